"""The core's incremental bookkeeping against a full scan of every job.

``NodeCore.tick`` visits only the jobs that changed or have a timer due, and
``NodeCore.next_wakeup`` reads heaps of cached timers. These tests check,
at every call of a whole simulated run, that they answer exactly what a
scan of every job answers: the tick against a copy of the core with every
job marked dirty (so the copy visits them all), the wakeup against
``NodeCore.reference_wakeup``, the pre-incremental formula computed from
scratch from the core's state.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import sim
import sim.quorum
from quorum_cron.core.actions import NOT_SENT
from quorum_cron.core.lifecycle import Phase
from quorum_cron.core.node import Action, CoreJob, Failure, NodeCore, NodeSettings, Now, RecordMissed, Vote
from sim.checker import ILLEGAL_STEP
from sim.explore import explore_scenario
from tests.core_driver import Every, boot

SCENARIOS = Path(sim.__file__).parent / "scenarios"
T0 = 1_699_999_980_000


class CheckedCore(NodeCore):
    """A core that checks each tick and wakeup against a full scan."""

    checks = 0

    def tick(self, now: Now) -> list[Action]:
        # The copy shares the (immutable) job definitions and their schedules.
        memo = {id(js.job): js.job for js in self._jobs.values()}
        memo[id(self.settings)] = self.settings
        ref = copy.deepcopy(self, memo)
        ref._dirty = set(range(len(ref._by_index)))
        expected = NodeCore.tick(ref, now)
        got = super().tick(now)
        assert got == expected, f"{self.settings.node_id} at {now}"
        CheckedCore.checks += 1
        return got

    def next_wakeup(self, now: Now) -> int:
        got = super().next_wakeup(now)
        assert got == self.reference_wakeup(now), f"{self.settings.node_id} at {now}"
        CheckedCore.checks += 1
        return got


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim.quorum, "NodeCore", CheckedCore)


SHIPPED = [
    "clock-jump",
    "lying-ntp",
    "whole-cluster-outage",
    "store-failover",
    "executor-paused",
    "flapping-links",
    "dst-fall-back",
    "swizzle",
]


@pytest.mark.usefixtures("checked")
@pytest.mark.parametrize("name", SHIPPED)
def test_incremental_tick_and_wakeup_match_a_full_scan_on_shipped_scenarios(name: str) -> None:
    before = CheckedCore.checks
    res = sim.run(sim.load(SCENARIOS / f"{name}.toml"), 0, exact_wakeups=True)
    assert res.report.runs > 0
    assert ILLEGAL_STEP not in res.report.by_kind()  # (the simulator's core reports one and goes on)
    assert CheckedCore.checks - before > 100


@pytest.mark.usefixtures("checked")
@pytest.mark.parametrize("seed", range(6))
def test_incremental_tick_and_wakeup_match_a_full_scan_on_explored_scenarios(seed: int) -> None:
    before = CheckedCore.checks
    res = sim.run(explore_scenario(seed, jobs=4, hours=0.25), seed, exact_wakeups=True)
    assert CheckedCore.checks - before > 100
    assert ILLEGAL_STEP not in res.report.by_kind()


# -- the timers a full scan would act on without being woken for them ---------


def _job(name: str, period_ms: int = 60_000, deadline_ms: int = 500) -> CoreJob:
    return CoreJob(name=name, schedule=Every(period_ms), spec_hash="h", deadline_ms=deadline_ms, timeout_ms=1)


def _core(*jobs: CoreJob) -> CheckedCore:
    return CheckedCore(NodeSettings(node_id="n1", quorum=2, max_skew_ms=250, retry_ms=500), list(jobs))


def test_a_vote_in_flight_past_its_deadline_waits_for_its_outcome() -> None:
    core = _core(_job("a"), _job("b", 1000))
    core.set_trust(True)
    (vote,) = [a for a in boot(core, Now(T0, 0)) if isinstance(a, Vote)]
    assert {r.job for r in vote.requests} == {"a", "b"}
    # No reply for "a" yet (the vote is in flight): a tick after its
    # deadline, woken for "b", leaves it be; the late failure then has it
    # recorded missed (bugs/vote-in-flight-at-deadline.toml).
    assert not any(isinstance(a, RecordMissed) for a in core.tick(Now(T0 + 800, 800)))
    assert core.slot_phase("a", T0) == Phase.VOTING
    # (The store answered with an error: it is reachable, so the records go at once; an
    # unreachable store's records go one probe at a time, tests/test_core.py.)
    core.on_failure(vote, Now(T0 + 900, 900), Failure.REFUSED, "OOM")
    missed = [a for a in core.tick(Now(T0 + 1400, 1400)) if isinstance(a, RecordMissed)]
    assert [(a.job, a.fire_ms) for a in missed] == [("a", T0), ("b", T0)]
    assert "could not vote: store refused the vote (OOM)" in missed[0].reason


@pytest.mark.parametrize("failure", [Failure.REFUSED, Failure.UNREACHABLE])
def test_a_vote_the_runtime_never_sent_is_missed_as_not_sent(failure: Failure) -> None:
    # (A Redis Cluster master whose writes fall short: its jobs' votes are held back on the node.
    # The missed reason said "store refused the vote (not sent: ...)", though no store saw it.)
    core = _core(_job("a"))
    core.set_trust(True)
    (vote,) = [a for a in boot(core, Now(T0, 0)) if isinstance(a, Vote)]
    held = f"{NOT_SENT}its master's writes are not replicated as required: WAIT: 0 of 1"
    core.on_failure(vote, Now(T0 + 100, 100), failure, held)
    missed: list[RecordMissed] = []
    for t in range(600, 5_000, 500):  # (each retry is held back too, as long as the master falls short)
        for a in core.tick(Now(T0 + t, t)):
            if isinstance(a, Vote):
                core.on_failure(a, Now(T0 + t, t), failure, held)
            elif isinstance(a, RecordMissed):
                missed.append(a)
        if failure == Failure.UNREACHABLE and t == 600:
            core.set_store_reachable(True)  # (records of an unreachable store wait for it to answer)
    assert missed and f"could not vote: vote {held}" in missed[0].reason, missed
    assert "store refused" not in missed[0].reason and "store unreachable" not in missed[0].reason


def test_an_untrusted_node_abstains_at_the_first_tick_after_its_retry() -> None:
    core = _core(_job("a", deadline_ms=5000), _job("b", 1000, deadline_ms=5000))
    core.set_trust(True)
    vote = next(a for a in boot(core, Now(T0, 0)) if isinstance(a, Vote))
    core.on_failure(vote, Now(T0 + 100, 100), Failure.REFUSED, "OOM")  # retry at mono 600
    core.set_trust(False, "clock stepped")
    assert core.tick(Now(T0 + 200, 200)) == []
    abstained = {a.job for a in core.tick(Now(T0 + 700, 700)) if type(a).__name__ == "Abstain"}
    assert abstained == {"a", "b"}
    core.next_wakeup(Now(T0 + 700, 700))


@pytest.mark.parametrize("step_ms", [-30_000, 30_000, 3_600_000])
def test_a_wall_clock_step_leaves_no_stale_wakeup(step_ms: int) -> None:
    core = _core(_job("a"), _job("b", 7000, deadline_ms=3000))
    core.set_trust(True)
    mono = 0
    for wall in range(T0, T0 + 20_000, 350):
        core.tick(Now(wall, mono))
        core.next_wakeup(Now(wall, mono))
        mono += 350
    for i in range(60):
        now = Now(T0 + 20_000 + step_ms + i * 350, mono + i * 350)
        core.next_wakeup(now)
        core.tick(now)
        core.next_wakeup(now)


def test_stop_voting_and_trust_changes_recompute_every_job() -> None:
    core = _core(*[_job(f"j{i}", 1000 * (i + 1), deadline_ms=900) for i in range(5)])
    core.set_trust(True)
    mono = 0
    for wall in range(T0, T0 + 10_000, 125):
        if wall == T0 + 3000:
            core.set_trust(False, "bound too wide")
        if wall == T0 + 5000:
            core.set_trust(True)
        if wall == T0 + 8000:
            core.stop_voting()
        core.tick(Now(wall, mono))
        core.next_wakeup(Now(wall, mono))
        mono += 125


def test_stale_heap_entries_are_compacted_away() -> None:
    core = _core(_job("a", 3_600_000))
    core.set_trust(True)
    core.tick(Now(T0, 0))
    # Ever earlier starts deferred: each one a new earliest timer, the last one stale. (Through
    # the core's own start path: notices ahead of the clock are bounded per job, core/starts.py.)
    js = core._jobs["a"]
    for k in range(300):
        core._maybe_start(js, T0 + 1_000_000 - k, 1, "n1", Now(T0 + 1, 1))
        core.next_wakeup(Now(T0 + 1, 1))
    assert all(len(h) <= 64 + 4 for h in core._timers._heaps)
    assert core.next_wakeup(Now(T0 + 1, 1)) == 1_000_000 - 299 - 1
