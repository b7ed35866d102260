"""What one harness run is asked to do (:class:`Options`) and leaves for the checker (:class:`RunRecord`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.plan import KINDS

__all__ = ["Options", "RunRecord"]


@dataclass(frozen=True)
class Options:
    """What to run. Timing values are milliseconds unless named ``_s``."""

    seed: int
    seconds: float
    workdir: Path
    scheduler: str = "quorum"  # or "leader"
    nodes: int = 5
    jobs: int = 3
    period_ms: int = 2000
    replica: bool = True
    kinds: tuple[str, ...] = KINDS
    lease_ms: int = 2000
    heartbeat_ms: int = 500
    start_timeout_ms: int = 500
    starting_deadline_ms: int = 1800
    """Not the default (half the period, 1 s): a takeover happens in a sweep, at the start
    timeout at the soonest (core.timers.min_sweep_gap), and a cut of two nodes can need two
    takeovers of one slot (its first two executors both cut off): 2 x start_timeout plus the
    calls must fit in the deadline (docs/testing.md)."""
    max_skew_ms: int = 250
    plan_file: Path | None = None
    """A fault plan written by hand (``chaos.planfile``): its faults instead of the seed's draw."""
    recovery_s: float = 3.0
    leader_ttl_ms: int = 3000

    @property
    def quorum(self) -> int:
        return self.nodes // 2 + 1

    @property
    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    @property
    def ledger_maxlen(self) -> int:
        """Room in each job's ledger for every slot of the run and its bring-up: the agents'
        default (10 000 entries, 5.5 h of a 2 s job) trimmed a 24 h run's oldest entries, which
        the checker would call unaccounted or unrecorded."""
        return max(10_000, int((self.seconds + 600) * 1000) // self.period_ms)


@dataclass
class RunRecord:
    """What the checker needs besides the ground truth: written to ``run.json``."""

    options: dict[str, Any]
    t0_ms: int
    end_ms: int
    faults: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    stopped_ms: int | None = None
    """When the nodes were stopped: a run that started shortly before may lack its ledger entry."""
