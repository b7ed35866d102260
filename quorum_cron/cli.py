"""The ``quorum-cron`` command line: the click group ``main`` and the config-side commands.

This module owns the group (``--help``, ``--version``), the commands that
need no store (``validate``, ``next``), and the one place where other
commands are registered (:func:`_register`).  Commands live in their own
modules as plain :class:`click.Command` objects; adding one is one line in
:func:`_register`.

Conventions: results go to stdout; problems go to stderr as one line
``error: ...`` per problem, with exit status 1.  Click's own usage errors
(unknown option, missing argument, a value out of range) take the same
shape: :class:`_Main` turns them into one ``error: ...`` line naming the
command's ``--help``, exit status 1 (click's default was three lines and
exit 2, unlike every other error of the tool).  The CLI may
read the real clock (``next`` defaults ``--after`` to now); the library never
does.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import sys
import time
import zoneinfo
from pathlib import Path
from typing import Any, NoReturn

import click

from quorum_cron.commands.common import config_option, redis_url_problem
from quorum_cron.commands.output import format_option, resolve_format
from quorum_cron.commands.pipes import quiet_on_closed_pipe
from quorum_cron.config.durations import format_duration
from quorum_cron.config.file import load_config
from quorum_cron.config.settings import Config, InvalidConfig, JobSpec, redact_url
from quorum_cron.errors import QuorumCronError
from quorum_cron.printable import printable

__all__ = ["OneLineError", "main"]

_MAX_NEXT = 1000


def _version() -> str:
    try:
        return importlib.metadata.version("quorum-cron")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _fail(*messages: str) -> NoReturn:
    for message in messages:
        click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _load(path: Path | str) -> Config:
    try:
        return load_config(path)
    except InvalidConfig as exc:
        _fail(*exc.errors)
    except QuorumCronError as exc:
        _fail(str(exc))


_MAX_AFTER_MS = int(dt.datetime(9000, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
"""Latest ``--after``: fire times must stay within what datetime represents (year 9999)."""


def _iso(ms: int, tz: dt.tzinfo) -> str:
    when = dt.datetime.fromtimestamp(ms / 1000, tz)
    return when.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class OneLineError(click.ClickException):
    """A click error shown the way every quorum-cron error is: one ``error: ...`` line, exit 1
    (2 under ``sim``, whose ``run`` and ``replay`` exit 1 for a violation the checker found)."""

    exit_code = 1

    def show(self, file: object = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class SimInputError(OneLineError):
    """A bad argument or input file of ``sim``: exit 2, so that a script running the simulator in
    CI tells it from a violation the checker found (exit 1)."""

    exit_code = 2


def _one_line(exc: click.ClickException, command: str | None = None) -> OneLineError:
    message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        message = f"{message} (see '{ctx.command_path} --help')"
    return (
        SimInputError(message)
        if command == "sim" and isinstance(exc, click.UsageError)
        else OneLineError(message)
    )


class _Main(click.Group):
    """The top-level group: every click error below it becomes one ``error: ...`` line with exit 1.

    Why here and not per command: click raises usage errors while parsing,
    before any command code runs; the group is the one place that sees the
    parsing of every subcommand (nested groups included).
    """

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except OneLineError:
            raise
        except click.ClickException as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        quiet_on_closed_pipe()
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except OneLineError:
            raise
        except click.ClickException as exc:
            raise _one_line(exc, ctx.invoked_subcommand) from None


@click.group(
    cls=_Main,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(_version(), "--version", "-V", prog_name="quorum-cron")
def main() -> None:
    """Leaderless distributed cron: N nodes vote on each run in Redis; a run happens when a quorum agrees.

    Start with `quorum-cron validate cluster.toml`, then check a job's next
    fire times with `quorum-cron next JOB --config cluster.toml`.
    """


@main.command()
@click.argument("file", type=click.Path(dir_okay=True, path_type=Path))
def validate(file: Path) -> None:
    """Check a config FILE; print every problem, or a summary of the cluster and its jobs.

    Exit status 0 when the file is valid, 1 when it is not.
    """
    config = _load(file)
    cluster = config.cluster
    if cluster.redis_url and (problem := redis_url_problem(cluster.redis_url)):
        # (A connection option redis-py has not got: the configuration checks URLs without a client.)
        raise OneLineError(f"{config.source}: cluster: field 'redis_url': {problem}")
    now = _now_ms()
    click.echo(f"{config.source}: ok")
    click.echo(
        f"cluster {cluster.namespace}: N={cluster.size} Q={cluster.quorum} "
        f"max_skew={format_duration(cluster.max_skew_ms)} lease={format_duration(cluster.lease_ms)}"
    )
    if cluster.members:
        click.echo(f"members: {', '.join(cluster.members)}")
    else:
        click.echo(f"members: the first {cluster.size} node ids to register (size mode)")
    shown = cluster.redacted_redis_url or "(not set)"
    if override := os.environ.get("QUORUM_CRON_REDIS_URL"):
        # The agent and every store command take it over the file's ("(not set)" alone read as
        # a node that could not start); it is not checked here: validate checks the file.
        shown += f"; the agent here uses QUORUM_CRON_REDIS_URL: {printable(redact_url(override) or '', 200)}"
    click.echo(f"redis: {shown}")
    click.echo(f"jobs: {len(config.jobs)}")
    rows = [_job_row(job, now) for job in config.jobs]
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
    for row in rows:
        click.echo(
            "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    timeout = cluster.start_timeout_ms
    # (One node: no takeover to miss. At most ten lines; a crontab import may hold thousands.)
    short = [job for job in config.jobs if job.starting_deadline_ms <= timeout] if cluster.size != 1 else []
    for job in short[:10]:
        # Valid, and maybe meant; but a takeover comes start_timeout after the commit, past the
        # deadline, so a slot whose executor does not start is missed, never taken over.
        deadline = format_duration(job.starting_deadline_ms)
        click.echo(
            f"warning: job {job.name!r}: starting_deadline {deadline} is not above start_timeout "
            f"{format_duration(timeout)}: a slot whose executor does not start is missed, never "
            f"taken over (set starting_deadline above {format_duration(timeout)}, or start_timeout "
            f"below {deadline})",
            err=True,
        )
    if len(short) > 10:
        click.echo(f"warning: and {len(short) - 10} more jobs like these", err=True)


def _job_row(job: JobSpec, now_ms: int) -> tuple[str, str, str, str]:
    schedule = job.schedule_expr
    if job.schedule.resolved_expr != schedule:
        schedule = f"{schedule} ({job.schedule.resolved_expr})"
    zone = zoneinfo.ZoneInfo(job.timezone)
    nxt = _iso(job.schedule.next_after(now_ms), zone)
    return job.name, schedule, job.timezone, f"next {nxt}"


def _parse_after(text: str, job: JobSpec) -> int:
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(raw)
    except ValueError:
        _fail(
            f"--after {text!r} is not an ISO-8601 time "
            f"(expected e.g. '2026-03-29T01:30:00+01:00', or a time without offset in the job's zone)"
        )
    if when.tzinfo is None:
        # A naive time is read in the job's zone, like the left column of the
        # output; a repeated wall time means its first occurrence (fold=0).
        when = when.replace(tzinfo=zoneinfo.ZoneInfo(job.timezone))
    try:
        ms = int(when.timestamp() * 1000)
    except (OverflowError, ValueError):
        ms = -1
    if not 0 <= ms < _MAX_AFTER_MS:
        _fail(f"--after {text!r} is out of range (expected a time from 1970-01-01 to 9000-01-01 UTC)")
    return ms


@main.command("next")
@click.argument("job_name", metavar="JOB")
@click.option("-n", "count", type=int, default=5, show_default=True, help=f"How many (1-{_MAX_NEXT}).")
@config_option
@click.option(
    "--after",
    metavar="TIME",
    help="ISO-8601 start (exclusive); without an offset it is read in the job's timezone. Default: now.",
)
@format_option("A JSON array of {fire_ms, local, utc, timezone}.")
def next_(
    job_name: str, count: int, config_path: Path, after: str | None, output_format: str | None, as_json: bool
) -> None:
    """Print JOB's next fire times: `<time in the job's zone>  <time in UTC>`, one per line.

    Plain (the default when piped): ISO-8601 times with their offsets. A table (the default at a
    terminal) names the zone of each column; json gives epoch ms as numbers.
    """
    fmt = resolve_format(output_format, as_json)
    if not 1 <= count <= _MAX_NEXT:
        _fail(f"-n {count} is out of range (expected 1 to {_MAX_NEXT})")
    config = _load(config_path)
    try:
        job = config.job(job_name)
    except QuorumCronError as exc:
        _fail(str(exc))
    start = _now_ms() if after is None else _parse_after(after, job)
    zone = zoneinfo.ZoneInfo(job.timezone)
    t = start
    times: list[tuple[int, str, str]] = []
    for _ in range(count):
        try:
            t = job.schedule.next_after(t)
            times.append((t, _iso(t, zone), _iso(t, dt.UTC)))
        except (OverflowError, ValueError):
            if fmt == "plain":
                for _, local, utc in times:
                    click.echo(f"{local}  {utc}")
            _fail(f"{job.name}: no fire time after {_iso(t, dt.UTC)} before year 10000")
    if fmt == "json":
        docs = [
            {"fire_ms": ms, "local": local, "utc": utc, "timezone": job.timezone} for ms, local, utc in times
        ]
        click.echo(json.dumps(docs, indent=2))
    elif fmt == "table":
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{job.name}: next {len(times)} fire times", title_justify="left")
        table.add_column(f"in the job's zone ({job.timezone})", overflow="fold")
        table.add_column("UTC", overflow="fold")
        for _, local, utc in times:
            table.add_row(local, utc)
        Console().print(table)
    else:
        for _, local, utc in times:
            click.echo(f"{local}  {utc}")


def _register() -> None:
    """Add the commands defined elsewhere; each module exports plain click commands."""
    from quorum_cron.clock.check import check_clock
    from quorum_cron.commands import COMMANDS
    from quorum_cron.commands.check_store import check_store
    from quorum_cron.commands.import_crontab import import_crontab
    from quorum_cron.commands.web import web
    from quorum_cron.sim_cli import sim_group

    for command in (*COMMANDS, web, check_clock, check_store, sim_group, import_crontab):
        main.add_command(command)


_register()
