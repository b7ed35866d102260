"""Which jobs a node sweeps (``quorum_cron.core.sweeps``): the open ones and the ones it heard of.

The unit tests drive ``SweepPlan`` by hand; the core tests check, on
``NodeCore`` and the memory store, that a node which voted for a slot
another node executes keeps sweeping that job until the slot ends (so a
takeover does not wait for the full sweep), and sweeps nothing while no job
has anything a sweep could change.
"""

from __future__ import annotations

from quorum_cron.core.model import SlotState, SweepParams, SweepResult
from quorum_cron.core.node import NodeCore, NodeSettings, Now, Sweep
from quorum_cron.core.sweeps import FULL_SWEEP_MS, FULL_SWEEP_SLICES, SweepPlan
from quorum_cron.store.memory import MemoryStore
from tests.core_driver import Driver, Every
from tests.test_core import T0, job

PARAMS = [SweepParams(name, 30_000, 5_000) for name in ("a", "b", "c")]


def _jobs(sweep: Sweep | None) -> list[str]:
    return [] if sweep is None else [p.job for p in sweep.params]


def test_the_first_sweep_covers_every_job_then_only_the_open_and_the_heard_of() -> None:
    plan = SweepPlan(PARAMS)
    assert _jobs(plan.next(0, probe=False)) == ["a", "b", "c"]  # (the backstop, due at once)
    plan.replied(SweepResult([], {"c": 500}), 10)
    plan.heard.add(0)
    assert _jobs(plan.next(1_000, probe=False)) == ["a", "c"]
    plan.replied(SweepResult([], {}), 1_010)
    assert plan.next(2_000, probe=False) is None  # (nothing open, nothing heard of: no call)
    assert _jobs(plan.next(1_010 + FULL_SWEEP_MS, probe=False)) == ["a"]  # (the backstop's first slice)


def test_an_open_job_is_swept_when_its_own_time_comes_not_when_another_jobs_does() -> None:
    """At a burst every job has a slot open, each due at its own start timeout or lease: a sweep
    covers the jobs whose time came, and the others keep theirs until it comes."""
    plan = SweepPlan(PARAMS)
    plan.next(0, probe=False)
    plan.replied(SweepResult([], {"a": 1_000, "b": 5_000, "c": 9_000}), 0)
    assert plan.due_in_ms(0) == 1_000
    assert plan.next(999, probe=False) is None  # (nothing due yet)
    assert _jobs(plan.next(1_000, probe=False)) == ["a"]
    plan.replied(SweepResult([], {"a": 20_000}), 1_100)  # (a started: its lease is later)
    assert plan.due_in_ms(1_100) == 3_900  # ("b", still known from the first reply)
    assert _jobs(plan.next(5_000, probe=False)) == ["b"]
    plan.replied(SweepResult([], {}), 5_050)  # ("b" ended)
    assert plan.due_in_ms(5_050) == 3_950
    assert _jobs(plan.next(9_000, probe=False)) == ["c"]
    plan.failed()  # (the store did not answer: "c" is covered by the next sweep, due or not)
    assert _jobs(plan.next(9_500, probe=False)) == ["c"]
    plan.replied(SweepResult([], {}), 9_600)
    assert plan.due_in_ms(9_600) == 21_100 - 9_600  # ("a" alone is left)
    assert _jobs(plan.next(21_100, probe=False)) == ["a"]


def test_a_failed_sweep_is_covered_by_the_next_and_a_probe_covers_every_job() -> None:
    plan = SweepPlan(PARAMS)
    plan.next(0, probe=False)
    plan.replied(SweepResult([], {"b": 1_000}), 0)
    assert _jobs(plan.next(1_000, probe=False)) == ["b"]
    plan.failed()
    plan.heard.add(0)
    assert _jobs(plan.next(2_000, probe=True)) == ["a", "b", "c"]  # (the store was unreachable)
    plan.failed()
    # The store answers again: what the failed sweeps covered and "b", still open, are swept.
    assert _jobs(plan.next(3_500, probe=False)) == ["a", "b"]


def test_a_job_a_vote_reply_showed_waits_for_its_time_and_a_sweep_of_others_keeps_it() -> None:
    """``expect`` (a vote's reply said when a sweep can change the slot): the job is not swept
    before then; a sweep in flight that did not cover it does not drop it, a failed sweep that
    did cover it hands it to the next, and a full sweep absorbs it."""
    plan = SweepPlan(PARAMS)
    plan.next(0, probe=False)
    plan.replied(SweepResult([], {"b": 2_000}), 0)
    plan.expect(0, 5_000, 60_000)
    plan.expect(0, 7_000, 60_000)  # (a later time for the same slot: the earlier one stands)
    assert plan.due_in_ms(1_000) == 1_000  # ("b" first)
    assert _jobs(plan.next(2_000, probe=False)) == ["b"]
    plan.expect(2, 3_000, 60_000)  # (a reply while "b"'s sweep is in flight)
    plan.replied(SweepResult([], {}), 2_100)
    assert plan.due_in_ms(2_100) == 900  # ("c" at 3,000, "a" at 5,000: both kept)
    assert plan.next(2_900, probe=False) is None
    assert _jobs(plan.next(3_000, probe=False)) == ["c"]
    plan.failed()  # ("c" goes with the next sweep, due or not)
    assert _jobs(plan.next(3_100, probe=False)) == ["c"]
    plan.replied(SweepResult([], {}), 3_200)
    assert _jobs(plan.next(5_000, probe=False)) == ["a"]
    plan.replied(SweepResult([], {}), 5_100)
    plan.expect(1, 9_000, 60_000)
    plan.expect(2, 2 * FULL_SWEEP_MS, 120_000)
    # The backstop's slice ("a") takes "b", due, and nothing of "c", not due and not in the slice.
    assert _jobs(plan.next(FULL_SWEEP_MS, probe=False)) == ["a", "b"]
    plan.replied(SweepResult([], {}), FULL_SWEEP_MS)
    assert plan.due_in_ms(FULL_SWEEP_MS) == FULL_SWEEP_MS  # ("c"'s expectation stays)


def test_a_slot_seen_ended_drops_the_sweep_it_alone_expected() -> None:
    """``ended``: the slot that set a job's expected sweep ended (the executor's finish, a poll):
    no sweep of the job is due for it any more; an expectation another slot of the job also set,
    or that a later slot set, stays; an end of an unexpected slot changes nothing."""
    plan = SweepPlan(PARAMS)
    plan.next(0, probe=False)
    plan.replied(SweepResult([], {}), 0)
    plan.expect(0, 5_000, 60_000)
    plan.expect(0, 3_000, 60_000)  # (the same slot, seen again: still its one slot)
    plan.ended(0, 60_000)
    assert plan.due_in_ms(1_000) == 0
    assert plan.next(5_000, probe=False) is None  # (no call: nothing left to sweep)
    plan.expect(1, 5_000, 60_000)
    plan.expect(1, 4_000, 120_000)  # (another slot of "b": which one is open is not known)
    plan.ended(1, 60_000)
    plan.ended(1, 120_000)
    assert plan.due_in_ms(1_000) == 3_000
    plan.expect(2, 6_000, 60_000)
    plan.ended(2, 0)  # (a slot of "c" this plan never expected)
    plan.ended(0, 60_000)  # (no expectation left for "a")
    assert _jobs(plan.next(4_000, probe=False)) == ["b"]
    plan.replied(SweepResult([], {}), 4_100)
    plan.ended(1, 120_000)  # (the sweep took "b"'s expectation: nothing to drop, no error)
    assert _jobs(plan.next(6_000, probe=False)) == ["c"]


def test_the_executor_does_not_sweep_a_job_whose_slot_it_finished() -> None:
    """The executor's vote reply set a sweep of the job at the slot's start timeout; its finish's
    reply showed the slot ended before then, so it sends no sweep when that time comes (until the
    full sweep)."""
    t0 = T0
    d = Driver([job("a", 60_000, deadline_ms=30_000), job("b", 3_600_000, deadline_ms=30_000)], n=3)
    d.run_until(t0 + 500)
    slot = d.store.slot("a", t0)
    assert slot.state == SlotState.SUCCEEDED
    executor = d.nodes[slot.executor].core
    assert executor._sweeps.next_full() > d.mono_ms + 10_000  # (the full sweep is not due)
    later = Now(t0 + 10_000, d.mono_ms + 9_500)  # (past the start timeout its vote reply set)
    assert [a for a in executor.tick(later) if isinstance(a, Sweep)] == []


def test_the_backstop_sweeps_every_job_once_in_its_slices_then_starts_over() -> None:
    """After the first (whole) sweep, each backstop covers one slice of the jobs, in turn: every
    job once in ``FULL_SWEEP_SLICES`` periods; a slice's failed sweep is sent again, not skipped;
    a slice takes the expectations of its jobs, due or not (its reply says when each is due)."""
    assert FULL_SWEEP_SLICES == 3
    params = [SweepParams(f"j{i}", 30_000, 5_000) for i in range(7)]
    plan = SweepPlan(params)
    assert len(_jobs(plan.next(0, probe=False))) == 7
    plan.replied(SweepResult([], {}), 0)
    plan.expect(4, 10 * FULL_SWEEP_MS, 60_000)  # (not due for long: "j4" is in slice 1)
    seen: list[list[str]] = []
    at = 0
    for _ in range(4):
        at += FULL_SWEEP_MS
        assert plan.next(at - 1, probe=False) is None  # (nothing before the backstop's time)
        seen.append(_jobs(plan.next(at, probe=False)))
        if len(seen) == 2:
            plan.failed()  # (the store did not answer: the same slice goes again)
            assert _jobs(plan.next(at + 1, probe=False)) == seen[-1]
        plan.replied(SweepResult([], {}), at + 1)
        at += 1
    assert seen == [["j0", "j3", "j6"], ["j1", "j4"], ["j2", "j5"], ["j0", "j3", "j6"]]
    assert plan.due_in_ms(at) == 0  # ("j4"'s expectation went with its slice)


def test_a_plan_with_fewer_jobs_than_slices_moves_past_its_empty_slices() -> None:
    """One job: two of the three slices are empty; the backstop makes no call for them and moves
    on, so the job is swept by it every ``FULL_SWEEP_SLICES`` periods and never waits forever."""
    plan = SweepPlan(PARAMS[:1])
    plan.next(0, probe=False)
    plan.replied(SweepResult([], {}), 0)
    calls = []
    for k in range(1, 7):
        sweep = plan.next(k * FULL_SWEEP_MS, probe=False)
        if sweep is not None:
            calls.append(k)
            plan.replied(SweepResult([], {}), k * FULL_SWEEP_MS)
        assert plan.next_full() == (k + 1) * FULL_SWEEP_MS
    assert calls == [1, 4]


def test_a_reload_makes_the_next_sweep_cover_every_job_of_the_new_list() -> None:
    plan = SweepPlan(PARAMS)
    plan.next(0, probe=False)
    plan.replied(SweepResult([], {}), 0)
    plan.reset([*PARAMS, SweepParams("d", 30_000, 5_000)])
    assert _jobs(plan.next(1, probe=False)) == ["a", "b", "c", "d"]


def test_a_voter_keeps_sweeping_a_job_another_node_executes_until_its_slot_ends() -> None:
    t0 = T0  # (a whole minute: the driver starts there)
    d = Driver(
        [job("a", 60_000, deadline_ms=30_000), job("b", 3_600_000, deadline_ms=30_000)], n=3, run_ms=10**9
    )
    d.run_until(t0 + 200)
    slot = d.store.slot("a", t0)
    assert slot.state == SlotState.RUNNING
    voter = next(name for name in d.nodes if name != slot.executor)
    core = d.nodes[voter].core
    # Past the lease the voter's vote reply showed (or its own deadline, for the first voter, which
    # saw the slot proposed), before the full sweep's time: a sweep could now change the slot.
    now = Now(t0 + 31_000, d.mono_ms + 31_000)
    (sweep,) = [a for a in core.tick(now) if isinstance(a, Sweep)]
    # "a" has a slot open (running elsewhere), "b" none: only "a" is swept.
    assert _jobs(sweep) == ["a"]
    reply = d.store.sweep(sweep.params)
    assert reply.open_jobs == {"a"}


def test_a_node_with_nothing_open_makes_no_sweep_call() -> None:
    store_now = [1_700_000_000_000]
    store = MemoryStore(lambda: store_now[0])
    core = NodeCore(NodeSettings(node_id="n1", quorum=1), [job("a", 3_600_000)])
    core.set_trust(True)
    now = Now(store_now[0] + 1_000, 0)
    sweeps = [a for a in core.tick(now) if isinstance(a, Sweep)]
    assert _jobs(sweeps[0]) == ["a"]  # (the first sweep is the full one)
    core.on_reply(sweeps[0], store.sweep(sweeps[0].params), now)
    for mono in range(1_000, 30_000, 1_000):  # (no slot of "a" due for most of an hour)
        assert not [a for a in core.tick(Now(now.wall_ms + mono, mono)) if isinstance(a, Sweep)]


def test_a_voter_sweeps_its_committed_slot_at_the_start_timeout_not_right_after_its_vote() -> None:
    """The vote's reply says the slot is committed at the store's time: the node does not sweep the
    job until the start timeout can have passed (issue 27: each node swept every job right after
    its vote, a third of the store's sweep work, changing nothing), and sweeps it then."""
    store_now = [1_700_000_000_000 - 1_700_000_000_000 % 60_000 + 60_000 - 500]
    store = MemoryStore(lambda: store_now[0])
    settings = NodeSettings(node_id="n1", quorum=1)
    core = NodeCore(settings, [job("a", 60_000)])
    core.set_trust(True)
    mono = 0

    def tick_to(wall: int) -> list[Sweep]:
        nonlocal mono
        mono += wall - store_now[0]
        store_now[0] = wall
        out = []
        for action in core.tick(Now(wall, mono)):
            if isinstance(action, Sweep):
                core.on_reply(action, store.sweep(action.params), Now(wall, mono))
                out.append(action)
            elif type(action).__name__ in ("Vote", "ReadHighWater"):
                from quorum_cron.core.perform import perform

                core.on_reply(action, perform(store, "n1", action), Now(wall, mono))
        return out

    fire = store_now[0] + 500
    assert [_jobs(s) for s in tick_to(store_now[0])] == [["a"]]  # (the first, full sweep)
    swept = [_jobs(s) for wall in range(fire - 400, fire + 5_000, 100) for s in tick_to(wall)]
    assert store.slot("a", fire).state == SlotState.COMMITTED  # (voted, committed, never started)
    assert swept == [], swept  # (nothing a sweep could change before the start timeout)
    swept = [_jobs(s) for wall in range(fire + 5_000, fire + 7_000, 100) for s in tick_to(wall)]
    assert ["a"] in swept, swept  # (the start timeout passed: swept, within sweep_ms)
    assert store.slot("a", fire).state != SlotState.COMMITTED or store.slot("a", fire).attempt > 1


def test_a_slot_whose_first_two_executors_never_start_is_taken_over_twice_inside_its_deadline() -> None:
    """Each takeover gives the next executor a fresh start timeout; with a start timeout shorter
    than ``sweep_ms`` the healthy voters' sweeps follow it (core.timers.min_sweep_gap), so two
    takeovers fit in a deadline of 2 x start timeout + margin. With sweeps at least ``sweep_ms``
    apart the second came 1 s after the first, past the deadline (the chaos harness's cut-inbound
    of two nodes, CI on 378b3d9: docs/testing.md)."""
    from quorum_cron.store.rendezvous import pick_executor

    def settings(node: str) -> NodeSettings:
        return NodeSettings(node_id=node, quorum=3, start_timeout_ms=500, sweep_ms=1_000, lease_ms=2_000)

    # (Three nodes, quorum three: every node is an agreeing voter, so the store's order of
    # executors is the rendezvous order of all three.)
    d = Driver([job("a", 60_000, deadline_ms=1_800)], n=3, settings=settings, run_ms=5_000)
    fire = Every(60_000).next_after(d.now_ms)
    d.run_until(fire - 40)  # (every node voted at fire - vote_lead; the start waits for fire)
    view = d.store.slot("a", fire)
    assert view.state == SlotState.COMMITTED, view
    first = view.executor
    assert first == pick_executor("a", fire, d.nodes)
    second = pick_executor("a", fire, [n for n in d.nodes if n != first])
    (third,) = set(d.nodes) - {first, second}
    d.nodes[first].alive = d.nodes[second].alive = False  # (they never hear of their turn)
    d.run_until(fire + 1_800)
    ran = [node for node, j, f, _ in d.executions if j == "a" and f == fire]
    assert ran == [third], (ran, d.store.slot("a", fire))
    assert d.store.slot("a", fire).state == SlotState.RUNNING
