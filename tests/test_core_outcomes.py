"""One writer per slot outcome: the core decides abstain / record missed / run locally, and why.

The runtime only reports what happened to a store call (no answer, or an
error answer) and whether its clock is trusted; these tests drive one core
by hand through each case.
"""

from __future__ import annotations

from collections.abc import Callable

from quorum_cron.core.model import SlotState, SlotView, SweepResult, TransitionResult, VoteResult, VoteStatus
from quorum_cron.core.node import (
    Abstain,
    Action,
    CoreJob,
    Failure,
    Finish,
    NodeCore,
    NodeSettings,
    Now,
    ReadHighWater,
    ReadSlots,
    RecordMissed,
    Run,
    RunLocal,
    Start,
    Sweep,
    Vote,
)
from quorum_cron.core.vote import PARKED_CHECK_MS, STALE_LOCAL_RUN_MS
from tests.core_driver import Every

T0 = 1_699_999_980_000
SETTINGS = NodeSettings(node_id="n1", quorum=2, retry_ms=500, vote_lead_ms=50)


def job_j(run_local: bool = True, misfire: str = "skip") -> CoreJob:
    """Job ``j``: every 10 s, a 2-second deadline."""
    return CoreJob(
        name="j",
        schedule=Every(10_000),
        spec_hash="h",
        deadline_ms=2_000,
        timeout_ms=60_000,
        misfire=misfire,
        run_local=run_local,
    )


def make(run_local: bool = True) -> NodeCore:
    core = NodeCore(SETTINGS, [job_j(run_local)])
    core.set_trust(True)
    return core


class Clock:
    def __init__(self, wall: int) -> None:
        self.wall, self.mono = wall, 0

    def at(self, wall: int) -> Now:
        self.mono += wall - self.wall
        self.wall = wall
        return Now(self.wall, self.mono)


def boot(core: NodeCore, clock: Clock) -> None:
    """First tick, past the deadline of the slot at T0: the high-water read and the sweep answer."""
    for a in core.tick(clock.at(T0 + 3_000)):
        assert isinstance(a, (ReadHighWater, Sweep)), a
        reply = [0] if isinstance(a, ReadHighWater) else SweepResult([])
        assert core.on_reply(a, reply, clock.at(T0 + 3_000)) == []


def voted(run_local: bool = True) -> tuple[NodeCore, Clock, int, Vote]:
    """A booted core that just sent its vote for the slot at ``T0 + 10 s``: (core, clock, fire, vote)."""
    core, clock = make(run_local), Clock(T0)
    boot(core, clock)
    fire = T0 + 10_000
    return core, clock, fire, vote_for_next_slot(core, clock, fire)


def vote_for_next_slot(core: NodeCore, clock: Clock, fire: int) -> Vote:
    """Tick at the vote lead before ``fire`` and return the vote emitted."""
    votes = [a for a in core.tick(clock.at(fire - SETTINGS.vote_lead_ms)) if isinstance(a, Vote)]
    assert len(votes) == 1, votes
    return votes[0]


Answer = Callable[[object, Now], tuple[bool, list[Action]]]
"""What a test's store does with one action: (keep it for the test to look at, what the core sends on)."""


def pump(core: NodeCore, clock: Clock, until: int, answer: Answer) -> list[object]:
    """Tick every 10 ms until ``until``, ``answer`` every action; return those kept, in order."""
    kept: list[object] = []
    pending: list[Action] = []
    t = clock.wall
    while t < until:
        t += 10
        pending.extend(core.tick(clock.at(t)))
        while pending:
            a = pending.pop(0)
            keep, more = answer(a, clock.at(t))
            if keep:
                kept.append(a)
            pending.extend(more)
    return kept


def drive(core: NodeCore, clock: Clock, until: int, failure: Failure) -> list[object]:
    """Tick every 10 ms until ``until``, failing every store call with ``failure``; return the rest
    (and the missed records sent)."""

    def fail(a: object, now: Now) -> tuple[bool, list[Action]]:
        if isinstance(a, (Vote, RecordMissed, Sweep, ReadHighWater)):
            return isinstance(a, RecordMissed), core.on_failure(a, now, failure, "OOM command not allowed")
        return True, []

    return pump(core, clock, until, fail)


def test_run_local_while_unreachable_at_the_fire_time_never_before_and_once() -> None:
    core, clock, fire, vote = voted()
    assert core.on_failure(vote, clock.at(fire - 40), Failure.UNREACHABLE, "connection refused") == []
    assert not core.store_reachable
    # Before the fire time by this node's clock: nothing runs.
    early = [a for a in core.tick(clock.at(fire - 1)) if isinstance(a, RunLocal)]
    assert early == []
    assert core.next_wakeup(clock.at(fire - 1)) <= 1
    seen = drive(core, clock, fire + 5_000, Failure.UNREACHABLE)
    local = [a for a in seen if isinstance(a, RunLocal)]
    assert local == [RunLocal("j", fire, 60_000)]
    # The local run ended: the slot's missed record names it, written by the core once.
    core.on_run_finished("j", fire, 0, True, "exit 0\nmore", clock.at(clock.wall))
    seen = drive(core, clock, fire + 9_000, Failure.UNREACHABLE)
    missed = [a for a in seen if isinstance(a, RecordMissed) and a.fire_ms == fire]
    assert missed and all(m.reason == missed[0].reason for m in missed)
    assert missed[0].reason == "no quorum before the deadline; ran locally on n1 (exit 0)"
    assert all(m.ran_locally for m in missed)  # (the agent reads the field, not the text)
    assert not [a for a in seen if isinstance(a, RunLocal) and a.fire_ms == fire]


def test_a_store_that_answers_with_an_error_is_no_reason_to_run_locally() -> None:
    core, clock, fire, vote = voted()
    core.on_failure(vote, clock.at(fire - 40), Failure.REFUSED, "OOM command not allowed")
    assert core.store_reachable
    seen = drive(core, clock, fire + 3_000, Failure.REFUSED)
    assert not [a for a in seen if isinstance(a, RunLocal)]
    missed = [a for a in seen if isinstance(a, RecordMissed) and a.fire_ms == fire]
    assert missed[0].reason == (
        "no quorum before the deadline (n1 could not vote: store refused the vote (OOM command not allowed))"
    )


def test_a_job_without_run_local_only_records_the_slot_missed() -> None:
    core, clock, fire, vote = voted(run_local=False)
    core.on_failure(vote, clock.at(fire - 40), Failure.UNREACHABLE, "connection refused")
    seen = drive(core, clock, fire + 3_000, Failure.UNREACHABLE)
    assert not [a for a in seen if isinstance(a, RunLocal)]
    missed = [a for a in seen if isinstance(a, RecordMissed) and a.fire_ms == fire]
    assert "could not vote: store unreachable" in missed[0].reason
    assert not missed[0].ran_locally


def test_an_untrusted_clock_abstains_and_the_core_records_why() -> None:
    core, clock = make(run_local=False), Clock(T0)
    boot(core, clock)
    core.set_trust(False, "NTP unreachable")
    fire = T0 + 10_000
    seen = drive(core, clock, fire + 3_000, Failure.UNREACHABLE)
    assert [a for a in seen if isinstance(a, Abstain) and a.fire_ms == fire] == [
        Abstain("j", fire, "NTP unreachable")
    ]
    assert not [a for a in seen if isinstance(a, Vote)]
    missed = [a for a in seen if isinstance(a, RecordMissed) and a.fire_ms == fire]
    assert missed[0].reason == "no quorum before the deadline (n1 abstained: NTP unreachable)"


def test_a_slot_missed_after_trust_came_back_says_why_the_node_abstained_then() -> None:
    """The missed record of a slot abstained on names the abstention's reason, not the clock's
    verdict when the record is written: trust back after the deadline read "n1 abstained: clock
    trusted: ...", which contradicts itself (a newcomer's audit of a loaded machine)."""
    core, clock = make(run_local=False), Clock(T0)
    boot(core, clock)
    core.set_trust(False, "wall clock jumped +555 ms")
    fire = T0 + 10_000
    drop = fire + 2_000 + core.settings.max_skew_ms  # (deadline and skew: too late to vote after it)
    seen = drive(core, clock, drop - 10, Failure.UNREACHABLE)
    assert [a for a in seen if isinstance(a, Abstain) and a.fire_ms == fire] == [
        Abstain("j", fire, "wall clock jumped +555 ms")
    ]
    assert not [a for a in seen if isinstance(a, RecordMissed) and a.fire_ms == fire]
    core.set_trust(True, "clock trusted: store TIME bound 8.0 ms <= max skew 250 ms")
    seen = core.tick(clock.at(drop + 1))
    missed = [a for a in seen if isinstance(a, RecordMissed) and a.fire_ms == fire]
    assert missed[0].reason == "no quorum before the deadline (n1 abstained: wall clock jumped +555 ms)"


def test_a_reply_makes_the_store_reachable_again() -> None:
    core, clock = make(), Clock(T0)
    boot(core, clock)
    core.set_store_reachable(False, "heartbeat failed")
    assert not core.store_reachable
    core.on_reply(ReadHighWater(("j",)), [0], clock.at(T0 + 5))
    assert core.store_reachable


def test_reads_that_backed_off_go_at_once_when_the_store_answers_again() -> None:
    """Votes and missed records wait for the high-water read; a read that backed off while the
    store was away must not hold them for its whole backoff once the store answers."""
    core, clock = make(run_local=False), Clock(T0)
    first = core.tick(clock.at(T0 + 3_000))
    (read,) = [a for a in first if isinstance(a, ReadHighWater)]
    for a in first:
        core.on_failure(a, clock.at(T0 + 3_000), Failure.UNREACHABLE, "connection refused")
    probes = reads = 0
    for _ in range(4):  # every call fails again: the probes' gap doubles (a sweep retries faster)
        acts = core.tick(clock.at(clock.wall + 10_000))
        held = [a for a in acts if isinstance(a, ReadHighWater | RecordMissed)]
        assert len(held) == 1, "while the store is away, one read or record at a time probes it"
        probes += 1
        reads += isinstance(held[0], ReadHighWater)
        for a in acts:
            if isinstance(a, ReadHighWater | RecordMissed | Sweep):
                core.on_failure(a, clock.at(clock.wall), Failure.UNREACHABLE, "connection refused")
    assert probes == 4 and reads >= 1
    later = core.tick(clock.at(clock.wall + 600))
    assert [a for a in later if isinstance(a, ReadHighWater)] == []  # still backing off
    sweeps = [a for a in later if isinstance(a, Sweep)]
    assert sweeps, "a sweep retry is what finds the store back"
    core.on_reply(sweeps[0], SweepResult([]), clock.at(clock.wall))
    assert core.next_wakeup(clock.at(clock.wall)) == 0
    assert read in core.tick(clock.at(clock.wall))


def test_while_the_store_is_unreachable_votes_wait_for_it_to_answer_and_the_sweep_asks() -> None:
    """A vote that got no answer is not sent again every retry_ms into the void: it waits; the
    sweep, brought forward to the retry time, probes the store; its reply sends the vote."""
    core, clock = make(run_local=False), Clock(T0)
    boot(core, clock)
    fire = T0 + 10_000
    first = core.tick(clock.at(fire - SETTINGS.vote_lead_ms))
    (vote,) = [a for a in first if isinstance(a, Vote)]
    for a in first:  # (the vote, and a sweep that came due meanwhile)
        core.on_failure(a, clock.at(fire - 40), Failure.UNREACHABLE, "connection refused")
    sweeps = 0
    t = clock.wall
    while t < fire + 1_000:  # half the deadline: three failed probes
        t += 10
        for a in core.tick(clock.at(t)):
            assert not isinstance(a, Vote), "a vote went while the store was unreachable"
            assert isinstance(a, Sweep), a
            sweeps += 1
            core.on_failure(a, clock.at(t), Failure.UNREACHABLE, "connection refused")
    assert sweeps >= 2, "the sweep probes the store every retry_ms"
    (sweep,) = [a for a in core.tick(clock.at(t + SETTINGS.retry_ms)) if isinstance(a, Sweep)]
    assert core.on_reply(sweep, SweepResult([]), clock.at(clock.wall)) == []
    assert core.next_wakeup(clock.at(clock.wall)) == 0
    assert [a for a in core.tick(clock.at(clock.wall)) if isinstance(a, Vote)] == [vote]


def test_a_refused_vote_is_retried_on_its_own_and_a_held_one_abstains_once_the_clock_is_untrusted() -> None:
    core, clock, fire, vote = voted(run_local=False)
    core.on_failure(vote, clock.at(fire - 40), Failure.REFUSED, "OOM command not allowed")
    again = core.tick(clock.at(fire - 40 + SETTINGS.retry_ms))
    assert vote in again, "a store answering with an error is asked again after retry_ms"
    core.on_failure(vote, clock.at(clock.wall), Failure.UNREACHABLE, "connection refused")
    later = core.tick(clock.at(clock.wall + 2 * SETTINGS.retry_ms))
    assert [a for a in later if not isinstance(a, Sweep)] == [], "held: the store is unreachable"
    core.set_trust(False, "clock stepped")
    assert core.tick(clock.at(clock.wall + 1)) == [Abstain("j", fire, "clock stepped")]


def test_while_the_store_is_unreachable_polls_wait_for_it_to_answer() -> None:
    """A node awaiting a slot (voted, no quorum yet) polls it; with the store unreachable the
    poll waits for any reply instead of going every retry_ms, then goes at once."""
    core, clock, fire, vote = voted(run_local=False)
    proposed = SlotView("j", fire, SlotState.PROPOSED, (("n1", "h"),), "h")
    core.on_reply(vote, [VoteResult(VoteStatus.RECORDED, proposed, clock.wall)], clock.at(clock.wall))
    polls: list[ReadSlots] = []
    t = clock.wall
    while not polls:  # the first poll, a fallback for a lost assignment notice
        t += 10
        polls = [a for a in core.tick(clock.at(t)) if isinstance(a, ReadSlots)]
    assert polls[0].slots == (("j", fire),)
    core.on_failure(polls[0], clock.at(t), Failure.UNREACHABLE, "connection refused")
    for _ in range(10):
        t += SETTINGS.retry_ms
        acts = core.tick(clock.at(t))
        assert not [a for a in acts if isinstance(a, ReadSlots)], "a poll went while the store was away"
        for a in acts:
            core.on_failure(a, clock.at(t), Failure.UNREACHABLE, "connection refused")
    sweep = Sweep(())
    core.on_reply(sweep, SweepResult([]), clock.at(t))  # any reply: the store is back
    assert polls[0] in core.tick(clock.at(t))


def serve(core: NodeCore, clock: Clock, until: int) -> list[RecordMissed]:
    """Tick every 10 ms until ``until`` with the store answering; return the missed records sent,
    unanswered (the caller answers them), in the order the core sent them."""

    def answer(a: object, now: Now) -> tuple[bool, list[Action]]:
        if isinstance(a, Sweep):
            return False, core.on_reply(a, SweepResult([]), now)
        if isinstance(a, ReadSlots):
            return False, core.on_reply(a, [SlotView(job, f, SlotState.ABSENT) for job, f in a.slots], now)
        assert isinstance(a, (Abstain, RunLocal, RecordMissed)), a
        return isinstance(a, RecordMissed), []

    return [a for a in pump(core, clock, until, answer) if isinstance(a, RecordMissed)]


def landed(core: NodeCore, clock: Clock, record: RecordMissed) -> list[object]:
    """The store recorded ``record``: its reply, and what the core sends on it."""
    view = SlotView(record.job, record.fire_ms, SlotState.MISSED, reason=record.reason)
    return list(core.on_reply(record, view, clock.at(clock.wall)))


def local_run_then_two_later_slots_held() -> tuple[NodeCore, Clock, int, list[int]]:
    """A slot run locally while the store was away; then the store answers, the clock is not
    trusted, and the next two slots are abstained, their deadlines passing while the local run
    goes on (its timeout is a minute): their records wait. Returns (core, clock, fire, later)."""
    core, clock, fire, vote = voted()
    core.on_failure(vote, clock.at(fire - 40), Failure.UNREACHABLE, "connection refused")
    assert [a for a in drive(core, clock, fire + 100, Failure.UNREACHABLE) if isinstance(a, RunLocal)]
    core.set_store_reachable(True)
    core.set_trust(False, "NTP unreachable")
    later = [fire + 10_000, fire + 20_000]
    assert serve(core, clock, later[-1] + 3_000) == []
    return core, clock, fire, later


def test_a_later_slots_record_waits_for_the_record_of_a_slot_run_locally() -> None:
    """A missed record raises the job's high-water mark, and a restart's catch-up starts there.

    So a node running a slot locally sends no record of a later slot of that job before the
    local slot's own record has landed: otherwise, should every node restart before the local
    run ends, no catch-up would reach the slot and it would end with no ledger entry (explorer
    seed 30004, ``sim/scenarios/bugs/local-runs-killed-below-hwm.toml``).
    """
    core, clock, fire, later = local_run_then_two_later_slots_held()
    assert core.slot_phase("j", later[0]).value == "missed"  # (held, as records waiting are)
    # The local run ends: its own record goes first, alone.
    core.on_run_finished("j", fire, 0, True, "exit 0", clock.at(clock.wall))
    first = serve(core, clock, clock.wall + 100)
    assert [(r.fire_ms, r.ran_locally) for r in first] == [(fire, True)]
    assert serve(core, clock, clock.wall + 1_000) == []  # (not before it has landed)
    # It landed: the later records go, in slot order.
    released = landed(core, clock, first[0])
    assert [a.fire_ms for a in released if isinstance(a, RecordMissed)] == later
    assert all(isinstance(a, RecordMissed) and "abstained" in a.reason for a in released)
    assert serve(core, clock, clock.wall + 1_000) == []  # (each sent once)


def test_a_vote_that_landed_lets_the_later_records_go() -> None:
    """A local slot whose vote the store took is voted: the store accounts for it, so the
    records it held back go (at the next tick) without waiting for the local run's end."""
    core, clock, fire, vote = voted()
    core.on_failure(vote, clock.at(fire - 40), Failure.UNREACHABLE, "connection refused")
    assert [a for a in drive(core, clock, fire + 100, Failure.UNREACHABLE) if isinstance(a, RunLocal)]
    core.set_store_reachable(True)
    votes = [a for a in core.tick(clock.at(fire + 200)) if isinstance(a, Vote)]
    assert [r.fire_ms for r in votes[0].requests] == [fire]  # (voted again once the store answers)
    core.set_trust(False, "NTP unreachable")
    later = fire + 10_000
    assert serve(core, clock, later + 3_000) == []  # (held: the vote's reply has not come)
    view = SlotView("j", fire, SlotState.PROPOSED, (("n1", "h"),), "h")
    core.on_reply(votes[0], [VoteResult(VoteStatus.RECORDED, view, clock.wall)], clock.at(clock.wall))
    assert [r.fire_ms for r in serve(core, clock, clock.wall + 100)] == [later]


def test_local_runs_records_land_in_slot_order() -> None:
    """Two slots run locally: the later one's record, with its run's outcome, waits for the
    earlier one's to land too (it raises the mark as any record does)."""
    core, clock, fire, vote = voted()
    core.on_failure(vote, clock.at(fire - 40), Failure.UNREACHABLE, "connection refused")
    second = fire + 10_000
    local = [a for a in drive(core, clock, second + 100, Failure.UNREACHABLE) if isinstance(a, RunLocal)]
    assert [a.fire_ms for a in local] == [fire, second]
    core.set_store_reachable(True)
    core.set_trust(False, "NTP unreachable")
    core.on_run_finished("j", second, 0, True, "exit 0", clock.at(clock.wall))
    assert serve(core, clock, second + 3_000) == []  # (past its deadline: owed, held back)
    core.on_run_finished("j", fire, 0, False, "exit 1", clock.at(clock.wall))
    first = serve(core, clock, clock.wall + 100)
    assert [(r.fire_ms, r.ran_locally) for r in first] == [(fire, True)]
    released = landed(core, clock, first[0])
    assert [(a.fire_ms, a.ran_locally) for a in released if isinstance(a, RecordMissed)] == [(second, True)]


def test_a_local_run_adopted_under_a_token_lets_the_later_records_go_when_it_ends() -> None:
    """The store commits the slot run locally to this node (its vote landed, the reply was lost):
    the agent reports the adopted run's end under the token. The slot is committed, so the vote
    owed is moot and no record of it is owed: the records it held back go, in slot order."""
    core, clock, fire, later = local_run_then_two_later_slots_held()
    committed = SlotView("j", fire, SlotState.COMMITTED, (("n1", "h"), ("n2", "h")), "h", "n1", 1, 1)
    core.on_reply(Sweep(()), SweepResult([committed]), clock.at(clock.wall))
    core.on_run_finished("j", fire, 1, True, "exit 0", clock.at(clock.wall))
    sent = serve(core, clock, clock.wall + 100)
    assert [(r.fire_ms, r.ran_locally) for r in sent] == [(later[0], False), (later[1], False)]


def test_a_graceful_stop_keeps_holding_the_later_records() -> None:
    """Stopping, the node sends no more records of a job's slots than the local run's own would
    let go: the records left die with the process, and the mark stays below the local slot, so
    a restart's catch-up accounts for it and for them."""
    core, clock, fire, _later = local_run_then_two_later_slots_held()
    core.stop_voting()
    assert serve(core, clock, clock.wall + 1_000) == []
    core.on_run_finished("j", fire, 0, True, "exit 0", clock.at(clock.wall))
    assert serve(core, clock, clock.wall + 5_000) == []


def test_a_local_run_whose_end_never_comes_holds_the_later_records_only_so_long() -> None:
    """No end reported (a bug, a lost process): past the job's timeout and STALE_LOCAL_RUN_MS
    from the run's start the later records go, rather than never. A forward step of the wall
    clock does not shorten that: it is counted on the monotonic clock."""
    core, clock, fire, later = local_run_then_two_later_slots_held()
    assert clock.wall == fire + 23_000  # (and the run started at ``fire``)
    clock.wall += 180_000  # (a wall step: no monotonic time passes)
    left = 60_000 + STALE_LOCAL_RUN_MS - 23_000  # (monotonic time before the run is taken as stale)
    assert serve(core, clock, clock.wall + left - 100) == []
    sent = serve(core, clock, clock.wall + PARKED_CHECK_MS + 3_000)
    assert [r.fire_ms for r in sent][:2] == later


def test_records_released_while_the_store_is_away_are_probed_in_the_same_tick() -> None:
    """The held records go once the local run is taken as stale; the store is away again by then,
    so they wait with the retries, one probe at a time. The tick that releases them sends that
    probe: it used to add them after it had looked at the retries, and ``next_wakeup()`` then
    said 0 right after it (explorer seed 70 with ``--wait-replicas 0``: a busy wakeup loop)."""
    core, clock, _fire, later = local_run_then_two_later_slots_held()
    core.set_store_reachable(False, "connection refused")
    probes: list[RecordMissed] = []
    until = clock.wall + 60_000 + STALE_LOCAL_RUN_MS + PARKED_CHECK_MS + 3_000
    while clock.wall < until:
        now = clock.at(clock.wall + 10)
        for a in core.tick(now):
            if isinstance(a, RecordMissed):
                probes.append(a)  # (left in flight: the probe's answer decides the rest)
            elif isinstance(a, Sweep):
                core.on_failure(a, now, Failure.UNREACHABLE, "connection refused")
        assert core.next_wakeup(now) > 0, f"at {now}: a tick left something due now"
    assert [p.fire_ms for p in probes] == later[:1]


def test_a_held_records_slot_committed_here_for_a_retry_goes_deferred_and_back() -> None:
    """A held record's slot can turn out committed to this node after all (its vote landed, the
    reply lost), its retry's backoff not over: ``missed`` -> ``deferred``. A graceful stop before
    the backoff ends drops the deferred start, and the record still waits: ``deferred`` ->
    ``missed``. Both steps are in the table."""
    core, clock, _fire, later = local_run_then_two_later_slots_held()
    assert core.slot_phase("j", later[0]).value == "missed"
    votes = (("n1", "h"), ("n2", "h"))
    view = SlotView(
        "j", later[0], SlotState.COMMITTED, votes, "h", "n1", 2, 2, not_before_ms=clock.wall + 5_000
    )
    core.on_reply(Sweep(()), SweepResult([view]), clock.at(clock.wall))
    assert core.slot_phase("j", later[0]).value == "deferred"
    core.stop_voting()
    assert serve(core, clock, clock.wall + 6_000) == []
    assert core.slot_phase("j", later[0]).value == "missed"


def test_a_run_under_a_token_ends_the_vote_still_owed_for_its_slot() -> None:
    """The vote's reply was lost and the clock then went untrusted (the vote is withheld); the
    store commits the slot here all the same. Once the run ends, the vote owed is moot: the
    record holds nothing of it (no ``finishing`` -> ``abstained`` step, no missed record)."""
    core, clock, fire, vote = voted(run_local=False)
    core.on_failure(vote, clock.at(fire - 40), Failure.UNREACHABLE, "connection refused")
    core.set_store_reachable(True)
    core.set_trust(False, "NTP unreachable")
    assert [a for a in core.tick(clock.at(fire + 150)) if isinstance(a, Abstain)]
    votes = (("n1", "h"), ("n2", "h"))
    committed = SlotView("j", fire, SlotState.COMMITTED, votes, "h", "n1", 1, 1)
    start = [
        a
        for a in core.on_reply(Sweep(()), SweepResult([committed]), clock.at(fire + 200))
        if isinstance(a, Start)
    ]
    running = SlotView("j", fire, SlotState.RUNNING, votes, "h", "n1", 1, 1)
    assert [
        a
        for a in core.on_reply(start[0], TransitionResult(True, running, clock.wall), clock.at(fire + 250))
        if isinstance(a, Run)
    ]
    out = core.on_run_finished("j", fire, 1, True, "exit 0", clock.at(fire + 300))
    finish = [a for a in out if isinstance(a, Finish)]
    done = SlotView("j", fire, SlotState.SUCCEEDED, votes, "h", "n1", 1, 1)
    core.on_reply(finish[0], TransitionResult(True, done, clock.wall), clock.at(fire + 350))
    assert core.slot_phase("j", fire).value == "none"
    assert not [r for r in serve(core, clock, fire + 5_000) if r.fire_ms == fire]


def test_a_reload_that_removes_a_job_still_sends_the_record_of_its_slot_run_locally() -> None:
    """A removed job's slots already taken in finish (quorum_cron/core/jobswap.py), a slot run
    locally included. The agent withdraws trust while the store is down, so that slot was
    abstained, never voted: the swap let it go as a due slot nobody had voted for, and its record,
    which carries the local run's outcome, was never sent (with every node reloaded, the slot
    ended with no ledger entry)."""
    core, clock = make(), Clock(T0)
    boot(core, clock)
    fire = T0 + 10_000
    core.set_store_reachable(False, "connection refused")
    core.set_trust(False, "store unreachable")
    seen = drive(core, clock, fire + 500, Failure.UNREACHABLE)
    assert [type(a) for a in seen] == [Abstain, RunLocal]
    core.replace_jobs([], clock.at(clock.wall))
    assert core.job_names == ()
    core.on_run_finished("j", fire, 0, True, "exit 0", clock.at(clock.wall + 100))
    assert [
        a for a in drive(core, clock, fire + 3_000, Failure.UNREACHABLE) if not isinstance(a, RecordMissed)
    ] == []
    core.set_store_reachable(True)
    core.set_trust(True)
    [record] = serve(core, clock, fire + 10_000)
    assert (record.fire_ms, record.ran_locally) == (fire, True)
    assert record.reason == "no quorum before the deadline; ran locally on n1 (exit 0)"
    assert landed(core, clock, record) == []
    assert serve(core, clock, fire + 20_000) == []  # (nothing of the removed job after it)


def serve_all(core: NodeCore, clock: Clock, until: int) -> list[object]:
    """Like :func:`serve`, but every action the core sent besides sweeps and reads, in order."""

    def answer(a: object, now: Now) -> tuple[bool, list[Action]]:
        if isinstance(a, Sweep):
            return False, core.on_reply(a, SweepResult([]), now)
        return True, []

    return pump(core, clock, until, answer)


def test_a_reload_that_removes_a_job_still_records_a_slot_it_abstained_on() -> None:
    """An abstained slot is owed its missed record (the clock was untrusted): the swap let it go
    as a due slot nothing was done about, and with the job removed from every node it ended with
    no ledger entry (explorer seed 79, ``sim/scenarios/bugs/reload-drops-abstained-slot.toml``)."""
    core, clock = make(run_local=False), Clock(T0)
    boot(core, clock)
    fire = T0 + 10_000
    core.set_trust(False, "clock error bound 900 ms > max skew 250 ms")
    assert [type(a) for a in serve_all(core, clock, fire + 100)] == [Abstain]
    core.replace_jobs([], clock.at(fire + 500))
    [record] = serve(core, clock, fire + 10_000)
    assert record.fire_ms == fire and "n1 abstained: clock error bound 900 ms" in record.reason
    assert landed(core, clock, record) == []
    assert serve(core, clock, fire + 20_000) == []  # (nothing of the removed job after it)


def widened_catch_up(run_local: bool = False, untrusted: str = "") -> tuple[NodeCore, Clock, list[int]]:
    """A restart at T0 + 10.5 s whose catch-up (the mark at T0 - 30 s) records T0 - 20 s and
    T0 - 10 s and votes T0, the latest, with its deadline widened to now (``run-once``); the
    clock untrusted (``untrusted``: why) from the start if given. Returns (core, clock, the fire
    times the catch-up recorded)."""
    core, clock = NodeCore(SETTINGS, [job_j(run_local, misfire="run-once")]), Clock(T0)
    core.set_trust(not untrusted, untrusted)
    now = clock.at(T0 + 10_500)  # (slot T0 + 10 s due, inside its deadline; T0 missed)
    caught: list[int] = []
    for a in core.tick(now):
        if isinstance(a, ReadHighWater):
            caught += [r.fire_ms for r in core.on_reply(a, [T0 - 30_000], now) if isinstance(r, RecordMissed)]
        elif isinstance(a, Sweep):
            core.on_reply(a, SweepResult([]), now)
    return core, clock, caught


def test_a_later_slots_record_waits_for_the_record_of_a_run_once_slot_whose_deadline_was_widened() -> None:
    """A restart's catch-up votes the latest missed slot of a ``run-once`` job with its deadline
    widened to now, so its record (the clock untrusted: abstained) is due only then; the next
    slot, due sooner, would raise the high-water mark past it first, and should every node then
    restart, no catch-up would reach it (explorer seed 62201). Its record waits, as behind a slot
    run locally."""
    core, clock, caught = widened_catch_up(untrusted="wall clock stepped by -60000 ms")
    assert caught == [T0 - 20_000, T0 - 10_000]
    # T0 + 10 s passes its deadline (T0 + 12.25 s with the skew) before T0's widened one (12.75 s).
    assert serve(core, clock, T0 + 12_600) == []
    assert core.slot_phase("j", T0 + 10_000).value == "missed"  # (held)
    [widened] = serve(core, clock, T0 + 13_000)
    assert widened.fire_ms == T0 and "n1 abstained: wall clock stepped" in widened.reason
    [later] = landed(core, clock, widened) + serve(core, clock, T0 + 13_100)
    assert isinstance(later, RecordMissed) and later.fire_ms == T0 + 10_000


def test_a_graceful_stop_keeps_holding_records_behind_a_slot_whose_deadline_was_widened() -> None:
    """As behind a slot run locally: the held records die with the process, so the mark stays below
    the widened slot, and the restart's catch-up records it and them. Dropping the widened slot's
    part at the stop let the held record go, raising the mark past a slot nobody then records."""
    core, clock, _ = widened_catch_up()
    core.set_trust(False, "wall clock stepped by -60000 ms")
    assert serve(core, clock, T0 + 12_600) == []  # (T0 + 10 s held behind T0)
    core.stop_voting()
    assert serve(core, clock, T0 + 25_000) == []
    assert core.slot_phase("j", T0).value != "none"


def test_a_widened_slot_run_locally_holds_records_back_only_as_a_local_run_does() -> None:
    """A widened slot whose vote failed with the store away runs locally; its run's end never comes:
    records behind it go once the run is taken as stale (``STALE_LOCAL_RUN_MS``), as behind any
    slot run locally, not never."""
    core, clock, _ = widened_catch_up(run_local=True)
    votes = [a for a in core.tick(clock.at(T0 + 10_510)) if isinstance(a, Vote)]
    for v in votes:
        core.on_failure(v, clock.at(T0 + 10_520), Failure.UNREACHABLE, "connection refused")
    assert [a.fire_ms for a in core.tick(clock.at(T0 + 10_530)) if isinstance(a, RunLocal)] == [
        T0,
        T0 + 10_000,
    ]
    core.set_store_reachable(True)
    core.set_trust(False, "NTP unreachable")
    assert serve(core, clock, T0 + 60_000) == []  # (held behind the local runs)
    sent = serve(core, clock, T0 + 10_530 + 60_000 + STALE_LOCAL_RUN_MS + PARKED_CHECK_MS + 1_000)
    assert [r.fire_ms for r in sent][:2] == [T0 + 20_000, T0 + 30_000]  # (held, then let go, in order)
