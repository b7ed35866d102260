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

Also every other question asked of the server itself (not of the slot
protocol), each answered as plain data so no module outside ``store/``
needs redis-py (issue 25): the agent's preflight (:func:`preflight`:
credentials, protocol, version, members key, eviction policy; the agent
decides what to refuse, :mod:`quorum_cron.agent.preflight`) and the queries
of ``quorum-cron check-store`` (:class:`ServerProbe`: INFO, ACL, replicas;
the command only formats). A memory store has no server: its preflight
reports nothing (no refusal, policy unknown) and it has no probe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, cast

import redis
from redis.cluster import RedisCluster
from redis.exceptions import (
    AuthenticationError,
    InvalidResponse,
    NoPermissionError,
    RedisClusterException,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.redact import redact_text
from quorum_cron.store.base import Store
from quorum_cron.store.connect import not_redis_line, open_client
from quorum_cron.store.passwords import password_not_required
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.urls import RedisTarget

__all__ = [
    "MIN_REDIS",
    "MIN_VALKEY",
    "NEEDS",
    "SAFE_POLICY",
    "RedisClient",
    "ServerCheck",
    "ServerInfo",
    "ServerProbe",
    "credentials_hint",
    "eviction_problem",
    "not_redis_problem",
    "parse_server_info",
    "preflight",
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

RedisClient: TypeAlias = redis.Redis | RedisCluster
"""A redis-py client of any deployment form, as :func:`~quorum_cron.store.connect.open_client` builds it:
the name the checks' callers outside ``store/`` type it with, importing no redis-py."""

SAFE_POLICY: Final = "noeviction"
"""The one ``maxmemory-policy`` an agent runs on. An allowlist, not a denylist of
the evicting ones: ``volatile-*`` evicts keys with a TTL (every slot key has
one), ``allkeys-*`` any key, and a policy a later Redis adds is refused until
someone checks what it evicts."""

_VERSION = re.compile(r"^(\d{1,4})\.(\d{1,4})(?:\.(\d{1,6}))?")


@dataclass(frozen=True)
class ServerInfo:
    """What ``INFO server`` says: product, version, mode (``standalone``, ``cluster``, ``sentinel``)."""

    product: str
    version: tuple[int, int, int] | None
    version_text: str
    mode: str
    api: tuple[int, int, int] | None = None
    """The Redis API level (``redis_version``; Valkey 8 says 7.2.4): it decides what redis-py sends."""

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
    api = _version(_printable(info.get("redis_version", "")))
    return ServerInfo(
        product=product, version=_version(text), version_text=text, mode=mode or "standalone", api=api
    )


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


def _client_of(server: Store | RedisClient) -> RedisClient | None:
    """The redis-py client behind ``server`` (a :class:`RedisStore` or a client); None: no server."""
    if isinstance(server, RedisStore):
        return server.client
    if isinstance(server, redis.Redis | RedisCluster):
        return server
    return None


def server_problem(server: Store | RedisClient, shown_url: str) -> str | None:
    """The :func:`unsupported` line for the server ``server`` reaches, or None.

    ``server``: a :class:`RedisStore` or a redis-py client; any other store
    (the memory model) has no server and gets None. A server that answers
    ``INFO`` in another protocol (an HTTP port) is not Redis: that line, as
    the agent's preflight says it (the commands said "unavailable during
    time: Protocol error ..." as for a server that is down). None when ``INFO
    server`` cannot be read otherwise: a server that is down is the caller's to report
    (the agent waits for it, a command says it cannot reach it), and a user
    whose ACL lacks INFO keeps an unchecked version rather than being
    locked out.
    """
    client = _client_of(server)
    if client is None:
        return None
    try:
        info = client.info("server")
    except InvalidResponse as exc:  # (it answered, but not in Redis's protocol: an HTTP port, say)
        return not_redis_line(shown_url, exc)
    except redis.RedisError:
        return None
    except (AttributeError, TypeError, ValueError):
        return None  # redis-py could not parse the reply as INFO (a non-text reply): nothing to judge
    if not info or not isinstance(info, Mapping):
        return None
    return unsupported(parse_server_info(info), shown_url)


def eviction_problem(policy: str | None, shown_url: str) -> str | None:
    """A one-line explanation when ``policy`` is not ``noeviction``, else None.

    ``None`` or ``""``: the policy could not be read (no ``INFO`` in the
    user's ACL, Redis not up yet): no verdict, the agent starts without it.
    """
    if not policy or policy == SAFE_POLICY:
        return None
    return (
        f"redis at {shown_url} has maxmemory-policy {policy[:100]}, which can evict quorum-cron's keys "
        f"(pause flags, token counters, committed slots) when memory runs out: expected noeviction "
        f"(CONFIG SET maxmemory-policy noeviction; see docs/operations.md)"
    )


@dataclass(frozen=True)
class ServerCheck:
    """What :func:`preflight` found: plain data, the agent decides what to do with it.

    ``refusal``: one line when the server must not be run on (credentials,
    not Redis, TLS set up wrongly, outside the matrix, a members key of
    another type), else None. ``reachable``: False when the server could not
    be reached (not a refusal: nodes may start before Redis). ``policy``:
    its ``maxmemory-policy`` (on a cluster an evicting node's, if any), None
    when unknown.
    """

    refusal: str | None = None
    reachable: bool = True
    policy: str | None = None


def preflight(server: Store | RedisClient, shown_url: str, members_key: str | None = None) -> ServerCheck:
    """Ping, check the version, check the members key type, read ``maxmemory_policy``.

    ``server``: a :class:`RedisStore` (its members key is used when
    ``members_key`` is None) or a redis-py client (then ``members_key`` is
    needed for the key check). Any other store, the memory model, has no
    server: nothing to report (``ServerCheck()``).
    """
    client = _client_of(server)
    if client is None:
        return ServerCheck()
    if members_key is None and isinstance(server, RedisStore):
        members_key = server.members_key
    try:
        client.ping()
    except AuthenticationError as exc:
        return ServerCheck(
            f"redis at {shown_url} refused the credentials ({_first_line(exc)}): "
            f"expected the password (and user) of that server in the URL"
        )
    except (RedisConnectionError, RedisTimeoutError) as exc:
        text = str(exc)
        if shown_url.startswith("rediss://") and ("ssl" in text.lower() or "certificate" in text):
            # TLS set up wrongly is a configuration error, not an outage to wait out.
            return ServerCheck(
                f"TLS with {shown_url} failed ({_first_line(exc)}): expected rediss:// with "
                f"?ssl_ca_certs=<CA file> (and ssl_certfile/ssl_keyfile when the server wants a client "
                f"certificate); see docs/operations.md"
            )
        if "protocol" in text.lower():
            return ServerCheck(not_redis_line(shown_url, exc))
        return ServerCheck(reachable=False)
    except ResponseError as exc:
        if credentials_hint(str(exc)):
            return ServerCheck(
                f"redis at {shown_url} requires a password ({_first_line(exc)}): "
                f"expected it in the URL (redis://:PASSWORD@host)"
            )
        return ServerCheck(f"redis at {shown_url} refused PING: {_first_line(exc)}")
    except redis.RedisError as exc:
        return ServerCheck(not_redis_line(shown_url, exc))
    problem = server_problem(client, shown_url)  # None without INFO in the ACL: the version stays unchecked
    if problem is not None:
        return ServerCheck(problem)
    if members_key is not None:
        try:
            raw = client.type(members_key)
            kind = raw.decode() if isinstance(raw, bytes) else str(raw)
        except redis.RedisError:
            kind = "none"
        if kind not in ("hash", "none"):
            return ServerCheck(
                f"redis at {shown_url}: key {members_key!r} is a {kind}, expected a hash of members "
                f"(it was not written by quorum-cron: delete it)"
            )
    try:
        policies = _policies(client.info("memory"))
    except redis.RedisError:
        return ServerCheck()  # e.g. an ACL user without INFO: the policy stays unknown
    # A cluster client answers per node: any node with an evicting policy is the one to report.
    found = sorted(set(policies))
    chosen = [p for p in found if p != SAFE_POLICY] or found
    return ServerCheck(policy=chosen[0] if chosen else None)


def _policies(reply: object) -> list[str]:
    """Every node's ``maxmemory_policy`` in an ``INFO memory`` reply, in node order (unread ones left out)."""
    return [str(node["maxmemory_policy"]) for node in _nodes(reply) if "maxmemory_policy" in node]


def _nodes(reply: object) -> list[Mapping[str, Any]]:
    """An INFO reply as one mapping per node (a cluster client answers per node, keyed by address)."""
    if isinstance(reply, Mapping) and reply and all(isinstance(v, Mapping) for v in reply.values()):
        return [v for v in reply.values() if isinstance(v, Mapping)]
    return [reply] if isinstance(reply, Mapping) else []


def not_redis_problem(shown_url: str, exc: BaseException) -> str | None:
    """The "does not answer like Redis" line when ``exc`` (a store error, or what caused it) is a
    reply outside Redis's protocol, else None: such a server is not down, and waiting or retrying
    will not help (``check-store`` says it as the agent does)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, InvalidResponse):
        cause = cause.__cause__
    return None if cause is None else not_redis_line(shown_url, cause)


def credentials_hint(text: str) -> str:
    """What to do about an error a server with a password gives a client without the right one
    (``""`` when ``text`` is not one): its own words name neither the URL nor the fix."""
    if "NOAUTH" in text or "already authenticated" in text:  # (RESP3's HELLO: the latter)
        return " (the server requires a password: expected it in the URL, redis://:PASSWORD@host)"
    if "WRONGPASS" in text or "invalid username-password" in text:
        return " (expected the password, and user, of that server in the URL)"
    return ""


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = redact_text(str(exc).split("\n", 1)[0])  # (a reply may echo AUTH's password)
    return text if len(text) <= limit else text[:limit] + "..."


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class ServerProbe:
    """The questions ``quorum-cron check-store`` asks one server, each answered as plain data.

    Nothing is written: the reads are tried as the connected user, the rest
    only asked about with ``ACL DRYRUN``. A failure the command reports as a
    whole ("cannot reach it") raises :class:`~quorum_cron.errors.StoreError`
    (:class:`~quorum_cron.errors.StoreUnavailable` for a connection) whose
    text is redis-py's message; what the server answers is returned as it
    came (the command prints it with control characters replaced), never
    acted on.
    """

    def __init__(self, target: RedisTarget, *, timeout_s: float) -> None:
        """Open a client for ``target`` (connects lazily; a cluster at once, raising StoreUnavailable)."""
        try:
            self._client = open_client(target, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        except (redis.RedisError, RedisClusterException) as exc:
            raise StoreUnavailable(redact_text(str(exc))) from exc

    def close(self) -> None:
        self._client.close()

    def unguarded(self, shown: str) -> str | None:
        """:func:`~quorum_cron.store.passwords.password_not_required` of this probe's client: the line
        when the URL gives a password the server does not check (``check-store``'s ``auth``)."""
        return password_not_required(self._client, shown)

    def _cmd(self, *args: str) -> Any:
        """One command on either client (the cluster client's ``execute_command`` is untyped)."""
        try:
            return cast(Any, self._client).execute_command(*args)
        except (RedisConnectionError, RedisTimeoutError, RedisClusterException) as exc:
            raise StoreUnavailable(redact_text(str(exc))) from exc
        except redis.RedisError as exc:
            raise StoreError(redact_text(str(exc))) from exc

    def _info(self, section: str) -> object:
        try:
            return self._client.info(section)
        except (RedisConnectionError, RedisTimeoutError, RedisClusterException) as exc:
            raise StoreUnavailable(redact_text(str(exc))) from exc
        except redis.RedisError as exc:
            raise StoreError(redact_text(str(exc))) from exc

    def ping(self) -> None:
        """PING; raises StoreError (StoreUnavailable when unreachable)."""
        self._cmd("PING")

    def server(self) -> ServerInfo:
        """``INFO server`` as a :class:`ServerInfo` (a cluster: its oldest node); raises StoreError."""
        reply = self._info("server")
        return parse_server_info(reply if isinstance(reply, Mapping) else {})

    def memory_policies(self) -> list[str]:
        """Every node's ``maxmemory-policy`` in node order; [] when ``INFO memory`` cannot be read."""
        try:
            return _policies(self._info("memory"))
        except StoreError:
            return []

    def replication(self) -> list[Mapping[str, Any]]:
        """``INFO replication`` of every node (role, connected_slaves...); raises StoreError."""
        return _nodes(self._info("replication"))

    def whoami(self) -> str | None:
        """``ACL WHOAMI``, or None when the user may not ask."""
        try:
            return _text(self._cmd("ACL", "WHOAMI"))
        except StoreError:
            return None

    def may_dryrun(self, user: str) -> bool:
        """Whether the connected user may run ``ACL DRYRUN`` (an admin checking ``user``)."""
        try:
            self._cmd("ACL", "DRYRUN", user, "PING")
        except StoreError:
            return False
        return True

    def dryrun(self, user: str, command: tuple[str, ...]) -> str:
        """``ACL DRYRUN user command...``: "OK" when allowed, else the server's reason; raises StoreError."""
        return _text(self._cmd("ACL", "DRYRUN", user, *command))

    def allowed(self, command: tuple[str, ...]) -> bool:
        """Run ``command`` (a read) as the connected user: False only when the ACL refuses it.

        Any other error (NOSCRIPT, WRONGTYPE...) means the command was
        allowed to run.
        """
        try:
            cast(Any, self._client).execute_command(*command)
        except NoPermissionError:
            return False
        except redis.RedisError:
            pass
        return True
