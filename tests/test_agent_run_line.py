"""The ``run`` line names the voters the store accepted, however the start was confirmed.

A start the node heard of late (its reply held past half the lease, or the
slot found running under its token only by a read) runs after a renew
confirms it (docs/protocol.md, "Leases"). The agent kept the view for the
line only from a start's or a folding vote's reply, so such a run was
logged ``votes=0``, as if nobody had voted. The agent is real, on the
memory model of the store; the replies are fed to its reply table as the
store worker hands them over.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest

from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.runtime import Agent
from quorum_cron.core.actions import Renew
from quorum_cron.core.model import SlotState, SlotView, TransitionResult
from quorum_cron.core.node import Run
from quorum_cron.store.memory import MemoryStore
from tests.agent_inproc import T0, agent_job, events, settings

FIRE = T0 + 2_000


def test_a_start_confirmed_by_a_renew_logs_its_voters_and_a_renew_of_a_run_keeps_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A renew of a run already going keeps no view: at 10,000 jobs those would push out the
    views of starts still to come (the views are bounded)."""
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    agent = Agent(settings(), [agent_job()], MemoryStore(lambda: T0))
    view = SlotView("job", FIRE, SlotState.RUNNING, (("n1", "h"), ("n2", "h")), attempt=1)
    renew = Renew("job", FIRE, 7, 60_000)
    agent._after_reply[Renew](agent, renew, TransitionResult(True, view, T0))

    async def main() -> None:
        agent.runs.start(Run("job", FIRE, 7, 60_000))
        again = replace(view, votes=(("n9", "h"),))
        agent._after_reply[Renew](agent, renew, TransitionResult(True, again, T0))  # (while it runs)
        agent.runs.stop_all("test over")

    asyncio.run(main())
    [run] = events(caplog.records, "run")
    assert run.qc_fields["votes"] == 2 and run.qc_fields["voters"] == "n1,n2"  # type: ignore[attr-defined]
    assert not agent.runs._views
