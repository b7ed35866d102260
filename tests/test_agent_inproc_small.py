"""The agent's small modules in-process: trigger verification, the store worker, bad-value reports.

* :mod:`quorum_cron.agent.triggers` on the memory store: only a trigger
  stored *with* its audit entry counts;
* :mod:`quorum_cron.agent.storeio`: protocol actions reach the store in the
  order they were submitted, on one thread, apart from background reads;
* :mod:`quorum_cron.agent.badvalues` on a real Redis: a corrupt value the
  store reads from its worker thread becomes a metric, a log event and (up
  to a bound) an alert, on the agent's loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest
import redis

from quorum_cron.agent import badvalues
from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.badvalues import BadValueReporter
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.storeio import StoreWorker
from quorum_cron.agent.triggers import AUDIT_SCAN, stored_triggers
from quorum_cron.clock.base import ManualClock
from quorum_cron.core.actions import ReadHighWater, Start, Vote
from quorum_cron.core.model import SlotState, TransitionResult, VoteRequest
from quorum_cron.errors import StoreUnavailable
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore
from tests.agent_inproc import T0, OutageStore, alerts_of, events, metric

# -- triggers ------------------------------------------------------------------


def test_an_audited_trigger_is_returned_and_one_before_since_is_not() -> None:
    clock = ManualClock(wall_ms=T0)
    store = MemoryStore(clock.wall_ms)
    first = store.trigger("job", "alice")
    clock.advance(1_000)
    second = store.trigger("job", "bob")
    assert stored_triggers(store, "job", T0 - 1) == [first, second]
    assert stored_triggers(store, "job", first) == [second]


def test_a_stored_trigger_whose_audit_entry_is_gone_is_not_trusted() -> None:
    clock = ManualClock(wall_ms=T0)
    store = MemoryStore(clock.wall_ms, audit_maxlen=1)
    fire = store.trigger("job", "alice")
    store.pause("job", "bob", "pushes the trigger's audit entry out")
    assert store.triggers("job", T0 - 1) == [fire]  # stored, but no longer audited
    assert stored_triggers(store, "job", T0 - 1) == []


def test_a_trigger_audited_further_back_than_the_scan_is_not_trusted() -> None:
    clock = ManualClock(wall_ms=T0)
    store = MemoryStore(clock.wall_ms, audit_maxlen=AUDIT_SCAN + 10)
    fire = store.trigger("job", "alice")
    for i in range(AUDIT_SCAN // 2):
        clock.advance(1)
        store.pause("job", "bob", f"pause {i}")
        store.resume("job", "bob")
    assert len(store.audit("job", AUDIT_SCAN + 10)) == AUDIT_SCAN + 1
    assert stored_triggers(store, "job", T0 - 1) == []
    assert stored_triggers(store, "job", fire) == []


def test_no_stored_trigger_reads_no_audit() -> None:
    store = OutageStore(ManualClock(wall_ms=T0))
    assert stored_triggers(store, "job", T0 - 1) == []
    assert store.count("triggers") == 1 and store.count("audit") == 0


# -- the store worker ------------------------------------------------------------


class _Recording(MemoryStore):
    """The memory store, noting each call and the thread it ran on; ``gate`` holds ``vote`` calls."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock.wall_ms)
        self.log: list[tuple[str, str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def vote(self, requests):  # type: ignore[no-untyped-def]
        self.entered.set()
        self.gate.wait(10)
        self.log.append((f"vote {requests[0].node}", threading.current_thread().name))
        return super().vote(requests)

    def start(self, *args):  # type: ignore[no-untyped-def]
        self.log.append(("start", threading.current_thread().name))
        return super().start(*args)

    def members(self):  # type: ignore[no-untyped-def]
        self.log.append(("members", threading.current_thread().name))
        return super().members()


def _req(node: str) -> VoteRequest:
    return VoteRequest("job", T0, node, "h", quorum=2, max_skew_ms=250, deadline_ms=1_000)


def test_protocol_actions_reach_the_store_in_submission_order_on_one_thread() -> None:
    store = _Recording(ManualClock(wall_ms=T0))
    worker = StoreWorker(store, "n1")

    async def main() -> object:
        futures = [worker.submit(Vote((_req(n),))) for n in ("n1", "n2", "n3")]
        futures.append(worker.submit(Start("job", T0, 1, 10_000)))
        replies = await asyncio.gather(*futures)
        return replies[-1]

    try:
        last = asyncio.run(main())
    finally:
        worker.shutdown()
    assert [what for what, _ in store.log] == ["vote n1", "vote n2", "vote n3", "start"]
    assert {thread for _, thread in store.log} == {"qc-store_0"}
    # The start ran as node n1, after the votes that committed the slot (executor chosen among n1, n2).
    assert isinstance(last, TransitionResult)
    view = store.slot("job", T0)
    assert last.ok == (view.executor == "n1")
    assert view.state == (SlotState.RUNNING if last.ok else SlotState.COMMITTED)


def test_a_background_read_is_not_held_behind_a_protocol_call_on_the_wire() -> None:
    store = _Recording(ManualClock(wall_ms=T0))
    worker = StoreWorker(store, "n1")

    async def main() -> None:
        store.gate.clear()
        held = worker.submit(Vote((_req("n1"),)))
        await asyncio.to_thread(store.entered.wait, 10)
        members = await asyncio.wait_for(worker.background(store.members), 10)  # the vote is still held
        assert members == [] and not held.done()
        store.gate.set()
        await held

    try:
        asyncio.run(main())
    finally:
        worker.shutdown()
    assert store.log[0] == ("members", "qc-store-bg_0")
    assert store.log[1] == ("vote n1", "qc-store_0")


def test_a_store_failure_reaches_the_caller_through_the_future() -> None:
    store = OutageStore(ManualClock(wall_ms=T0))
    store.down = "connection refused"
    worker = StoreWorker(store, "n1")

    async def main() -> None:
        with pytest.raises(StoreUnavailable, match="connection refused"):
            await worker.submit(ReadHighWater(("job",)))
        with pytest.raises(StoreUnavailable, match="connection refused"):
            await worker.background(store.members)

    try:
        asyncio.run(main())
    finally:
        worker.shutdown()


def test_after_shutdown_no_call_is_accepted_and_queued_calls_are_cancelled() -> None:
    store = _Recording(ManualClock(wall_ms=T0))
    worker = StoreWorker(store, "n1")

    async def main() -> None:
        store.gate.clear()
        on_the_wire = worker.submit(Vote((_req("n1"),)))
        await asyncio.to_thread(store.entered.wait, 10)
        queued = worker.submit(Vote((_req("n2"),)))
        worker.shutdown()
        store.gate.set()
        await on_the_wire  # the call already running completes
        with pytest.raises(asyncio.CancelledError):
            await queued
        with pytest.raises(RuntimeError):
            worker.submit(Vote((_req("n3"),)))
        with pytest.raises(RuntimeError):
            await worker.background(store.members)

    asyncio.run(main())
    assert [what for what, _ in store.log] == ["vote n1"]


# -- bad values ------------------------------------------------------------------


def test_a_corrupt_member_read_on_the_worker_thread_is_reported_on_the_loop(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)
    store = RedisStore(redis_client, "inproc")
    metrics, alerts = Metrics(), AlertHook("n1")
    reporter = BadValueReporter(metrics, alerts)
    redis_client.hset("qc:{inproc}:members", "n9", "not json")
    loop_thread: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reporter.attach(store, loop)
        worker = StoreWorker(store, "n1")
        try:
            assert await worker.background(store.members) == []
        finally:
            worker.shutdown()
        loop_thread.append(threading.get_ident())
        # The report was queued on the loop (call_soon_threadsafe) before the reply: it has run.
        assert metric(metrics, "quorum_cron_bad_values_total", kind="member") == 1

    asyncio.run(main())
    [alert] = alerts_of(alerts, AlertKind.BAD_VALUE)
    assert "n9" in alert.fields["what"] and alert.message.startswith(
        "bad value in the store, ignored: member"
    )
    [logged] = [r for r in caplog.records if getattr(r, "qc_event", None) == "alert"]
    assert logged.thread == loop_thread[0]


def test_bad_value_alerts_stop_at_the_bound_but_every_value_is_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)
    metrics, alerts = Metrics(), AlertHook("n1")
    reporter = BadValueReporter(metrics, alerts)
    for i in range(badvalues.MAX_ALERTS + 5):
        reporter.report(f"slot job@{i}", "not a slot")
    assert len(alerts_of(alerts, AlertKind.BAD_VALUE)) == badvalues.MAX_ALERTS
    assert metric(metrics, "quorum_cron_bad_values_total", kind="slot") == badvalues.MAX_ALERTS + 5
    assert len(events(caplog.records, "bad_value")) == 5


def test_a_report_without_a_running_loop_is_made_at_once() -> None:
    metrics, alerts = Metrics(), AlertHook("n1")
    reporter = BadValueReporter(metrics, alerts)
    reporter.report_threadsafe("", "empty what")  # never attached: reported in the caller's thread
    assert metric(metrics, "quorum_cron_bad_values_total", kind="value") == 1
    loop = asyncio.new_event_loop()
    reporter.attach(RedisStore.__new__(RedisStore), loop)
    loop.close()
    reporter.report_threadsafe("ledger job@1", "bad json")  # attached to a loop since closed: at once too
    assert metric(metrics, "quorum_cron_bad_values_total", kind="ledger") == 1
    assert json.loads(alerts.sent[-1].document())["kind"] == AlertKind.BAD_VALUE
