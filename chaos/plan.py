"""The fault schedule of a run, drawn from a seed before the run starts.

A schedule is a list of :class:`Fault`, one at a time with a quiet gap
between them, so each slot can be attributed to at most one fault in the
report. Kinds come in rounds: every round is a seeded shuffle of all the
kinds in play, so a run long enough for one round covers every kind once,
and a soak (``--minutes 60``) repeats them with fresh targets and sizes.
Same seed, same options → the same schedule (checked by a test). A node
fault may be *aimed*: when it starts, the node that started the latest job
(read from the ground truth) replaces one of its drawn targets.

What each kind does (the harness carries them out, ``chaos.run``):

==================  =========================================================
partition-minority  a minority of nodes loses Redis both ways
partition-majority  a majority loses Redis both ways (no quorum: slots missed)
cut-outbound        node → Redis dropped, Redis → node kept
cut-inbound         Redis → node dropped (votes land, replies are lost)
loss                a random share (20-50 %) of packets dropped, nft numgen
latency             delay ± jitter on the node's link, in the TCP proxy
pause               SIGSTOP for longer than the lease, then SIGCONT
kill                SIGKILL, restarted after a few seconds
clock-offset        the node's clock off by up to ±200 ms (< max_skew)
clock-step          the node's clock steps by ±1-5 s, and back at the end
redis-restart       SIGKILL of the primary, restarted from its AOF
promotion           primary SIGKILLed, replica promoted, old one re-joins
==================  =========================================================
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

__all__ = ["IMPAIRING", "KINDS", "REDIS_KINDS", "Fault", "plan"]

KINDS = (
    "partition-minority",
    "partition-majority",
    "cut-outbound",
    "cut-inbound",
    "loss",
    "latency",
    "pause",
    "kill",
    "clock-offset",
    "clock-step",
    "redis-restart",
    "promotion",
)
REDIS_KINDS = frozenset({"redis-restart", "promotion"})
IMPAIRING = frozenset(
    {"partition-minority", "partition-majority", "cut-outbound", "cut-inbound", "pause", "kill", "clock-step"}
    | REDIS_KINDS
)
"""Kinds that take their targets (all nodes, for Redis faults) out of "can reach Redis
and may vote" for the coverage figure. Loss, latency and an offset within max_skew
leave a node able to vote: slots due meanwhile count in the coverage."""

AIM_SHARE = 0.6
"""Share of node faults aimed at the node that ran the latest job. Random targets alone
mostly miss the one node that matters to a leader-based scheduler (its leader); aiming
treats both schedulers alike: the leader there, the latest executor here."""

GAP_S = 3.0
"""Quiet time between one fault's recovery and the next fault."""


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` on ``targets`` from ``at_s`` for ``duration_s`` (seconds from the run start)."""

    index: int
    kind: str
    at_s: float
    duration_s: float
    targets: tuple[str, ...]
    params: dict[str, float] = field(default_factory=dict)
    aim: bool = False
    """Aim at the node that started the latest job: it replaces one of ``targets`` when the
    fault starts (the baseline's leader, quorum-cron's latest executor)."""

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def describe(self) -> str:
        parts = [self.kind, ",".join(self.targets) or "redis", f"{self.duration_s:.1f}s"]
        parts += [f"{k}={v:g}" for k, v in sorted(self.params.items())]
        if self.aim:
            parts.append("(aimed at the latest executor)")
        return " ".join(parts)


def _draw(
    kind: str, rng: random.Random, nodes: list[str], quorum: int, lease_s: float
) -> tuple[float, tuple[str, ...], dict[str, float]]:
    minority = len(nodes) - quorum
    some = rng.randint(1, max(1, minority))

    def pick(k: int) -> tuple[str, ...]:
        return tuple(sorted(rng.sample(nodes, k)))

    if kind == "partition-minority":
        return rng.uniform(4, 6), pick(max(1, minority)), {}
    if kind == "partition-majority":
        return rng.uniform(3, 5), pick(quorum), {}
    if kind in ("cut-outbound", "cut-inbound"):
        return rng.uniform(3, 6), pick(some), {}
    if kind == "loss":
        return rng.uniform(4, 6), pick(some), {"percent": rng.randint(20, 50)}
    if kind == "latency":
        delay = rng.randint(50, 400)
        return rng.uniform(4, 6), pick(some), {"delay_ms": delay, "jitter_ms": rng.randint(0, delay // 2)}
    if kind == "pause":
        return lease_s + rng.uniform(1, 2), pick(1), {}
    if kind == "kill":
        return rng.uniform(2, 3), pick(1), {}
    if kind == "clock-offset":
        return rng.uniform(5, 8), pick(1), {"offset_ms": rng.choice((-1, 1)) * rng.randint(50, 200)}
    if kind == "clock-step":
        return rng.uniform(4, 6), pick(1), {"step_ms": rng.choice((-1, 1)) * rng.randint(1000, 5000)}
    if kind == "redis-restart":
        return rng.uniform(1, 2), (), {}
    if kind == "promotion":
        return rng.uniform(1, 2), (), {}
    raise ValueError(f"unknown fault kind {kind!r}: expected one of {', '.join(KINDS)}")


def plan(
    seed: int,
    seconds: float,
    nodes: list[str],
    *,
    quorum: int,
    kinds: tuple[str, ...] = KINDS,
    lease_s: float = 2.0,
    recovery_s: float = 3.0,
    first_at_s: float = 4.0,
) -> list[Fault]:
    """Faults that fit in ``seconds``, each followed by ``recovery_s`` + :data:`GAP_S` of quiet.

    Raises ValueError for no kinds or a length that is not a finite number: either used to
    draw rounds forever (the loop below ends only when a fault no longer fits).
    """
    if not kinds or not math.isfinite(seconds):
        raise ValueError(
            f"a schedule needs fault kinds and a finite length (kinds {kinds}, seconds {seconds})"
        )
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = first_at_s
    while True:
        order = list(kinds)
        rng.shuffle(order)
        for kind in order:
            duration, targets, params = _draw(kind, rng, nodes, quorum, lease_s)
            aim = bool(targets) and rng.random() < AIM_SHARE
            if at + duration + recovery_s > seconds:
                return faults
            faults.append(Fault(len(faults), kind, round(at, 3), round(duration, 3), targets, params, aim))
            at += duration + recovery_s + GAP_S
