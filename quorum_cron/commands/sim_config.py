"""An agent's configuration as simulator input: its jobs and cluster as a scenario with no faults.

``quorum-cron sim explore --config`` and ``sim scenario --config`` ask "do *my* jobs survive
partitions, crashes and clock faults?". They need the config's jobs as the simulator's
:class:`~sim.scenario.JobDef` values and its cluster as a node count and settings. The
simulator may not import the config loader (docs/architecture.md: ``sim`` sees only the pure
schedule and duration grammar), so the conversion lives here, in a face, and hands ``sim``
a plain :class:`~sim.scenario.Scenario` to use as a template.

What cannot be carried over is said, one line per feature, never dropped in silence; what
does not matter to the simulator (commands, environments, alerts, output, the store's URL and
retention) is left out on purpose: a simulated run lasts a drawn ``run`` time and fails at a
drawn ``fail_rate`` whatever its command is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from quorum_cron.config.durations import format_duration
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.errors import ConfigError
from sim.quorum import make_schedule
from sim.scenario import DEFAULT_START_MS, MAX_NODES, ClockDef, JobDef, Scenario, SettingsDef

__all__ = ["FromConfig", "from_config", "job_def", "quiet_jobs"]

_DEFAULTS = ClusterConfig(namespace="x", size=1)
"""The cluster defaults, to tell a setting the config changed from one it left alone."""


@dataclass(frozen=True)
class FromConfig:
    """A config as the simulator sees it."""

    scenario: Scenario
    """Nodes ``n1..nN``, the config's jobs and settings, no faults."""
    node_names: tuple[tuple[str, str], ...]
    """``(sim id, member id)`` for a config with ``members`` (sorted, as the config keeps them)."""
    warnings: tuple[str, ...]
    """One line per feature of the config the simulator does not model."""


def job_def(spec: JobSpec) -> tuple[JobDef, list[str]]:
    """``spec`` as a simulator job, and a line for each of its options the simulator cannot model.

    The schedule goes over as written (``H`` resolves from the job's name, as in the agent), so
    the simulated job fires at the agent's times; ``run`` and ``fail_rate`` stay at their
    defaults: the explorer draws them per seed, a scenario file's author sets them.
    """
    where = f"job {spec.name!r}"
    schedule = spec.schedule
    every = schedule.period_ms if schedule.kind == "every" else None
    job = JobDef(
        name=spec.name,
        every_ms=every or 0,
        cron="" if every else schedule.expr,
        timezone="UTC" if every else schedule.tz,
        deadline_ms=spec.starting_deadline_ms,
        timeout_ms=spec.timeout_ms,
        delivery=spec.delivery,
        overlap=spec.overlap,
        misfire=spec.misfire,
        retries=spec.retries,
        retry_backoff_ms=spec.retry_backoff_ms,
        on_store_unavailable=spec.on_store_unavailable,
    )
    lost = []
    if schedule.dst != "once":
        lost.append(
            f'{where}: dst = "{schedule.dst}" is not modeled (the simulator runs a repeated wall time once)'
        )
    if spec.retries and spec.retry_backoff_max_ms != spec.retry_backoff_ms:
        lost.append(
            f"{where}: retry_backoff_max = '{format_duration(spec.retry_backoff_max_ms)}' is not modeled "
            f"(every simulated retry waits retry_backoff = '{format_duration(spec.retry_backoff_ms)}')"
        )
    if spec.retries and spec.retry_jitter:
        lost.append(f"{where}: retry_jitter = {spec.retry_jitter:g} is not modeled (retries wait exactly)")
    if spec.in_process:
        lost.append(f"{where}: an in-process job is simulated like a command (a drawn run time)")
    return job, lost


def _cluster_lines(cluster: ClusterConfig) -> list[str]:
    """A line for each cluster setting the simulator does not model (only those the config changed)."""
    from sim.faults import HEARTBEAT_MS

    lost = []
    if cluster.heartbeat_ms != _DEFAULTS.heartbeat_ms:
        lost.append(
            f"cluster: heartbeat = '{format_duration(cluster.heartbeat_ms)}' paces only the simulated "
            f"clock checks (simulated membership heartbeats come every {format_duration(HEARTBEAT_MS)})"
        )
    if cluster.clock_check_interval_ms != _DEFAULTS.clock_check_interval_ms:
        lost.append(
            f"cluster: clock_check_interval = '{format_duration(cluster.clock_check_interval_ms)}' is "
            "not modeled (a simulated clock check does not expire)"
        )
    if cluster.wait_replicas and cluster.wait_timeout_ms != _DEFAULTS.wait_timeout_ms:
        lost.append(
            f"cluster: wait_timeout = '{format_duration(cluster.wait_timeout_ms)}' is not modeled "
            "(a simulated WAIT is acknowledged with the write)"
        )
    if cluster.ntp_servers:
        lost.append(
            f"cluster: ntp_servers and ntp_unreachable = {cluster.ntp_unreachable!r} are not modeled "
            "(the simulated clock guard reads true time; ntp_lie faults model a server that lies)"
        )
    url = cluster.redis_url or ""
    if url.startswith(("redis+cluster://", "rediss+cluster://")):
        lost.append(
            "cluster: redis_url is a Redis Cluster: its masters are simulated as one store "
            "(one master's failover or WAIT shortfall alone is not)"
        )
    return lost


def from_config(
    config: Config, *, hours: float, nodes: int | None = None, start_ms: int | None = None
) -> FromConfig:
    """The scenario of ``config``'s cluster and jobs over ``hours`` from ``start_ms`` (None: the
    simulator's default start), with no faults.

    ``nodes`` overrides the config's size; the config's quorum then holds only if it is still a
    majority of ``nodes`` (else a majority is used and a warning says so). Raises
    :class:`ConfigError` for a config the simulator cannot take (no jobs, more nodes than it runs).
    """
    cluster = config.cluster
    if not config.jobs:
        raise ConfigError(f"{config.source}: no [[jobs]] to simulate (expected at least one job)")
    count = cluster.size if nodes is None else nodes
    if count > MAX_NODES:
        raise ConfigError(
            f"{config.source}: cluster: size {count} is more than the simulator runs "
            f"(expected at most {MAX_NODES}: pass --nodes {MAX_NODES} or fewer)"
        )
    warnings = _cluster_lines(cluster)
    quorum = 0
    if cluster.quorum != cluster.size // 2 + 1:
        if count // 2 + 1 <= cluster.quorum <= count:
            quorum = cluster.quorum
        else:
            warnings.append(
                f"cluster: quorum = {cluster.quorum} is not a majority of --nodes {count}: "
                f"simulated with quorum {count // 2 + 1}"
            )
    jobs = []
    for spec in config.jobs:
        job, lost = job_def(spec)
        jobs.append(job)
        warnings += lost
    settings = SettingsDef(
        quorum=quorum,
        max_skew_ms=cluster.max_skew_ms,
        lease_ms=cluster.lease_ms,
        start_timeout_ms=cluster.start_timeout_ms,
        wait_replicas=cluster.wait_replicas,
    )
    # A vote lead at or past max_skew is refused by the store's early window: keep it inside.
    if settings.vote_lead_ms >= settings.max_skew_ms:
        settings = replace(settings, vote_lead_ms=settings.max_skew_ms // 2)
    scenario = Scenario(
        name=cluster.namespace,
        nodes=count,
        duration_ms=max(1_000, int(hours * 3_600_000)),
        jobs=tuple(jobs),
        settings=settings,
        # The agent checks its clock against the store's TIME every heartbeat (agent/health.py):
        # that, not clock_check_interval (how long a check stays valid), is the simulated guard's
        # pace, within the scenario's bounds (1s and up).
        # No base drift: the agent's hosts run NTP (docs/operations.md asks for it), which keeps
        # their clocks within a few ms; the simulator's default ±50 ppm has nothing slew it back,
        # so in the hours a daily job needs, a fault-free run's clocks wandered past max_skew and
        # its slots ended missed ("clock untrusted"). Drifting clocks remain faults
        # (clock_drift, drawn by the explorer), on top of a start offset within clocks.skew.
        clocks=ClockDef(drift_ppm=0, check_ms=max(1_000, cluster.heartbeat_ms)),
        description=f"the jobs and cluster of {config.source}",
        start_ms=DEFAULT_START_MS if start_ms is None else start_ms,
    )
    names: tuple[tuple[str, str], ...] = ()
    if cluster.members and nodes in (None, cluster.size):
        names = tuple(zip(scenario.node_ids, cluster.members, strict=True))
    return FromConfig(scenario=scenario, node_names=names, warnings=tuple(warnings))


def quiet_jobs(scenario: Scenario) -> list[str]:
    """A warning for each job with no fire time in the scenario's run, naming the ``--hours`` that
    would reach its first one (a job that never fires is checked for nothing)."""
    end = scenario.start_ms + scenario.duration_ms
    lines = []
    for job in scenario.jobs:
        schedule = make_schedule(job)
        first = schedule.next_after(scenario.start_ms)
        if first <= end:
            continue
        # Past the first fire time by its deadline and a minute, for the checker to judge it.
        need = (first - scenario.start_ms + job.deadline_ms + 60_000) / 3_600_000
        shown = f"{math.ceil(need * 10) / 10:g}"
        lines.append(
            f"job {job.name!r} fires no slot in the simulated {format_duration(scenario.duration_ms)} "
            f"(its first is {format_duration(first - scenario.start_ms)} in): nothing of it is "
            f"checked; try --hours {shown}, or a --start shortly before it"
        )
    return lines
