"""Operator actions: ``quorum-cron trigger JOB``, ``pause JOB``, ``resume JOB``.

Each is one atomic store call, recorded in the job's audit with who (``--by``,
default ``$USER@host``) and when (store time). None of them carries anything
but the job's name and the operator's words: the nodes run their own
definition of the job, so nothing can be injected through Redis.

* ``trigger`` asks the cluster to run the job now: the store picks the slot
  (its own time) and announces it; the nodes vote for it like any other
  slot, so it still needs a quorum and runs at most once.
* ``pause`` / ``resume``: cluster-wide. While paused, every slot of the job
  that comes due ends ``skipped`` with the pause's reason; runs already
  started go on (failed ones are not retried). Resuming a job that is not
  paused changes nothing and is not audited (a store call retried after a
  lost reply must not record a second resume); the command says so, naming
  who resumed it last, as the web face's answer does (``was_paused``).

A job the config does not define is refused (exit status 1) before the
store is touched.
"""

from __future__ import annotations

import getpass
import shlex
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from quorum_cron.agent.membership import membership_facts
from quorum_cron.commands.common import (
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
from quorum_cron.config.settings import Config
from quorum_cron.errors import StoreError
from quorum_cron.printable import printable
from quorum_cron.store.base import MAX_REASON, JobControl, Store

__all__ = ["MAX_REASON", "default_by", "describe_control", "pause", "resume", "trigger"]

# MAX_REASON (the store contract's): a pause reason longer than this is refused (it is shown in every
# skipped slot's ledger entry); commands/members.py and the web face check the same bound.


_T = TypeVar("_T")


def default_by() -> str:
    """``$USER@hostname``: who is acting, when ``--by`` is not given."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


by_option = click.option(
    "--by", metavar="NAME", help="Who is acting, for the audit (default: $USER@hostname)."
)


def _known(config: Config, job: str) -> None:
    names = [s.name for s in config.jobs]
    if job not in names:
        fail(f"unknown job {job!r}: expected one of {', '.join(names) or '(none configured)'}")


MAX_BY = 200
"""Longest ``--by``: it is stored in the audit and shown by ``status`` for every paused job."""


def _by(by: str | None) -> str:
    who = (by if by is not None else default_by()).strip()
    problem = unprintable_problem("--by", who, f"1-{MAX_BY} printable characters on one line")
    if problem is not None:
        fail(problem)
    if not who or len(who) > MAX_BY or not who.isprintable():
        shown = repr(who) if len(who) <= 60 else f"{who[:60]!r}... ({len(who)} characters)"
        fail(f"--by {shown} is not a name: expected 1-{MAX_BY} printable characters on one line")
    return who


@click.command("trigger")
@click.argument("job")
@config_option
@redis_option
@by_option
def trigger(job: str, config_path: Path, redis_url: str | None, by: str | None) -> None:
    """Ask the cluster to run JOB now (a slot voted like any other: it needs a quorum)."""
    config = load(config_path)
    _known(config, job)
    who = _by(by)
    # (Options first, and `--` before a job named like an option: a hint runs as pasted.)
    name = f"-- {shlex.quote(job)}" if job.startswith("-") else shlex.quote(job)
    check = (
        f"`quorum-cron history --config {shlex.quote(config.source)} {name}` shows its slot, triggered, "
        "once the cluster decides it; trigger again only if it does not"
    )
    store, shown = store_for(config, redis_url)
    try:
        # Read first (common.written): a store that failed after the trigger said "cannot trigger" of a
        # trigger made, and a second one ran the job twice. The quorum is the store's record's.
        health = membership_facts(store.membership(), store.members(), config.cluster).health
        control = store.control(job)
        fire_ms = written(lambda: store.trigger(job, who), check)
    except StoreError as exc:
        fail(f"cannot trigger {job!r} through the store at {shown}: {store_failure(exc)}")
    finally:
        store.close()
    click.echo(f"triggered {job}: slot {fire_ms} ({fmt_ms(fire_ms)}) by {who}")
    if control.paused:  # (the store still takes the trigger: the ledger says what became of it)
        resume = f"quorum-cron resume --config {shlex.quote(config.source)} {name}"
        click.echo(
            f"warning: {job} is paused ({describe_control(control)}): the triggered slot will be "
            f"recorded skipped; `{resume}` first to run it",
            err=True,
        )
    if not health.ok:
        click.echo(
            f"warning: only {health.alive} of {health.size} nodes alive, need {health.quorum}: "
            f"the slot will be missed unless enough nodes vote before its deadline",
            err=True,
        )


@click.command("pause")
@click.argument("job")
@config_option
@redis_option
@click.option("--reason", default="", metavar="TEXT", help="Why (shown in status and in each skipped slot).")
@by_option
def pause(job: str, config_path: Path, redis_url: str | None, reason: str, by: str | None) -> None:
    """Pause JOB cluster-wide: its slots end skipped until `resume`."""
    config = load(config_path)
    _known(config, job)
    who = _by(by)
    reason = reason.strip()
    problem = unprintable_problem("--reason", reason, "one line of printable text")
    if problem is not None:
        fail(problem)
    if len(reason) > MAX_REASON:
        fail(f"--reason is {len(reason)} characters: expected at most {MAX_REASON}")
    if not reason:
        # A second pause without a reason would replace the first's who and why with nothing
        # (the store takes the latest pause as the job's): say who paused it instead.
        now = _call(config, redis_url, job, lambda s: s.control(job), "read the pause state of")
        if now.paused:
            click.echo(f"{job} is already paused: {describe_control(now)} (unchanged; --reason to replace)")
            return
    control = _call(config, redis_url, job, lambda s: s.pause(job, who, reason), "pause")
    if not control.changed:  # (the same pause, by the same --by with the same reason, was in place)
        click.echo(f"{job} is already paused: {describe_control(control)} (unchanged)")
        return
    click.echo(f"paused {job}: {describe_control(control)}")


@click.command("resume")
@click.argument("job")
@config_option
@redis_option
@by_option
def resume(job: str, config_path: Path, redis_url: str | None, by: str | None) -> None:
    """Resume a paused JOB cluster-wide: its next slots run again."""
    config = load(config_path)
    _known(config, job)
    who = _by(by)
    after = _call(config, redis_url, job, lambda s: s.resume(job, who), "resume")
    # The store says whether this call ended the pause (JobControl.changed): a job resumed by
    # someone else in between, or by another session as the same --by, is unchanged here.
    if after.changed:
        click.echo(f"resumed {job}: {describe_control(after)}")
    else:
        click.echo(f"{job} is not paused: {describe_control(after)} (unchanged: nothing to resume)")


def _call(config: Config, redis_url: str | None, job: str, op: Callable[[Store], _T], what: str) -> _T:
    store, shown = store_for(config, redis_url)
    try:
        return op(store)
    except StoreError as exc:
        fail(f"cannot {what} {job!r} through the store at {shown}: {store_failure(exc)}")
    finally:
        store.close()


def describe_control(control: JobControl) -> str:
    """``paused by alice@h at 2024-... : reason`` / ``active (resumed by ... at ...)`` / ``active``."""
    by, reason = printable(control.by, 100), printable(control.reason, 500)
    if control.paused:
        text = f"paused by {by} at {fmt_ms(control.at_ms)}"
        return f"{text}: {reason}" if reason else text
    if control.by:
        return f"active (resumed by {by} at {fmt_ms(control.at_ms)})"
    return "active"
