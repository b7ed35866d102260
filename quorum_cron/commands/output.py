"""How the reading commands (``status``, ``history``, ``next``) print: the ``--format`` choice, rows, zones.

Why a choice: a ``rich`` table fits the terminal by cutting and wrapping
cells (``every…``, ``succe…``), which is right for a person at a terminal
and wrong everywhere else. ``--format plain`` prints aligned rows that keep
every value whole (a line may exceed the terminal; nothing is cut), which is
what a pipe, a log or a mail gets by default; ``--format table`` is the
default at a terminal; ``--format json`` is for programs, with stable types
(numbers are JSON numbers, absent values ``null``; see docs/cli-output.md).

Every value printed here went through :func:`~quorum_cron.printable.printable`
(plain) or :func:`~quorum_cron.printable.cell` (tables) by the caller or by
:func:`rows`: text read from Redis is never printed raw.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import zoneinfo
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import click

from quorum_cron.printable import printable
from quorum_cron.redact import redact_text
from quorum_cron.store.base import LedgerEntry, SlotState

__all__ = [
    "TABLE_MIN_COLUMNS",
    "Format",
    "format_option",
    "reason_with_cause",
    "resolve_format",
    "rows",
    "utc_label",
    "zoned_label",
]

Format = Literal["table", "plain", "json"]

TABLE_MIN_COLUMNS = 100
"""The narrowest terminal the table is the default at (``status`` has nine columns)."""

F = TypeVar("F", bound=Callable[..., Any])


def format_option(json_help: str) -> Callable[[F], F]:
    """``--format table|plain|json`` plus the older ``--json`` (the same as ``--format json``)."""

    def decorate(func: F) -> F:
        func = click.option("--json", "as_json", is_flag=True, help=f"{json_help} Same as --format json.")(
            func
        )
        return click.option(
            "--format",
            "output_format",
            type=click.Choice(["table", "plain", "json"]),
            help="table (default at a terminal), plain (default when piped: aligned rows, none cut) or json.",
        )(func)

    return decorate


def resolve_format(output_format: str | None, as_json: bool) -> Format:
    """The format asked for, else ``table`` when stdout is a terminal at least
    :data:`TABLE_MIN_COLUMNS` wide and ``plain`` when it is not."""
    if as_json:
        if output_format not in (None, "json"):
            click.echo(f"error: --json and --format {output_format} disagree: expected one of them", err=True)
            sys.exit(1)
        return "json"
    if output_format == "table":
        return "table"
    if output_format == "json":
        return "json"
    if output_format == "plain":
        return "plain"
    if not sys.stdout.isatty():
        return "plain"
    # (A narrower terminal squeezed status's nine columns until words split mid-word, a cell over
    # eight lines: every value whole on a row the terminal wraps reads better. --format table
    # still gives the table.)
    return "table" if shutil.get_terminal_size().columns >= TABLE_MIN_COLUMNS else "plain"


def rows(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """Aligned columns, two spaces apart, every value whole (control characters escaped, empty as ``-``)."""
    cells = [list(header)] + [[printable(v) or "-" for v in row] for row in body]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]


def utc_label(ms: int) -> str:
    """``2026-12-03 01:30:00Z``: an instant in UTC, labelled (what every node agrees on)."""
    if ms <= 0:
        return "-"
    try:
        when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, ValueError, OSError):  # a value read from Redis, beyond year 9999
        return f"{ms} ms"
    frac = f".{ms % 1000:03d}" if ms % 1000 else ""
    return when.strftime("%Y-%m-%d %H:%M:%S") + frac + "Z"


def zoned_label(ms: int, zone: str) -> str:
    """``2026-12-03 02:30:00 CET (Europe/Berlin)``: an instant in a job's own zone, labelled."""
    if ms <= 0:
        return "-"
    try:
        when = dt.datetime.fromtimestamp(ms / 1000, tz=zoneinfo.ZoneInfo(zone))
    except (OverflowError, ValueError, OSError, zoneinfo.ZoneInfoNotFoundError):
        return utc_label(ms)
    frac = f".{ms % 1000:03d}" if ms % 1000 else ""
    label = when.strftime("%Y-%m-%d %H:%M:%S") + frac + f" {when.tzname()}"
    return label if zone == "UTC" else f"{label} ({zone})"


def reason_with_cause(e: LedgerEntry) -> str:
    """The ledger's reason, and for a failed run the cause its detail starts with.

    The store ends a failed slot "job failed"; why (``exit 3``, ``timed out after 3000 ms``,
    ``killed by signal SIGKILL``) is the first line of the run's detail, which only
    ``history --detail`` showed: the reason column of a failure said nothing a success's did
    not. ``history`` and ``status`` (its last outcomes) both show it; URL passwords in it are
    masked, as in the detail itself: before the line is cut to 120 characters, since a URL cut
    before its ``@`` is no URL with a password to the masking, which then showed its start.
    """
    if e.state == SlotState.FAILED and e.detail:
        cause = redact_text(e.detail.split("\n", 1)[0].strip())[:120]
        if cause and cause not in e.reason:
            return f"{e.reason}: {cause}"
    return e.reason
