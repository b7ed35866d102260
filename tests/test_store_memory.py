"""Unit tests of the model's rules (quorum_cron.store.memory).

One test per rule in ``Store.vote`` / ``Store.sweep`` / the fenced
transitions, each written so that it fails if that rule is dropped. The
contract suite then proves the Redis scripts equal this model.
"""

from __future__ import annotations

from typing import Any

import pytest

from quorum_cron.core.model import (
    TERMINAL_STATES,
    Delivery,
    Overlap,
    SlotState,
    SweepParams,
    VoteRequest,
    VoteStatus,
)
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.rendezvous import pick_executor

T0 = 1_700_000_000_000
SKEW, DEADLINE = 250, 30_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> MemoryStore:
    return MemoryStore(clock, retention_ms=3_600_000, ledger_maxlen=100)


def req(node: str, fire: int = T0, job: str = "j", **kw: Any) -> VoteRequest:
    kw.setdefault("spec_hash", "h1")
    kw.setdefault("quorum", 3)
    kw.setdefault("max_skew_ms", SKEW)
    kw.setdefault("deadline_ms", DEADLINE)
    return VoteRequest(job=job, fire_ms=fire, node=node, **kw)


def commit(
    store: MemoryStore, fire: int = T0, job: str = "j", nodes: tuple[str, ...] = ("n1", "n2", "n3"), **kw: Any
) -> Any:
    res = store.vote([req(n, fire, job, **kw) for n in nodes])[-1]
    assert res.status == VoteStatus.COMMITTED
    return res.slot


# -- vote ----------------------------------------------------------------------------------


def test_rule1_decided_slot_is_returned_unchanged(store: MemoryStore) -> None:
    slot = commit(store)
    res = store.vote([req("n4")])[0]
    assert res.status == VoteStatus.DECIDED and res.slot == slot
    assert "n4" not in res.slot.voters


def test_rule2_early_vote_is_refused_and_not_stored(store: MemoryStore, clock: Clock) -> None:
    res = store.vote([req("n1", fire=T0 + SKEW + 1)])[0]
    assert res.status == VoteStatus.EARLY and res.slot.state == SlotState.ABSENT
    assert store.slot("j", T0 + SKEW + 1).state == SlotState.ABSENT
    assert store.vote([req("n1", fire=T0 + SKEW)])[0].status == VoteStatus.RECORDED  # boundary: allowed


def test_rule3_late_vote_without_quorum_marks_the_slot_missed(store: MemoryStore, clock: Clock) -> None:
    store.vote([req("n1")])
    clock.now = T0 + DEADLINE
    assert store.vote([req("n2")])[0].status == VoteStatus.RECORDED  # boundary: still in time
    clock.now = T0 + DEADLINE + 1
    res = store.vote([req("n3")])[0]
    assert res.status == VoteStatus.MISSED and res.slot.state == SlotState.MISSED
    assert res.slot.voters == ("n1", "n2")  # the late vote is not stored
    [entry] = store.ledger("j", 10)
    assert (entry.state, entry.reason, entry.voters) == (
        SlotState.MISSED,
        "deadline passed before quorum",
        ("n1", "n2"),
    )
    assert store.high_waters(["j"])[0] == T0


def test_rule4_a_repeated_vote_overwrites(store: MemoryStore) -> None:
    store.vote([req("n1"), req("n1"), req("n2")])
    res = store.vote([req("n2", spec_hash="h2")])[0]
    assert res.status == VoteStatus.RECORDED
    assert res.slot.votes == (("n1", "h1"), ("n2", "h2"))
    assert store.vote([req("n1")])[0].status == VoteStatus.RECORDED  # n1 twice is still one vote


def test_rule5_quorum_needs_the_same_spec_hash(store: MemoryStore) -> None:
    results = store.vote([req("n1"), req("n2"), req("n3", spec_hash="h2"), req("n4", spec_hash="h2")])
    assert [r.status for r in results] == [VoteStatus.RECORDED] * 4
    res = store.vote([req("n5")])[0]
    assert res.status == VoteStatus.COMMITTED and res.slot.spec_hash == "h1"
    agreeing = ["n1", "n2", "n5"]
    assert res.slot.executor == pick_executor("j", T0, agreeing)  # never a node with another spec


def test_rule5_commit_sets_token_time_and_attempt(store: MemoryStore, clock: Clock) -> None:
    clock.now = T0 + 5
    first = commit(store)
    second = commit(store, fire=T0 + 1)
    other_job = commit(store, job="k")
    assert (first.token, second.token, other_job.token) == (1, 2, 1)  # per-job counter
    assert (first.committed_ms, first.attempt, first.state) == (T0 + 5, 1, SlotState.COMMITTED)
    assert store.high_waters(["j"])[0] == T0 + 1


def test_rule5_quorum_is_the_highest_ever_sent(store: MemoryStore) -> None:
    store.vote([req("n1", quorum=3)])
    res = store.vote([req("n2", quorum=2)])[0]  # a misconfigured node cannot lower the bar
    assert res.status == VoteStatus.RECORDED
    assert store.vote([req("n3", quorum=2)])[0].status == VoteStatus.COMMITTED
    store.vote([req("n1", fire=T0 + 1, quorum=4)])
    assert [r.status for r in store.vote([req(n, fire=T0 + 1) for n in ("n2", "n3", "n4")])] == [
        VoteStatus.RECORDED,
        VoteStatus.RECORDED,
        VoteStatus.COMMITTED,
    ]


def test_overlap_allow_commits_alongside(store: MemoryStore) -> None:
    commit(store)
    assert commit(store, fire=T0 + 1).state == SlotState.COMMITTED


def test_overlap_forbid_skips_while_another_slot_is_active(store: MemoryStore) -> None:
    commit(store)
    res = store.vote([req(n, fire=T0 + 1, overlap=Overlap.FORBID) for n in ("n1", "n2", "n3")])[-1]
    assert res.status == VoteStatus.COMMITTED and res.slot.state == SlotState.SKIPPED
    assert res.slot.reason == f"overlap forbidden: slot {T0} committed, not started yet"
    assert res.slot.token == 0 and store.ledger("j", 1)[0].state == SlotState.SKIPPED


def test_overlap_replace_ends_the_active_slots(store: MemoryStore) -> None:
    running = commit(store)
    assert store.start("j", T0, running.executor, running.token, 60_000).ok
    commit(store, fire=T0 + 1)
    new = commit(store, fire=T0 + 2, overlap=Overlap.REPLACE)
    assert new.state == SlotState.COMMITTED
    assert store.slot("j", T0).state == SlotState.FAILED
    assert store.slot("j", T0 + 1).state == SlotState.SKIPPED
    assert store.slot("j", T0 + 1).reason == f"replaced by slot {T0 + 2}"


def test_results_are_in_request_order(store: MemoryStore) -> None:
    results = store.vote([req("n1", job="b"), req("n1", job="a", fire=T0 + 10**6), req("n2", job="b")])
    assert [(r.slot.job, r.status) for r in results] == [
        ("b", VoteStatus.RECORDED),
        ("a", VoteStatus.EARLY),
        ("b", VoteStatus.RECORDED),
    ]


# -- fenced transitions ------------------------------------------------------------------------


def test_start_is_fenced_by_state_executor_and_token(store: MemoryStore) -> None:
    slot = commit(store)
    other = next(n for n in slot.voters if n != slot.executor)
    assert (
        store.start("j", T0, other, slot.token, 1_000).reason
        == f"executor is {slot.executor!r}, not {other!r}"
    )
    assert store.start("j", T0, slot.executor, slot.token - 1, 1_000).reason == (
        f"stale token {slot.token - 1}, current is {slot.token}"
    )
    assert store.start("j", T0 + 9, slot.executor, slot.token, 1_000).reason == "unknown slot"
    ok = store.start("j", T0, slot.executor, slot.token, 1_000)
    assert ok.ok and ok.slot.lease_until_ms == T0 + 1_000 and ok.slot.started_ms == T0
    again = store.start("j", T0, slot.executor, slot.token, 1_000)
    assert not again.ok and again.reason == "slot is running, not committed"


def test_start_refused_after_the_starting_deadline(store: MemoryStore, clock: Clock) -> None:
    slot = commit(store)
    clock.now = T0 + DEADLINE + 1
    res = store.start("j", T0, slot.executor, slot.token, 1_000)
    assert not res.ok and res.reason == "starting deadline passed"


def test_renew_and_finish(store: MemoryStore, clock: Clock) -> None:
    slot = commit(store)
    store.start("j", T0, slot.executor, slot.token, 1_000)
    clock.now += 500
    assert store.renew("j", T0, slot.executor, slot.token, 1_000).slot.lease_until_ms == T0 + 1_500
    res = store.finish("j", T0, slot.executor, slot.token, False, "exit 3")
    assert res.ok and (res.slot.state, res.slot.reason, res.slot.detail) == (
        SlotState.FAILED,
        "job failed",
        "exit 3",
    )
    assert not store.finish("j", T0, slot.executor, slot.token, True, "").ok  # a repeat changes nothing
    assert [e.state for e in store.ledger("j", 10)] == [SlotState.FAILED]


# -- sweep --------------------------------------------------------------------------------------


def params(**kw: Any) -> list[SweepParams]:
    kw.setdefault("deadline_ms", DEADLINE)
    kw.setdefault("start_timeout_ms", 5_000)
    return [SweepParams(job="j", **kw)]


def test_sweep_misses_proposed_slots_past_deadline(store: MemoryStore, clock: Clock) -> None:
    store.vote([req("n1")])
    clock.now = T0 + DEADLINE
    assert store.sweep(params()).changed == []
    clock.now += 1
    [slot] = store.sweep(params()).changed
    assert (slot.state, slot.reason) == (SlotState.MISSED, "deadline passed before quorum")


def test_sweep_reassigns_a_slot_not_started_in_time(store: MemoryStore, clock: Clock) -> None:
    first = commit(store)
    clock.now = T0 + 5_000
    assert store.sweep(params()).changed == []  # boundary: not yet
    clock.now += 1
    [second] = store.sweep(params()).changed
    fresh = [n for n in first.voters if n != first.executor]
    assert second.executor == pick_executor("j", T0, fresh)
    assert (second.token, second.attempt, second.committed_ms) == (first.token + 1, 2, clock.now)
    assert not store.start("j", T0, first.executor, first.token, 1_000).ok  # the old executor is fenced off


def test_sweep_reassigns_among_all_voters_when_each_was_assigned(store: MemoryStore, clock: Clock) -> None:
    commit(store, nodes=("n1", "n2", "n3"), quorum=3, deadline_ms=10**6)
    for _ in range(2):  # attempts 2 and 3: every voter has been assigned once
        clock.now += 5_001
        store.sweep(params())
    clock.now += 5_001
    [slot] = store.sweep(params()).changed
    assert slot.attempt == 4 and slot.executor == pick_executor("j", T0, ["n1", "n2", "n3"])


def test_sweep_misses_a_committed_slot_never_started_before_deadline(
    store: MemoryStore, clock: Clock
) -> None:
    slot = commit(store)
    clock.now = T0 + DEADLINE + 1
    [missed] = store.sweep(params()).changed
    assert (missed.state, missed.reason) == (
        SlotState.MISSED,
        f"not started before deadline by {slot.executor}",
    )


@pytest.mark.parametrize("delivery", list(Delivery))
def test_sweep_expired_lease(store: MemoryStore, clock: Clock, delivery: Delivery) -> None:
    slot = commit(store)
    store.start("j", T0, slot.executor, slot.token, 1_000)
    clock.now = T0 + 1_000
    assert store.sweep(params(delivery=delivery)).changed == []
    clock.now += 1
    [after] = store.sweep(params(delivery=delivery)).changed
    if delivery == Delivery.AT_MOST_ONCE:
        assert (after.state, after.reason) == (SlotState.LOST, f"lease of {slot.executor} expired mid-run")
    else:
        assert after.state == SlotState.COMMITTED and after.token == slot.token + 1
        assert after.executor != slot.executor and after.started_ms == 0
        # it ran once already: the starting deadline no longer applies
        clock.now = T0 + DEADLINE + 10
        assert store.start("j", T0, after.executor, after.token, 1_000).ok


def test_sweep_returns_changes_by_job_then_fire(store: MemoryStore, clock: Clock) -> None:
    for job in ("b", "a"):
        for fire in (T0 + 1, T0):
            store.vote([req("n1", fire=fire, job=job)])
    clock.now = T0 + DEADLINE + 10
    swept = store.sweep([SweepParams(j, DEADLINE, 5_000) for j in ("b", "a")]).changed
    assert [(s.job, s.fire_ms) for s in swept] == [("b", T0), ("b", T0 + 1), ("a", T0), ("a", T0 + 1)]


# -- record_missed, retention, ledger ------------------------------------------------------------


def test_record_missed_only_after_the_deadline_and_only_undecided(store: MemoryStore, clock: Clock) -> None:
    assert store.record_missed("j", T0, DEADLINE, "no node alive").state == SlotState.ABSENT
    commit(store, fire=T0 + 1)
    clock.now = T0 + DEADLINE + 2
    assert store.record_missed("j", T0, DEADLINE, "no node alive").reason == "no node alive"
    assert store.record_missed("j", T0 + 1, DEADLINE, "no node alive").state == SlotState.COMMITTED


def test_slots_vanish_after_retention(clock: Clock) -> None:
    store = MemoryStore(clock, retention_ms=60_000)
    store.vote([req("n1")])
    clock.now = T0 + 59_999
    assert store.slot("j", T0).state == SlotState.PROPOSED
    clock.now = T0 + 60_000
    assert store.slot("j", T0).state == SlotState.ABSENT and store.slots("j", 0, 2**52) == []


def test_ledger_is_newest_first_and_bounded(clock: Clock) -> None:
    store = MemoryStore(clock, ledger_maxlen=2)
    clock.now = T0 + 10**6
    for i in range(3):
        store.record_missed("j", T0 + i, DEADLINE, str(i))
    assert [e.reason for e in store.ledger("j", 5)] == ["2", "1"]
    assert store.ledger("j", 0) == []


# -- membership ------------------------------------------------------------------------------------


def test_heartbeat_refuses_a_second_live_incarnation(store: MemoryStore, clock: Clock) -> None:
    assert store.heartbeat("n1", "a", 1_000, {"v": "1"}).ok
    res = store.heartbeat("n1", "b", 1_000, {})
    assert not res.ok and res.holder == "a"
    assert store.heartbeat("n1", "a", 1_000, {}).ok  # the holder renews
    clock.now += 1_000
    assert store.heartbeat("n1", "b", 1_000, {}).ok  # expired: taken over


def test_leave_needs_the_holding_incarnation_and_members_skip_expired(
    store: MemoryStore, clock: Clock
) -> None:
    store.heartbeat("n2", "a", 1_000, {})
    store.heartbeat("n1", "a", 5_000, {"z": "1", "a": "2"})
    store.leave("n2", "other")
    assert [m.node for m in store.members()] == ["n1", "n2"]
    clock.now += 1_000
    assert [(m.node, m.info) for m in store.members()] == [("n1", {"a": "2", "z": "1"})]
    store.leave("n1", "a")
    assert store.members() == []


# -- operator control and retries ------------------------------------------------------


def test_paused_job_skips_undecided_slots_and_keeps_decided_ones(store: MemoryStore, clock: Clock) -> None:
    committed = commit(store)
    store.vote([req("n1", fire=T0 + 1)])  # proposed before the pause
    store.pause("j", "alice", "maintenance")
    assert store.vote([req("n4")])[0].status == VoteStatus.DECIDED  # decided: untouched
    res = store.vote([req("n2", fire=T0 + 1)])[0]
    assert res.status == VoteStatus.SKIPPED and res.slot.state == SlotState.SKIPPED
    assert res.slot.reason == "paused by alice: maintenance" and res.slot.voters == ("n1", "n2")
    assert store.vote([req("n1", fire=T0 + SKEW + 1)])[0].status == VoteStatus.EARLY  # early still refused
    assert store.slot("j", T0).token == committed.token
    store.resume("j", "bob")
    assert store.vote([req(n, fire=T0 + 2) for n in ("n1", "n2", "n3")])[-1].status == VoteStatus.COMMITTED
    store.pause("j", "carol", "")  # no reason: no dangling ": " (the Redis store's test says the same)
    assert store.vote([req("n1", fire=T0 + 3)])[0].slot.reason == "paused by carol"


def test_retries_reassign_with_backoff_then_the_last_failure_ends_the_slot(
    store: MemoryStore, clock: Clock
) -> None:
    slot = commit(store)
    tokens = [slot.token]
    for attempt in (1, 2):
        assert store.start("j", T0, slot.executor, slot.token, 5_000).ok
        res = store.finish(
            "j", T0, slot.executor, slot.token, False, "exit 1", retries=2, retry_backoff_ms=100
        )
        slot = res.slot
        assert slot.state == SlotState.COMMITTED and slot.runs == attempt
        assert slot.reason == f"attempt {attempt} of 3 failed; retry after 100 ms"
        assert slot.not_before_ms == clock.now + 100
        tokens.append(slot.token)
        assert not store.start("j", T0, slot.executor, slot.token, 5_000).ok
        clock.now += 100 + DEADLINE  # retries ignore the starting deadline
    assert tokens == sorted(set(tokens))
    assert store.start("j", T0, slot.executor, slot.token, 5_000).ok
    res = store.finish("j", T0, slot.executor, slot.token, False, "exit 1", retries=2, retry_backoff_ms=100)
    assert res.slot.state == SlotState.FAILED and res.slot.runs == 3
    states = [e.state for e in store.ledger("j", 10)]
    assert states == [SlotState.FAILED, SlotState.RETRYING, SlotState.RETRYING]
    assert SlotState.RETRYING not in TERMINAL_STATES


def test_trigger_times_are_store_time_bounded_and_audited(clock: Clock) -> None:
    store = MemoryStore(clock, retention_ms=10_000, trigger_maxlen=2, audit_maxlen=3)
    fires = []
    for _ in range(3):
        clock.now += 1
        fires.append(store.trigger("j", "ops"))
    assert fires == [T0 + 1, T0 + 2, T0 + 3] and store.triggers("j", 0) == fires[1:]
    store.pause("j", "ops", "x")
    assert [a.action for a in store.audit("j", 10)] == ["pause", "trigger", "trigger"]


def test_with_job_tables_fills_in_the_tables_heartbeats_name_by_digest() -> None:
    """status and the dashboard read a node's job table beside its heartbeat (issue 27): a member
    naming it by digest gets it filled in, one sending it inline (an older agent) keeps its own."""
    from quorum_cron.core.model import Member
    from quorum_cron.store.ports import table_digest, with_job_tables

    store = MemoryStore(lambda: 1_000)
    store.publish_jobs("n1", "a=1111111111111111")
    store.publish_jobs("n2", "a=2222222222222222")
    store.publish_jobs("n4", "a=4444444444444444")
    d1 = table_digest("a=1111111111111111")
    members = [
        Member("n1", "i1", 0, 2_000, {"jobs_digest": d1}),
        Member("n2", "i2", 0, 2_000, {"jobs": "a=inline"}),
        Member("n3", "i3", 0, 2_000, {"jobs_digest": "d3"}),  # (nothing published: left as it is)
        # (a table its heartbeat does not name: a reload whose table write failed; not read)
        Member("n4", "i4", 0, 2_000, {"jobs_digest": table_digest("a=new")}),
    ]
    got = with_job_tables(store, members)
    assert [m.info.get("jobs") for m in got] == ["a=1111111111111111", "a=inline", None, None]
    assert got[0].info["jobs_digest"] == d1 and members[0].info == {"jobs_digest": d1}
