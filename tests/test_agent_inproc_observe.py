"""The observer (quorum_cron/agent/observe.py) in-process: what each store reply turns into.

Every reply fed to :class:`Observer` here is a real one, produced by the
memory model of the store on a manual clock (not a hand-built value), so
the tests check that what the store can actually answer becomes the right
log event, metric and alert, and nothing else.
"""

from __future__ import annotations

import logging

import pytest

from quorum_cron.agent import observe
from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.observe import Observer
from quorum_cron.clock.base import ManualClock
from quorum_cron.core.actions import (
    Abstain,
    Finish,
    ReadHighWater,
    ReadSlots,
    RecordMissed,
    Renew,
    Start,
    Sweep,
    Vote,
)
from quorum_cron.core.model import Delivery, SlotState, SweepParams, VoteRequest, VoteStatus
from quorum_cron.store.memory import MemoryStore
from tests.agent_inproc import T0, agent_job, alerts_of, events, metric

JOB = "job"
FIRE = T0 + 2_000
DEADLINE = 1_000


class World:
    """One observer (node n1, knowing job ``job`` with hash ``hash-mine``) and a memory store."""

    def __init__(self) -> None:
        self.clock = ManualClock(wall_ms=FIRE, monotonic_ms=0)
        self.store = MemoryStore(self.clock.wall_ms)
        self.metrics = Metrics()
        self.alerts = AlertHook("n1")
        self.observer = Observer("n1", {JOB: agent_job(JOB)}, self.metrics, self.alerts)

    def request(self, node: str, spec_hash: str = "hash-mine", fire_ms: int = FIRE) -> VoteRequest:
        return VoteRequest(JOB, fire_ms, node, spec_hash, quorum=2, max_skew_ms=250, deadline_ms=DEADLINE)

    def vote(self, *requests: VoteRequest) -> None:
        """Cast the votes in the store and show the observer the reply."""
        action = Vote(tuple(requests))
        self.observer.reply(action, self.store.vote(action.requests))

    def commit(self, fire_ms: int = FIRE) -> tuple[str, int]:
        """Commit the slot with n1's and n2's votes; (executor, token)."""
        view = self.store.vote([self.request("n1", fire_ms=fire_ms), self.request("n2", fire_ms=fire_ms)])[
            -1
        ].slot
        assert view.state == SlotState.COMMITTED
        return view.executor, view.token

    def run(self, fire_ms: int = FIRE) -> tuple[str, int]:
        """Commit and start the slot; (executor, token)."""
        executor, token = self.commit(fire_ms)
        assert self.store.start(JOB, fire_ms, executor, token, 10_000).ok
        return executor, token


@pytest.fixture
def world(caplog: pytest.LogCaptureFixture) -> World:
    caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)
    return World()


def test_a_committing_vote_is_counted_by_status_and_logged_at_debug_with_its_executor_and_token(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.vote(world.request("n1"))
    world.vote(world.request("n2"))
    assert metric(world.metrics, "quorum_cron_votes_total", job=JOB, status=VoteStatus.RECORDED) == 1
    assert metric(world.metrics, "quorum_cron_votes_total", job=JOB, status=VoteStatus.COMMITTED) == 1
    [commit] = events(caplog.records, "commit")
    view = world.store.slot(JOB, FIRE)
    # DEBUG (issue 27): a line per slot that went as planned; the summary line counts it.
    assert commit.levelno == logging.DEBUG
    assert world.observer.counts["committed"] == 1
    assert commit.qc_fields["executor"] == view.executor  # type: ignore[attr-defined]
    assert commit.qc_fields["token"] == view.token  # type: ignore[attr-defined]
    assert commit.qc_fields["votes"] == 2  # type: ignore[attr-defined]
    assert world.alerts.sent == []
    assert metric(world.metrics, "quorum_cron_slots_total", job=JOB, outcome="skipped") == 0


def test_a_vote_on_a_paused_job_counts_the_slot_skipped_and_logs_the_pause_reason(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.store.pause(JOB, "alice", "maintenance")
    world.vote(world.request("n1"))
    assert metric(world.metrics, "quorum_cron_votes_total", job=JOB, status=VoteStatus.SKIPPED) == 1
    assert metric(world.metrics, "quorum_cron_slots_total", job=JOB, outcome="skipped") == 1
    [skipped] = events(caplog.records, "skipped")
    assert skipped.levelno == logging.WARNING
    assert "paused by alice: maintenance" in skipped.getMessage()
    assert events(caplog.records, "commit") == []


def test_a_vote_after_the_deadline_raises_slot_missed_once_and_counts_it(world: World) -> None:
    world.clock.advance(DEADLINE + 1)
    world.vote(world.request("n1"))
    [alert] = alerts_of(world.alerts, AlertKind.SLOT_MISSED)
    assert alert.fields == {"job": JOB, "slot": str(FIRE), "how": "vote after deadline"}
    assert "deadline passed before quorum" in alert.message
    assert metric(world.metrics, "quorum_cron_slots_total", job=JOB, outcome="missed") == 1
    world.vote(world.request("n2"))  # the slot is decided: DECIDED, not a second miss
    assert len(alerts_of(world.alerts, AlertKind.SLOT_MISSED)) == 1


def test_a_peer_voting_another_definition_is_alerted_once_per_foreign_hash(world: World) -> None:
    world.vote(world.request("n2", spec_hash="hash-theirs"))
    world.vote(world.request("n3", spec_hash="hash-theirs"))
    [alert] = alerts_of(world.alerts, AlertKind.SPEC_MISMATCH)
    assert alert.fields["theirs"] == "hash-theirs" and alert.fields["ours"] == "hash-mine"
    assert alert.fields["nodes"] == "n2"
    world.clock.advance(2_000)
    world.vote(world.request("n4", spec_hash="hash-other", fire_ms=FIRE + 2_000))
    assert [a.fields["theirs"] for a in alerts_of(world.alerts, AlertKind.SPEC_MISMATCH)] == [
        "hash-theirs",
        "hash-other",
    ]


def test_a_vote_on_a_job_this_node_does_not_run_is_counted_but_never_compared() -> None:
    w = World()
    other = VoteRequest("elsewhere", FIRE, "n2", "h", quorum=2, max_skew_ms=250, deadline_ms=DEADLINE)
    w.observer.reply(Vote((other,)), w.store.vote([other]))
    assert metric(w.metrics, "quorum_cron_votes_total", job="elsewhere", status=VoteStatus.RECORDED) == 1
    assert w.alerts.sent == []


def test_mismatch_alerts_are_bounded_and_ignore_our_own_hash(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(observe, "MAX_MISMATCHES", 2)
    world.observer.mismatch(JOB, "hash-mine", "n2", "run")
    assert world.alerts.sent == []
    for theirs in ("a", "b", "c"):
        world.observer.mismatch(JOB, theirs, "n2", "run")
    assert [a.fields["theirs"] for a in world.alerts.sent] == ["a", "b"]


def test_a_refused_start_is_logged_with_the_store_reason(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.commit()
    stale = Start(JOB, FIRE, token + 5, 10_000)
    world.observer.reply(stale, world.store.start(JOB, FIRE, executor, token + 5, 10_000))
    [refused] = events(caplog.records, "start_refused")
    assert refused.qc_fields["reason"] == f"stale token {token + 5}, current is {token}"  # type: ignore[attr-defined]
    assert events(caplog.records, "retry_wait") == []


def test_a_start_refused_past_its_deadline_is_a_refusal_not_a_wait(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.commit()
    world.clock.advance(DEADLINE + 1)  # still committed to us, same token: but too late to start
    action = Start(JOB, FIRE, token, 10_000)
    world.observer.reply(action, world.store.start(JOB, FIRE, executor, token, 10_000))
    [refused] = events(caplog.records, "start_refused")
    assert refused.qc_fields["reason"] == "starting deadline passed"  # type: ignore[attr-defined]
    assert events(caplog.records, "retry_wait") == []


def test_an_accepted_start_reports_nothing(world: World, caplog: pytest.LogCaptureFixture) -> None:
    executor, token = world.commit()
    action = Start(JOB, FIRE, token, 10_000)
    world.observer.reply(action, world.store.start(JOB, FIRE, executor, token, 10_000))
    assert events(caplog.records, "start_refused") == [] and events(caplog.records, "retry_wait") == []
    assert world.alerts.sent == []


def test_a_start_refused_for_its_retry_backoff_is_a_wait_not_a_refusal(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.run()
    retried = world.store.finish(
        JOB, FIRE, executor, token, False, "exit 1", retries=1, retry_backoff_ms=5_000
    )
    view = retried.slot
    assert view.state == SlotState.COMMITTED and view.not_before_ms > 0
    early = Start(JOB, FIRE, view.token, 10_000)
    world.observer.reply(early, world.store.start(JOB, FIRE, view.executor, view.token, 10_000))
    [wait] = events(caplog.records, "retry_wait")
    assert wait.levelno == logging.INFO and wait.qc_fields["token"] == view.token  # type: ignore[attr-defined]
    assert events(caplog.records, "start_refused") == []


def test_a_refused_renewal_is_logged_with_its_token_and_reason(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.commit()  # committed, never started: a renew is refused
    action = Renew(JOB, FIRE, token, 10_000)
    world.observer.reply(action, world.store.renew(JOB, FIRE, executor, token, 10_000))
    [refused] = events(caplog.records, "renew_refused")
    assert refused.qc_fields["reason"] == "slot is committed, not running"  # type: ignore[attr-defined]
    caplog.clear()
    w = World()  # an accepted renewal: silent
    executor, token = w.run()
    w.observer.reply(Renew(JOB, FIRE, token, 10_000), w.store.renew(JOB, FIRE, executor, token, 10_000))
    assert events(caplog.records, "renew_refused") == []


def _finish(w: World, executor: str, token: int, succeeded: bool, retries: int = 0) -> Finish:
    action = Finish(JOB, FIRE, token, succeeded, "detail", retries, 0)
    w.observer.reply(action, w.store.finish(JOB, FIRE, executor, token, succeeded, "detail", retries, 0))
    return action


@pytest.mark.parametrize(("succeeded", "state"), [(True, SlotState.SUCCEEDED), (False, SlotState.FAILED)])
def test_a_recorded_result_counts_the_slot_by_outcome(
    world: World, caplog: pytest.LogCaptureFixture, succeeded: bool, state: SlotState
) -> None:
    executor, token = world.run()
    _finish(world, executor, token, succeeded)
    assert metric(world.metrics, "quorum_cron_slots_total", job=JOB, outcome=state.value) == 1
    [finish] = events(caplog.records, "finish")
    assert finish.qc_fields["state"] == state.value  # type: ignore[attr-defined]


def test_the_finish_line_tells_how_long_the_run_held_the_slot_by_the_store_clock(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.run()  # started at FIRE by the store's clock
    world.clock.advance(2_404)
    _finish(world, executor, token, True)
    [finish] = events(caplog.records, "finish")
    assert finish.levelno == logging.INFO and finish.qc_fields["ran_ms"] == 2_404  # type: ignore[attr-defined]
    assert finish.getMessage().endswith("recorded succeeded (2404 ms after its start)")


def test_a_failed_run_with_retries_left_is_logged_as_retrying_and_not_counted(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.run()
    _finish(world, executor, token, False, retries=2)
    [retrying] = events(caplog.records, "retrying")
    assert retrying.qc_fields["next_token"] == token + 1  # type: ignore[attr-defined]
    assert metric(world.metrics, "quorum_cron_slots_total", job=JOB, outcome="failed") == 0
    assert events(caplog.records, "finish") == []


def test_a_stale_result_is_logged_as_refused_and_not_counted(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.run()
    _finish(world, executor, token, True)
    caplog.clear()
    _finish(world, executor, token, True)  # the slot has ended: a second result is stale
    [refused] = events(caplog.records, "finish_refused")
    assert "slot is succeeded, not running" in refused.getMessage()
    assert metric(world.metrics, "quorum_cron_slots_total", job=JOB, outcome="succeeded") == 1


def _sweep(w: World, delivery: Delivery = Delivery.AT_MOST_ONCE) -> None:
    action = Sweep((SweepParams(JOB, DEADLINE, 2_000, delivery),))
    w.observer.reply(action, w.store.sweep(action.params))


def test_a_sweep_that_misses_a_slot_alerts_slot_missed_by_sweep(world: World) -> None:
    world.store.vote([world.request("n2")])  # proposed, never reaches quorum
    world.clock.advance(DEADLINE + 1)
    _sweep(world)
    [alert] = alerts_of(world.alerts, AlertKind.SLOT_MISSED)
    assert alert.fields["how"] == "sweep"
    assert metric(world.metrics, "quorum_cron_slots_total", job=JOB, outcome="missed") == 1


def test_a_sweep_that_loses_a_run_alerts_slot_lost_with_the_executor(world: World) -> None:
    executor, token = world.run()
    world.clock.advance(10_001)  # the lease ran out
    _sweep(world)
    [alert] = alerts_of(world.alerts, AlertKind.SLOT_LOST)
    assert alert.fields["executor"] == executor and alert.fields["token"] == str(token)
    assert metric(world.metrics, "quorum_cron_slots_total", job=JOB, outcome="lost") == 1


def test_a_sweep_that_reassigns_a_slot_logs_the_takeover_without_alerting(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.commit()
    world.clock.advance(500)  # past the start timeout below, inside the deadline
    action = Sweep((SweepParams(JOB, DEADLINE, 100),))
    world.observer.reply(action, world.store.sweep(action.params))
    [takeover] = events(caplog.records, "takeover")
    assert takeover.qc_fields["token"] == token + 1  # type: ignore[attr-defined]
    assert takeover.qc_fields["executor"] != executor  # type: ignore[attr-defined]
    assert world.alerts.sent == []


def test_a_missed_record_written_by_this_node_alerts_once_and_one_written_before_does_not(
    world: World,
) -> None:
    world.clock.advance(DEADLINE + 1)
    mine = RecordMissed(JOB, FIRE, DEADLINE, "clock untrusted")
    world.observer.reply(mine, world.store.record_missed(JOB, FIRE, DEADLINE, mine.reason))
    [alert] = alerts_of(world.alerts, AlertKind.SLOT_MISSED)
    assert alert.fields["how"] == "recorded by this node"
    late = RecordMissed(JOB, FIRE, DEADLINE, "store unreachable")  # the slot already says "clock untrusted"
    world.observer.reply(late, world.store.record_missed(JOB, FIRE, DEADLINE, late.reason))
    assert len(alerts_of(world.alerts, AlertKind.SLOT_MISSED)) == 1


def test_reads_report_nothing(world: World, caplog: pytest.LogCaptureFixture) -> None:
    world.observer.reply(ReadSlots(((JOB, FIRE),)), world.store.read_slots([(JOB, FIRE)]))
    world.observer.reply(ReadHighWater((JOB,)), world.store.high_waters([JOB]))
    assert world.alerts.sent == [] and events(caplog.records, "commit") == []


def test_an_abstention_is_counted_by_cause_and_logged_with_its_reason(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.observer.abstain(Abstain(JOB, FIRE, "clock not trusted"), "clock")
    world.observer.abstain(Abstain(JOB, FIRE + 2_000, "store unreachable"), "store")
    assert metric(world.metrics, "quorum_cron_abstentions_total", job=JOB, cause="clock") == 1
    assert metric(world.metrics, "quorum_cron_abstentions_total", job=JOB, cause="store") == 1
    first, second = events(caplog.records, "abstain")
    assert first.qc_fields["reason"] == "clock not trusted"  # type: ignore[attr-defined]
    assert second.qc_fields["cause"] == "store"  # type: ignore[attr-defined]


def test_the_commit_line_is_not_even_formatted_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """At the default level the per-slot commit costs a count, not a formatted record."""
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    w = World()
    w.vote(w.request("n1"), w.request("n2"))
    assert events(caplog.records, "commit") == []
    assert w.observer.counts["committed"] == 1


def test_the_summary_line_counts_what_this_node_saw_since_the_last_one(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    executor, token = world.commit()  # committed by votes the observer did not see: not its count
    world.observer.reply(
        Start(JOB, FIRE, token, 10_000), world.store.start(JOB, FIRE, executor, token, 10_000)
    )
    _finish(world, executor, token, True)
    world.clock.advance(2_000)
    world.vote(world.request("n1", fire_ms=FIRE + 2_000), world.request("n2", fire_ms=FIRE + 2_000))
    world.observer.abstain(Abstain(JOB, FIRE + 4_000, "clock not trusted"), "clock")
    world.observer.summary(60.0)
    [summary] = events(caplog.records, "summary")
    fields = summary.qc_fields  # type: ignore[attr-defined]
    assert summary.levelno == logging.INFO
    assert {k: v for k, v in fields.items() if v and k != "interval_s"} == {
        "committed": 1,
        "started": 1,
        "succeeded": 1,
        "abstained": 1,
    }
    assert fields["interval_s"] == 60.0 and fields["takeovers"] == 0
    assert summary.getMessage() == "last 60 s: 1 committed, 1 started, 1 succeeded, 1 abstained"
    caplog.clear()
    world.observer.summary(60.0)  # nothing since: no line
    assert events(caplog.records, "summary") == []


def test_the_summary_counts_takeovers_and_refusals(world: World, caplog: pytest.LogCaptureFixture) -> None:
    executor, token = world.commit()
    stale = Start(JOB, FIRE, token + 5, 10_000)
    world.observer.reply(stale, world.store.start(JOB, FIRE, executor, token + 5, 10_000))
    world.clock.advance(500)
    action = Sweep((SweepParams(JOB, DEADLINE, 100),))
    world.observer.reply(action, world.store.sweep(action.params))
    world.observer.summary(30.0)
    [summary] = events(caplog.records, "summary")
    fields = summary.qc_fields  # type: ignore[attr-defined]
    assert (fields["start_refused"], fields["takeovers"], fields["committed"]) == (1, 1, 0)


def test_a_dropped_result_is_logged_at_error_with_its_slot_and_token(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    action = Finish(JOB, FIRE, 3, True, "exit 0", 0, 0)
    world.observer.finish_dropped(action, "store unreachable: connection refused")
    [dropped] = events(caplog.records, "finish_dropped")
    assert dropped.levelno == logging.ERROR
    assert dropped.qc_fields == {"job": JOB, "slot": FIRE, "token": 3, "succeeded": True}  # type: ignore[attr-defined]
    assert "connection refused" in dropped.getMessage() and "resend buffer is full" in dropped.getMessage()
