"""Random scenarios and fault schedules, written once for two sources of choices.

The seeded explorer draws from a ``random.Random``; the hypothesis
strategies (``sim.strategies``) draw from hypothesis, which can then shrink
what it drew. Both go through a :class:`Chooser`, so they generate the same
space of faults and jobs from the same code.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from quorum_cron.core.model import Delivery, Overlap
from sim.scenario import Fault, JobDef, Scenario

__all__ = [
    "Chooser",
    "RandomChooser",
    "random_fault",
    "random_jobs",
    "random_membership",
    "random_reloads",
    "random_runs",
    "random_scenario",
]

T = TypeVar("T")

EXPLORE_KINDS: tuple[str, ...] = (
    "partition",
    "flap",
    "swizzle",
    "loss",
    "delay",
    "pause",
    "crash",
    "outage",
    "clock_jump",
    "clock_drift",
    "clock_strobe",
    "ntp_lie",
    "store_restart",
    "store_failover",
    "store_refuse",
    "deploy",
)
"""Fault kinds the explorer draws from one at a time (every kind but membership changes, which
:func:`random_membership` draws as a plan: a change and the faults around it)."""

MEMBERSHIP_LOSSY = frozenset({"store_failover"})
"""Faults a membership plan is not combined with: a failover rolls the namespace record back under
nodes that hold a newer one (a limit of the simulation's model, not explored yet), and a
store restarted empty starts from the first record again. ``store_restart`` with ``lose_state``
is excluded too (checked by field)."""


class Chooser(Protocol):
    def int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]."""
        ...

    def choice(self, options: Sequence[T]) -> T: ...


class RandomChooser:
    """Choices from a seeded ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]


def _nodes(c: Chooser, node_ids: Sequence[str], most: int) -> tuple[str, ...]:
    k = c.int(1, max(1, most))
    chosen: list[str] = []
    pool = list(node_ids)
    for _ in range(k):
        n = c.choice(pool)
        pool.remove(n)
        chosen.append(n)
    return tuple(sorted(chosen))


def random_fault(
    c: Chooser,
    node_ids: Sequence[str],
    duration_ms: int,
    jobs: Sequence[str],
    kinds: Sequence[str] = EXPLORE_KINDS,
) -> Fault:
    """One fault of one of ``kinds``, starting somewhere in the first 90 % of the run."""
    kind = c.choice(kinds)
    n = len(node_ids)
    at = c.int(0, duration_ms * 9 // 10 // 1000) * 1000
    length = c.choice((2_000, 10_000, 30_000, 60_000, 180_000))
    nodes = _nodes(c, node_ids, n - 1 if kind in ("crash", "pause", "deploy") else n)
    if kind in ("partition", "loss", "delay", "crash", "clock_jump", "clock_drift", "ntp_lie"):
        base = Fault(kind=kind, at_ms=at, for_ms=length, nodes=nodes)
        if kind == "loss":
            return Fault(
                kind=kind,
                at_ms=at,
                for_ms=length,
                nodes=nodes,
                loss=c.choice((0.05, 0.2, 0.5)),
                reply_loss=c.choice((0.0, 0.1, 0.5)),
            )
        if kind == "delay":
            return Fault(
                kind=kind, at_ms=at, for_ms=length, nodes=nodes, delay_ms=(1, c.choice((50, 300, 900)))
            )
        if kind == "clock_jump":
            by = c.choice((-60_000, -30_000, -2_000, -300, 300, 2_000, 30_000))
            return Fault(kind=kind, at_ms=at, for_ms=c.choice((0, length)), nodes=nodes, by_ms=by)
        if kind == "clock_drift":
            return Fault(
                kind=kind, at_ms=at, for_ms=length, nodes=nodes, ppm=c.choice((-5_000, -500, 500, 5_000))
            )
        if kind == "ntp_lie":
            return Fault(
                kind=kind, at_ms=at, for_ms=length, nodes=nodes, by_ms=c.choice((-5_000, -400, 400, 5_000))
            )
        return base
    if kind == "pause":
        when = c.choice(("", "", "run", "commit", "start"))
        return Fault(kind=kind, at_ms=at, for_ms=length, nodes=() if when else nodes, when=when)
    if kind == "flap":
        return Fault(kind=kind, at_ms=at, for_ms=length, nodes=nodes, period_ms=c.choice((500, 2_000, 5_000)))
    if kind == "swizzle":
        return Fault(
            kind=kind, at_ms=at, for_ms=length, nodes=nodes, period_ms=c.choice((1_000, 5_000, 15_000))
        )
    if kind == "clock_strobe":
        return Fault(
            kind=kind,
            at_ms=at,
            for_ms=length,
            nodes=nodes,
            by_ms=c.choice((100, 400, 2_000)),
            period_ms=c.choice((1_000, 7_000)),
        )
    if kind == "outage":
        return Fault(kind=kind, at_ms=at, for_ms=length)
    if kind == "store_restart":
        return Fault(kind=kind, at_ms=at, for_ms=c.choice((500, 3_000, 30_000)))
    if kind == "store_refuse":
        return Fault(kind=kind, at_ms=at, for_ms=c.choice((500, 3_000, 20_000)))
    if kind == "store_failover":
        return Fault(
            kind=kind, at_ms=at, for_ms=c.choice((0, 1_000, 5_000)), by_ms=c.choice((10, 200, 2_000))
        )
    return Fault(
        kind="deploy",
        at_ms=at,
        for_ms=c.choice((1_000, 5_000)),
        nodes=nodes,
        period_ms=c.choice((5_000, 30_000)),
        job=c.choice(jobs),
        spec=f"v{c.int(2, 9)}",
    )


def random_membership(
    c: Chooser, node_ids: Sequence[str], duration_ms: int
) -> tuple[tuple[str, ...], tuple[Fault, ...]]:
    """A membership plan (issue 22): the first member set and faults around a change of it.

    One change (grow, shrink or replace), its finish by the operator some time later (refused
    while a new member has not heartbeated under the joint epoch; heartbeats finish it too), and
    around it any of: a partition, a crash of a new member half-way (the joint state lasts), a
    removed node that keeps its old config, a node paused across the change (a stale epoch when
    it wakes), a non-member voting with a copy of the config, a second change. Returns
    ``((), ())`` for no plan (two draws in three).
    """
    n = len(node_ids)
    if n < 3 or c.int(0, 2):
        return (), ()
    spares = c.int(0, min(2, n - 3))
    members = tuple(node_ids[: n - spares])
    outside = list(node_ids[n - spares :])
    how = c.choice(("grow", "shrink", "replace")) if outside else c.choice(("shrink", "shrink", "replace"))
    if how == "grow":
        new = members + tuple(outside)
    elif how == "shrink":
        gone = _nodes(c, members, max(1, (len(members) - 1) // 2))
        new = tuple(m for m in members if m not in gone) or members[:1]
    else:
        gone = (c.choice(members),)
        new = tuple(m for m in members if m not in gone) + (tuple(outside[:1]) if outside else ())
    at = c.int(duration_ms // 10 // 1000, duration_ms * 6 // 10 // 1000) * 1000
    faults = [
        Fault(kind="reconfigure", at_ms=at, nodes=tuple(sorted(new))),
        Fault(kind="finish", at_ms=at + c.choice((5_000, 30_000, 120_000))),
    ]
    removed = [m for m in members if m not in new]
    added = [m for m in new if m not in members]
    for _ in range(c.int(0, 3)):
        what = c.choice(("partition", "crash", "stale", "pause", "rogue", "again"))
        if what == "partition":
            cut = _nodes(c, node_ids, max(1, n // 2))
            faults.append(
                Fault(kind="partition", at_ms=at - 10_000, for_ms=c.choice((30_000, 120_000)), nodes=cut)
            )
        elif what == "crash":
            victim = c.choice(added or list(new))
            faults.append(
                Fault(kind="crash", at_ms=at - 5_000, for_ms=c.choice((30_000, 180_000)), nodes=(victim,))
            )
        elif what == "stale" and removed:
            faults.append(Fault(kind="stale_config", at_ms=at - 5_000, nodes=(c.choice(removed),)))
        elif what == "pause":
            sleeper = c.choice(list(node_ids))
            faults.append(
                Fault(kind="pause", at_ms=at - 10_000, for_ms=c.choice((30_000, 120_000)), nodes=(sleeper,))
            )
        elif what == "rogue" and (outside or removed):
            faults.append(
                Fault(
                    kind="rogue",
                    at_ms=at + c.choice((-30_000, 20_000)),
                    nodes=(c.choice(outside or removed),),
                )
            )
        elif what == "again":
            back = tuple(sorted(members))
            faults.append(Fault(kind="reconfigure", at_ms=at + c.choice((20_000, 300_000)), nodes=back))
            faults.append(Fault(kind="finish", at_ms=at + 400_000))
    first = () if len(members) == n else members
    return first, tuple(f for f in faults if 0 <= f.at_ms < duration_ms)


def random_reloads(
    c: Chooser, node_ids: Sequence[str], duration_ms: int, jobs: Sequence[str]
) -> tuple[Fault, ...]:
    """Live config reloads (one draw in three; ``()`` otherwise): one or two, each redefining a job
    (a new spec hash) or removing it, on every node or on some, one node per ``period`` (0: all
    at once, as a config push does) and put back later, or never.

    A reload is its own plan, drawn after the rest of a scenario (``sim.explore`` draws it from a
    stream of its own), so each seed's other faults and jobs are what they were before reloads
    were explored."""
    if c.int(0, 2):
        return ()
    out = []
    for _ in range(c.int(1, 2)):
        remove = c.int(0, 1) == 1
        out.append(
            Fault(
                kind="reload",
                at_ms=c.int(0, duration_ms * 9 // 10 // 1000) * 1000,
                for_ms=c.choice((0, 30_000, 180_000, 600_000)),
                nodes=tuple(node_ids) if c.int(0, 1) else _nodes(c, node_ids, len(node_ids)),
                period_ms=c.choice((0, 2_000, 30_000)),
                job=c.choice(jobs),
                spec="" if remove else f"v{c.int(2, 9)}",
                remove=remove,
            )
        )
    return tuple(out)


def random_jobs(c: Chooser, count: int) -> tuple[JobDef, ...]:
    """``count`` jobs with periods from 2 s to 5 min and varied delivery, overlap, misfire, retries and
    store-outage policy."""
    jobs = []
    for i in range(count):
        every = c.choice((2_000, 5_000, 10_000, 30_000, 60_000, 300_000))
        deadline = max(1_000, every // c.choice((2, 4)))
        run_hi = c.choice((200, 2_000, 20_000, 60_000))
        jobs.append(
            JobDef(
                name=f"job{i}",
                every_ms=every,
                deadline_ms=min(deadline, 60_000),
                run_ms=(min(100, run_hi), run_hi),
                fail_rate=c.choice((0.0, 0.0, 0.1, 0.3)),
                delivery=c.choice((Delivery.AT_MOST_ONCE, Delivery.AT_LEAST_ONCE)),
                overlap=c.choice((Overlap.FORBID, Overlap.ALLOW, Overlap.REPLACE)),
                misfire=c.choice(("skip", "run-once")),
                retries=c.choice((0, 0, 1, 2)),
                retry_backoff_ms=c.choice((0, 1_000, 5_000)),
                on_store_unavailable=c.choice(("skip", "skip", "skip", "run-local")),
            )
        )
    return tuple(jobs)


def random_runs(c: Chooser, given: Sequence[JobDef]) -> tuple[JobDef, ...]:
    """``given`` jobs (a user's: ``sim explore --config``) with a drawn run time and failure rate
    each, from the ranges :func:`random_jobs` draws: the simulator cannot know how long the real
    command takes or how often it fails, so each seed tries other values."""
    out = []
    for job in given:
        run_hi = c.choice((200, 2_000, 20_000, 60_000))
        out.append(replace(job, run_ms=(min(100, run_hi), run_hi), fail_rate=c.choice((0.0, 0.0, 0.1, 0.3))))
    return tuple(out)


def random_scenario(
    c: Chooser,
    *,
    name: str,
    nodes: int,
    jobs: int,
    duration_ms: int,
    faults_per_hour: int = 12,
    kinds: Sequence[str] = EXPLORE_KINDS,
    membership: bool = True,
    given_jobs: Sequence[JobDef] = (),
) -> Scenario:
    """A cluster of ``nodes`` running ``jobs`` random jobs under random faults (and, one in three,
    a membership plan: :func:`random_membership`; its draws come last, so the rest of a
    scenario is the same with or without it).

    With ``given_jobs`` those jobs run instead of random ones (``jobs`` is then ignored), each
    with a drawn run time and failure rate (:func:`random_runs`); without them the draws are
    exactly what they were before ``given_jobs`` existed, so explored seeds replay the same."""
    job_defs = random_runs(c, given_jobs) if given_jobs else random_jobs(c, jobs)
    node_ids = tuple(f"n{i}" for i in range(1, nodes + 1))
    count = c.int(0, max(1, faults_per_hour * duration_ms // 3_600_000))
    faults = [random_fault(c, node_ids, duration_ms, [j.name for j in job_defs], kinds) for _ in range(count)]
    members: tuple[str, ...] = ()
    lossy = any(f.kind in MEMBERSHIP_LOSSY or f.lose_state for f in faults)
    if membership and not lossy:
        members, plan = random_membership(c, node_ids, duration_ms)
        faults += plan
    faults.sort(key=lambda f: f.at_ms)
    return Scenario(
        name=name, nodes=nodes, duration_ms=duration_ms, jobs=job_defs, faults=tuple(faults), members=members
    )
