"""``quorum-cron check-clock``: measure this machine's clock the way a node would, and say why.

Queries every NTP server (several samples each), optionally probes the
store's clock with Redis ``TIME``, runs the result through the same
:class:`~quorum_cron.clock.skew.ClockGuard` the agent uses, prints every sample
and the verdict. Exit status: 0 trusted, 1 not trusted, 2 cannot tell;
bad input is one ``error: ...`` line with exit 1, like every command.

With no NTP server configured (the default config has none) the check is
the agent's: Redis ``TIME`` alone decides (``ntp_unreachable =
"store-time"``, the default without servers). While NTP samples are taken
(up to ``samples x (timeout + interval)`` seconds against silent servers)
a progress line per server goes to stderr, so a slow check is not mistaken
for a hung one; the report on stdout stays the same.

Registered in the main group by ``quorum_cron.cli`` (``main.add_command(check_clock)``).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import NoReturn

import click

from quorum_cron.clock.base import Clock, SystemClock
from quorum_cron.clock.ntp import (
    DEFAULT_SAMPLE_INTERVAL_S,
    DEFAULT_SAMPLES,
    DEFAULT_TIMEOUT_S,
    MAX_SAMPLES,
    NtpServer,
    probe_store_time,
    query_server,
)
from quorum_cron.clock.policy import MAX_SKEW_LIMIT_MS
from quorum_cron.clock.skew import (
    ClockGuard,
    ClockReading,
    NtpCheck,
    NtpOutcome,
    NtpSample,
    ServerReport,
    TrustPolicy,
    UnreachablePolicy,
    Verdict,
    assess_ntp,
    error_bound_ms,
    rejection_reason,
    root_distance_ms,
)
from quorum_cron.commands.seconds import Seconds
from quorum_cron.config.durations import format_duration, parse_duration
from quorum_cron.config.file import load_config
from quorum_cron.config.settings import redact_url
from quorum_cron.errors import ConfigError

__all__ = ["PROBE_NAMESPACE", "check_clock", "run_check"]

PROBE_NAMESPACE = "quorum-cron"
"""The namespace whose store ``TIME`` is read without a config (it only picks a Redis Cluster's master)."""


def _count(n: int, one: str, many: str) -> str:
    """``n`` with its noun in the number it takes ("1 failed query", "0 replies")."""
    return f"{n} {one if n == 1 else many}"


def _sample_line(n: int, sample: NtpSample, max_root_distance_ms: float) -> str:
    line = (
        f"  #{n} offset {sample.offset_ms:+.1f} ms  delay {sample.delay_ms:.1f} ms  "
        f"stratum {sample.stratum}  leap {sample.leap}  root distance {root_distance_ms(sample):.1f} ms  "
        f"bound {error_bound_ms(sample):.1f} ms"
    )
    reason = rejection_reason(sample, max_root_distance_ms=max_root_distance_ms)
    return f"{line}  REJECTED: {reason}" if reason else line


def _print_ntp(reports: tuple[ServerReport, ...], check: NtpCheck, policy: TrustPolicy) -> None:
    for report, summary in zip(reports, check.servers, strict=True):
        replies = _count(len(report.samples), "reply", "replies")
        failed = _count(len(report.failures), "failed query", "failed queries")
        click.echo(f"NTP {report.server}: {replies}, {failed}")
        for n, sample in enumerate(report.samples, 1):
            click.echo(_sample_line(n, sample, policy.max_root_distance_ms))
        # Each distinct failure once, with how many queries it ended: a name that does not
        # resolve was printed once per query, then again as the reason the server was unusable.
        queries = len(report.samples) + len(report.failures)
        for failure, count in Counter(report.failures).items():
            click.echo(f"  failed: {failure}" + (f" ({count} of {queries} queries)" if count > 1 else ""))
        if summary.best is not None:
            click.echo(
                f"  best (lowest delay): offset {summary.best.offset_ms:+.1f} ms, "
                f"bound {error_bound_ms(summary.best):.1f} ms"
            )
        elif not report.samples and report.failures:
            click.echo("  unusable: every query failed")
        else:
            click.echo(f"  unusable: {summary.why_unusable()}")
    usable = _count(len(check.usable), "usable server", "usable servers")
    if check.outcome is NtpOutcome.AGREED:
        click.echo(
            f"NTP agreement: {len(check.agreeing)} of {usable}; "
            f"offset {check.offset_ms:+.1f} ms "
            f"(true offset in [{check.low_ms:+.1f}, {check.high_ms:+.1f}] ms), "
            f"bound {check.bound_ms:.1f} ms"
        )
    elif check.outcome is NtpOutcome.NO_MAJORITY:
        click.echo(f"NTP agreement: none, no majority of {usable} agrees")
    else:
        click.echo("NTP agreement: no usable server")


def run_check(
    servers: tuple[NtpServer, ...],
    policy: TrustPolicy,
    *,
    samples: int = DEFAULT_SAMPLES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sample_interval_s: float = DEFAULT_SAMPLE_INTERVAL_S,
    redis_url: str | None = None,
    clock: Clock | None = None,
    namespace: str = PROBE_NAMESPACE,
) -> Verdict:
    """Do one full check, printing as it goes; returns the verdict.

    No ``servers``: NTP is not consulted at all and, as in the agent, the
    store ``TIME`` probe decides alone (the policy must then be
    ``store-time`` and ``redis_url`` given, which the command ensures).
    ``namespace`` only matters on a Redis Cluster: its members hash's
    master is the one whose ``TIME`` is read (the config's namespace).
    """
    clock = clock if clock is not None else SystemClock()
    guard = ClockGuard(policy)
    guard.observe_reading(ClockReading.of(clock))
    if servers:
        reports = _query_with_progress(
            servers, samples=samples, clock=clock, timeout_s=timeout_s, sample_interval_s=sample_interval_s
        )
        check = assess_ntp(reports, max_root_distance_ms=policy.max_root_distance_ms)
        guard.observe_ntp(check, ClockReading.of(clock))
        _print_ntp(reports, check, policy)
    else:
        click.echo("NTP: no server configured: Redis TIME alone decides (ntp_unreachable = store-time)")
        guard.observe_ntp(
            assess_ntp((), max_root_distance_ms=policy.max_root_distance_ms), ClockReading.of(clock)
        )
    if redis_url is not None:
        _probe_redis(guard, clock, redis_url, namespace)
    return guard.verdict(ClockReading.of(clock))


def _query_with_progress(
    servers: tuple[NtpServer, ...],
    *,
    samples: int,
    clock: Clock,
    timeout_s: float,
    sample_interval_s: float,
) -> tuple[ServerReport, ...]:
    """Query every server concurrently, saying on stderr what is awaited and each server as it ends."""
    worst_s = samples * timeout_s + (samples - 1) * sample_interval_s
    click.echo(
        f"querying {_count(len(servers), 'NTP server', 'NTP servers')}, "
        f"{_count(samples, 'sample', 'samples')} each "
        f"(at most {worst_s:.1f} s if a server stays silent)...",
        err=True,
    )
    started = time.monotonic()
    reports: dict[int, ServerReport] = {}
    with ThreadPoolExecutor(max_workers=min(len(servers), 16)) as pool:
        futures = {
            pool.submit(
                query_server,
                server,
                samples=samples,
                clock=clock,
                timeout_s=timeout_s,
                sample_interval_s=sample_interval_s,
            ): i
            for i, server in enumerate(servers)
        }
        for future in as_completed(futures):
            report = future.result()
            reports[futures[future]] = report
            click.echo(
                f"  {report.server}: {len(report.samples)} of {samples} replied "
                f"({time.monotonic() - started:.1f} s)",
                err=True,
            )
    return tuple(reports[i] for i in range(len(servers)))


MAX_TIMEOUT_S = 60.0
"""Longest ``--timeout``: an NTP reply later than a minute tells nothing about the clock."""
MAX_SAMPLE_INTERVAL_S = 3600.0
"""Longest ``--sample-interval``: an hour (a socket or a sleep refused ``inf`` and ``1e10`` with a
traceback)."""


def _usage(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _probe_redis(guard: ClockGuard, clock: Clock, url: str, namespace: str) -> None:
    """Probe the store's clock with the store's own ``TIME`` (the one the agent's clock guard reads).

    On a Redis Cluster that is the master holding ``namespace``'s members
    hash, as in the agent. Any URL form: a Sentinel URL reaches the master.
    """
    # Imported only when asked: a plain NTP check must not need a Redis client.
    from quorum_cron.errors import QuorumCronError
    from quorum_cron.store.connect import store_failure
    from quorum_cron.store.options import StoreOptions, open_store

    shown = redact_url(url) or ""
    try:
        store = open_store(url, StoreOptions(namespace), socket_timeout=2.0, socket_connect_timeout=2.0)
        try:
            probe = probe_store_time(clock, store.time_ms)
        finally:
            store.close()
    except (QuorumCronError, OSError, ValueError) as exc:
        # The store's line names its address and asks the agent "changed under a running
        # agent?"; this line names the store already, and no agent runs here.
        why = store_failure(exc)
        click.echo(f"store TIME ({shown}): failed: {why}")
        guard.observe_store_unreachable(f"{shown}: {why}", ClockReading.of(clock))
        return
    click.echo(f"store TIME ({shown}): {probe.evidence()}, bound {probe.bound_ms:.1f} ms")
    guard.observe_store(probe, ClockReading.of(clock))


@click.command("check-clock")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Cluster config: NTP servers, max skew, NTP-unreachable policy, Redis URL.",
)
@click.option(
    "--server",
    "server_specs",
    multiple=True,
    metavar="HOST[:PORT]",
    help="NTP server to query (repeatable); replaces the config's servers.",
)
@click.option(
    "--samples",
    type=click.IntRange(1, MAX_SAMPLES),
    default=DEFAULT_SAMPLES,
    show_default=True,
    help="Queries per server; the lowest-delay reply is used.",
)
@click.option(
    "--max-skew",
    metavar="DURATION",
    help="Largest tolerated clock error, e.g. 250ms (default: config, else 250ms).",
)
@click.option("--redis", "redis_url", metavar="URL", help="Also compare with the store's clock (Redis TIME).")
@click.option(
    "--timeout",
    "timeout_s",
    type=Seconds(min=0.01, max=MAX_TIMEOUT_S),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds to wait for each NTP reply.",
)
@click.option(
    "--sample-interval",
    "sample_interval_s",
    type=Seconds(min=0, max=MAX_SAMPLE_INTERVAL_S),
    default=DEFAULT_SAMPLE_INTERVAL_S,
    show_default=True,
    help="Seconds between two queries to one server (public servers rate-limit).",
)
@click.pass_context
def check_clock(
    ctx: click.Context,
    config_path: Path | None,
    server_specs: tuple[str, ...],
    samples: int,
    max_skew: str | None,
    redis_url: str | None,
    timeout_s: float,
    sample_interval_s: float,
) -> None:
    """Measure this machine's clock against NTP (and Redis TIME); exit 0 trusted, 1 not, 2 cannot tell.

    Without NTP servers (none in --config, no --server) Redis TIME alone decides, as in the agent.
    """
    policy = TrustPolicy()
    namespace = PROBE_NAMESPACE
    config_servers: tuple[str, ...] = ()
    try:
        if config_path is not None:
            cluster = load_config(config_path).cluster
            config_servers = cluster.ntp_servers
            namespace = cluster.namespace
            policy = TrustPolicy(
                max_skew_ms=cluster.max_skew_ms,
                check_interval_ms=cluster.clock_check_interval_ms,
                ntp_unreachable=UnreachablePolicy(cluster.ntp_unreachable),
            )
            if redis_url is None:
                redis_url = cluster.redis_url
        if max_skew is not None:
            skew_ms = parse_duration(max_skew, what="--max-skew")
            if not 0 < skew_ms <= MAX_SKEW_LIMIT_MS:
                raise ConfigError(
                    f"--max-skew: {max_skew!r} is out of range (expected more than 0 and at most "
                    f"{format_duration(MAX_SKEW_LIMIT_MS)}, as cluster.max_skew, e.g. '250ms')"
                )
            policy = dataclasses.replace(policy, max_skew_ms=skew_ms)
        policy = dataclasses.replace(policy, require_store_check=redis_url is not None)
        servers = tuple(NtpServer.parse(s) for s in (server_specs or config_servers))
    except (ConfigError, ValueError) as exc:
        _usage(str(exc))
    if not servers:
        if redis_url is None:
            _usage(
                "nothing to check against: no NTP servers and no Redis URL "
                "(expected --server HOST[:PORT], --redis URL, or a --config with "
                "cluster.ntp_servers or cluster.redis_url)"
            )
        policy = dataclasses.replace(policy, ntp_unreachable=UnreachablePolicy.STORE_TIME)
    verdict = run_check(
        servers,
        policy,
        samples=samples,
        timeout_s=timeout_s,
        sample_interval_s=sample_interval_s,
        redis_url=redis_url,
        namespace=namespace,
    )
    click.echo(f"verdict: {verdict}")
    ctx.exit(verdict.trust.exit_code)
