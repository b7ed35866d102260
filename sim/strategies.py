"""Hypothesis strategies for scenarios and fault schedules — for your own property tests.

Example::

    from hypothesis import given, settings
    import sim
    from sim.strategies import scenarios

    @settings(max_examples=50, deadline=None)
    @given(scenarios(nodes=5, jobs=2, duration_ms=600_000), st.integers(0, 2**32))
    def test_never_twice(scenario, seed):
        assert sim.run(scenario, seed).report.duplicates == 0

When such a test fails, hypothesis shrinks the fault schedule (fewer faults,
earlier, shorter) and prints the minimal one; ``sim.dumps`` turns it into a
scenario file for ``quorum-cron sim replay``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from hypothesis import strategies as st

from sim.gen import EXPLORE_KINDS, random_fault, random_jobs, random_reloads, random_scenario
from sim.scenario import Fault, JobDef, Scenario

__all__ = ["fault_schedules", "faults", "jobs", "scenarios"]

T = TypeVar("T")


class _DrawChooser:
    """Choices drawn from hypothesis (so it can shrink them)."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))


@st.composite
def faults(
    draw: st.DrawFn,
    node_ids: Sequence[str],
    duration_ms: int,
    jobs: Sequence[str] = ("job0",),
    kinds: Sequence[str] = EXPLORE_KINDS,
) -> Fault:
    """One fault of one of ``kinds`` against ``node_ids``, within ``duration_ms``."""
    return random_fault(_DrawChooser(draw), node_ids, duration_ms, jobs, kinds)


@st.composite
def fault_schedules(
    draw: st.DrawFn,
    node_ids: Sequence[str],
    duration_ms: int,
    jobs: Sequence[str] = ("job0",),
    max_faults: int = 6,
    kinds: Sequence[str] = EXPLORE_KINDS,
) -> tuple[Fault, ...]:
    """Up to ``max_faults`` faults, in time order: the part of a scenario worth shrinking."""
    drawn = draw(st.lists(faults(node_ids, duration_ms, jobs, kinds), max_size=max_faults))
    return tuple(sorted(drawn, key=lambda f: f.at_ms))


@st.composite
def jobs(draw: st.DrawFn, count: int = 2) -> tuple[JobDef, ...]:
    """``count`` random jobs (periods 2 s - 5 min, varied delivery, overlap, misfire)."""
    return random_jobs(_DrawChooser(draw), count)


@st.composite
def scenarios(
    draw: st.DrawFn,
    nodes: int = 5,
    jobs: int = 2,
    duration_ms: int = 600_000,
    max_faults: int = 6,
    kinds: Sequence[str] = EXPLORE_KINDS,
    wait_replicas: int = 1,
    reloads: bool = True,
) -> Scenario:
    """A whole scenario: random jobs and a random fault schedule on a cluster of ``nodes`` (and,
    with ``reloads``, one draw in three, live config reloads: :func:`sim.gen.random_reloads`).

    ``wait_replicas``: the store's setting; 1 (``WAIT`` on, the deployment docs/store.md asks
    for) by default, so a property that holds only with it is checked without excuses; 0 draws
    a store without ``WAIT``, whose failovers may forget a slot or run it twice (the checker's
    ``FAILOVER_LOSS``: tests/test_sim_explore.py expects exactly those limits there).
    """
    base = random_scenario(
        _DrawChooser(draw),
        name="hypothesis",
        nodes=nodes,
        jobs=jobs,
        duration_ms=duration_ms,
        faults_per_hour=0,
    )
    schedule = draw(
        fault_schedules(base.node_ids, duration_ms, [j.name for j in base.jobs], max_faults, kinds)
    )
    if reloads:
        jobs_ = [j.name for j in base.jobs]
        schedule += random_reloads(_DrawChooser(draw), base.node_ids, duration_ms, jobs_)
    return replace(base.with_faults(schedule), settings=replace(base.settings, wait_replicas=wait_replicas))
