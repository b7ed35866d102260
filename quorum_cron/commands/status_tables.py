"""``status``'s terminal tables (live nodes; jobs with their next fire and last outcome), and
the pause cell its plain rows share: apart from :mod:`.status` so each stays under 500 lines."""

from __future__ import annotations

from rich.table import Table

from quorum_cron.commands.common import ago, fmt_ms
from quorum_cron.commands.members import role
from quorum_cron.commands.output import reason_with_cause, utc_label, zoned_label
from quorum_cron.config.settings import JobSpec
from quorum_cron.core import model
from quorum_cron.printable import cell
from quorum_cron.store.base import JobControl, LedgerEntry, Member, SlotState

__all__ = ["NODE_COLUMNS", "jobs_table", "members_table", "since"]

_STATE_STYLE = {
    SlotState.SUCCEEDED: "green",
    SlotState.FAILED: "red",
    SlotState.LOST: "red",
    SlotState.MISSED: "yellow",
    SlotState.SKIPPED: "yellow",
}


NODE_COLUMNS = (
    "node",
    "role",
    "epoch",
    "host",
    "incarnation",
    "last heartbeat",
    "clock",
    "offset ms",
    "voting",
)
"""The live-nodes table's columns, in the plain rows and the terminal table alike."""


def since(control: JobControl) -> str:
    """`` since 2026-12-07 19:43:09.054Z``: when the pause began, as the PAUSED line below says it;
    why is that line only (a reason of up to 500 characters does not fit a cell)."""
    return f" since {fmt_ms(control.at_ms)}" if control.at_ms > 0 else ""


def members_table(members: list[Member], stored: model.Membership | None, now: int) -> Table:
    table = Table(title="nodes (live)", title_justify="left")
    for col in NODE_COLUMNS:
        table.add_column(col, overflow="fold")
    if not members:
        table.add_row("[red]none alive[/]", "", "", "", "", "", "", "", "")
    for m in members:
        clock = m.info.get("clock", "?")
        clock_cell = (
            f"[green]{clock}[/]"
            if clock == "trusted"
            else f"[red]{cell(clock, 40)}[/]: {cell(m.info.get('clock_reason', ''))}"
        )
        node_role = role(m.node, stored)
        table.add_row(
            cell(m.node, 100),
            f"[red]{node_role}[/]" if node_role == "REFUSED" else node_role,
            str(m.epoch) if m.epoch else "-",
            cell(m.info.get("host", ""), 100),
            cell(m.incarnation[:8]),
            ago(m.seen_ms, now),
            clock_cell,
            cell(m.info.get("clock_offset_ms", ""), 20),
            cell(m.info.get("voting", ""), 20),
        )
    return table


def jobs_table(
    jobs: list[JobSpec], last: dict[str, LedgerEntry | None], controls: dict[str, JobControl], now: int
) -> Table:
    table = Table(title="jobs", title_justify="left")
    for col in (
        "job",
        "schedule",
        "control",
        "next fire (job zone / UTC)",
        "last slot (UTC)",
        "outcome",
        "executor",
        "token",
        "reason",
    ):
        table.add_column(col, overflow="fold")
    for spec in jobs:
        name = spec.name
        next_ms = spec.schedule.next_after(now)
        entry = last.get(name)
        expr, tz = spec.schedule_expr, spec.timezone
        control = controls[name]
        control_cell = (
            f"[yellow]paused[/] by {cell(control.by, 100)}{since(control)}" if control.paused else "active"
        )
        nxt = f"{zoned_label(next_ms, tz)}\n{utc_label(next_ms)} ({ago(next_ms, now)})"
        if entry is None:
            table.add_row(name, f"{expr} ({tz})", control_cell, nxt, "-", "-", "", "", "")
            continue
        style = _STATE_STYLE.get(entry.state, "")
        table.add_row(
            name,
            f"{expr} ({tz})",
            control_cell,
            nxt,
            fmt_ms(entry.fire_ms),
            f"[{style}]{entry.state}[/]" if style else str(entry.state),
            cell(entry.executor or "-", 100),
            str(entry.token or "-"),
            cell(reason_with_cause(entry)),
        )
    return table
