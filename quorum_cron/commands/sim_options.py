"""The ``sim`` commands' options that take a user's values: ``--hours``, ``--start``, ``--config``.

``quorum-cron sim explore`` and ``sim scenario`` share them; each bad value is one line naming
it and what was expected (exit 2, as click's own errors). Kept apart from :mod:`quorum_cron.sim_cli`
(the commands and their output) so that each stays a module of one concern.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from quorum_cron.printable import printable

__all__ = ["hours_option", "load_template", "parse_start", "start_option"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_START_HINT = (
    "an ISO 8601 date or date-time such as 2026-03-29 or 2026-03-29T00:30:00Z; UTC unless it names an offset"
)


def hours_option(ctx: click.Context, param: click.Parameter, hours: float) -> float:
    """``--hours`` as a finite number of hours. Why: ``nan`` and ``inf`` pass a ``FloatRange``
    (nan compares false to its bounds) and failed later with a traceback, or, without
    ``--config``, as if the first explored seed had raised."""
    if not math.isfinite(hours * 3_600_000):
        raise click.BadParameter(
            f"{hours!r} hours is not a time the simulator can run (expected a finite number such as 1 or 0.5)"
        )
    return hours


def parse_start(text: str) -> int:
    """``--start``: the simulated run's first instant, in ms since the epoch (UTC unless the
    text names an offset). Raises ``ValueError`` naming the value and what was expected.

    Why an option: simulated time began at 2023-11-14T22:14Z whatever the config, so a daily
    job needed hours of simulated time before its first slot, and a daylight-saving change
    (the slots a timezone job skips or repeats) could not be simulated at all."""
    from sim.scenario import MAX_START_MS

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a start time (expected {_START_HINT})") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    # Whole ms by integer arithmetic: int(timestamp() * 1000) truncated toward zero (a time in
    # the last ms of 1969 read as 1970's first) and rounded sub-ms digits in float.
    ms = (when - _EPOCH) // timedelta(milliseconds=1)
    if not 0 <= ms < MAX_START_MS:
        raise ValueError(f"{text!r} is outside the simulator's calendar (expected 1970 to 8999)")
    return ms


def start_option(ctx: click.Context, param: click.Parameter, text: str | None) -> int | None:
    """``--start`` as ms since the epoch (None: the simulator's default start)."""
    if text is None:
        return None
    try:
        return parse_start(text)
    except ValueError as exc:
        raise click.BadParameter(printable(str(exc), 300)) from None


def load_template(
    path: Path, hours: float, nodes: int | None, start_ms: int | None = None
) -> tuple[object, tuple[tuple[str, str], ...]]:
    """The template scenario of a config FILE (``--config``), with a ``warning:`` line on stderr for
    each feature the simulator does not model and each job that fires no slot in ``hours``.

    A config that does not load is refused with the loader's own line (exit 2, as any bad input of
    ``sim``); ``quorum-cron validate`` lists every problem."""
    from quorum_cron.commands.sim_config import from_config, quiet_jobs
    from quorum_cron.config.file import load_config
    from quorum_cron.config.settings import InvalidConfig
    from quorum_cron.errors import ConfigError

    try:
        converted = from_config(load_config(path), hours=hours, nodes=nodes, start_ms=start_ms)
    except ConfigError as exc:
        every = f" (every problem: quorum-cron validate {path})" if isinstance(exc, InvalidConfig) else ""
        raise click.BadParameter(f"{exc}{every}", param_hint="--config") from None
    for line in (*converted.warnings, *quiet_jobs(converted.scenario)):
        click.echo(f"warning: {printable(line, 300)}", err=True)
    return converted.scenario, converted.node_names
