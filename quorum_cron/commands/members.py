"""``quorum-cron members``: read and change the membership record the store enforces.

``show`` prints the record (epoch, members, quorum, a change in progress,
who made the last change and why), the live nodes with the epoch they
heartbeat under, the nodes the store refuses, and the last changes.

``add ID...``, ``remove ID...``, ``replace OLD NEW`` and ``set a,b,c`` each
make ONE compare-and-set on the store: from the epoch read to the next, a
*joint* configuration in which a slot commits only with a quorum of the old
set AND a quorum of the new one (``docs/protocol.md``, "Membership and
reconfiguration"). The joint state ends by itself once every member of the
new set has heartbeated under the joint epoch (the heartbeat script makes
that step), or by ``finish`` (refused until then, unless ``--force``).
A change needs ``--reason`` (one line, at most :data:`MAX_REASON`
characters) and is recorded with ``--by`` (default ``$USER@host``) and the
store's time, as pause and trigger are. The command never runs anything
from the store, and a crash (or Ctrl-C) at any point leaves either the old
record or the new one: the store changes it in one atomic step.

``--quorum Q`` sets the new members' quorum (default a majority; required
when the store's quorum is above one, so a change never lowers it unasked).
A change that keeps no current member is refused unless ``--force``: jobs
take a newer record only from a member of theirs (``members_plan.nobody_stays``).

``--json`` prints the record (and for ``show`` the nodes) as one JSON
document. Every refusal is one line on stderr and exit status 1.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from quorum_cron.agent.membership import MembershipFacts, membership_doc, membership_facts
from quorum_cron.commands.common import (
    ago,
    config_option,
    fail,
    fmt_ms,
    load,
    redis_option,
    store_failure,
    store_for,
    unprintable_problem,
    written,
)
from quorum_cron.commands.control import MAX_REASON, _by, by_option
from quorum_cron.commands.members_plan import PlanError, check_words, no_tolerance, nobody_stays, target
from quorum_cron.config.membership import awaited_members, members_hint
from quorum_cron.config.settings import Config
from quorum_cron.core import model
from quorum_cron.core.model import Configuration, MembershipChange
from quorum_cron.errors import StoreError
from quorum_cron.printable import printable
from quorum_cron.store.base import Member
from quorum_cron.store.keys import job_prefix
from quorum_cron.store.redis import RedisStore

__all__ = ["members"]

LOG_LIMIT = 10
"""How many past changes ``show`` prints."""

json_option = click.option("--json", "as_json", is_flag=True, help="One JSON document instead of text.")
quorum_option = click.option(
    "--quorum",
    type=click.IntRange(min=1),
    default=None,
    metavar="Q",
    help="The new members' quorum (a majority of them up to all; default: a majority). "
    "Required when the store's quorum is above a majority.",
)
force_change_option = click.option(
    "--force",
    is_flag=True,
    help="Even when no current member stays (jobs then refuse the new members until each job's "
    "record is cleared: docs/operations.md).",
)
reason_option = click.option(
    "--reason",
    required=True,
    metavar="TEXT",
    help=f"Why (required; one line, at most {MAX_REASON} characters): kept with the change.",
)


def _reason(reason: str) -> str:
    text = reason.strip()
    problem = unprintable_problem("--reason", text, "one line saying why the membership changes")
    if problem is not None:
        fail(problem)
    if not text or len(text) > MAX_REASON or not text.isprintable():
        fail(
            f"--reason is {len(text)} characters: expected one line of 1-{MAX_REASON} printable "
            f"characters saying why the membership changes"
        )
    return text


@click.group("members")
def members() -> None:
    """Show or change the cluster's members (an epoch-numbered record the store enforces on every vote).

    A change (add, remove, replace, set) goes through a joint configuration
    that needs a quorum of the old AND the new members; it ends when every
    new member heartbeats under it, or with `members finish`. See
    docs/operations.md, "Membership".
    """


# --------------------------------------------------------------------------- show


@members.command("show")
@config_option
@redis_option
@json_option
def show(config_path: Path, redis_url: str | None, as_json: bool) -> None:
    """The record the store enforces, the live nodes and their epochs, refused nodes, recent changes.

    Exit status 0; 1 when the store has no record yet (no agent started) or cannot be read.
    """
    config = load(config_path)
    store, shown = store_for(config, redis_url)
    try:
        stored = store.membership()
        live = store.members()
        log = store.membership_log(LOG_LIMIT)
    except StoreError as exc:
        fail(f"cannot read the membership from the store at {shown}: {store_failure(exc)}")
    finally:
        store.close()
    facts = membership_facts(stored, live, config.cluster, config.source)
    if as_json:
        doc = {
            "namespace": config.cluster.namespace,
            **facts.doc(),
            "nodes": [_node_doc(m, stored) for m in live],
            "log": [membership_doc(m) for m in log],
        }
        click.echo(json.dumps(doc, indent=2))
        sys.exit(0 if stored is not None else 1)
    if stored is None:
        fail(
            f"the store at {shown} has no membership record for {config.cluster.namespace!r} yet: "
            f"the first agent to start creates it from its config"
        )
    for line in describe_facts(facts, live, config.source):
        click.echo(line)
    click.echo("nodes (live):")
    if not live:
        click.echo("  none")
    now = max((m.seen_ms for m in live), default=0)
    for m in live:
        click.echo("  " + _node_line(m, stored, now))
    click.echo("changes (newest first):")
    for entry in log:
        click.echo(f"  {fmt_ms(entry.changed_ms)}  {_change_line(entry)}")


def describe_facts(
    facts: MembershipFacts, live: Sequence[Member] | None = None, source: str | None = None
) -> list[str]:
    """The record and what it means, one fact per line (shared with ``status``).

    ``live``: the live nodes, to name the new members a change in progress still waits for;
    ``source``: the config file its hints name (``--config FILE`` without it).
    """
    stored = facts.stored
    if stored is None:
        return ["membership: no record in the store yet (the first agent creates it from its config)"]
    record = stored.record
    lines = [f"membership epoch {record.epoch}: {record.current.describe()}"]
    if record.old is not None:
        lines.append(
            f"  CHANGE IN PROGRESS (joint): a slot needs a quorum of old {record.old.describe()} "
            f"AND of new {record.current.describe()}"
        )
        lines.append(
            "  it ends when every new member heartbeats under epoch "
            f"{record.epoch}, or with {members_hint('finish', source)}"
        )
        absent = awaited_members(record, live or ())
        if live is not None and absent:
            lines.append(
                f"  waiting for {', '.join(absent)}: not running (start them; if one never will, "
                f"{members_hint('finish --force', source)}, then remove it)"
            )
    lines.append(
        f"  last change {fmt_ms(stored.changed_ms)} by {printable(stored.by, 100)}: "
        f"{printable(stored.reason, MAX_REASON)}"
    )
    if facts.refused:
        shown = ", ".join(f"{m.node} (epoch {m.epoch})" for m in facts.refused)
        lines.append(f"  REFUSED (live but not members, their votes do not count): {shown}")
    if facts.behind:
        lines.append(f"  not yet on epoch {record.epoch}: {', '.join(facts.behind)}")
    if facts.disagreement is not None:
        lines.append(f"  CONFIG DISAGREES: {facts.disagreement}")
    return lines


def role(node: str, stored: model.Membership | None) -> str:
    """``member``, ``joining`` / ``leaving`` (while joint), ``REFUSED`` (not in the record), ``-``."""
    if stored is None:
        return "-"
    record = stored.record
    if record.current.has(node) and record.old is not None and not record.old.has(node):
        return "joining"
    if record.current.has(node):
        return "member"
    if record.old is not None and record.old.has(node):
        return "leaving"
    return "REFUSED"


def _node_doc(m: Member, stored: model.Membership | None) -> dict[str, Any]:
    return {
        "node": m.node,
        "epoch": m.epoch,
        "role": role(m.node, stored).lower(),
        "seen_ms": m.seen_ms,
        "host": m.info.get("host", ""),
        "voting": m.info.get("voting", ""),
    }


def _node_line(m: Member, stored: model.Membership | None, now: int) -> str:
    epoch = f"epoch {m.epoch}" if m.epoch else "no epoch (an agent from before membership records)"
    return f"{m.node}  {role(m.node, stored)}  {epoch}  seen {ago(m.seen_ms, now)}"


def _change_line(entry: model.Membership) -> str:
    return f"{entry.record.describe()} — by {printable(entry.by, 100)}: {printable(entry.reason, MAX_REASON)}"


# --------------------------------------------------------------------------- changes


def _change(
    config: Config,
    redis_url: str | None,
    op: str,
    args: tuple[str, ...],
    by: str | None,
    reason: str,
    as_json: bool,
    quorum: int | None = None,
    force: bool = False,
) -> None:
    who = _by(by)
    why = _reason(reason)
    try:
        check_words(op, args)
    except PlanError as exc:
        fail(str(exc))
    store, shown = store_for(config, redis_url)
    try:
        record = _stored(store, shown).record
        if record.old is not None:
            fail(
                f"a change is in progress ({record.describe()}): expected it to end first — it does when "
                f"every new member heartbeats under epoch {record.epoch}, or run "
                f"{members_hint('finish', config.source)}"
            )
        try:
            new = target(record.current, op, args, quorum)
        except (PlanError, ValueError) as exc:
            fail(str(exc))
        stranded = nobody_stays(record.epoch, record.current, new)
        if stranded is not None and not force:
            fail(stranded)
        live = store.members()  # (read first: a change made never reads as failed, common.written)
        result = written(lambda: store.change_membership(record.epoch, new, who, why), _show(config))
    except StoreError as exc:
        fail(f"cannot change the membership through the store at {shown}: {store_failure(exc)}")
    finally:
        store.close()
    after = _accepted(result, "change the membership")
    _report(after, as_json)
    if (fragile := no_tolerance(after.record.current)) is not None:
        click.echo(fragile, err=True)
    if stranded is not None:
        _clear_records_note(config, record.current)
    if record.current.open_seats:
        click.echo(
            f"note: the {record.current.open_seats} open seat(s) of size mode are closed: the new members "
            f"are exactly {', '.join(after.record.current.members)}",
            err=True,
        )
    if after.record.old is not None:
        _warn_quorum(after.record.current, live, "new")
        joining = [n for n in after.record.current.members if not after.record.old.has(n)]
        running = {m.node for m in live}
        down = [n for n in joining if n not in running]
        if down:
            click.echo(
                f"next: start {', '.join(down)} (their config lists the new members); the change ends "
                f"when every new member heartbeats under epoch {after.record.epoch}",
                err=True,
            )
        elif joining:
            click.echo(
                f"next: {', '.join(joining)} {'is' if len(joining) == 1 else 'are'} already running (refused "
                f"until now); the change ends when every "
                f"new member heartbeats under epoch {after.record.epoch}, within a heartbeat or two",
                err=True,
            )
        leaving = [n for n in after.record.old.members if not after.record.current.has(n) and n in running]
        if leaving:
            click.echo(
                f"next: stop {', '.join(leaving)} (SIGTERM) once `members show` shows no change in progress: "
                + (
                    "it runs, and until it stops it heartbeats"
                    if len(leaving) == 1
                    else "they run, and until they stop they heartbeat"
                )
                + ' as REFUSED (docs/operations.md, "Scale down")',
                err=True,
            )


def _clear_records_note(config: Config, old: Configuration) -> None:
    """After a forced change that keeps no member: how to let each job take the new record."""
    names = [j.name for j in config.jobs]
    keys = " ".join(shlex.quote(job_prefix(config.cluster.namespace, n) + "meta") for n in names[:3])
    more = f" (and the same for the other {len(names) - 3} jobs)" if len(names) > 3 else ""
    pattern = shlex.quote(job_prefix(config.cluster.namespace, "JOB") + "meta") + " for each job"
    click.echo(
        f"note: forced with no member of {', '.join(old.members)} staying: once the change has ended, a job "
        f'whose slots end missed ("refused by membership") takes the new record from its next vote after '
        f"its old one is cleared: for each KEY, redis-cli HDEL KEY mr — {keys or pattern}{more}",
        err=True,
    )


def _show(config: Config) -> str:
    return f"`quorum-cron members show --config {shlex.quote(config.source)}` shows the record it holds"


def _stored(store: RedisStore, shown: str) -> model.Membership:
    stored = store.membership()
    if stored is None:
        fail(
            f"the store at {shown} has no membership record yet: expected one created by the first agent "
            f"(start an agent with this config, then change the members)"
        )
    return stored


def _accepted(result: MembershipChange, what: str, hint: str = "") -> model.Membership:
    if not result.ok or result.membership is None:
        fail(f"cannot {what}: {printable(result.reason, 500) or 'refused by the store'}{hint}")
    return result.membership


def _report(after: model.Membership, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(membership_doc(after), indent=2))
        return
    click.echo(f"membership {after.record.describe()}")
    click.echo(f"  by {printable(after.by, 100)}: {printable(after.reason, MAX_REASON)}")


def _warn_quorum(conf: Configuration, live: list[Member], which: str) -> None:
    alive = {m.node for m in live}
    up = sum(1 for n in conf.members if n in alive)
    if up < conf.quorum:
        whose = f"the {which} members" if which else "the members"
        click.echo(
            f"warning: {up} of {whose} are alive, need {conf.quorum}: "
            f"no slot commits until enough of {', '.join(conf.members)} run",
            err=True,
        )


def change_options(func: Callable[..., None]) -> Callable[..., None]:
    """The options every change takes: --config, --redis, --reason, --by, --quorum, --force, --json."""
    options = (json_option, force_change_option, quorum_option, by_option, reason_option, redis_option)
    for option in (*options, config_option):
        func = option(func)
    return func


@members.command("add")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@change_options
def add(
    ids: tuple[str, ...],
    config_path: Path,
    redis_url: str | None,
    reason: str,
    by: str | None,
    quorum: int | None,
    force: bool,
    as_json: bool,
) -> None:
    """Add node ID(s): a joint configuration (old AND new quorum) until every new member heartbeats."""
    _change(load(config_path), redis_url, "add", ids, by, reason, as_json, quorum, force)


@members.command("remove")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@change_options
def remove(
    ids: tuple[str, ...],
    config_path: Path,
    redis_url: str | None,
    reason: str,
    by: str | None,
    quorum: int | None,
    force: bool,
    as_json: bool,
) -> None:
    """Remove node ID(s): a joint configuration (old AND new quorum) until every new member heartbeats."""
    _change(load(config_path), redis_url, "remove", ids, by, reason, as_json, quorum, force)


@members.command("replace")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@change_options
def replace(
    old: str,
    new: str,
    config_path: Path,
    redis_url: str | None,
    reason: str,
    by: str | None,
    quorum: int | None,
    force: bool,
    as_json: bool,
) -> None:
    """Replace member OLD by a new id NEW (a dead host by its successor), through a joint configuration."""
    _change(load(config_path), redis_url, "replace", (old, new), by, reason, as_json, quorum, force)


@members.command("set")
@click.argument("ids", nargs=-1, required=True, metavar="a,b,c")
@change_options
def set_(
    ids: tuple[str, ...],
    config_path: Path,
    redis_url: str | None,
    reason: str,
    by: str | None,
    quorum: int | None,
    force: bool,
    as_json: bool,
) -> None:
    """Make the members exactly a,b,c (comma-separated, or a b c), through a joint configuration."""
    if len(ids) > 1 and any("," in part for part in ids):
        fail(f"{' '.join(ids)!r} mixes commas and spaces: expected the members as one list, 'a,b,c' or a b c")
    _change(load(config_path), redis_url, "set", (",".join(ids),), by, reason, as_json, quorum, force)


@members.command("finish")
@config_option
@redis_option
@reason_option
@by_option
@click.option(
    "--force",
    is_flag=True,
    help="Even if some new member has not heartbeated under the joint epoch (audited; see docs).",
)
@json_option
def finish(
    config_path: Path, redis_url: str | None, reason: str, by: str | None, force: bool, as_json: bool
) -> None:
    """End a change in progress: from the joint configuration to the new members alone.

    Refused until every new member has heartbeated under the joint epoch
    (the heartbeat then ends it by itself), unless --force.
    """
    config = load(config_path)
    who = _by(by)
    why = _reason(reason)
    store, shown = store_for(config, redis_url)
    try:
        record = _stored(store, shown).record
        if record.old is None:
            fail(f"no change is in progress ({record.describe()}): expected a joint configuration to finish")
        live = store.members()  # (read first: a change made never reads as failed, common.written)
        result = written(lambda: store.finish_membership(record.epoch, who, why, force=force), _show(config))
    except StoreError as exc:
        fail(f"cannot finish the membership change through the store at {shown}: {store_failure(exc)}")
    finally:
        store.close()
    # (The store's refusal says "(or force it)"; the command names the flag that does.)
    hint = "" if force else f"; {members_hint('finish --force', config.source)} ends it anyway"
    after = _accepted(result, "finish the change", hint)
    _report(after, as_json)
    _warn_quorum(after.record.current, live, "")
