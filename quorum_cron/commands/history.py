"""``quorum-cron history [JOB]``: the ledger — what happened to each slot, and why.

Newest first. Without ``JOB``, the ledgers of every configured job are
read in one pipelined call (per master on a cluster) and merged by fire
time. ``--format`` (see :mod:`.output`): a table at a terminal, plain rows
that keep every value whole when piped (the reason last, since it is the
longest), or one JSON object per entry for scripts (types in
docs/cli-output.md).

**Which voters counted.** The ledger lists every node whose vote the slot
stored, and neither it nor the slot record keeps the membership record that
decided the slot: what the store can tell is shown apart from the other
voters (:mod:`quorum_cron.store.voters`, which the dashboard shares).
docs/operations.md, "Reading history after a membership change".

**Which slots an operator triggered.** Neither the slot nor its ledger entry
says so; the job's audit stream does (the ``trigger`` entry names the fire
time): the ``triggered`` column and fields (:mod:`quorum_cron.store.triggered`,
which the dashboard shares).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from quorum_cron.commands.common import (
    config_option,
    fail,
    fmt_ms,
    load,
    redis_option,
    store_failure,
    store_for,
)
from quorum_cron.commands.output import format_option, reason_with_cause, resolve_format, rows, utc_label
from quorum_cron.config.values import _name_problem
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.printable import cell, printable
from quorum_cron.redact import redact_text
from quorum_cron.store.base import LedgerEntry, ObservedStore, SlotState
from quorum_cron.store.ledger_json import ledger_doc
from quorum_cron.store.server import credentials_hint
from quorum_cron.store.triggered import TriggerMark, read_marks
from quorum_cron.store.voters import VoterAccount, read_accounts

__all__ = ["history"]

_STYLE = {
    SlotState.SUCCEEDED: "green",
    SlotState.FAILED: "red",
    SlotState.LOST: "red",
    SlotState.MISSED: "yellow",
    SlotState.SKIPPED: "yellow",
    SlotState.RETRYING: "magenta",
}


@click.command("history")
@click.argument("job", required=False)
@config_option
@redis_option
@click.option(
    "--limit", default=20, show_default=True, type=click.IntRange(1, 10_000), help="Entries to show."
)
@format_option("One JSON object per line instead of a table.")
@click.option("--detail", is_flag=True, help="Show each run's detail (exit status, output tail).")
def history(
    job: str | None,
    config_path: Path,
    redis_url: str | None,
    limit: int,
    output_format: str | None,
    as_json: bool,
    detail: bool,
) -> None:
    """The ledger of JOB (default: every configured job), newest first, with reasons.

    A JOB no longer in the config is shown from the ledger the store keeps.
    """
    fmt = resolve_format(output_format, as_json)
    config = load(config_path)
    names = [s.name for s in config.jobs]
    store, shown = store_for(config, redis_url)
    unreadable: list[str] = []
    try:
        if job is not None and job not in names:
            entries = _removed_job(store, shown, job, names, limit)
        else:
            entries = _read(store, [job] if job else names, limit, unreadable)
        entries.sort(key=lambda e: (e.fire_ms, e.job), reverse=True)
        entries = entries[:limit]
        counts = _accounts(store, entries, config.cluster.max_skew_ms)
        marks = _marks(store, entries)
    except StoreError as exc:
        fail(f"cannot read the store at {shown}: {store_failure(exc)}{credentials_hint(str(exc))}")
    finally:
        store.close()
    # A run's detail is the job's own output: URL passwords it printed are masked when shown, as
    # the dashboard shows them (agents mask it before the ledger has it; an older agent did not).
    entries = [replace(e, detail=redact_text(e.detail)) for e in entries]
    if fmt == "json":
        for e, c, m in zip(entries, counts, marks, strict=True):
            click.echo(json.dumps(_doc(e, c) | m.doc(), sort_keys=True))
    elif fmt == "plain":
        _plain(entries, detail, counts, marks)
    else:
        _table(entries, detail, counts, marks)
    if unreadable:  # (the others shown, each unreadable one named above: not a success)
        sys.exit(1)


def _header(entries: Sequence[LedgerEntry]) -> str:
    count = len(entries)
    return f"history ({count} {'entry' if count == 1 else 'entries'}, newest first)"


def _table(
    entries: list[LedgerEntry],
    detail: bool,
    counts: Sequence[VoterAccount] | None = None,
    marks: Sequence[TriggerMark] | None = None,
) -> None:
    table = Table(title=_header(entries), title_justify="left")
    cols = ["slot (UTC)", "job", "outcome", "triggered", "reason", "executor", "token", "voters"]
    cols += ["delay ms", "ran ms"]
    if detail:
        cols.append("detail")
    for col in cols:
        table.add_column(col, overflow="fold")
    for e, c, m in _told(entries, counts, marks):
        style = _STYLE.get(e.state, "")
        row = [
            fmt_ms(e.fire_ms),
            e.job,
            f"[{style}]{e.state}[/]" if style else str(e.state),
            cell(m.text(), 200),
            cell(reason_with_cause(e)),
            cell(e.executor or "-", 100),
            str(e.token or "-"),
            cell(c.text(e.voters)),
            str(e.started_ms - e.fire_ms) if e.started_ms else "-",
            _ran_ms(e),
        ]
        if detail:
            row.append(cell(e.detail, 4000, newlines=True))
        table.add_row(*row)
    Console().print(table)


def _plain(
    entries: list[LedgerEntry],
    detail: bool,
    counts: Sequence[VoterAccount] | None = None,
    marks: Sequence[TriggerMark] | None = None,
) -> None:
    """Aligned rows, every value whole; with ``--detail`` each run's detail follows its row, indented."""
    click.echo(_header(entries))
    header = ["slot (UTC)", "job", "outcome", "triggered", "executor", "token", "voters"]
    header += ["delay ms", "ran ms", "reason"]
    body = [
        [
            utc_label(e.fire_ms),
            e.job,
            str(e.state),
            m.text(),
            e.executor or "-",
            str(e.token or "-"),
            c.text(e.voters),
            str(e.started_ms - e.fire_ms) if e.started_ms else "-",
            _ran_ms(e),
            reason_with_cause(e),
        ]
        for e, c, m in _told(entries, counts, marks)
    ]
    lines = rows(header, body)
    click.echo(lines[0])
    for e, line in zip(entries, lines[1:], strict=True):
        click.echo(line)
        if detail and e.detail:
            for part in printable(e.detail, 4000, newlines=True).splitlines():
                click.echo(f"    | {part}")


def _told(
    entries: Sequence[LedgerEntry],
    counts: Sequence[VoterAccount] | None,
    marks: Sequence[TriggerMark] | None,
) -> list[tuple[LedgerEntry, VoterAccount, TriggerMark]]:
    """Each entry with its voters' account and its trigger mark (none told when not given)."""
    n = len(entries)
    return list(zip(entries, counts or [VoterAccount()] * n, marks or [TriggerMark()] * n, strict=True))


def _removed_job(
    store: ObservedStore, shown: str, job: str, names: list[str], limit: int
) -> list[LedgerEntry]:
    """The ledger of a job the config does not define: a job removed from it keeps its history.

    A name that is not a job name, or one the store holds no ledger of (a
    typo, most often), is refused as an unknown job; so is any name when the
    store cannot be reached, and the line says the ledger could not be looked
    for. On stderr, a note says where the entries shown come from.
    """
    unknown = f"unknown job {job!r}: expected one of {', '.join(names) or '(none configured)'}"
    if _name_problem(job, "job name"):
        fail(unknown)
    try:
        entries = store.ledger(job, limit)
    except StoreUnavailable as exc:
        fail(f"{unknown} (nor could its ledger be looked for in the store at {shown}: {store_failure(exc)})")
    if not entries:
        fail(f"{unknown} (the store holds no ledger of {job!r} either)")
    click.echo(
        f"note: {job!r} is not in this config (removed, or defined in other nodes' configs only?); "
        "its ledger as the store keeps it",
        err=True,
    )
    return entries


def _read(store: ObservedStore, names: list[str], limit: int, unreadable: list[str]) -> list[LedgerEntry]:
    """Every named job's newest ``limit`` entries: pipelined (per master on a cluster), not per job.

    A corrupt ledger (a key that is not a stream) fails the pipelined read;
    then the jobs are read one by one so that job is named in a warning (and
    in ``unreadable``: the command then exits 1) and the others are still shown.
    """
    try:
        return [e for got in store.ledgers(names, limit) for e in got]
    except StoreUnavailable:
        raise
    except StoreError:
        # (Not a job's key when the server refuses the connection itself: a password, a database
        # it has not got. Then one line says so, not a warning per job over an empty table.)
        store.time_ms()
    entries: list[LedgerEntry] = []
    for name in names:
        try:
            entries.extend(store.ledger(name, limit))
        except StoreUnavailable:
            raise
        except StoreError as exc:  # this job's ledger is corrupt: say so, show the others
            click.echo(f"warning: ledger of {name!r} unreadable: {printable(str(exc), 300)}", err=True)
            unreadable.append(name)
    return entries


def _ran_ms(e: LedgerEntry) -> str:
    """How long the run took, or ``-`` when the ledger cannot say: a ``lost`` slot's end is when
    its lease ran out in the store (the run itself may have ended long before, or not yet)."""
    if not (e.started_ms and e.finished_ms) or e.state == SlotState.LOST:
        return "-"
    return str(e.finished_ms - e.started_ms)


def _doc(e: LedgerEntry, c: VoterAccount) -> dict[str, object]:
    return ledger_doc(e) | {"slot": fmt_ms(e.fire_ms)} | c.doc()


def _accounts(store: ObservedStore, entries: list[LedgerEntry], max_skew_ms: int) -> list[VoterAccount]:
    """:func:`~quorum_cron.store.voters.read_accounts`: a corrupt value there is a warning, not a
    failure: the ledger is still shown, without what it could not tell."""
    try:
        return read_accounts(store, entries, max_skew_ms)
    except StoreUnavailable:
        raise
    except StoreError as exc:
        click.echo(f"warning: cannot tell which voters counted: {printable(str(exc), 300)}", err=True)
        return [VoterAccount() for _ in entries]


def _marks(store: ObservedStore, entries: list[LedgerEntry]) -> list[TriggerMark]:
    """:func:`~quorum_cron.store.triggered.read_marks`: a job whose audit cannot be read (a corrupt
    key) is a warning, its entries shown with ``?`` (``null`` in ``--json``), the others marked."""
    unreadable: dict[str, StoreError] = {}
    marks = read_marks(store, entries, unreadable)
    for name, exc in unreadable.items():
        click.echo(
            f"warning: cannot tell which slots of {name!r} were triggered, its audit is unreadable: "
            f"{printable(str(exc), 300)}",
            err=True,
        )
    return marks
