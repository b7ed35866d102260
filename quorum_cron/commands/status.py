"""``quorum-cron status``: is the cluster able to run its jobs right now, and did it?

Reads only: the membership record the store enforces (epoch, members,
quorum, a joint configuration in progress, live nodes it refuses — never
the config's quorum), the live nodes (with their last heartbeat, epoch and
clock trust — a node that does not trust its clock says why, with the
measured offset), quorum health against the record, and per job the next
fire time (from this config's schedule), whether it is paused (by whom,
when, why) and the last ledger entry. ``--json`` prints the same as one
JSON document. Exit status 0 when a quorum of members is alive and this
config agrees with the store's record; 1 when not, or when the store
cannot be read (usable as a monitoring check).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from quorum_cron import model
from quorum_cron.agent.membership import MembershipFacts, membership_facts
from quorum_cron.commands.common import ago, config_option, fail, fmt_ms, load, redis_option, store_for
from quorum_cron.commands.control import describe_control
from quorum_cron.commands.members import describe_facts, role
from quorum_cron.config import JobSpec
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.printable import cell
from quorum_cron.store.base import JobControl, LedgerEntry, Member, SlotState

__all__ = ["status"]

_STATE_STYLE = {
    SlotState.SUCCEEDED: "green",
    SlotState.FAILED: "red",
    SlotState.LOST: "red",
    SlotState.MISSED: "yellow",
    SlotState.SKIPPED: "yellow",
}


@click.command("status")
@config_option
@redis_option
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of tables.")
def status(config_path: Path, redis_url: str | None, as_json: bool) -> None:
    """Members, clock trust, quorum health, and each job's next fire, pause state and last outcome."""
    config = load(config_path)
    store, shown = store_for(config, redis_url)
    cluster = config.cluster
    jobs = list(config.jobs)
    try:
        now = store.time_ms()
        members = store.members()
        stored = store.membership()
        last: dict[str, LedgerEntry | None] = {}
        controls: dict[str, JobControl] = {}
        unreadable: dict[str, str] = {}
        names = [spec.name for spec in jobs]
        try:
            # Pipelined (on a cluster: one pipeline per master), not a round trip per job.
            for name, (_, entries, control) in zip(names, store.ledger_tails(names, 1, {}), strict=True):
                last[name] = entries[0] if entries else None
                controls[name] = control
        except StoreUnavailable:
            raise
        except StoreError:
            # Some job's keys are corrupt (e.g. a wrong type): read job by job, so
            # that job is shown as unreadable and the others still are.
            for name in names:
                try:
                    entries = store.ledger(name, 1)
                    controls[name] = store.control(name)
                except StoreUnavailable:
                    raise
                except StoreError as exc:
                    entries = []
                    controls[name] = JobControl(False, "", 0, "")
                    unreadable[name] = str(exc)
                last[name] = entries[0] if entries else None
    except StoreError as exc:
        fail(f"cannot read the store at {shown}: {exc}")
    finally:
        store.close()
    facts = membership_facts(stored, members, cluster, config.source)
    health = facts.health
    code = 0 if health.ok and facts.disagreement is None else 1
    if as_json:
        click.echo(json.dumps(_doc(cluster.namespace, facts, members, jobs, last, controls, now), indent=2))
        sys.exit(code)
    console = Console()
    style = "green" if health.ok else "bold red"
    voting = sum(1 for m in members if m.info.get("voting") == "yes")
    console.print(
        f"cluster [bold]{cluster.namespace}[/] on {shown}: "
        f"[{style}]{health}[/]"
        + ("" if voting >= health.alive else f" ([yellow]{voting} voting[/])")
        + ("" if health.ok else " — QUORUM LOST: no slot can run")
    )
    for line in describe_facts(facts):
        bad = "REFUSED" in line or "DISAGREES" in line or "PROGRESS" in line
        console.print(f"[yellow]{cell(line, 0)}[/]" if bad else cell(line, 0), soft_wrap=True)
    console.print(_members_table(members, stored, now))
    console.print(_jobs_table(jobs, last, controls, now))
    for name, problem in unreadable.items():
        console.print(f"[red]{name}: store state unreadable[/]: {cell(problem, 300)}", soft_wrap=True)
    for name, control in controls.items():
        if control.paused:
            why = cell(describe_control(control), 0)
            console.print(f"[yellow]{name} is PAUSED[/]: {why}", soft_wrap=True)
    sys.exit(code)


def _members_table(members: list[Member], stored: model.Membership | None, now: int) -> Table:
    table = Table(title="nodes (live)", title_justify="left")
    for col in (
        "node",
        "role",
        "epoch",
        "host",
        "incarnation",
        "last heartbeat",
        "clock",
        "offset ms",
        "voting",
    ):
        table.add_column(col)
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


def _jobs_table(
    jobs: list[JobSpec], last: dict[str, LedgerEntry | None], controls: dict[str, JobControl], now: int
) -> Table:
    table = Table(title="jobs", title_justify="left")
    for col in (
        "job",
        "schedule",
        "control",
        "next fire (UTC)",
        "last slot (UTC)",
        "outcome",
        "executor",
        "token",
        "reason",
    ):
        table.add_column(col)
    for spec in jobs:
        name = spec.name
        next_ms = spec.schedule.next_after(now)
        entry = last.get(name)
        expr, tz = spec.schedule_expr, spec.timezone
        control = controls[name]
        control_cell = f"[yellow]paused[/] by {cell(control.by, 100)}" if control.paused else "active"
        if entry is None:
            table.add_row(
                name,
                f"{expr} ({tz})",
                control_cell,
                f"{fmt_ms(next_ms)} ({ago(next_ms, now)})",
                "-",
                "-",
                "",
                "",
                "",
            )
            continue
        style = _STATE_STYLE.get(entry.state, "")
        table.add_row(
            name,
            f"{expr} ({tz})",
            control_cell,
            f"{fmt_ms(next_ms)} ({ago(next_ms, now)})",
            fmt_ms(entry.fire_ms),
            f"[{style}]{entry.state}[/]" if style else str(entry.state),
            cell(entry.executor or "-", 100),
            str(entry.token or "-"),
            cell(entry.reason),
        )
    return table


def _doc(
    namespace: str,
    facts: MembershipFacts,
    members: list[Member],
    jobs: list[JobSpec],
    last: dict[str, LedgerEntry | None],
    controls: dict[str, JobControl],
    now: int,
) -> dict[str, object]:
    def last_doc(entry: LedgerEntry | None) -> dict[str, object] | None:
        if entry is None:
            return None
        return {
            "slot_ms": entry.fire_ms,
            "state": str(entry.state),
            "reason": entry.reason,
            "executor": entry.executor,
            "token": entry.token,
        }

    return {
        "namespace": namespace,
        "store_time_ms": now,
        **facts.doc(),
        "members": [
            {
                "node": m.node,
                "epoch": m.epoch,
                "role": role(m.node, facts.stored).lower(),
                "incarnation": m.incarnation,
                "seen_ms": m.seen_ms,
                "host": m.info.get("host", ""),
                "clock": m.info.get("clock", ""),
                "clock_reason": m.info.get("clock_reason", ""),
                "clock_offset_ms": m.info.get("clock_offset_ms", ""),
                "voting": m.info.get("voting", ""),
            }
            for m in members
        ],
        "jobs": [
            {
                "job": spec.name,
                "next_ms": spec.schedule.next_after(now),
                "paused": controls[spec.name].paused,
                "control_by": controls[spec.name].by,
                "control_at_ms": controls[spec.name].at_ms,
                "pause_reason": controls[spec.name].reason,
                "last": last_doc(last[spec.name]),
            }
            for spec in jobs
        ],
    }
