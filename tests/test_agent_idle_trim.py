"""The agent's loop trims the heap only when idle (:class:`quorum_cron.agent.allocator.BurstTrim`).

In process, on the memory store and the real clock, with glibc's ``malloc_trim`` replaced by a
recorder (tests/test_agent_allocator.py shows what the real one gives back): the loop offers
its waits to the trim, a vote held on the wire counts as work on its way (no trim then, though
the loop is idle), and once its reply is in the next idle wait trims.
"""

from __future__ import annotations

import asyncio

import pytest

from quorum_cron.agent import allocator
from quorum_cron.agent.allocator import BurstTrim
from quorum_cron.agent.runtime import Agent
from quorum_cron.clock.base import SystemClock
from tests.agent_inproc import OutageStore, agent_job, settings
from tests.polling import until


def test_no_trim_while_a_vote_is_on_its_way_and_one_once_its_reply_is_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = OutageStore(SystemClock())  # type: ignore[arg-type]  # (wall_ms is all it reads)
    # (A deadline well past the next fire: no missed-slot timer cuts the loop's waits short.)
    agent = Agent(settings("n1", size=1, quorum=1), [agent_job("job", deadline_ms=10_000)], store)
    trims: list[int] = []  # what was on its way to the store at each trim
    waits: list[tuple[float, int]] = []  # each wait the loop offered: (wait_ms, in flight)

    def malloc_trim(pad: int) -> int:
        trims.append(agent._voting + len(agent._finishing))
        return 1

    offered = BurstTrim.idle

    def idle(self: BurstTrim, mono_ms: int, wait_ms: float, in_flight: int) -> bool:
        waits.append((wait_ms, in_flight))
        return offered(self, mono_ms, wait_ms, in_flight)

    monkeypatch.setattr(allocator, "_TRIM", [malloc_trim])
    monkeypatch.setattr(allocator, "TRIM_GAP_MS", 0)
    monkeypatch.setattr(allocator, "IDLE_MS", 200)  # (an every-2s job leaves waits of 1-2 s)
    monkeypatch.setattr(BurstTrim, "idle", idle)

    async def main() -> None:
        running = asyncio.create_task(agent.run())
        try:
            await asyncio.wait_for(agent.ready.wait(), 15)
            await until("a trim while idle", lambda: bool(trims))
            store.gate.clear()  # (from here every store call is held on the wire)
            await until(
                "an idle wait with the vote on its way",
                lambda: any(w >= allocator.IDLE_MS and n > 0 for w, n in waits),
            )
            held = len(trims)
            store.gate.set()
            await until("a trim once the reply is in", lambda: len(trims) > held)
        finally:
            store.gate.set()
            agent.request_stop("test over")
            await asyncio.wait_for(running, 15)

    asyncio.run(main())
    assert trims and all(n == 0 for n in trims), trims
