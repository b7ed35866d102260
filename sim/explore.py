"""The random explorer over seeds, and the shrinker for a failing run.

``explore`` turns each seed into a random scenario (jobs and faults drawn
from the seed's ``explore`` stream), runs it and checks it, optionally on
several worker processes (each run stays single-threaded and
deterministic). ``shrink`` takes a failing run and removes faults, jobs
and simulated time while the same kind of violation still happens; the
result, with seed and strategy embedded, is a scenario file that replays
the failure (``quorum-cron sim replay FILE``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from sim.checker import KNOWN_LIMITS, Report
from sim.gen import RandomChooser, random_reloads, random_scenario
from sim.rng import derive_seed
from sim.runner import run
from sim.scenario import Fault, Scenario

__all__ = ["ExploreError", "SeedResult", "check_seeds", "explore", "explore_scenario", "shrink"]


class ExploreError(RuntimeError):
    """An explored seed's run raised (a bug in the core or the simulator): the message names the
    seed and the exploration's settings, so ``sim run`` can replay it."""


@dataclass(frozen=True)
class SeedResult:
    """What one explored seed did."""

    seed: int
    ok: bool
    violations: dict[str, int]
    duplicates: int
    runs: int
    due: int
    misses: int
    events: int
    reached: dict[str, int]
    exempt: dict[str, int] = field(default_factory=dict)
    """The checker's exemptions by name (``Report.exempt``: cut off, the lease exemptions); the
    known limits are in ``violations``, each under its own kind."""
    liveness_checked: int = 0
    """Due slots the liveness rule judged (of ``due``)."""


def explore_scenario(
    seed: int,
    *,
    nodes: int = 5,
    jobs: int = 3,
    hours: float = 1.0,
    wait_replicas: int = 1,
    template: Scenario | None = None,
) -> Scenario:
    """The random scenario the explorer runs for ``seed``.

    ``wait_replicas`` is the store setting of the explored deployment: 1 (the
    default) is what docs/store.md asks of a replicated Redis that can fail
    over; 0 explores a deployment without ``WAIT``, where a failover that
    loses acknowledged writes can run a slot twice (a reported limit).

    ``template`` (a user's cluster and jobs: ``sim explore --config``) gives the nodes, jobs,
    clocks, settings and start time instead of ``nodes`` and random ``jobs``; faults are drawn as for any
    seed. Its own quorum (not a majority) keeps membership changes out: the simulator takes a
    quorum setting only with every node a member.
    """
    chooser = RandomChooser(random.Random(derive_seed(seed, "explore")))
    duration_ms = int(hours * 3_600_000)
    if template is None:
        sc = random_scenario(chooser, name=f"explore-{seed}", nodes=nodes, jobs=jobs, duration_ms=duration_ms)
    else:
        sc = random_scenario(
            chooser,
            name=f"{template.name}-explore-{seed}",
            nodes=template.nodes,
            jobs=len(template.jobs),
            duration_ms=duration_ms,
            given_jobs=template.jobs,
            membership=not template.settings.quorum,
        )
        sc = replace(
            sc,
            settings=template.settings,
            clocks=template.clocks,
            description=template.description,
            start_ms=template.start_ms,
        )
    # Half the seeds vote at the fire time: most of their slots commit after it, with the
    # executor's start folded into the commit (docs/protocol.md). Drawn apart from the scenario,
    # so each seed's jobs and faults are what they were.
    lead = random.Random(derive_seed(seed, "explore-lead")).choice((0, sc.settings.vote_lead_ms))
    # One seed in three reloads the config live (added after the other faults, drawn apart too).
    reloads = random_reloads(
        RandomChooser(random.Random(derive_seed(seed, "explore-reload"))),
        sc.node_ids,
        sc.duration_ms,
        [j.name for j in sc.jobs],
    )
    return replace(
        sc,
        faults=sc.faults + reloads,
        settings=replace(sc.settings, wait_replicas=wait_replicas, vote_lead_ms=lead),
    )


def _one(args: tuple[int, int, int, float, str, frozenset[str], int, Scenario | None]) -> SeedResult:
    seed, nodes, jobs, hours, strategy, known, wait_replicas, template = args
    try:
        scenario = explore_scenario(
            seed, nodes=nodes, jobs=jobs, hours=hours, wait_replicas=wait_replicas, template=template
        )
        result = run(scenario, seed, strategy)
    except Exception as exc:
        # A run that raises is a bug in the simulator or the core; name the seed, which a worker
        # process's traceback does not (explorer seed 70160 raised and stopped a whole exploration).
        what = f"{nodes} nodes, {jobs} jobs" if template is None else f"the jobs of {template.name!r}"
        raise ExploreError(
            f"explored seed {seed} ({strategy}, {what}, {hours:g} h, "
            f"wait_replicas {wait_replicas}) raised {type(exc).__name__}: {exc}"
        ) from exc
    rep = result.report
    return SeedResult(
        seed=seed,
        ok=not rep.unexpected(known),
        violations=dict(rep.by_kind()),
        duplicates=rep.duplicates,
        runs=rep.runs,
        due=rep.due,
        misses=rep.misses,
        events=result.events,
        reached=dict(rep.reached),
        exempt=dict(rep.exempt),
        liveness_checked=rep.liveness_checked,
    )


def explore(
    seeds: Iterable[int],
    *,
    nodes: int = 5,
    jobs: int = 3,
    hours: float = 1.0,
    strategy: str = "quorum",
    workers: int = 1,
    known: frozenset[str] = KNOWN_LIMITS,
    wait_replicas: int = 1,
    template: Scenario | None = None,
) -> Iterator[SeedResult]:
    """Run each seed's random scenario; yield results in seed order.

    ``known``: violation kinds of reported, unfixed core bugs that do not
    fail a seed (they are still counted in ``violations``).
    ``wait_replicas``, ``template``: see :func:`explore_scenario`.
    """
    tasks = [(s, nodes, jobs, hours, strategy, known, wait_replicas, template) for s in seeds]
    if workers <= 1:
        yield from map(_one, tasks)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(_one, tasks, chunksize=1)


def _check_one(args: tuple[Scenario, int, str, str]) -> Report:
    scenario, seed, strategy, mutant = args
    return run(scenario, seed, strategy, mutant=mutant).report


def check_seeds(
    scenario: Scenario, seeds: Iterable[int], strategy: str = "quorum", *, mutant: str = "", workers: int = 1
) -> list[Report]:
    """Run ``scenario`` once per seed (on ``workers`` processes) and return the reports in seed order."""
    tasks = [(scenario, s, strategy, mutant) for s in seeds]
    if workers <= 1:
        return [_check_one(t) for t in tasks]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_check_one, tasks, chunksize=4))


def _fails_like(kinds: frozenset[str], known: frozenset[str]) -> Callable[[Report], bool]:
    def fails(rep: Report) -> bool:
        return any(v.kind in kinds for v in rep.unexpected(known))

    return fails


def shrink(
    scenario: Scenario,
    seed: int,
    strategy: str = "quorum",
    *,
    mutant: str = "",
    known: frozenset[str] = KNOWN_LIMITS,
    max_runs: int = 300,
) -> Scenario:
    """A smaller scenario that still fails the same way with the same seed (seed, strategy embedded).

    Greedy delta debugging: drop faults (halves, then one at a time), drop
    jobs, end the run soon after the first violation, shorten faults, and
    repeat until nothing more can go. Raises ``ValueError`` if the run does
    not fail to begin with.
    """
    first = run(scenario, seed, strategy, mutant=mutant).report
    bad = first.unexpected(known)
    if not bad:
        raise ValueError(
            f"seed {seed} of {scenario.name!r} does not fail under {strategy!r}: nothing to shrink"
        )
    fails = _fails_like(frozenset(v.kind for v in bad), known)
    budget = [max_runs]

    def still_fails(candidate: Scenario) -> bool:
        if budget[0] <= 0:
            return False
        budget[0] -= 1
        return fails(run(candidate, seed, strategy, mutant=mutant).report)

    best = scenario
    # End the run a little after the first violation (keeping the checker's tail).
    first_t = min(v.t for v in bad) - scenario.start_ms
    tail = max(60_000, 2 * max(j.deadline_ms for j in scenario.jobs) + scenario.settings.lease_ms + 60_000)
    # (Without the faults past the new end, in the same run: a file holding them would not load.
    # They act on nothing, but each install draws from the faults' random stream, and a
    # membership run draws its heartbeat phases after them, so the cut is checked with them gone:
    # explorer seed 123058's shrunk file did not fail when they were dropped unchecked.)
    end = min(best.duration_ms, first_t + tail)
    shorter = replace(best, duration_ms=end, faults=tuple(f for f in best.faults if f.at_ms < end))
    if shorter.duration_ms < best.duration_ms and still_fails(shorter):
        best = shorter
    changed = True
    while changed and budget[0] > 0:
        changed = False
        faults = list(best.faults)
        chunk = max(1, len(faults) // 2)
        while chunk >= 1 and faults:
            i = 0
            while i < len(faults):
                candidate = replace(best, faults=tuple(faults[:i] + faults[i + chunk :]))
                if still_fails(candidate):
                    best, faults, changed = candidate, faults[:i] + faults[i + chunk :], True
                else:
                    i += chunk
            chunk //= 2
        for job in list(best.jobs):
            if len(best.jobs) > 1:
                kept = tuple(j for j in best.jobs if j is not job)
                names = {j.name for j in kept}
                candidate = replace(
                    best, jobs=kept, faults=tuple(f for f in best.faults if not f.job or f.job in names)
                )
                if still_fails(candidate):
                    best, changed = candidate, True
        for i, f in enumerate(best.faults):
            if f.for_ms > 1_000:
                quicker: Fault = replace(f, for_ms=f.for_ms // 2)
                candidate = replace(best, faults=(*best.faults[:i], quicker, *best.faults[i + 1 :]))
                if still_fails(candidate):
                    best, changed = candidate, True
    return replace(
        best,
        name=f"{scenario.name}-shrunk",
        seed=seed,
        strategy=strategy,
        mutant=mutant,
        description=f"shrunk from {scenario.name!r} seed {seed}: {', '.join(sorted({v.kind for v in bad}))}",
    )
