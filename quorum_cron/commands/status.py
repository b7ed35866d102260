"""``quorum-cron status``: is the cluster able to run its jobs right now, and did it?

Reads only: the membership record the store enforces (epoch, members,
quorum, a joint configuration in progress, live nodes it refuses — never
the config's quorum), the live nodes (with their last heartbeat, epoch and
clock trust — a node that does not trust its clock says why, with the
measured offset), quorum health against the record, and per job the next
fire time (from this config's schedule), whether it is paused (by whom,
when, why) and the last ledger entry. Next fire times are shown in the
job's own zone and in UTC, each labelled. ``--format`` (see
:mod:`.output`): a table at a terminal, plain rows that keep every value
whole when piped, or one JSON document (types in docs/cli-output.md).

Config drift: each live node heartbeats the spec hash of every job it runs;
a job whose hash differs from this config's is the spec mismatch the agents
alert about (their votes on that job do not add up with the others'), shown
here as ``drift``. A job no one definition of which a quorum of the voting
members runs can never be decided (``no_quorum``: a job added to one node's
config only), whether this config defines it or only a voter's published job
table names it. Exit status 0 when the cluster can run slots: a quorum of
members alive and voting, and this config agrees with the store's record;
1 when not, or when the store cannot be read (usable as a monitoring check).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import click
from rich.console import Console

from quorum_cron.agent.membership import MembershipFacts, membership_facts
from quorum_cron.commands.common import (
    ago,
    config_option,
    fail,
    load,
    redis_option,
    store_failure,
    store_for,
)
from quorum_cron.commands.control import describe_control
from quorum_cron.commands.members import describe_facts, role
from quorum_cron.commands.output import (
    format_option,
    reason_with_cause,
    resolve_format,
    rows,
    utc_label,
    zoned_label,
)
from quorum_cron.commands.status_tables import NODE_COLUMNS, jobs_table, members_table, since
from quorum_cron.config.membership import (
    DOWN_SHOWN,
    SHORT_SHOWN,
    down_members,
    judged_jobs,
    not_in_config_text,
    short_jobs,
    spec_hashes,
)
from quorum_cron.config.settings import JobSpec
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.printable import cell, first_of, printable
from quorum_cron.store.base import JobControl, LedgerEntry, Member
from quorum_cron.store.ports import with_job_tables
from quorum_cron.store.server import credentials_hint

__all__ = ["status"]


@click.command("status")
@config_option
@redis_option
@format_option("One JSON document instead of tables.")
def status(config_path: Path, redis_url: str | None, output_format: str | None, as_json: bool) -> None:
    """Members, clock trust, quorum health, config drift; each job's next fire, pause state, last outcome.

    Exit status 0 when the cluster can run slots, 1 when it cannot (or the store cannot be read).
    """
    fmt = resolve_format(output_format, as_json)
    config = load(config_path)
    store, shown = store_for(config, redis_url)
    cluster = config.cluster
    jobs = list(config.jobs)
    try:
        now = store.time_ms()
        members = with_job_tables(store, store.members())
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
        fail(f"cannot read the store at {shown}: {store_failure(exc)}{credentials_hint(str(exc))}")
    finally:
        store.close()
    facts = membership_facts(stored, members, cluster, config.source)
    snap = _Snapshot(
        cluster.namespace, shown, now, facts, members, jobs, last, controls, unreadable, config.source
    )
    code = 0 if snap.can_run else 1
    if fmt == "json":
        click.echo(json.dumps(snap.doc(), indent=2))
    elif fmt == "plain":
        for line in snap.plain():
            click.echo(line)
    else:
        snap.print_tables(Console())
    sys.exit(code)


def spec_drift(members: list[Member], jobs: list[JobSpec]) -> dict[str, list[str]]:
    """Per live node, the jobs whose heartbeated spec hash differs from this config's (sorted)."""
    mine = {spec.name: spec.spec_hash for spec in jobs}
    out: dict[str, list[str]] = {}
    for m in members:
        theirs = spec_hashes(m)
        differs = sorted(name for name, digest in theirs.items() if name in mine and mine[name] != digest)
        if differs:
            out[m.node] = differs
    return out


@dataclass(frozen=True)
class _Snapshot:
    """What one read of the store says, rendered as tables, plain rows or JSON (one fact, three faces)."""

    namespace: str
    shown: str
    now: int
    facts: MembershipFacts
    members: list[Member]
    jobs: list[JobSpec]
    last: dict[str, LedgerEntry | None]
    controls: dict[str, JobControl]
    unreadable: dict[str, str]
    source: str | None = None
    """The config file (hints name it; ``--config FILE`` without it)."""

    @cached_property  # (problems() and doc() both read it, and short; a snapshot does not change)
    def voters(self) -> list[Member]:
        """Live members (not refused) that say they vote: the ones that can make a quorum now."""
        return [
            m
            for m in self.members
            if m.info.get("voting") == "yes" and role(m.node, self.facts.stored) != "REFUSED"
        ]

    @property
    def voting(self) -> int:
        return len(self.voters)

    @cached_property
    def short(self) -> dict[str, list[str]]:
        """:func:`short_jobs`, once a quorum votes (before, every job is short: said once above)."""
        quorum = self.facts.health.quorum
        if self.voting < quorum:
            return {}
        record = self.facts.stored.record if self.facts.stored is not None else None
        return short_jobs(self.voters, [spec.name for spec in self.jobs] + self.elsewhere, record, quorum)

    @cached_property
    def elsewhere(self) -> list[str]:
        """Jobs some live voter runs that this config does not define (sorted): judged too, or
        a job one node alone was given looks healthy from the other nodes' config."""
        return judged_jobs(self.voters, (spec.name for spec in self.jobs))[len(self.jobs) :]

    @cached_property
    def down(self) -> list[str]:
        """Members of the store's record (while joint, of both configurations) with no live heartbeat."""
        stored = self.facts.stored
        return down_members(stored.record, self.members) if stored is not None else []

    def health_text(self) -> str:
        """``2 of 3 alive, need 2 (down: n2)``: who is missing, not only how many."""
        down = f" (down: {first_of(self.down, DOWN_SHOWN)})" if self.down else ""
        return f"{self.facts.health}{down}"

    @property
    def drift(self) -> dict[str, list[str]]:
        return spec_drift(self.members, self.jobs)

    @property
    def can_run(self) -> bool:
        health = self.facts.health
        return health.ok and self.voting >= health.quorum and self.facts.disagreement is None

    def problems(self) -> list[str]:
        """Why slots cannot run, or what an operator must look at; one line each."""
        health = self.facts.health
        out: list[str] = []
        if not health.ok:
            out.append(f"QUORUM LOST: {self.health_text()}: no slot can run")
        elif self.voting < health.quorum:
            out.append(f"QUORUM NOT VOTING: {self.voting} voting, need {health.quorum}: no slot can run")
        if self.facts.disagreement is not None:
            out.append(f"CONFIG DISAGREES with the store's membership: {self.facts.disagreement}")
        for node, names in self.drift.items():
            out.append(
                f"DRIFT: {node} runs other definitions of {', '.join(names)} than this config "
                "(spec mismatch: its votes on these jobs do not count with the others')"
            )
        foreign = set(self.elsewhere)
        ours = [name for name in self.short if name not in foreign]
        theirs = [not_in_config_text(name, self.short[name]) for name in self.short if name in foreign]
        for names in (ours, theirs):
            if names:
                out.append(
                    f"NO QUORUM FOR {first_of(names, SHORT_SHOWN)}: no one definition of "
                    f"{'it' if len(names) == 1 else 'each'} is run by a quorum of the {self.voting} "
                    "voting members: each slot ends missed"
                )
        return out

    def fact_lines(self) -> list[str]:
        """:func:`describe_facts` without its CONFIG DISAGREES line: :meth:`problems` says it
        (first, and in the JSON's ``problems``); ``members show`` keeps it, having no such list."""
        return describe_facts(replace(self.facts, disagreement=None), self.members, self.source)

    def headline(self) -> str:
        health = self.facts.health
        voting = "" if self.voting >= health.alive else f" ({self.voting} voting)"
        return f"cluster {self.namespace} on {self.shown}: {self.health_text()}{voting}"

    # -- plain rows ----------------------------------------------------------

    def plain(self) -> list[str]:
        lines = [printable(self.headline())]
        lines += [printable(p) for p in self.problems()]
        lines += [printable(line) for line in self.fact_lines()]
        lines += ["", "nodes (live)"]
        header = list(NODE_COLUMNS)
        body = [
            [
                m.node,
                role(m.node, self.facts.stored),
                str(m.epoch) if m.epoch else "-",
                m.info.get("host", ""),
                m.incarnation[:8],
                ago(m.seen_ms, self.now),
                m.info.get("clock", "?")
                + (f": {m.info.get('clock_reason', '')}" if m.info.get("clock", "?") != "trusted" else ""),
                m.info.get("clock_offset_ms", ""),
                m.info.get("voting", ""),
            ]
            for m in self.members
        ]
        lines += rows(header, body) if body else ["none alive"]
        lines += ["", "jobs"]
        header = ["job", "schedule", "zone", "control", "next fire (job zone)", "next fire (UTC)", "in"]
        body = []
        for spec in self.jobs:
            nxt = spec.schedule.next_after(self.now)
            control = self.controls[spec.name]
            body.append(
                [
                    spec.name,
                    spec.schedule_expr,
                    spec.timezone,
                    f"paused by {control.by}{since(control)}" if control.paused else "active",
                    zoned_label(nxt, spec.timezone),
                    utc_label(nxt),
                    ago(nxt, self.now),
                ]
            )
        lines += rows(header, body)
        lines += ["", "last outcomes"]
        header = ["job", "last slot (UTC)", "outcome", "executor", "token", "reason"]
        body = []
        for spec in self.jobs:
            entry = self.last.get(spec.name)
            if entry is None:
                body.append([spec.name, "-", "-", "-", "-", ""])
                continue
            body.append(
                [
                    spec.name,
                    utc_label(entry.fire_ms),
                    str(entry.state),
                    entry.executor or "-",
                    str(entry.token or "-"),
                    reason_with_cause(entry),
                ]
            )
        lines += rows(header, body)
        lines += self._footnotes(plain=True)
        return lines

    def _footnotes(self, *, plain: bool) -> list[str]:
        esc = printable if plain else cell
        out = []
        for name, problem in self.unreadable.items():
            out.append(f"{esc(name)}: store state unreadable: {esc(problem, 300)}")
        for name, control in self.controls.items():
            if control.paused:
                out.append(f"{esc(name)} is PAUSED: {esc(describe_control(control), 0)}")
        return out

    # -- tables ----------------------------------------------------------------

    def print_tables(self, console: Console) -> None:
        style = "green" if self.can_run else "bold red"
        console.print(f"[{style}]{cell(self.headline(), 0)}[/]", soft_wrap=True)
        for problem in self.problems():
            console.print(f"[bold red]{cell(problem, 0)}[/]", soft_wrap=True)
        for line in self.fact_lines():
            bad = "REFUSED" in line or "DISAGREES" in line or "PROGRESS" in line
            console.print(f"[yellow]{cell(line, 0)}[/]" if bad else cell(line, 0), soft_wrap=True)
        console.print(members_table(self.members, self.facts.stored, self.now))
        console.print(jobs_table(self.jobs, self.last, self.controls, self.now))
        for line in self._footnotes(plain=False):
            console.print(f"[yellow]{line}[/]", soft_wrap=True)

    # -- JSON ------------------------------------------------------------------

    def doc(self) -> dict[str, object]:
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

        drift, foreign = self.drift, set(self.elsewhere)
        return {
            "namespace": self.namespace,
            "store_time_ms": self.now,
            "can_run_slots": self.can_run,
            "voting": self.voting,
            "problems": self.problems(),
            **self.facts.doc(),
            "down": self.down,
            "drift": [{"node": node, "jobs": names} for node, names in drift.items()],
            "no_quorum": [
                {"job": job, "run_by": nodes, "in_config": job not in foreign}
                for job, nodes in self.short.items()
            ],
            "members": [
                {
                    "node": m.node,
                    "epoch": m.epoch,
                    "role": role(m.node, self.facts.stored).lower(),
                    "incarnation": m.incarnation,
                    "seen_ms": m.seen_ms,
                    "host": m.info.get("host", ""),
                    "clock": m.info.get("clock", ""),
                    "clock_reason": m.info.get("clock_reason", ""),
                    "clock_offset_ms": m.clock_offset_ms,
                    "voting": m.info.get("voting", ""),
                    "drift": drift.get(m.node, []),
                }
                for m in self.members
            ],
            "jobs": [
                {
                    "job": spec.name,
                    "schedule": spec.schedule_expr,
                    "timezone": spec.timezone,
                    "next_ms": spec.schedule.next_after(self.now),
                    "next_local": zoned_label(spec.schedule.next_after(self.now), spec.timezone),
                    "next_utc": utc_label(spec.schedule.next_after(self.now)),
                    "paused": self.controls[spec.name].paused,
                    "control_by": self.controls[spec.name].by,
                    "control_at_ms": self.controls[spec.name].at_ms,
                    "pause_reason": self.controls[spec.name].reason,
                    "unreadable": self.unreadable.get(spec.name),
                    "last": last_doc(self.last[spec.name]),
                }
                for spec in self.jobs
            ],
        }
