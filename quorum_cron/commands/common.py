"""What the agent-side commands share: loading the config, opening the store, times for people."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import click

from quorum_cron.agent.startup import open_node_store
from quorum_cron.config.file import load_config
from quorum_cron.config.settings import Config, InvalidConfig
from quorum_cron.errors import QuorumCronError, StoreError, StoreOutOfMemory, StoreUnavailable
from quorum_cron.printable import printable
from quorum_cron.store import urls as store_urls
from quorum_cron.store.connect import kind_problem, options_problem, store_failure
from quorum_cron.store.passwords import password_not_required
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.server import server_problem

__all__ = [
    "ago",
    "config_option",
    "fail",
    "fmt_ms",
    "load",
    "redis_option",
    "redis_url_problem",
    "store_failure",
    "store_for",
    "store_url",
    "unprintable_problem",
    "write_failure",
    "written",
]

config_option = click.option(  # (every command's: one metavar, one check, one help line)
    "--config",
    "config_path",
    required=True,
    metavar="FILE",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="QUORUM_CRON_CONFIG",
    help="Cluster config file (TOML). Env: QUORUM_CRON_CONFIG.",
)
redis_option = click.option(
    "--redis",
    "redis_url",
    metavar="URL",
    envvar="QUORUM_CRON_REDIS_URL",
    help="Redis URL, overriding the config's (env QUORUM_CRON_REDIS_URL keeps a password off argv).",
)


def load(config_path: Path) -> Config:
    """The config, or every problem on stderr (``error: ...``, one per line) and exit 1, like ``validate``."""
    try:
        return load_config(config_path)
    except InvalidConfig as exc:
        fail(*exc.errors)
    except QuorumCronError as exc:
        fail(str(exc))


def fail(*messages: str) -> NoReturn:
    for message in messages:
        click.echo(f"error: {message}", err=True)
    sys.exit(1)


def store_url(config: Config, redis_url: str | None) -> str:
    """The Redis URL to use (``--redis`` over the config's), or one line on stderr and exit 1."""
    url = redis_url or config.cluster.redis_url
    if not url:
        fail(
            f"{config.source}: no Redis URL: set cluster.redis_url, pass --redis URL "
            "or set QUORUM_CRON_REDIS_URL"
        )
    problem = redis_url_problem(url)
    if problem is not None:
        # Name where the URL came from: an agent whose file is fine but whose environment holds
        # a stale QUORUM_CRON_REDIS_URL said only "'http://x' has scheme 'http'".
        where = (
            "--redis / QUORUM_CRON_REDIS_URL" if redis_url else f"{config.source}: cluster: field 'redis_url'"
        )
        fail(f"{where}: {problem}")
    return url


def store_for(config: Config, redis_url: str | None) -> tuple[RedisStore, str]:
    """The store and its printable (password-free) URL.

    Opened as the agent opens it (:func:`~quorum_cron.agent.startup.open_node_store`).
    A URL of the wrong kind for its server (:func:`~quorum_cron.store.connect.kind_problem`)
    and a server outside the support matrix are refused here with the agent's
    line (:func:`~quorum_cron.store.server.server_problem`), before a
    command's script could fail on it opaquely. One it cannot reach passes:
    each command reports that its own way (the agent waits for it). A server
    that lets clients in without the password the URL gives is said in one
    ``warning: ...`` line on stderr, as the agent logs it; the command goes on.
    """
    try:
        store, shown = open_node_store(store_url(config, redis_url), config.cluster)
    except QuorumCronError as exc:
        fail(str(exc))
    wrong = kind_problem(store.client)  # a redis:// URL at a cluster node or a Sentinel...: the URL to use
    problem = f"redis at {shown}: {wrong}" if wrong is not None else server_problem(store, shown)
    if problem is not None:
        store.close()
        fail(problem)
    unguarded = password_not_required(store, shown)
    if unguarded is not None:
        click.echo(f"warning: {unguarded}", err=True)
    return store, shown


def write_failure(exc: StoreError, check: str) -> str:
    """Why a command's write failed (:func:`store_failure`), and when its outcome is unknown, how to
    find it out: ``check`` (e.g. "`quorum-cron members show ...` shows the record").

    A write whose reply was lost (the connection closed or timed out after the command went out, a
    ``WAIT`` shortfall, a refusal that may stop a script after a write) may have been made: "cannot
    trigger" alone invited running a trigger again, and the job twice. Out of memory writes nothing.
    The command reads what it needs before its write, so the write is the call that failed.
    """
    said = store_failure(exc)
    if isinstance(exc, StoreUnavailable) and not isinstance(exc, StoreOutOfMemory):
        said += f" (the store may have made it before the reply was lost: {check})"
    return said


_T = TypeVar("_T")


class WriteFailed(StoreError):
    """A command's write failed (:func:`written`): the command's ``except StoreError`` says it,
    with :attr:`~quorum_cron.errors.StoreError.failure` telling whether it may have been made."""


def written(write: Callable[[], _T], check: str) -> _T:
    """``write()``, the command's last store call; its failure re-raised as :class:`WriteFailed`
    whose ``failure`` is :func:`write_failure`'s (the outcome may be unknown: ``check`` says how to
    tell), so the command's one ``cannot ...`` line says it."""
    try:
        return write()
    except StoreError as exc:
        raise WriteFailed(str(exc), write_failure(exc, check)) from exc


def redis_url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable Redis URL (one line, password-free), or None.

    The one parser of every URL form (:mod:`quorum_cron.store.urls`), which
    also refuses what redis-py would misread (``redis://:pw@/0`` going to
    localhost, ``/notadb`` going to database 0, an unencoded ``/`` in a password), then a
    query parameter redis-py has no connection option for
    (:func:`~quorum_cron.store.connect.options_problem`).
    """
    problem = store_urls.redis_url_problem(url)
    if problem is None:
        problem = options_problem(store_urls.parse_redis_url(url))
    return problem


def unprintable_problem(option: str, text: str, what: str) -> str | None:
    """Why ``text`` is not one line of printable text, naming the character (None: it is).

    Said apart from the length check: "--reason is 11 characters" for
    ``$'disk\\nswap'`` named the wrong problem (issue 26).
    """
    bad = next((ch for ch in text if not ch.isprintable()), None)
    if bad is None:
        return None
    names = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}
    kind = names.get(bad, f"the control character {printable(bad)}")
    return f"{option} '{printable(text, 80)}' contains {kind}: expected {what}"


def fmt_ms(ms: int) -> str:
    """Epoch ms as ``2024-05-01 12:00:00.000Z`` (UTC: what every node agrees on)."""
    if ms <= 0:
        return "-"
    try:
        when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, ValueError, OSError):  # a value read from Redis, beyond year 9999
        return f"{ms} ms"
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def ago(ms: int, now_ms: int) -> str:
    """``3.2 s ago`` / ``in 4.0 s`` (seconds below 10 min, else minutes/hours)."""
    delta = (now_ms - ms) / 1000
    word = "ago" if delta >= 0 else "from now"
    s = abs(delta)
    if s < 600:
        text = f"{s:.1f} s"
    elif s < 7200:
        text = f"{s / 60:.0f} min"
    else:
        text = f"{s / 3600:.1f} h"
    return f"in {text}" if delta < 0 else f"{text} {word}"
