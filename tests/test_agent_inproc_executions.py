"""Job-process bookkeeping (quorum_cron/agent/executions.py) in-process.

The jobs are coroutine functions (:class:`CallableTarget`) that wait on an
event the test sets, so every run starts, blocks and ends exactly when the
test says; each run's end is awaited through the ``report`` callback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from quorum_cron.agent import executions
from quorum_cron.agent.executions import LOCAL_DETAIL, Runs
from quorum_cron.agent.jobprocess import CallableTarget, JobContext, JobRun, RunOutcome
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.metrics import Metrics
from quorum_cron.clock.base import ManualClock
from quorum_cron.core.actions import Kill, Run, RunLocal
from quorum_cron.core.model import SlotState, SlotView
from tests.agent_inproc import T0, Signal, agent_job, events, metric, until

FIRE = T0 + 2_000


@dataclass
class Job:
    """A job whose runs each wait for ``release`` (or fail when ``fail`` is set)."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    fail: str = ""
    contexts: list[JobContext] = field(default_factory=list)
    cancelled: int = 0
    entered: Signal | None = None

    async def __call__(self, ctx: JobContext) -> None:
        self.contexts.append(ctx)
        if self.entered is not None:
            self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail:
            raise ValueError(self.fail)


class Node:
    """A :class:`Runs` of node n1 with one job ``job`` (see :class:`Job`); reports are collected."""

    def __init__(self) -> None:
        self.signal = Signal()
        self.job = Job(entered=self.signal)
        self.metrics = Metrics()
        self.reports: list[tuple[str, int, int, bool, str]] = []
        self.pokes = 0
        self.runs = Runs(
            "n1",
            {"job": agent_job("job", target=CallableTarget(self.job.__call__))},
            clock=ManualClock(wall_ms=FIRE),
            metrics=self.metrics,
            tail_bytes=1024,
            report=self._report,
            poke=self._poke,
        )

    def _report(self, job: str, fire_ms: int, token: int, succeeded: bool, detail: str) -> None:
        self.reports.append((job, fire_ms, token, succeeded, detail))
        self.signal.set()

    def _poke(self) -> None:
        self.pokes += 1

    async def started(self, count: int) -> None:
        await until(self.signal, lambda: len(self.job.contexts) >= count, f"{count} run(s) started", 10)

    async def reported(self, count: int) -> None:
        await until(self.signal, lambda: len(self.reports) >= count, f"{count} report(s)", 10)


def inproc(test: Callable[[Node], Awaitable[None]]) -> Callable[[pytest.LogCaptureFixture], None]:
    """Run ``test`` on a fresh loop with a fresh :class:`Node`, the agent's events captured."""

    def run(caplog: pytest.LogCaptureFixture) -> None:
        caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)

        async def main() -> None:
            node = Node()
            try:
                await test(node)
            finally:
                node.runs.stop_all("test over")

        asyncio.run(main())

    run.__name__ = test.__name__
    run.__doc__ = test.__doc__
    return run


@inproc
async def test_a_run_gets_its_slot_and_token_and_its_end_is_reported_once(node: Node) -> None:
    node.runs.note_start(SlotView("job", FIRE, SlotState.RUNNING, (("n1", "h"), ("n2", "h")), attempt=1))
    node.runs.start(Run("job", FIRE, 7, 60_000))
    assert node.runs.running("job", FIRE) and len(node.runs) == 1
    assert metric(node.metrics, "quorum_cron_running_jobs") == 1
    await node.started(1)
    [ctx] = node.job.contexts
    assert (ctx.job, ctx.slot_ms, ctx.token, ctx.node) == ("job", FIRE, 7, "n1")
    node.job.release.set()
    await node.reported(1)
    assert node.reports == [("job", FIRE, 7, True, "returned")]
    assert not node.runs.running("job", FIRE) and metric(node.metrics, "quorum_cron_running_jobs") == 0
    assert node.pokes == 1
    assert node.metrics.registry.get_sample_value("quorum_cron_fire_delay_seconds_count", {"job": "job"}) == 1


def test_the_run_log_line_names_the_voters_the_store_accepted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)

    async def main() -> None:
        node = Node()
        node.runs.note_start(SlotView("job", FIRE, SlotState.RUNNING, (("n1", "h"), ("n3", "h")), attempt=2))
        node.runs.start(Run("job", FIRE, 7, 60_000))
        node.runs.start(Run("job", FIRE + 2_000, 8, 60_000))  # no view noted for this one
        await node.started(2)
        node.job.release.set()
        await node.reported(2)

    asyncio.run(main())
    first, second = events(caplog.records, "run")
    assert first.qc_fields["voters"] == "n1,n3" and first.qc_fields["attempt"] == 2  # type: ignore[attr-defined]
    assert first.qc_fields["votes"] == 2 and first.qc_fields["local"] is False  # type: ignore[attr-defined]
    assert second.qc_fields["voters"] == "" and second.qc_fields["votes"] == 0  # type: ignore[attr-defined]
    ended = events(caplog.records, "ended")
    assert [e.qc_fields["ok"] for e in ended] == [True, True]  # type: ignore[attr-defined]


def test_a_reported_success_logs_its_end_at_debug_and_a_failure_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A success is told at INFO by the store's ``finish`` line (Observer): two lines per slot."""
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)

    async def main() -> None:
        node = Node()
        node.job.release.set()
        node.runs.start(Run("job", FIRE, 7, 60_000))
        await node.reported(1)
        node.job.fail = "disk full"
        node.runs.start(Run("job", FIRE + 2_000, 8, 60_000))
        await node.reported(2)

    asyncio.run(main())
    assert [r.qc_fields["token"] for r in events(caplog.records, "run")] == [7, 8]  # type: ignore[attr-defined]
    [ended] = events(caplog.records, "ended")
    assert ended.levelno == logging.WARNING and ended.qc_fields["token"] == 8  # type: ignore[attr-defined]
    assert "raised ValueError: disk full" in ended.getMessage()


@inproc
async def test_a_failing_job_is_reported_failed_with_its_exception(node: Node) -> None:
    node.job.fail = "disk full"
    node.job.release.set()
    node.runs.start(Run("job", FIRE, 3, 60_000))
    await node.reported(1)
    [(_, _, token, ok, detail)] = node.reports
    assert token == 3 and not ok and detail.startswith("raised ValueError: disk full")


@inproc
async def test_a_password_the_run_printed_is_masked_in_the_detail_the_ledger_gets(node: Node) -> None:
    node.job.fail = "cannot reach redis://backup:s3cret@db:6379/0"
    node.job.release.set()
    node.runs.start(Run("job", FIRE, 3, 60_000))
    await node.reported(1)
    [(_, _, _, ok, detail)] = node.reports
    assert not ok and "s3cret" not in detail
    assert detail.startswith("raised ValueError: cannot reach redis://backup:***@db:6379/0")


@inproc
async def test_a_kill_stops_only_the_run_holding_that_token(node: Node) -> None:
    node.runs.start(Run("job", FIRE, 5, 60_000))
    await node.started(1)
    node.runs.kill(Kill("job", FIRE, 4, "stale token"))  # not this run's token: it keeps running
    node.runs.kill(Kill("job", FIRE + 2_000, 5, "no such run"))
    assert node.runs.running("job", FIRE) and node.reports == []
    node.runs.kill(Kill("job", FIRE, 5, "lease lost"))
    await node.reported(1)
    [(_, _, token, ok, detail)] = node.reports
    assert token == 5 and not ok and detail == "stopped by the agent (lease lost)"
    assert node.job.cancelled == 1


@inproc
async def test_a_new_token_for_a_running_slot_supersedes_the_old_run(node: Node) -> None:
    node.runs.start(Run("job", FIRE, 5, 60_000))
    await node.started(1)
    node.runs.start(Run("job", FIRE, 6, 60_000))
    await node.reported(1)
    assert node.reports[0][2:] == (5, False, "stopped by the agent (superseded by token 6)")
    await node.started(2)
    assert node.runs.running("job", FIRE)  # the new run, under token 6
    node.job.release.set()
    await node.reported(2)
    assert node.reports[1][2:] == (6, True, "returned")
    assert len(node.runs) == 0


@inproc
async def test_a_local_run_is_reported_with_token_0_then_as_the_result_of_the_slot_assigned_later(
    node: Node,
) -> None:
    node.job.release.set()
    node.runs.run_local(RunLocal("job", FIRE, 60_000), "connection refused")
    await node.reported(1)
    assert node.reports == [("job", FIRE, 0, True, "returned")]
    node.runs.start(Run("job", FIRE, 9, 60_000))  # the store assigned the slot to us after all
    assert node.reports[1] == ("job", FIRE, 9, True, f"{LOCAL_DETAIL}: returned")
    assert len(node.job.contexts) == 1 and not node.runs.running("job", FIRE)  # never run twice
    node.runs.start(Run("job", FIRE, 10, 60_000))  # the local result was used once: a new token runs
    await node.started(2)
    assert node.job.contexts[1].token == 10


@inproc
async def test_a_local_run_still_going_when_assigned_is_adopted_and_killable_by_its_new_token(
    node: Node,
) -> None:
    node.runs.run_local(RunLocal("job", FIRE, 60_000), "connection refused")
    await node.started(1)
    assert node.job.contexts[0].token == 0
    node.runs.start(Run("job", FIRE, 9, 60_000))  # adopted: not started again
    assert len(node.job.contexts) == 1
    node.runs.kill(Kill("job", FIRE, 0, "token 0 is not the adopted token"))
    assert node.runs.running("job", FIRE)
    node.runs.kill(Kill("job", FIRE, 9, "lease lost"))
    await node.reported(1)
    assert node.reports == [("job", FIRE, 9, False, f"{LOCAL_DETAIL}: stopped by the agent (lease lost)")]


@inproc
async def test_run_local_runs_a_slot_at_most_once_and_only_for_a_known_job(node: Node) -> None:
    node.runs.run_local(RunLocal("other", FIRE, 60_000), "down")
    assert len(node.runs) == 0
    node.runs.run_local(RunLocal("job", FIRE, 60_000), "down")
    node.runs.run_local(RunLocal("job", FIRE, 60_000), "down")  # running: ignored
    assert len(node.runs) == 1
    node.job.release.set()
    await node.reported(1)
    node.runs.run_local(RunLocal("job", FIRE, 60_000), "down")  # its result is kept: ignored
    assert len(node.runs) == 0 and len(node.job.contexts) == 1


@inproc
async def test_finished_local_results_are_bounded(node: Node) -> None:
    executions_bound = executions.MAX_LOCAL_RESULTS
    executions.MAX_LOCAL_RESULTS = 1
    try:
        node.job.release.set()
        node.runs.run_local(RunLocal("job", FIRE, 60_000), "down")
        node.runs.run_local(RunLocal("job", FIRE + 2_000, 60_000), "down")
        await node.reported(2)
        node.runs.start(Run("job", FIRE, 4, 60_000))  # its local result was dropped: it runs for real
        await node.reported(3)
        assert node.reports[2] == ("job", FIRE, 4, True, "returned")
        assert len(node.job.contexts) == 3
    finally:
        executions.MAX_LOCAL_RESULTS = executions_bound


@inproc
async def test_stop_all_stops_every_run(node: Node) -> None:
    node.runs.start(Run("job", FIRE, 1, 60_000))
    node.runs.start(Run("job", FIRE + 2_000, 2, 60_000))
    await node.started(2)
    node.runs.stop_all("shutdown grace period expired")
    await node.reported(2)
    assert sorted(r[2:] for r in node.reports) == [
        (1, False, "stopped by the agent (shutdown grace period expired)"),
        (2, False, "stopped by the agent (shutdown grace period expired)"),
    ]


class _BrokenRun(JobRun):
    """A runner with a bug, however it is started (a command's task, a callable's ``start``)."""

    async def run(self) -> RunOutcome:
        raise RuntimeError("runner bug")

    def start(self, on_end: Callable[[RunOutcome], None]) -> None:
        raise RuntimeError("runner bug")


@inproc
async def test_a_bug_in_the_runner_is_reported_as_a_failed_run_not_a_dead_node(node: Node) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(executions, "JobRun", _BrokenRun)
        node.runs.start(Run("job", FIRE, 2, 60_000))
        await node.reported(1)
    assert node.reports == [("job", FIRE, 2, False, "agent error while running the job: runner bug")]
    assert len(node.runs) == 0


@inproc
async def test_start_views_are_bounded(node: Node) -> None:
    bound = executions.MAX_START_VIEWS
    executions.MAX_START_VIEWS = 2
    try:
        for i in range(3):
            node.runs.note_start(SlotView("job", FIRE + i, SlotState.RUNNING, (("n1", "h"),)))
        assert [k[1] for k in node.runs._views] == [FIRE + 1, FIRE + 2]
    finally:
        executions.MAX_START_VIEWS = bound
