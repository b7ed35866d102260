"""Which Redis-compatible server a URL reaches, and whether quorum-cron supports it.

Owns the support matrix in code: the minimum server versions
(:data:`MIN_REDIS`, :data:`MIN_VALKEY`) and the one-line refusal of a server
below them. Read once at connection time from ``INFO server``
(:func:`server_problem`: the ``agent`` preflight and every CLI command that
opens the store; ``check-store`` reports it among its checks), so a server
difference is named at start instead of surfacing later as an opaque script
error.

Why Redis 7.0 is the floor: the scripts and the agent rely on three things
Redis 6.2 lacks. Sharded pub/sub (``SPUBLISH``/``SSUBSCRIBE``) for a
Redis Cluster's notices; ACL rules naming those commands (``ACL SETUSER
... +spublish`` is refused by 6.2, so the documented user cannot be
created); and Redis 7's Lua error objects, which the scripts' error
handling was written against (6.2's error handler cannot raise a table).
Valkey forked from Redis 7.2.4, so every Valkey release (7.2 and later)
has all three. Nothing read here is trusted beyond choosing a message: a
server that lies about its version is refused or allowed on its word, and
its replies are still checked where they are parsed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import redis
from redis.cluster import RedisCluster

__all__ = [
    "MIN_REDIS",
    "MIN_VALKEY",
    "NEEDS",
    "ServerInfo",
    "parse_server_info",
    "server_problem",
    "unsupported",
]

MIN_REDIS: Final = (7, 0, 0)
"""The oldest Redis quorum-cron runs on (tested: Debian's 7.0.15)."""

MIN_VALKEY: Final = (7, 2, 0)
"""The oldest Valkey (its first release, forked from Redis 7.2.4; tested: 8.1.8, the embedded default)."""

NEEDS: Final = (
    "sharded pub/sub (SPUBLISH) for a Redis Cluster's notices, ACL rules naming it, "
    "and Redis 7's Lua error replies"
)
"""What a server below the minimum lacks, as the refusal names it."""

_VERSION = re.compile(r"^(\d{1,4})\.(\d{1,4})(?:\.(\d{1,6}))?")


@dataclass(frozen=True)
class ServerInfo:
    """What ``INFO server`` says: product, version, mode (``standalone``, ``cluster``, ``sentinel``)."""

    product: str
    version: tuple[int, int, int] | None
    version_text: str
    mode: str

    def __str__(self) -> str:
        return f"{self.product} {self.version_text} ({self.mode})"


def _version(text: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(text)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _printable(value: object, limit: int = 40) -> str:
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[:limit] + "..."


def parse_server_info(info: Mapping[str, object]) -> ServerInfo:
    """A :class:`ServerInfo` from redis-py's ``INFO server`` dict.

    A cluster client answers per node (a dict of dicts): the oldest node
    decides, since every node runs the scripts. Valkey reports
    ``server_name:valkey`` and ``valkey_version`` (its ``redis_version`` is
    the Redis API level it matches, 7.2.4).
    """
    if info and all(isinstance(v, Mapping) for v in info.values()):
        nodes = [parse_server_info(v) for v in info.values() if isinstance(v, Mapping)]
        known = [n for n in nodes if n.version is not None]
        if not known:
            return nodes[0]
        return min(known, key=lambda n: (n.product, n.version or (0, 0, 0)))
    name = _printable(info.get("server_name", "")).lower()
    if "valkey_version" in info or name == "valkey":
        product, text = "Valkey", _printable(info.get("valkey_version", info.get("redis_version", "?")))
    else:
        product, text = "Redis", _printable(info.get("redis_version", "?"))
    mode = _printable(info.get("redis_mode", info.get("server_mode", "standalone")))
    return ServerInfo(product=product, version=_version(text), version_text=text, mode=mode or "standalone")


def unsupported(server: ServerInfo, shown_url: str) -> str | None:
    """One line when ``server`` is outside the support matrix, else None.

    An unreadable version (a proxy that hides it) is allowed: the scripts'
    own replies are still checked, and refusing would lock out a working
    server on a missing INFO field.
    """
    if server.version is None:
        return None
    floor = MIN_VALKEY if server.product == "Valkey" else MIN_REDIS
    if server.version >= floor:
        return None
    need = ".".join(map(str, floor[:2]))
    return (
        f"redis at {shown_url} is {server}: quorum-cron needs {server.product} >= {need} "
        f"({NEEDS}); see docs/operations.md#supported-servers"
    )


def server_problem(client: redis.Redis | RedisCluster, shown_url: str) -> str | None:
    """The :func:`unsupported` line for the server ``client`` reaches, or None.

    None also when ``INFO server`` cannot be read: a server that is down is
    the caller's to report (the agent waits for it, a command says it cannot
    reach it), and a user whose ACL lacks INFO keeps an unchecked version
    rather than being locked out.
    """
    try:
        info = client.info("server")
    except redis.RedisError:
        return None
    except (AttributeError, TypeError, ValueError):
        return None  # redis-py could not parse the reply as INFO (a non-text reply): nothing to judge
    if not info or not isinstance(info, Mapping):
        return None
    return unsupported(parse_server_info(info), shown_url)
