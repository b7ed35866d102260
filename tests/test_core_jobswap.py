"""A config reload's job swap in the pure core (``NodeCore.replace_jobs``, quorum_cron/core/jobswap.py).

Virtual time on the in-memory store (tests/core_driver.py): a changed job
applies from its next slot while a slot already voted or running keeps the
old definition, an added job starts being scheduled, a removed job takes in
no new slot but lets the one running finish.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from quorum_cron.core.actions import Vote
from quorum_cron.core.membership import Configuration
from quorum_cron.core.model import MembershipRecord, SlotState, SweepResult
from quorum_cron.core.node import CoreJob, Failure, NodeCore, NodeSettings, Now
from tests.core_driver import Driver, Every, boot

T0 = 1_699_999_980_000


def job(name: str = "a", period_ms: int = 1000, spec_hash: str = "h1", deadline_ms: int = 500) -> CoreJob:
    return CoreJob(
        name=name, schedule=Every(period_ms), spec_hash=spec_hash, deadline_ms=deadline_ms, timeout_ms=60_000
    )


def swap(d: Driver, jobs: list[CoreJob]) -> None:
    for node in d.nodes.values():
        node.core.replace_jobs(jobs, Now(wall_ms=d.now_ms + node.offset_ms, mono_ms=d.mono_ms))


def states(d: Driver, name: str, start: int, end: int) -> dict[int, tuple[SlotState, str]]:
    return {v.fire_ms: (v.state, v.spec_hash) for v in d.store.slots(name, start, end)}


def test_a_changed_job_applies_from_its_next_slot_and_the_running_slot_keeps_the_old_one() -> None:
    d = Driver([job(spec_hash="h1", period_ms=2_000)], n=3, run_ms=1_500)
    d.run_until(T0 + 3_200)  # slot T0+2000 runs (1.5 s)
    assert [t for _, _, t, _ in d.executions] == [T0, T0 + 2_000]
    assert any(n.core.slot_phase("a", T0 + 2_000).name == "RUNNING" for n in d.nodes.values())
    swap(d, [job(spec_hash="h2", period_ms=2_000)])
    d.run_until(T0 + 12_000)
    seen = states(d, "a", T0, T0 + 11_000)
    for t, (state, spec) in seen.items():
        assert state == SlotState.SUCCEEDED, (t, state)
        assert spec == ("h1" if t <= T0 + 3_200 else "h2"), (t, spec)
    # The new schedule (every 2 s) from the next slot on; no slot of the old one after the swap.
    assert sorted(t for t in seen if t > T0 + 3_200) == [T0 + 4_000, T0 + 6_000, T0 + 8_000, T0 + 10_000]
    assert all(not n.kills for n in d.nodes.values())


def test_a_vote_sent_before_the_swap_is_retried_with_the_old_hash_the_next_slot_with_the_new() -> None:
    core = NodeCore(NodeSettings(node_id="n1", quorum=2), [job(spec_hash="h1")])
    core.set_trust(True)
    boot(core, Now(T0 + 100, 0))
    votes = [a for a in core.tick(Now(T0 + 960, 860)) if isinstance(a, Vote)]
    assert [(r.fire_ms, r.spec_hash) for r in votes[0].requests] == [(T0 + 1_000, "h1")]
    changes = core.replace_jobs([job(spec_hash="h2")], Now(T0 + 970, 870))
    assert changes.changed == ("a",) and changes.boundaries == (("a", T0 + 1_000),)
    core.on_failure(votes[0], Now(T0 + 980, 880), Failure.REFUSED, "busy")
    # A newer membership record rebuilds pending requests: the slot's definition still decides the hash.
    core.set_membership(MembershipRecord(1, Configuration.of(("n1", "n2", "n3"))))
    again = [a for a in core.tick(Now(T0 + 1_400, 1_400)) if isinstance(a, Vote)]
    assert [(r.fire_ms, r.spec_hash) for r in again[0].requests] == [(T0 + 1_000, "h1")]
    core.on_failure(again[0], Now(T0 + 1_400, 1_400), Failure.REFUSED, "busy")
    later = [r for a in core.tick(Now(T0 + 1_960, 1_960)) if isinstance(a, Vote) for r in a.requests]
    assert (T0 + 2_000, "h2") in [(r.fire_ms, r.spec_hash) for r in later]
    assert core.definition("a", T0 + 1_000).spec_hash == "h1"  # type: ignore[union-attr]
    assert core.definition("a", T0 + 2_000).spec_hash == "h2"  # type: ignore[union-attr]


def test_an_added_job_starts_being_scheduled() -> None:
    d = Driver([job("a")], n=3)
    d.run_until(T0 + 2_500)
    swap(d, [job("a"), job("b", 500)])
    d.run_until(T0 + 6_000)
    b = states(d, "b", T0, T0 + 5_900)
    assert b and all(state == SlotState.SUCCEEDED and spec == "h1" for state, spec in b.values())
    assert min(b) <= T0 + 3_000 and max(b) >= T0 + 5_500
    for node in d.nodes.values():
        assert node.core.job_names == ("a", "b")
        now = Now(d.now_ms, d.mono_ms)
        assert node.core.next_wakeup(now) == node.core.reference_wakeup(now)


def test_a_removed_job_takes_in_no_new_slot_and_its_running_slot_finishes() -> None:
    d = Driver([job("a", 2_000), job("b", 2_000)], n=3, run_ms=1_500)
    d.run_until(T0 + 2_200)
    assert any(n.core.slot_phase("a", T0 + 2_000).name == "RUNNING" for n in d.nodes.values())
    swap(d, [job("b", 2_000)])
    d.run_until(T0 + 8_000)
    a = states(d, "a", T0, T0 + 8_000)
    assert max(a) == T0 + 2_000  # nothing after the swap
    assert all(state == SlotState.SUCCEEDED for state, _ in a.values())  # the running one finished
    assert max(states(d, "b", T0, T0 + 8_000)) >= T0 + 6_000
    assert all(not n.kills for n in d.nodes.values())
    for node in d.nodes.values():
        assert node.core.job_names == ("b",)
        assert node.core.on_trigger("a", d.now_ms, Now(d.now_ms, d.mono_ms)) == []
        now = Now(d.now_ms, d.mono_ms)
        assert node.core.next_wakeup(now) == node.core.reference_wakeup(now)
    # Defined again later: scheduled again, under the new definition.
    swap(d, [job("a", 2_000, spec_hash="h3"), job("b", 2_000)])
    d.run_until(T0 + 14_000)
    after = states(d, "a", T0 + 8_001, T0 + 13_500)
    assert after == {t: (SlotState.SUCCEEDED, "h3") for t in (T0 + 10_000, T0 + 12_000)}


def test_nodes_that_disagree_after_a_reload_fire_nothing_together() -> None:
    d = Driver([job(spec_hash="h1")], n=3)
    d.run_until(T0 + 2_200)
    for name in ("n1",):  # one node reloaded: h2 alone, the two others still h1
        node = d.nodes[name]
        node.core.replace_jobs([job(spec_hash="h2")], Now(d.now_ms, d.mono_ms))
    d.run_until(T0 + 5_000)
    for t, (state, spec) in states(d, "a", T0 + 2_201, T0 + 4_500).items():
        assert state == SlotState.SUCCEEDED and spec == "h1", (t, state, spec)
        assert "n1" not in d.store.slot("a", t).voters or spec == "h1"
    for name in ("n2", "n3"):
        d.nodes[name].core.replace_jobs([job(spec_hash="h2")], Now(d.now_ms, d.mono_ms))
    d.run_until(T0 + 8_000)
    assert {v for v in states(d, "a", T0 + 5_001, T0 + 7_500).values()} == {(SlotState.SUCCEEDED, "h2")}


@pytest.mark.parametrize("seed", range(12))
def test_reloads_at_random_moments_never_run_a_slot_twice_nor_under_another_definition(seed: int) -> None:
    rng = random.Random(seed)
    d = Driver([job("a", spec_hash="v0"), job("b", 1_500, spec_hash="v0")], n=3, run_ms=300, seed=seed)
    end = T0 + 30_000
    checked = 0

    def check_new_runs() -> None:
        """Each run's slot was committed under the definition its executor holds for that slot."""
        nonlocal checked
        for name, j, t, _ in d.executions[checked:]:
            view = d.store.slot(j, t)
            mine = d.nodes[name].core.definition(j, t)
            assert mine is not None and view.spec_hash == mine.spec_hash, (name, j, t, view.spec_hash, mine)
        checked = len(d.executions)

    version = 0
    while d.now_ms < end - 3_000:
        d.run_until(d.now_ms + rng.randrange(200, 3_000))
        version += 1
        jobs = [job("a", rng.choice((1_000, 2_000)), spec_hash=f"v{version}")]
        if rng.random() < 0.7:
            jobs.append(job("b", 1_500, spec_hash=f"v{version}"))
        for name in rng.sample(sorted(d.nodes), rng.randrange(1, 4)):  # some nodes, in some order
            check_new_runs()
            core, now = d.nodes[name].core, Now(d.now_ms, d.mono_ms)
            core.replace_jobs(jobs, now)
            assert core.next_wakeup(now) == core.reference_wakeup(now)
            d.run_until(d.now_ms + rng.randrange(0, 200))
    d.run_until(end)
    check_new_runs()
    per_slot = Counter((j, t) for _, j, t, _ in d.executions)
    assert per_slot and max(per_slot.values()) == 1
    assert {d.store.slot(j, t).spec_hash for _, j, t, _ in d.executions} > {"v0"}  # new ones did fire
    for node in d.nodes.values():
        now = Now(d.now_ms, d.mono_ms)
        assert node.core.next_wakeup(now) == node.core.reference_wakeup(now)


def test_a_slot_due_but_not_taken_in_when_its_job_changes_is_voted_under_the_old_definition() -> None:
    """A tick takes a slot in at its vote lead; a swap that comes between the fire time and that
    tick (no vote lead, a loop busy for a moment, a reload queued while the node was paused) drew
    the boundary at the wall clock, past the slot, and nobody voted or recorded it (explorer seed
    60498, every node reloaded at the fire time). The slot is taken in first: voted with the old
    hash, and the next slot with the new one."""
    settings = NodeSettings(node_id="n1", quorum=2, vote_lead_ms=0)
    core = NodeCore(settings, [job("a", 10_000, "h1", deadline_ms=2_000)])
    core.set_trust(True)
    mono = 0

    def at(wall: int) -> Now:
        return Now(wall_ms=wall, mono_ms=mono + wall - T0)

    for a in core.tick(at(T0 + 3_000)):  # (boot: the high-water read and the sweep answered)
        reply = [0] if type(a).__name__ == "ReadHighWater" else SweepResult([])
        core.on_reply(a, reply, at(T0 + 3_000))
    fire = T0 + 10_000
    assert not [a for a in core.tick(at(fire - 5)) if isinstance(a, Vote)]  # (not due yet)
    core.replace_jobs([job("a", 10_000, "h2", deadline_ms=2_000)], at(fire + 3))
    votes = [r for a in core.tick(at(fire + 4)) if isinstance(a, Vote) for r in a.requests]
    assert [(r.fire_ms, r.spec_hash) for r in votes] == [(fire, "h1")]
    later = [r for a in core.tick(at(fire + 10_000)) if isinstance(a, Vote) for r in a.requests]
    assert [(r.fire_ms, r.spec_hash) for r in later] == [(fire + 10_000, "h2")]
