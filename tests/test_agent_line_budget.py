"""The bound on the lines of what did not go as planned (quorum_cron/agent/linebudget.py).

An overloaded node used to log a ``start_refused`` and a ``takeover`` line
for nearly every slot of a 100,000-job minute. Each event now logs at most
:data:`MAX_LINES_PER_EVENT` lines between two ``summary`` lines; the rest are
counted and named in the summary. The replies fed to the observer are real
ones from the memory model of the store, as in test_agent_inproc_observe.py.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from quorum_cron.agent.linebudget import MAX_LINES_PER_EVENT, LineBudget
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.runtime import Agent
from quorum_cron.core.actions import Start, Sweep
from quorum_cron.core.model import SweepParams
from quorum_cron.core.node import Run
from quorum_cron.store.memory import MemoryStore
from tests.agent_inproc import T0, agent_job, events, settings
from tests.test_agent_inproc_executions import FIRE as RUN_FIRE
from tests.test_agent_inproc_executions import Node
from tests.test_agent_inproc_observe import DEADLINE, FIRE, JOB, World

EXTRA = 70


@pytest.fixture
def world(caplog: pytest.LogCaptureFixture) -> World:
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    return World()


def _refuse_starts(world: World, count: int) -> None:
    executor, token = world.commit()
    for _ in range(count):
        stale = Start(JOB, FIRE, token + 5, 10_000)
        world.observer.reply(stale, world.store.start(JOB, FIRE, executor, token + 5, 10_000))


def test_an_event_past_its_bound_is_counted_and_said_once_then_in_the_summary(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    _refuse_starts(world, MAX_LINES_PER_EVENT + EXTRA)
    assert len(events(caplog.records, "start_refused")) == MAX_LINES_PER_EVENT
    [said] = events(caplog.records, "lines_suppressed")
    assert said.levelno == logging.WARNING
    assert said.qc_fields == {"of_event": "start_refused", "limit": MAX_LINES_PER_EVENT}  # type: ignore[attr-defined]
    world.observer.summary(60.0)
    [summary] = events(caplog.records, "summary")
    fields = summary.qc_fields  # type: ignore[attr-defined]
    assert fields["start_refused"] == MAX_LINES_PER_EVENT + EXTRA  # every refusal still counted
    assert fields["lines_suppressed"] == EXTRA
    assert summary.getMessage().endswith(f"; lines not logged one by one: start_refused {EXTRA}")


def test_the_bound_is_per_event_and_starts_over_with_each_summary(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    _refuse_starts(world, MAX_LINES_PER_EVENT + 1)
    world.clock.advance(500)  # past the start timeout: the sweep hands the slot over
    sweep = Sweep((SweepParams(JOB, DEADLINE, 100),))
    world.observer.reply(sweep, world.store.sweep(sweep.params))
    assert len(events(caplog.records, "takeover")) == 1  # another event: its own bound
    world.observer.summary(60.0)
    caplog.clear()
    _refuse_starts(world, 1)  # a new window
    assert len(events(caplog.records, "start_refused")) == 1
    world.observer.summary(60.0)
    [summary] = events(caplog.records, "summary")
    assert summary.qc_fields["lines_suppressed"] == 0  # type: ignore[attr-defined]
    assert "not logged" not in summary.getMessage()


def test_a_summary_is_logged_for_suppressed_lines_alone(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """Failed runs' ``ended`` lines are bounded before the store counts the slots (Runs)."""
    for _ in range(MAX_LINES_PER_EVENT + 3):
        world.observer.lines.event(logging.getLogger(EVENT_LOGGER), logging.WARNING, "ended", "failed")
    world.observer.summary(60.0)
    [summary] = events(caplog.records, "summary")
    assert summary.getMessage() == "last 60 s: lines not logged one by one: ended 3"
    assert world.observer.lines.take_suppressed() == {}  # the summary started it over


def test_a_line_below_the_enabled_level_is_not_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=EVENT_LOGGER)
    budget = LineBudget()
    for _ in range(MAX_LINES_PER_EVENT + 3):
        budget.event(logging.getLogger(EVENT_LOGGER), logging.INFO, "retry_wait", "x")
    assert budget.take_suppressed() == {}


def test_failed_runs_share_the_budget_and_a_success_does_not_spend_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)

    async def main() -> Node:
        node = Node()
        for _ in range(MAX_LINES_PER_EVENT):  # what other failed runs of this minute logged
            node.runs.lines.event(logging.getLogger(EVENT_LOGGER), logging.WARNING, "ended", "earlier")
        node.job.release.set()
        node.runs.start(Run("job", RUN_FIRE, 7, 60_000))  # a success: its line is DEBUG
        await node.reported(1)
        node.job.fail = "disk full"
        node.runs.start(Run("job", RUN_FIRE + 2_000, 8, 60_000))
        await node.reported(2)
        return node

    node = asyncio.run(main())
    assert [r.getMessage() for r in events(caplog.records, "ended")] == ["earlier"] * MAX_LINES_PER_EVENT
    assert node.runs.lines.take_suppressed() == {"ended": 1}
    assert node.reports[1][3] is False  # the failure is still reported to the store


def test_an_agent_s_runs_and_observer_share_one_budget() -> None:
    agent = Agent(settings(), [agent_job()], MemoryStore(lambda: T0))
    assert agent.runs.lines is agent.observer.lines
