"""A start folded into the commit, on the node's side (docs/protocol.md, "A start folded into the commit").

A core with an incarnation asks its votes to start what they commit to it;
the reply that says so runs the job under a lease counted from the vote's
send, or confirms first when it came half a lease late; a folding vote whose
reply was lost is adopted from a later view only under this process's
incarnation; a token whose start is still in flight is not run twice. The
store is the memory model, the one the contract suite holds to the scripts.
"""

from __future__ import annotations

from quorum_cron.core.model import SlotState, SlotView, TransitionResult, VoteResult, VoteStatus
from quorum_cron.core.node import (
    CoreJob,
    Failure,
    NodeCore,
    NodeSettings,
    Now,
    RecordMissed,
    Renew,
    Run,
    Start,
    Vote,
)
from quorum_cron.store.memory import MemoryStore
from tests.core_driver import Every, boot

T0 = 1_699_999_980_000
LEASE = 3_000


def _core(incarnation: str = "inc-1", deadline_ms: int = 500) -> NodeCore:
    job = CoreJob(
        name="a", schedule=Every(60_000), spec_hash="h1", deadline_ms=deadline_ms, timeout_ms=60_000
    )
    settings = NodeSettings(node_id="n1", quorum=1, lease_ms=LEASE, vote_lead_ms=0, incarnation=incarnation)
    core = NodeCore(settings, [job])
    core.set_trust(True)
    return core


def _vote(core: NodeCore, mono: int) -> Vote:
    (vote,) = [a for a in boot(core, Now(T0 + mono, mono)) if isinstance(a, Vote)]
    return vote


def test_the_votes_ask_for_the_start_only_with_an_incarnation() -> None:
    (asked,) = _vote(_core("inc-1"), 0).requests
    assert (asked.start_lease_ms, asked.incarnation) == (LEASE, "inc-1")
    (plain,) = _vote(_core(""), 0).requests
    assert (plain.start_lease_ms, plain.incarnation) == (0, "")


def test_a_vote_that_started_the_slot_runs_it_with_the_lease_from_the_votes_send() -> None:
    core = _core()
    store = MemoryStore(lambda: T0 + 10)
    vote = _vote(core, 0)
    (res,) = store.vote(vote.requests)
    assert res.status == VoteStatus.COMMITTED and res.slot.state == SlotState.RUNNING
    assert res.slot.starter == "inc-1" and res.slot.executor == "n1"
    assert core.on_reply(vote, [res], Now(T0 + 20, 20)) == [Run("a", T0, res.slot.token, 60_000)]
    # Renewed a third of the lease after the vote was sent (mono 0), not after the reply (20).
    renew = Renew("a", T0, res.slot.token, LEASE)
    assert renew not in core.tick(Now(T0 + 999, 999))
    assert renew in core.tick(Now(T0 + 1_000, 1_000))


def test_the_lease_counts_from_when_the_vote_went_on_the_wire() -> None:
    core = _core()
    store = MemoryStore(lambda: T0 + 400)
    vote = _vote(core, 0)
    core.sent(vote, 300)  # it waited on the store worker's thread
    (res,) = store.vote(vote.requests)
    assert core.on_reply(vote, [res], Now(T0 + 400, 400)) == [Run("a", T0, res.slot.token, 60_000)]
    renew = Renew("a", T0, res.slot.token, LEASE)
    assert renew not in core.tick(Now(T0 + 1_299, 1_299))
    assert renew in core.tick(Now(T0 + 1_300, 1_300))


def test_a_reply_half_a_lease_late_is_confirmed_before_the_job_runs() -> None:
    core = _core()
    store = MemoryStore(lambda: T0 + 10)
    vote = _vote(core, 0)
    (res,) = store.vote(vote.requests)
    late = LEASE // 2
    token = res.slot.token
    assert core.on_reply(vote, [res], Now(T0 + late, late)) == [Renew("a", T0, token, LEASE)]
    confirmed = TransitionResult(True, res.slot, T0 + late)
    assert core.on_reply(Renew("a", T0, token, LEASE), confirmed, Now(T0 + late + 5, late + 5)) == [
        Run("a", T0, token, 60_000)
    ]


def test_a_lost_folding_vote_is_adopted_from_the_missed_records_reply_under_this_incarnation() -> None:
    """The vote landed and started the slot here, its reply was lost, and the slot's deadline
    passed before the store answered again: the missed record finds the slot running under this
    node and this process's incarnation, so a renew confirms it and the job runs. A slot some
    earlier process of the same node id started (its job may still run, orphaned) is left alone."""
    for starter, adopted in (("inc-1", True), ("inc-0", False)):
        core = _core(deadline_ms=500)
        vote = _vote(core, 0)
        assert core.on_failure(vote, Now(T0 + 100, 100)) == []  # landed, or not: not known
        record = next(a for a in core.tick(Now(T0 + 2_000, 2_000)) if isinstance(a, RecordMissed))
        view = SlotView("a", T0, SlotState.RUNNING, executor="n1", token=4, runs=1, starter=starter)
        got = core.on_reply(record, view, Now(T0 + 2_100, 2_100))
        if not adopted:
            assert got == [], starter
            continue
        assert got == [Renew("a", T0, 4, LEASE)]
        ok = TransitionResult(True, view, T0 + 2_100)
        assert core.on_reply(got[0], ok, Now(T0 + 2_150, 2_150)) == [Run("a", T0, 4, 60_000)]


def test_a_folded_start_of_a_token_whose_start_is_in_flight_leaves_the_run_to_that_start() -> None:
    """A failover that lost writes can hand the same token out twice (store-failover seed 30):
    the start of it in flight decides, and the job runs once."""
    core = _core()
    vote = _vote(core, 0)
    (start,) = core.on_assigned("a", T0, 4, Now(T0, 0))
    assert isinstance(start, Start)
    view = SlotView("a", T0, SlotState.RUNNING, executor="n1", token=4, runs=1, starter="inc-1")
    folded = VoteResult(VoteStatus.COMMITTED, view, T0 + 10)
    assert core.on_reply(vote, [folded], Now(T0 + 10, 10)) == []
    refused = TransitionResult(False, view, T0 + 20, "slot is running, not committed")
    assert core.on_reply(start, refused, Now(T0 + 20, 20)) == [Renew("a", T0, 4, LEASE)]


def test_a_decided_reply_under_this_incarnation_is_confirmed_and_run() -> None:
    """The client sent the vote again after a connection error (redis-py's retry) or an earlier
    send's reply was lost: the store answers ``decided``, the slot running under this node with
    this process's tag. A renew confirms it; under another process's tag nothing happens."""
    for starter, adopted in (("inc-1", True), ("inc-0", False)):
        core = _core()
        vote = _vote(core, 0)
        view = SlotView("a", T0, SlotState.RUNNING, executor="n1", token=4, runs=1, starter=starter)
        got = core.on_reply(vote, [VoteResult(VoteStatus.DECIDED, view, T0 + 10)], Now(T0 + 20, 20))
        assert got == ([Renew("a", T0, 4, LEASE)] if adopted else []), starter


def test_a_vote_in_flight_at_a_graceful_stop_still_runs_the_slot_it_starts() -> None:
    """Stopping keeps the votes in flight (the agent waits for their replies within the grace):
    a reply that started the slot here runs it at once, its lease from the vote's send."""
    core = _core()
    store = MemoryStore(lambda: T0 + 10)
    vote = _vote(core, 0)
    core.stop_voting()
    (res,) = store.vote(vote.requests)
    assert core.on_reply(vote, [res], Now(T0 + 20, 20)) == [Run("a", T0, res.slot.token, 60_000)]


def test_a_failed_folding_votes_mark_goes_once_a_retry_shows_nothing_committed() -> None:
    """A folding vote that failed marks the slot for adoption; the retry's ``recorded`` reply shows
    the first send committed nothing, and the node keeps nothing of the slot (no record leaks)."""
    job = CoreJob(name="a", schedule=Every(60_000), spec_hash="h1", deadline_ms=5_000, timeout_ms=60_000)
    settings = NodeSettings(node_id="n1", quorum=2, lease_ms=LEASE, vote_lead_ms=0, incarnation="inc-1")
    core = NodeCore(settings, [job])
    core.set_trust(True)
    store = MemoryStore(lambda: T0 + 10)
    vote = _vote(core, 0)
    core.on_failure(vote, Now(T0 + 100, 100), Failure.REFUSED, "OOM command not allowed")
    retry = next(a for a in core.tick(Now(T0 + 1_000, 1_000)) if isinstance(a, Vote))
    (res,) = store.vote(retry.requests)
    assert res.status == VoteStatus.RECORDED
    slot = core._jobs["a"].slots[T0]
    assert slot.start_first == (0, 0)  # (the mark: token unknown, the vote sent at 0)
    core.on_reply(retry, [res], Now(T0 + 1_010, 1_010))
    assert slot.start_first is None
