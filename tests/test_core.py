"""The node core's rules, driven in virtual time against the memory model."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum_cron.core.model import (
    Delivery,
    Overlap,
    SlotState,
    SweepParams,
    SweepResult,
    TransitionResult,
    VoteStatus,
)
from quorum_cron.core.node import (
    Abstain,
    Action,
    CoreJob,
    Failure,
    Finish,
    Kill,
    NodeCore,
    NodeSettings,
    Now,
    ReadHighWater,
    RecordMissed,
    Renew,
    Run,
    Start,
    Sweep,
    Vote,
)
from quorum_cron.store.memory import MemoryStore
from tests.core_driver import Driver, Every, boot

T0 = 1_699_999_980_000  # a whole multiple of every period used below (60 s included)


def job(name: str = "tick", period_ms: int = 1000, **kw: object) -> CoreJob:
    return CoreJob(
        name=name,
        schedule=Every(period_ms),
        spec_hash=str(kw.pop("spec_hash", "h1")),
        deadline_ms=int(kw.pop("deadline_ms", 500)),  # type: ignore[call-overload]
        timeout_ms=60_000,
        **kw,  # type: ignore[arg-type]
    )


def test_every_due_slot_runs_exactly_once_on_a_healthy_cluster() -> None:
    d = Driver([job("a"), job("b", 2000)], n=5)
    d.run_until(T0 + 60_000)
    per_slot = Counter((j, t) for _, j, t, _ in d.executions)
    assert per_slot and max(per_slot.values()) == 1
    due_a = [T0, *Every(1000).fire_times(T0, T0 + 60_000 - 1000)]
    ran_a = sorted(t for (j, t) in per_slot if j == "a")
    assert ran_a[: len(due_a)] == due_a
    for t in due_a:
        assert d.store.slot("a", t).state == SlotState.SUCCEEDED


def test_executors_spread_over_the_nodes() -> None:
    d = Driver([job("a", 1000)], n=3)
    d.run_until(T0 + 300_000)
    by_node = Counter(n for n, *_ in d.executions)
    assert set(by_node) == {"n1", "n2", "n3"}
    assert min(by_node.values()) >= 0.75 * (sum(by_node.values()) / 3)


def test_a_minority_alone_cannot_commit() -> None:
    d = Driver([job("a")], n=5)
    for name in ("n3", "n4", "n5"):
        d.nodes[name].alive = False
    d.run_until(T0 + 10_000)
    assert d.executions == []
    ledger = d.store.ledger("a", 100)
    assert ledger and all(e.state == SlotState.MISSED for e in ledger)


def test_nodes_with_different_definitions_cannot_fire_together() -> None:
    jobs_by_node = {"n1": "h1", "n2": "h2", "n3": "h3"}
    d = Driver([job("a")], n=3)
    for name, h in jobs_by_node.items():
        d.nodes[name].core = NodeCore(NodeSettings(node_id=name, quorum=2), [job("a", spec_hash=h)])
        d.nodes[name].core.set_trust(True)
    d.run_until(T0 + 5_000)
    assert d.executions == []


def test_untrusted_clock_abstains_once_per_slot_and_never_votes() -> None:
    d = Driver([job("a")], n=3)
    d.nodes["n1"].core.set_trust(False, "NTP bound 5000 ms > 250 ms")
    d.run_until(T0 + 5_000)
    assert all(n != "n1" for n, *_ in d.executions)
    reasons = {a.reason for a in d.nodes["n1"].abstains}
    assert reasons == {"NTP bound 5000 ms > 250 ms"}
    slots = [a.fire_ms for a in d.nodes["n1"].abstains]
    assert len(slots) == len(set(slots)) >= 4
    for view in d.store.slots("a", T0, T0 + 5_000):
        assert "n1" not in view.voters


def test_core_votes_a_lead_before_the_slot_and_starts_only_when_it_is_due() -> None:
    core = NodeCore(NodeSettings(node_id="n1", quorum=1, vote_lead_ms=50), [job("a")])
    core.set_trust(True)
    first = core.tick(Now(T0 + 10, 0))
    assert [type(a) for a in first] == [ReadHighWater, Sweep]  # votes wait for the high-water read
    assert core.on_reply(first[0], [0], Now(T0 + 10, 0)) == []
    (vote,) = core.tick(Now(T0 + 10, 0))
    assert isinstance(vote, Vote)
    assert [r.fire_ms for r in vote.requests] == [T0]
    assert core.next_wakeup(Now(T0 + 10, 0)) == 940
    assert not any(isinstance(a, Vote) for a in core.tick(Now(T0 + 949, 939)))
    (early,) = [a for a in core.tick(Now(T0 + 950, 940)) if isinstance(a, Vote)]
    assert [r.fire_ms for r in early.requests] == [T0 + 1000]
    # Committed to us 50 ms ahead of time: the start waits for the fire time.
    assert core.on_assigned("a", T0 + 1000, 2, Now(T0 + 951, 941)) == []
    assert core.next_wakeup(Now(T0 + 951, 941)) <= 49
    assert not any(isinstance(a, Start) for a in core.tick(Now(T0 + 999, 989)))
    assert Start("a", T0 + 1000, 2, core.settings.lease_ms) in core.tick(Now(T0 + 1000, 990))


def test_vote_lead_must_stay_inside_the_store_window() -> None:
    with pytest.raises(ValueError, match="vote_lead_ms 300 is outside"):
        NodeSettings(node_id="n1", quorum=1, max_skew_ms=250, vote_lead_ms=300)


def test_lost_vote_reply_is_retried_and_the_repeat_changes_nothing() -> None:
    d = Driver([job("a")], n=3)
    core = d.nodes["n1"].core
    actions = boot(core, Now(T0, 0))
    vote = next(a for a in actions if isinstance(a, Vote))
    (first_sweep,) = [a for a in actions if isinstance(a, Sweep)]
    core.on_reply(first_sweep, d.store.sweep(first_sweep.params), Now(T0, 0))
    d.store.vote(vote.requests)  # the vote lands ...
    assert core.on_failure(vote, Now(T0, 0)) == []  # ... but the reply is lost
    # The store may be gone: the vote waits for it to answer; the sweep, brought forward
    # to the retry time, asks.
    (sweep,) = core.tick(Now(T0 + 500, 500))
    assert isinstance(sweep, Sweep)
    core.on_reply(sweep, d.store.sweep(sweep.params), Now(T0 + 600, 600))
    retry = [a for a in core.tick(Now(T0 + 600, 600)) if isinstance(a, Vote)]
    assert retry and retry[0].requests == vote.requests
    results = d.store.vote(retry[0].requests)
    assert results[0].status == VoteStatus.RECORDED
    assert results[0].slot.votes == (("n1", "h1"),)


def test_refused_renew_kills_the_run() -> None:
    core = NodeCore(NodeSettings(node_id="n1", quorum=1, lease_ms=3000), [job("a")])
    core.set_trust(True)
    start = Start("a", T0, 7, 3000)
    assert core.on_assigned("a", T0, 7, Now(T0, 0)) == [start]
    from quorum_cron.core.model import SlotView

    ok = TransitionResult(True, SlotView("a", T0, SlotState.RUNNING, token=7, executor="n1"), T0)
    assert core.on_reply(start, ok, Now(T0, 0)) == [Run("a", T0, 7, 60_000)]
    renew = [a for a in core.tick(Now(T0 + 1000, 1000)) if not isinstance(a, Sweep | Vote | ReadHighWater)]
    assert len(renew) == 1
    refused = TransitionResult(False, SlotView("a", T0, SlotState.COMMITTED, token=8), T0, "stale token 7")
    assert core.on_reply(renew[0], refused, Now(T0 + 1000, 1000)) == [  # type: ignore[arg-type]
        Kill("a", T0, 7, "renew refused: stale token 7")
    ]


def test_paused_executor_is_replaced_and_cannot_start_late() -> None:
    clock = [T0]
    store = MemoryStore(lambda: clock[0])
    j = job("a", 60_000, deadline_ms=30_000)
    cores = {n: NodeCore(NodeSettings(node_id=n, quorum=2, start_timeout_ms=5000), [j]) for n in ("n1", "n2")}
    for core in cores.values():
        core.set_trust(True)
        vote = next(a for a in boot(core, Now(T0, 0)) if isinstance(a, Vote))
        results = store.vote(vote.requests)
    first = results[0].slot
    assert first.state == SlotState.COMMITTED
    paused = first.executor  # pauses before it hears of its assignment
    clock[0] += 6000
    (taken,) = store.sweep([SweepParams("a", 30_000, 5000)]).changed
    assert taken.executor != paused and taken.token > first.token
    # The paused node wakes with the old notice: its start is fenced off.
    core = cores[paused]
    (start,) = core.on_assigned("a", T0, first.token, Now(T0 + 6000, 6000))
    assert isinstance(start, Start)
    reply = store.start("a", T0, paused, start.token, start.lease_ms)
    assert not reply.ok and "stale token" in reply.reason
    assert core.on_reply(start, reply, Now(T0 + 6000, 6000)) == []


def test_at_most_once_lease_expiry_is_lost_not_rerun() -> None:
    d = Driver([job("a", 60_000, deadline_ms=10_000)], n=3, run_ms=10**9)
    d.run_until(T0 + 200)
    running = d.store.slot("a", T0)
    assert running.state == SlotState.RUNNING
    d.nodes[running.executor].alive = False  # crashed mid-run
    d.run_until(T0 + 40_000)
    assert d.store.slot("a", T0).state == SlotState.LOST
    assert [e for e in d.executions if e[2] == T0] == [(running.executor, "a", T0, running.token)]


def test_at_least_once_lease_expiry_reruns_with_a_higher_token() -> None:
    j = job("a", 60_000, deadline_ms=10_000, delivery=Delivery.AT_LEAST_ONCE)
    d = Driver([j], n=3, run_ms=10**9)
    d.run_until(T0 + 200)
    first = d.store.slot("a", T0)
    d.nodes[first.executor].alive = False
    d.run_until(T0 + 40_000)
    runs = [e for e in d.executions if e[2] == T0]
    assert len(runs) == 2
    assert runs[1][0] != first.executor and runs[1][3] > first.token


def test_restart_after_whole_cluster_outage_accounts_for_every_slot() -> None:
    d = Driver([job("a", 1000, deadline_ms=500)], n=3)
    d.run_until(T0 + 3_000)
    hwm = d.store.high_waters(["a"])[0]
    # Everyone goes down for a minute; fresh processes come back.
    d.now_ms += 60_000
    d.mono_ms += 60_000
    for name, node in d.nodes.items():
        node.core = NodeCore(NodeSettings(node_id=name, quorum=2), [job("a", 1000, deadline_ms=500)])
        node.core.set_trust(True)
    restart = d.now_ms
    d.run_until(restart + 5_000)
    for t in Every(1000).fire_times(hwm, restart + 4_000):
        assert d.store.slot("a", t).state in {SlotState.MISSED, SlotState.SUCCEEDED}, t
    missed = [e for e in d.store.ledger("a", 1000) if e.state == SlotState.MISSED]
    assert any(e.reason == "no node alive to vote before its deadline" for e in missed)


def test_run_once_misfire_runs_the_latest_missed_slot_once() -> None:
    mk = lambda: job("a", 10_000, deadline_ms=1000, misfire="run-once")  # noqa: E731
    d = Driver([mk()], n=3)
    d.run_until(T0 + 15_000)
    d.now_ms += 100_000
    d.mono_ms += 100_000
    for name, node in d.nodes.items():
        node.core = NodeCore(NodeSettings(node_id=name, quorum=2), [mk()])
        node.core.set_trust(True)
    restart = d.now_ms
    d.run_until(restart + 2_000)
    latest = max(Every(10_000).fire_times(T0, restart - 1000))
    assert d.store.slot("a", latest).state == SlotState.SUCCEEDED
    assert sum(1 for e in d.executions if e[2] == latest) == 1
    assert d.store.slot("a", latest - 10_000).state == SlotState.MISSED


def test_first_tick_reads_the_high_water_mark_and_records_missed() -> None:
    core = NodeCore(NodeSettings(node_id="n1", quorum=2), [job("a", 1000, deadline_ms=500)])
    core.set_trust(True)
    now = Now(T0 + 5_000, 0)
    acts = core.tick(now)
    hw = next(a for a in acts if isinstance(a, ReadHighWater))
    assert hw == ReadHighWater(("a",))
    out = core.on_reply(hw, [T0 + 1000], now)
    assert [a.fire_ms for a in out if isinstance(a, RecordMissed)] == [T0 + 2000, T0 + 3000, T0 + 4000]


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=5),
    dead=st.sets(st.integers(min_value=1, max_value=5), max_size=4),
    offsets=st.lists(st.integers(min_value=-200, max_value=200), min_size=5, max_size=5),
)
def test_no_slot_ever_runs_twice_whatever_nodes_are_down(n: int, dead: set[int], offsets: list[int]) -> None:
    d = Driver([job("a", 1000), job("b", 3000)], n=n)
    for i, (_, node) in enumerate(sorted(d.nodes.items())):
        node.offset_ms = offsets[i]
        node.alive = (i + 1) not in dead
    d.run_until(T0 + 20_000)
    per_slot = Counter((j, t) for _, j, t, _ in d.executions)
    assert all(c == 1 for c in per_slot.values())
    alive = sum(1 for node in d.nodes.values() if node.alive)
    if alive >= n // 2 + 1:
        assert len(per_slot) >= 19 + 6  # liveness with a healthy majority
    else:
        assert not per_slot


def test_duplicate_job_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate job names"):
        NodeCore(NodeSettings(node_id="n1", quorum=1), [job("a"), job("a")])


def test_abstain_action_carries_the_reason() -> None:
    core = NodeCore(NodeSettings(node_id="n1", quorum=1), [job("a")])
    acts = core.tick(Now(T0, 0))
    assert Abstain("a", T0, "clock not checked yet") in acts


def test_failed_run_is_retried_under_a_new_token_after_its_backoff() -> None:
    j = job("a", 60_000, deadline_ms=10_000, retries=2, retry_backoff_ms=3000)
    d = Driver([j], n=3, run_ms=100)
    d.succeeds = lambda run: run.token >= 3  # the first two attempts fail
    d.run_until(T0 + 20_000)
    runs = [e for e in d.executions if e[2] == T0]
    assert [token for *_, token in runs] == [1, 2, 3]
    starts = [d.store.ledger("a", 10)]
    states = [e.state for e in reversed(starts[0])]
    assert states == [SlotState.RETRYING, SlotState.RETRYING, SlotState.SUCCEEDED]
    final = d.store.slot("a", T0)
    assert final.state == SlotState.SUCCEEDED and final.runs == 3
    assert final.started_ms - T0 >= 2 * 3000  # each retry waited for its backoff


def test_a_retry_assigned_before_its_backoff_is_started_when_due() -> None:
    j = job("a", 60_000, retries=1, retry_backoff_ms=5000)
    core = NodeCore(NodeSettings(node_id="n1", quorum=1), [j])
    core.set_trust(True)
    from quorum_cron.core.model import SlotView

    view = SlotView("a", T0, SlotState.COMMITTED, executor="n1", token=4, not_before_ms=T0 + 5000)
    fin = Finish("a", T0, 3, False, "exit 1", 1, 5000)
    assert core.on_reply(fin, TransitionResult(True, view, T0), Now(T0, 0)) == []
    assert core.next_wakeup(Now(T0, 0)) <= 5000
    assert not any(isinstance(a, Start) for a in core.tick(Now(T0 + 4999, 4999)))
    assert Start("a", T0, 4, core.settings.lease_ms) in core.tick(Now(T0 + 5000, 5000))


def test_trigger_is_voted_like_a_scheduled_slot_and_needs_a_quorum() -> None:
    d = Driver([job("a", 3_600_000, deadline_ms=5000)], n=3)
    d.run_until(T0 + 1000)
    fire = d.store.trigger("a", "alice")
    for name in ("n1", "n2"):
        node = d.nodes[name]
        assert node.core.on_trigger("a", fire, d._now(node)) == []
    d.run_until(T0 + 3000)
    assert [e[2] for e in d.executions] == [fire]  # the hourly slot is not due in this window
    assert d.store.slot("a", fire).voters == ("n1", "n2")


def test_trigger_heard_after_its_deadline_is_ignored() -> None:
    core = NodeCore(NodeSettings(node_id="n1", quorum=2), [job("a", deadline_ms=500)])
    core.set_trust(True)
    core.tick(Now(T0, 0))
    core.on_trigger("a", T0 + 100, Now(T0 + 700, 700))
    votes = [a for a in core.tick(Now(T0 + 700, 700)) if isinstance(a, Vote)]
    assert all(r.fire_ms != T0 + 100 for v in votes for r in v.requests)


def test_slots_nobody_voted_for_still_end_in_the_ledger() -> None:
    d = Driver([job("a", 1000, deadline_ms=500)], n=3)
    for node in d.nodes.values():
        node.core.set_trust(False, "NTP unreachable")
    d.run_until(T0 + 5_000)
    assert d.executions == []
    for t in [T0, *Every(1000).fire_times(T0, T0 + 3_000)]:
        view = d.store.slot("a", t)
        assert view.state == SlotState.MISSED, t
        assert "abstained: NTP unreachable" in view.reason


def test_a_node_that_slept_through_slots_accounts_for_them() -> None:
    core = NodeCore(NodeSettings(node_id="n1", quorum=2), [job("a", 1000, deadline_ms=500)])
    core.set_trust(True)
    boot(core, Now(T0, 0))
    acts = core.tick(Now(T0 + 4_200, 4_200))  # paused for four seconds
    missed = [a.fire_ms for a in acts if isinstance(a, RecordMissed)]
    assert missed == [T0 + 1000, T0 + 2000, T0 + 3000]
    votes = [r.fire_ms for a in acts if isinstance(a, Vote) for r in a.requests]
    assert votes == [T0 + 4000]


def test_an_abstaining_node_sleeps_until_its_pending_slot_is_too_late() -> None:
    j = job("a", 60_000, deadline_ms=500)
    core = NodeCore(NodeSettings(node_id="n1", quorum=2, max_skew_ms=250), [j])
    boot(core, Now(T0, 0))  # abstains: the clock was never checked
    assert core.next_wakeup(Now(T0 + 1, 1)) == 500 + 250 + 1 - 1


@pytest.mark.parametrize("outcome", ["accepted", "refused", "failed", "held again"])
def test_a_start_reply_held_past_half_the_lease_is_confirmed_by_a_renew_before_the_job_runs(
    outcome: str,
) -> None:
    """A held start reply: the lease that began after the start's send may be nearly over, and the
    slot taken over once it is. The node renews first and runs only if the store accepts in time,
    with the lease counted from the renew's send."""
    from quorum_cron.core.lifecycle import Phase
    from quorum_cron.core.model import SlotView

    core = NodeCore(NodeSettings(node_id="n1", quorum=1, lease_ms=3000), [job("a", 60_000)])
    core.set_trust(True)
    (start,) = core.on_assigned("a", T0, 1, Now(T0, 0))
    assert isinstance(start, Start)
    running = SlotView("a", T0, SlotState.RUNNING, token=1, executor="n1")
    ok = TransitionResult(True, running, T0)
    # Held 1500 ms (half the lease): no run yet, a renew of the same token instead.
    assert core.on_reply(start, ok, Now(T0 + 1500, 1500)) == [Renew("a", T0, 1, 3000)]
    assert core.slot_phase("a", T0) == Phase.STARTING
    # Meanwhile an assignment notice or a read of the slot must not start it a second time.
    assert core.on_assigned("a", T0, 1, Now(T0 + 1600, 1600)) == []
    renew = Renew("a", T0, 1, 3000)
    if outcome == "accepted":
        assert core.on_reply(renew, ok, Now(T0 + 1700, 1700)) == [Run("a", T0, 1, 60_000)]
        assert core.slot_phase("a", T0) == Phase.RUNNING
        # The lease runs from the renew's send (1500): the next renew is due lease/3 later.
        assert not [a for a in core.tick(Now(T0 + 2499, 2499)) if isinstance(a, Renew)]
        assert [a for a in core.tick(Now(T0 + 2500, 2500)) if isinstance(a, Renew)] == [renew]
        return
    if outcome == "refused":
        lost = SlotView("a", T0, SlotState.LOST, token=1, executor="n1")
        refused = TransitionResult(False, lost, T0, "slot is lost")
        assert core.on_reply(renew, refused, Now(T0 + 1700, 1700)) == []
    elif outcome == "failed":
        # Not known whether it landed: the slot is read again, and a read showing it ours is
        # confirmed again before anything runs.
        from quorum_cron.core.node import ReadSlots

        assert core.on_failure(renew, Now(T0 + 1700, 1700)) == []
        assert core.slot_phase("a", T0) == Phase.AWAITING
        due = core.tick(Now(T0 + 2200, 2200))
        (read,) = [a for a in due if isinstance(a, ReadSlots | Renew | Run | Start)]
        assert read == ReadSlots((("a", T0),))
        assert core.on_reply(read, [running], Now(T0 + 2300, 2300)) == [renew]
        assert core.on_reply(renew, ok, Now(T0 + 2400, 2400)) == [Run("a", T0, 1, 60_000)]
        return
    else:
        assert core.on_reply(renew, ok, Now(T0 + 3000, 3000)) == []  # held again: the store decides
    assert core.slot_phase("a", T0) == Phase.NONE
    assert not [a for a in core.tick(Now(T0 + 4000, 4000)) if isinstance(a, Renew | Run | Start)]


def test_an_executor_whose_start_reply_is_lost_confirms_the_slot_it_reads_running_under_its_token() -> None:
    """A read showing the slot running under our token may show a write no replica acknowledged
    (a failover then loses it: explorer seed 31090): a renew of the token confirms it, and the
    job runs under the lease that renew was granted; a read long after the start changes nothing."""
    from quorum_cron.core.model import SlotView
    from quorum_cron.core.node import ReadSlots

    for replied_at, confirms in ((1_000, True), (1_500, True), (3_000, False)):
        core = NodeCore(NodeSettings(node_id="n1", quorum=1, lease_ms=3000, retry_ms=500), [job("a", 60_000)])
        core.set_trust(True)
        (start,) = core.on_assigned("a", T0, 1, Now(T0, 0))
        assert isinstance(start, Start)
        assert core.on_failure(start, Now(T0 + 400, 400)) == []  # the start landed; its reply was lost
        (read,) = [a for a in core.tick(Now(T0 + 900, 900)) if isinstance(a, ReadSlots)]
        view = SlotView("a", T0, SlotState.RUNNING, token=1, executor="n1")
        got = core.on_reply(read, [view], Now(T0 + replied_at, replied_at))
        if not confirms:
            assert got == []  # a lease after the first start: the store decides (lost, or a takeover)
            continue
        assert got == [Renew("a", T0, 1, 3000)]
        assert not [a for a in core.tick(Now(T0 + replied_at + 10, replied_at + 10)) if isinstance(a, Run)]
        accepted = TransitionResult(True, view, T0)
        at = replied_at + 100
        assert core.on_reply(got[0], accepted, Now(T0 + at, at)) == [Run("a", T0, 1, 60_000)]
        t = replied_at + 999  # the next renew: lease/3 after the confirming renew's send
        assert [a for a in core.tick(Now(T0 + t, t)) if isinstance(a, Renew)] == []
        t += 1
        assert [a for a in core.tick(Now(T0 + t, t)) if isinstance(a, Renew)] == [Renew("a", T0, 1, 3000)]


def test_a_missed_record_the_store_keeps_refusing_backs_off_to_sixteen_retries() -> None:
    settings = NodeSettings(node_id="n1", quorum=2, retry_ms=500)
    core = NodeCore(settings, [job("a", 1000, deadline_ms=500)])
    core.set_trust(True)
    (read,) = [a for a in core.tick(Now(T0, 0)) if isinstance(a, ReadHighWater)]
    core.on_reply(read, [0], Now(T0, 0))  # (a slept-through slot's record waits for this read)
    acts = core.tick(Now(T0 + 2_200, 2_200))  # slept through T0 + 1000
    record = next(a for a in acts if isinstance(a, RecordMissed))
    sent_at = 2_200
    for gap in (500, 1000, 2000, 4000, 8000, 8000, 8000):
        core.on_failure(record, Now(T0 + sent_at, sent_at), Failure.REFUSED, "OOM")
        # The record comes back once its backoff has passed, not before.
        early = sent_at + gap - 1
        assert record not in core.tick(Now(T0 + early, early)), gap
        assert core.next_wakeup(Now(T0 + early, early)) <= 1
        sent_at += gap
        assert record in core.tick(Now(T0 + sent_at, sent_at)), gap
    # A reply resets it: the next failure is retried after retry_ms again.
    core.on_reply(record, core_view_missed(record), Now(T0 + sent_at, sent_at))
    core.on_failure(record, Now(T0 + sent_at, sent_at), Failure.REFUSED, "OOM")
    assert record not in core.tick(Now(T0 + sent_at + 499, sent_at + 499))
    assert record in core.tick(Now(T0 + sent_at + 500, sent_at + 500))


def test_while_the_store_is_unreachable_missed_records_go_one_probe_at_a_time() -> None:
    """A node cut off from the store holds its missed records and sends one at a time, each
    failed probe doubling the gap before the next (up to 16x retry_ms); the first reply sends
    every held record at the next tick."""
    settings = NodeSettings(node_id="n1", quorum=2, retry_ms=500)
    core = NodeCore(settings, [job("a", 1000, deadline_ms=500)])
    core.set_trust(True)
    for a in core.tick(Now(T0, 0)):
        if isinstance(a, ReadHighWater):
            core.on_reply(a, [0], Now(T0, 0))
        elif isinstance(a, Sweep):
            core.on_reply(a, SweepResult([]), Now(T0, 0))

    def records(acts: list[Action]) -> list[RecordMissed]:
        return [a for a in acts if isinstance(a, RecordMissed)]

    # Slept through T0 .. T0 + 3000: four records at once, the store still reachable.
    acts = core.tick(Now(T0 + 4_000, 4_000))
    assert sorted(r.fire_ms for r in records(acts)) == [T0, T0 + 1000, T0 + 2000, T0 + 3000]
    for a in acts:
        if isinstance(a, RecordMissed | Vote | Sweep):
            core.on_failure(a, Now(T0 + 4_010, 4_010))  # no answer: unreachable
    assert not core.store_reachable
    probes: list[int] = []
    t = 4_010
    while t < 60_000:
        t += 10
        acts = core.tick(Now(T0 + t, t))
        sent = records(acts)
        assert len(sent) <= 1, f"{len(sent)} records sent at once while the store is unreachable"
        for a in acts:
            if isinstance(a, Vote | Sweep):
                core.on_failure(a, Now(T0 + t, t))  # votes and sweeps get no answer either
        for r in sent:
            probes.append(t)
            # Nothing more goes while the probe is in flight, though later slots come due.
            assert records(core.tick(Now(T0 + t + 5, t + 5))) == []
            core.on_failure(r, Now(T0 + t + 5, t + 5))
    gaps = [b - a for a, b in itertools.pairwise(probes)]
    assert len(gaps) >= 8
    for i, gap in enumerate(gaps):
        want = 500 << min(i, 4)  # counted from the failure, 5 ms after the probe was sent
        assert want <= gap < want + 20, (i, gaps)
    # The store answers (any reply): every slot that passed its deadline meanwhile (dozens,
    # though only a few probes went) is recorded at the next tick.
    core.on_reply(Sweep(()), SweepResult([]), Now(T0 + t, t))
    assert core.store_reachable
    assert core.next_wakeup(Now(T0 + t, t)) == 0
    released = {r.fire_ms for r in records(core.tick(Now(T0 + t, t)))}
    assert set(range(T0, T0 + t - 2_000, 1000)) <= released
    assert max(released) < T0 + t


def core_view_missed(record: RecordMissed) -> object:
    store = MemoryStore(lambda: record.fire_ms + 10_000)
    return store.record_missed(record.job, record.fire_ms, record.deadline_ms, record.reason)


@pytest.mark.parametrize(
    ("delivery", "overlap", "killed"),
    [
        (Delivery.AT_LEAST_ONCE, Overlap.ALLOW, True),
        (Delivery.AT_LEAST_ONCE, Overlap.FORBID, True),
        (Delivery.AT_MOST_ONCE, Overlap.FORBID, True),
        (Delivery.AT_MOST_ONCE, Overlap.REPLACE, True),
        (Delivery.AT_MOST_ONCE, Overlap.ALLOW, False),
    ],
)
def test_a_run_is_killed_at_its_lease_end_counted_from_the_accepted_renews_send(
    delivery: Delivery, overlap: Overlap, killed: bool
) -> None:
    """Once the lease ends in the store, the store hands the slot on (at-least-once) or marks it
    lost, after which a later slot may start although overlap is forbidden (and ``replace`` can
    no longer reach the run): only an at-most-once run of a job that allows overlap goes on."""
    from quorum_cron.core.model import SlotView
    from quorum_cron.core.run import lease_margin

    lease = 3000
    settings = NodeSettings(node_id="n1", quorum=1, lease_ms=lease)
    core = NodeCore(settings, [job("a", 60_000, delivery=delivery, overlap=overlap)])
    core.set_trust(True)
    (start,) = core.on_assigned("a", T0, 1, Now(T0, 0))
    running = TransitionResult(True, SlotView("a", T0, SlotState.RUNNING, token=1, executor="n1"), T0)
    assert core.on_reply(start, running, Now(T0 + 100, 100)) == [Run("a", T0, 1, 60_000)]
    (renew,) = [a for a in core.tick(Now(T0 + 1000, 1000)) if isinstance(a, Renew)]
    assert core.on_reply(renew, running, Now(T0 + 1800, 1800)) == []  # accepted; the reply was slow
    (late,) = [a for a in core.tick(Now(T0 + 2000, 2000)) if isinstance(a, Renew)]  # never answered
    end = 1000 + lease - 30  # from the accepted renew's send, not its reply (1800); 1% margin
    assert lease_margin(lease) == 30
    if killed:
        assert core.next_wakeup(Now(T0 + 3000, 3000)) <= end - 3000  # the timer wakes the node
    assert not [a for a in core.tick(Now(T0 + end - 1, end - 1)) if isinstance(a, Kill)]
    kills = [a for a in core.tick(Now(T0 + end, end)) if isinstance(a, Kill)]
    if killed:
        assert kills == [Kill("a", T0, 1, "lease ended before a renew was accepted")]
        assert core.on_reply(late, running, Now(T0 + end + 5, end + 5)) == []  # too late: stays killed
    else:
        assert kills == []  # the store marks the slot lost; it is never run again, nor held back


def test_a_read_answered_after_the_slot_was_committed_to_this_node_sets_no_poll() -> None:
    """A poll sent while the slot was proposed, answered after the assignment notice made this
    node start it: the proposed view is older news. Polling again would leave a poll timer on the
    starting slot, and a renew refused later would turn the run into ``awaiting``, a step the
    lifecycle table does not allow (explorer seed 11)."""
    from quorum_cron.core.lifecycle import Phase
    from quorum_cron.core.model import SlotView
    from quorum_cron.core.node import ReadSlots

    core = NodeCore(
        NodeSettings(node_id="n1", quorum=1, lease_ms=3000), [job("a", 60_000, deadline_ms=30_000)]
    )
    core.set_trust(True)
    read = ReadSlots((("a", T0),))
    (start,) = core.on_assigned("a", T0, 1, Now(T0, 0))
    assert isinstance(start, Start)
    proposed = SlotView("a", T0, SlotState.PROPOSED)
    assert core.on_reply(read, [proposed], Now(T0 + 10, 10)) == []
    running = SlotView("a", T0, SlotState.RUNNING, token=1, executor="n1")
    assert core.on_reply(start, TransitionResult(True, running, T0), Now(T0 + 20, 20)) == [
        Run("a", T0, 1, 60_000)
    ]
    assert core.slot_phase("a", T0) == Phase.RUNNING
    renew = Renew("a", T0, 1, 3000)  # (what its renew timer sends; no tick: no vote of its own)
    failed = SlotView("a", T0, SlotState.FAILED, token=1, executor="n1")
    core.on_reply(renew, TransitionResult(False, failed, T0 + 1030, "slot is failed"), Now(T0 + 1030, 1030))
    assert core.slot_phase("a", T0) == Phase.NONE


@given(lease=st.integers(min_value=1_000, max_value=86_400_000))  # (the config's range)
def test_the_lease_margin_covers_a_one_percent_clock_rate_difference(lease: int) -> None:
    """The margin is what covers the node's and the store's clocks running at different rates
    (docs/protocol.md, "Leases"): at least 1% of the lease (10,000 ppm, twice the simulator's
    largest drift), and not much more. A mutation audit shrank it to 0.001% with every
    test and exploration passing: the simulator seldom pairs long at-least-once runs, a lease's
    worth of failed renewals and thousands of ppm of drift (sim/scenarios/lease-margin-under-drift.toml
    does)."""
    from quorum_cron.core.lease import lease_end, lease_margin

    margin = lease_margin(lease)
    assert margin * 100 > lease - 100  # 1%, to the millisecond
    assert margin * 50 <= lease  # and not much more: the run's time is the lease less it
    assert lease_end(1_000, lease) == 1_000 + lease - margin
