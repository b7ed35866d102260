"""Run one scenario with one seed and one strategy; check its trace.

This is the simulator's front door (``sim.run``): the CLI, the explorer,
the shrinker and the tests all come through here.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.checker import Report, check
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
    trace = world.run()
    return RunResult(scenario, seed, world.strategy.name, trace, check(trace.records), world.loop.events)
