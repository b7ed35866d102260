"""Run one scenario with one seed and one strategy; check its trace.

This is the simulator's front door (``sim.run``): the CLI, the explorer,
the shrinker and the tests all come through here.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sim.checker import Report, check
from sim.faults import install_faults
from sim.scenario import STRATEGIES, Scenario
from sim.trace import Trace
from sim.world import Strategy, World

__all__ = ["RunResult", "make_strategy", "run"]


@dataclass
class RunResult:
    """A finished run: its trace and the checker's report."""

    scenario: Scenario
    seed: int
    strategy: str
    trace: Trace
    report: Report
    events: int


def make_strategy(name: str, mutant: str = "", exact_wakeups: bool = False) -> Strategy:
    """The strategy called ``name`` (``quorum``, ``leader``, ``lock``), optionally a planted mutant."""
    if mutant:
        from sim.mutants import make_mutant

        return make_mutant(mutant)
    if name == "quorum":
        from sim.quorum import QuorumStrategy

        return QuorumStrategy(exact_wakeups=exact_wakeups)
    if name == "leader":
        from sim.baselines import LeaderStrategy

        return LeaderStrategy()
    if name == "lock":
        from sim.baselines import LockStrategy

        return LockStrategy()
    raise ValueError(f"unknown strategy {name!r}: expected one of {', '.join(STRATEGIES)}")


def run(
    scenario: Scenario, seed: int, strategy: str = "quorum", *, mutant: str = "", exact_wakeups: bool = False
) -> RunResult:
    """Simulate ``scenario`` with ``seed`` under ``strategy`` and check the trace."""
    world = World(scenario, seed, make_strategy(strategy, mutant, exact_wakeups))
    with _fewer_collections():
        trace = world.run(install_faults)
        report = check(trace.records, scenario)
    return RunResult(scenario, seed, world.strategy.name, trace, report, world.loop.events)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often during a run (restored after).

    A run allocates a few small objects per event (messages, replies, trace
    records) that reference counting frees, not cycles; with the default
    threshold (700 allocations) the collector still walks the young
    generation several times per simulated second, about 2.5% of a run.
    The check runs inside too: with the default restored, its first
    allocations walked the whole run's young objects again and again (about
    15 collections, 10-15 ms of a 200 ms run; one now).
    """
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 100_000), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
