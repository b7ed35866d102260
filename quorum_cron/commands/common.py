"""What the agent-side commands share: loading the config, opening the store, times for people."""

from __future__ import annotations

import datetime as dt
import sys
import urllib.parse
from pathlib import Path
from typing import NoReturn

import click

from quorum_cron.agent.setup import open_store
from quorum_cron.config import Config, InvalidConfig, load_config
from quorum_cron.errors import QuorumCronError
from quorum_cron.store.redis import RedisStore, redact_url

__all__ = ["ago", "config_option", "fail", "fmt_ms", "load", "redis_option", "redis_url_problem", "store_for"]

config_option = click.option(
    "--config",
    "config_path",
    required=True,
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


def store_for(config: Config, redis_url: str | None) -> tuple[RedisStore, str]:
    """The store and its printable (password-free) URL."""
    url = redis_url or config.cluster.redis_url
    if not url:
        fail(f"{config.source}: no Redis URL: set cluster.redis_url or pass --redis URL")
    problem = redis_url_problem(url)
    if problem is not None:
        fail(problem)
    try:
        return open_store(url, config.cluster), redact_url(url)
    except QuorumCronError as exc:
        fail(str(exc))


def redis_url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable Redis URL (one line, password-free), or None.

    redis-py accepts more than it should: ``redis://:pw@/0`` connects to
    localhost, ``redis://host/notadb`` to database 0. Both are refused here.
    The userinfo is taken up to the last ``@`` (a password may hold ``/``).
    """
    shown = redact_url(url)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("redis", "rediss", "unix"):
        return f"Redis URL {shown!r}: expected redis://, rediss:// or unix://"
    rest = rest[rest.rfind("@") + 1 :]
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    hostport, path = rest[:cut], rest[cut:]
    query = path.partition("?")[2].partition("#")[0]
    path = path.partition("?")[0].partition("#")[0]
    for pair in filter(None, query.split("&")):
        key, _, value = pair.partition("=")
        if key == "db" and not value.isdigit():
            return f"Redis URL {shown!r}: database {value!r} is not a number (expected ?db=0)"
    if scheme == "unix":
        return None if path else f"Redis URL {shown!r} has no socket path (expected unix:///run/redis.sock)"
    host, port = hostport, ""
    if hostport.startswith("["):
        host, _, port = hostport[1:].partition("]")
        port = port.removeprefix(":")
    elif ":" in hostport:
        host, _, port = hostport.rpartition(":")
    if not host:
        return f"Redis URL {shown!r} has no host (expected e.g. redis://redis.internal:6379/0)"
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        return f"Redis URL {shown!r}: port {port!r} is not a port number (expected 1-65535)"
    db = path.strip("/")
    if db and not db.isdigit():
        return f"Redis URL {shown!r}: database {db!r} is not a number (expected e.g. /0)"
    try:
        parsed_host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        parsed_host = ""
    if parsed_host.lower() != host.lower():
        # The client reads the userinfo only up to the first / ? #: it would connect elsewhere.
        return (
            f"Redis URL {shown!r}: the user or password holds '/', '?', '#' or '@' "
            f"(expected them percent-encoded: %2F %3F %23 %40)"
        )
    return None


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
