"""Building the redis-py client for a parsed Redis URL, and the fail-fast settings a node's client uses.

:mod:`quorum_cron.store.urls` parses and validates a URL (the configuration
imports it and needs no client); this module turns the parsed
:class:`~quorum_cron.store.urls.RedisTarget` into a client:
:class:`redis.Redis` (standalone), a Sentinel-managed :class:`redis.Redis`
whose connections find the current master through the sentinels on every
(re)connect, or :class:`redis.cluster.RedisCluster`.

:func:`fail_fast` gives the client settings a node and the operator commands open the
store with (:func:`quorum_cron.store.options.open_store`): redis-py's
default retries a failed command with backoff, which would hold a vote for
seconds while Redis is down; the agent has its own reconnect loop and must
learn of an outage at once. The single retry covers a pooled connection
that went stale when Redis restarted.

A URL's scheme must match the kind of server it reaches (``docs/operations.md``,
"Supported servers"). Redis's own refusals named neither the server nor the fix:
a ``redis://`` URL at a Redis Cluster node failed with ``MOVED``, ``CROSSSLOT`` or
``WAIT cannot be used with replica instances``, one at a Sentinel with ``unknown
command 'SCRIPT'``, and a ``redis+cluster://`` URL at a standalone server with
"Cluster mode is not enabled on this node". So every connection of a
standalone URL asks ``INFO server`` once when it opens (``+info`` is in the
documented ACL; a user without it stays unchecked, as the version does) and a
cluster node or a sentinel fails it with :class:`WrongServerKind`, one line
naming the address and the URL to use; :func:`open_client` refuses a cluster
URL whose seeds are no cluster nodes with :class:`NotClusterNodes`, the same way.
:func:`kind_problem` asks a client for such a line before anything else is asked.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Final, cast

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import InvalidResponse, RedisClusterException, RedisError, ResponseError
from redis.retry import Retry

from quorum_cron.errors import ConfigError, StoreError
from quorum_cron.redact import redact_text
from quorum_cron.store.sentinels import MasterPool, NotSentinels, SentinelCredentialsRefused, Sentinels
from quorum_cron.store.urls import (
    RedisTarget,
    bad_url,
    host_port,
    parse_redis_url,
    userinfo_shown,
    wrong_kind,
)

__all__ = [
    "SOCKET_CONNECT_TIMEOUT_S",
    "SOCKET_TIMEOUT_S",
    "ClusterClient",
    "NotClusterNodes",
    "WrongServerKind",
    "answer_problem",
    "connection_failure",
    "fail_fast",
    "info_fields",
    "kind_problem",
    "not_redis_line",
    "open_client",
    "options_problem",
    "store_failure",
]

SOCKET_TIMEOUT_S: Final = 2.0
SOCKET_CONNECT_TIMEOUT_S: Final = 1.0
MAX_URL_TIMEOUT_S: Final = 86_400.0
"""Longest ``?socket_timeout=`` / ``?socket_connect_timeout=`` a URL may give (a day)."""


def fail_fast() -> dict[str, Any]:
    """Client keywords that fail at once: short timeouts, one retry without backoff (a new
    ``Retry`` each call: redis-py's is mutable state per client).

    The retry is for a connection error only (a pooled connection the server closed), never
    for a timeout: a server that did not answer within the timeout will not answer a second
    try sooner. redis-py's default retried timeouts too, and a connect is retried inside the
    command's retry, so a store that stopped answering held every call for two read timeouts
    (4 s: the web face's 503s) and a blackholed address for four connect timeouts.
    """
    return {
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": SOCKET_CONNECT_TIMEOUT_S,
        "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    }


def options_problem(target: RedisTarget) -> str | None:
    """Why redis-py would refuse a standalone URL's ``?name=value`` parameters (one line, the URL
    redacted), or None.

    redis-py hands every query parameter to its connection class, so a typo
    (``?socket_timout=2``) parses and then fails the first connection with a
    ``TypeError`` deep in a traceback. A connection object is made here (that
    opens no socket) to find out now. Apart from :mod:`.urls`, which the
    configuration imports without loading a client.
    """
    if target.mode != "standalone" or "?" not in target.url:
        return None
    try:
        pool = redis.ConnectionPool.from_url(target.url)
        conn = pool.make_connection()
        pool.disconnect()
    except TypeError as exc:
        name = re.search(r"argument '(\w+)'", str(exc))
        what = f"parameter {name.group(1)!r}" if name else "a parameter"
        return f"{target.shown!r} has {what} (not a connection option; expected e.g. ?db=0&socket_timeout=5)"
    except (ValueError, RedisError) as exc:  # (RedisError: ?protocol=9 fails the constructor so)
        return f"{target.shown!r} has a parameter redis-py refuses ({redact_text(str(exc))})"
    # A timeout the socket refuses (negative, NaN, past what time_t holds) passed the constructor and
    # failed the first connect with a traceback; 0 would make the socket non-blocking.
    for option in ("socket_timeout", "socket_connect_timeout"):
        value = getattr(conn, option, None)
        if value is not None and not 0 < value <= MAX_URL_TIMEOUT_S:
            return (
                f"{target.shown!r} has {option}={value} (expected a number of seconds above 0 and at most "
                f"{MAX_URL_TIMEOUT_S:.0f}, e.g. ?{option}=5)"
            )
    return None


def not_redis_line(shown_url: str, exc: BaseException) -> str:
    """The line for a server that answered outside Redis's protocol (the agent's preflight, the
    commands, ``check-store`` and ``demo`` all say it so)."""
    why = redact_text(str(exc).split("\n", 1)[0][:200] or type(exc).__name__)
    return f"the server at {shown_url} does not answer like Redis ({why}): expected a Redis server"


_REDIS_PY_SAID: Final = (
    (re.compile(r"Error -?\d+ connecting to \S+?\. (?P<why>.+?)\.?"), ""),
    (re.compile(r"(?P<why>Connection closed by server)\."), ""),
    (re.compile(r"Error while reading from \S+ ?: \(\d+, '(?P<why>.+)'\)"), "while reading: "),
    (re.compile(r"Timeout connecting to server"), "no answer within the connect timeout"),
    (re.compile(r"Timeout reading from \S+"), "no reply within the socket timeout"),
)


def connection_failure(why: str) -> str:
    """redis-py's text for a failed connection without the address it repeats ("Error 111
    connecting to h:1. Connection refused." is "Connection refused"); other text as it is."""
    for raw, words in _REDIS_PY_SAID:
        if (inner := raw.fullmatch(why)) is not None:
            return words + (inner.groupdict().get("why") or "")
    return why


def store_failure(exc: BaseException) -> str:
    """Why a store call failed, for a line that names the store (its URL, password masked) already.

    The store layer's lines name the address and the internal operation ("redis at
    redis://h:1/0 unavailable during time: Error 111 connecting to h:1. Connection refused."):
    right in the agent's log, where nothing else names them, but a one-off command's line
    ("cannot read the store at redis://:***@h:1/0: ...") said the URL twice (once without its
    user) and an operation the operator never asked for. The store layer says what failed apart
    (:attr:`~quorum_cron.errors.StoreError.failure`: "unavailable: Connection refused", a
    refused password without the agent's "changed under a running agent?"); any other error's
    first line is returned redacted.
    """
    if isinstance(exc, StoreError) and exc.failure:
        return exc.failure
    return redact_text(str(exc).split("\n", 1)[0])


def answer_problem(url: str) -> str | None:
    """Why ``url`` cannot be used now (it does not parse, or its Redis does not answer a ``PING``
    within the fail-fast timeouts): one line, the URL redacted; None when it answers."""
    try:
        target = parse_redis_url(url)
        client = open_client(target, **fail_fast())
    except ConfigError as exc:
        return str(exc)
    try:
        client.ping()
    except WrongServerKind as exc:  # it answered: as a server of another kind
        return f"redis at {target.shown}: {exc}"
    except InvalidResponse as exc:  # it answered, but not in Redis's protocol (an HTTP port, say)
        return not_redis_line(target.shown, exc)
    except redis.RedisError as exc:
        first = redact_text(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return f"redis at {target.shown} did not answer: {first}"
    finally:
        client.close()
    return None


class ClusterClient(RedisCluster):
    """A :class:`RedisCluster` opened from a URL, which it keeps (redacted) as :attr:`shown_url`.

    The store names its server by it in every error line: the client's own
    node list grows to every node it discovered (redis-py's dynamic startup
    nodes, which the slot-map refresh needs), so a line named six addresses of
    a 3 + 3 cluster, none of them necessarily the one configured.
    """

    shown_url: str = ""


class WrongServerKind(RedisError):
    """A standalone URL's connection reached a Redis Cluster node or a Sentinel (see the module docstring).

    Not a connection error: redis-py does not retry it, the store reports a
    failure (not "unavailable": waiting will not change the server's kind).
    ``address``, ``mode`` (``cluster`` / ``sentinel``) and ``info`` (the
    ``INFO server`` fields) let ``check-store`` word its own lines.
    """

    def __init__(self, message: str, address: str, mode: str, info: dict[str, str], suggestion: str) -> None:
        super().__init__(message)
        self.address = address
        self.mode = mode
        self.info = info
        self.suggestion = suggestion


class NotClusterNodes(ConfigError):
    """A ``redis+cluster://`` URL none of whose seeds answered as a cluster node: the URL has to change."""


def info_fields(reply: object, limit: int = 200) -> dict[str, str]:
    """An ``INFO`` reply's ``name:value`` lines as text (redis-py's parsed dict, bytes or str)."""
    if isinstance(reply, dict):
        return {str(k): str(v)[:limit] for k, v in reply.items() if not isinstance(v, dict)}
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else reply
    if not isinstance(text, str):
        return {}
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and not name.startswith("#"):
            out[name.strip()] = value.strip()[:limit]
    return out


def _mode(fields: dict[str, str]) -> str:
    return fields.get("redis_mode") or fields.get("server_mode") or "standalone"


def _master_names(reply: object) -> list[str] | None:
    """The names in a ``SENTINEL MASTERS`` reply (RESP2 flat lists or RESP3 maps), None when unreadable."""

    def text(v: object) -> str:
        return v.decode(errors="replace") if isinstance(v, bytes) else str(v)

    if isinstance(reply, dict):  # redis-py's parsed form: name -> state
        return sorted(text(k) for k in reply)
    if not isinstance(reply, list):
        return None
    names = []
    for entry in reply:
        if isinstance(entry, dict):
            fields = {text(k): v for k, v in entry.items()}
        elif isinstance(entry, list):
            fields = {text(k): v for k, v in zip(entry[::2], entry[1::2], strict=False)}
        else:
            return None
        if "name" in fields:
            names.append(text(fields["name"]))
    return sorted(names)


class _KindCheck:
    """The ``redis_connect_func`` of a standalone URL's connections: what redis-py does on connect
    (AUTH, SELECT...), then ``INFO server``; a cluster node or a sentinel raises :class:`WrongServerKind`.

    One round trip per new connection (pooled connections live long). A refused
    ``INFO`` (no ``+info`` in the user's ACL, a proxy without it) leaves the
    connection unchecked: the scripts' own errors are still reported.
    """

    def __init__(self, target: RedisTarget) -> None:
        self._tls = target.tls
        self._userinfo = userinfo_shown(target.shown)

    def __call__(self, conn: Any) -> None:
        conn.on_connect()
        try:
            conn.send_command("INFO", "server")
            fields = info_fields(conn.read_response())
        except ResponseError:
            return
        mode = _mode(fields)
        if mode not in ("cluster", "sentinel"):
            return
        masters = None
        if mode == "sentinel":
            with contextlib.suppress(ResponseError):
                conn.send_command("SENTINEL", "MASTERS")
                masters = _master_names(conn.read_response())
        path = getattr(conn, "path", None)
        address = host_port(str(conn.host), int(conn.port)) if not path else str(path)
        line = wrong_kind(address, mode, tls=self._tls, userinfo=self._userinfo, masters=masters)
        raise WrongServerKind(line, address, mode, fields, line.partition(": ")[2])


def kind_problem(client: object) -> str | None:
    """The one line saying that ``client``'s URL reached the wrong kind of server, or None.

    Opens a connection (``PING``): a standalone URL at a cluster node or a
    sentinel (:class:`WrongServerKind`), a Sentinel URL whose addresses are no
    sentinels or refuse its sentinel credentials. None for anything else,
    an unreachable server too: the caller's own checks report those.
    """
    ping = getattr(client, "ping", None)
    if ping is None:
        return None
    try:
        ping()
    except (WrongServerKind, NotSentinels, SentinelCredentialsRefused) as exc:
        return str(exc)
    except (RedisError, RedisClusterException, OSError):
        return None
    return None


def _not_cluster_nodes(target: RedisTarget, client_kwargs: dict[str, Any]) -> list[str]:
    """What each seed of a cluster URL is when it is no usable cluster node (``INFO server``), one
    clause each; seeds that are cluster nodes, unreachable or refuse ``INFO`` are left out."""
    timeouts = {k: v for k, v in client_kwargs.items() if k in ("socket_timeout", "socket_connect_timeout")}
    userinfo = userinfo_shown(target.shown)
    found: list[str] = []
    for host, port in target.hosts[:16]:
        address = host_port(host, port)
        client = redis.Redis(
            host=host, port=port, username=target.username, password=target.password, ssl=target.tls,
            retry=Retry(NoBackoff(), 0), **timeouts,
        )  # fmt: skip
        try:
            mode = _mode(info_fields(client.info("server")))
            if mode == "cluster":  # a cluster node that refused CLUSTER SLOTS: the user's ACL
                try:
                    cast(Any, client).execute_command("CLUSTER", "SLOTS")
                except ResponseError as exc:
                    why = redact_text(str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__)
                    found.append(
                        f"{address} is a Redis Cluster node but refused CLUSTER SLOTS ({why}): the user "
                        f"needs +cluster|slots (docs/operations.md, Least-privilege ACL)"
                    )
                continue
            masters = None
            if mode == "sentinel":
                with contextlib.suppress(RedisError):
                    masters = _master_names(cast(Any, client).execute_command("SENTINEL", "MASTERS"))
            found.append(wrong_kind(address, mode, tls=target.tls, userinfo=userinfo, masters=masters))
        except (RedisError, OSError):
            continue  # unreachable or refusing INFO: nothing to say about it
        finally:
            client.close()
    return found


def open_client(target: RedisTarget, **client_kwargs: Any) -> redis.Redis | RedisCluster:
    """The redis-py client for ``target``; ``client_kwargs`` (timeouts, retry) go to every connection.

    A cluster URL connects at once: seeds that are no cluster nodes raise
    :class:`NotClusterNodes` (one line naming each and the URL for it).
    """
    problem = options_problem(target)
    if problem is not None:
        raise ConfigError(f"invalid redis url: {problem}")
    try:
        if target.mode == "standalone":
            kwargs = {"redis_connect_func": _KindCheck(target), **client_kwargs}
            return redis.Redis.from_url(target.url, **kwargs)
        if target.mode == "sentinel":
            sentinel_kwargs = {
                k: v for k, v in client_kwargs.items() if k in ("socket_timeout", "socket_connect_timeout")
            }
            if target.sentinel_username is not None:
                sentinel_kwargs["username"] = target.sentinel_username
            if target.sentinel_password is not None:
                sentinel_kwargs["password"] = target.sentinel_password
            # Sentinels: a refused sentinel password is said so in one line (store/sentinels.py).
            sentinel = Sentinels(list(target.hosts), sentinel_kwargs=sentinel_kwargs, **client_kwargs)
            # MasterPool: connections already open follow a failover too (store/sentinels.py).
            master: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call, unused-ignore]
                target.master, connection_pool_class=MasterPool, db=target.db, username=target.username,
                password=target.password, **client_kwargs,
            )  # fmt: skip
            return master
        kwargs = dict(client_kwargs)
        kwargs.pop("retry", None)  # the cluster client has its own retry / refresh policy
        try:
            cluster = ClusterClient(
                startup_nodes=[ClusterNode(h, p) for h, p in target.hosts],  # type: ignore[no-untyped-call]
                username=target.username,
                password=target.password,
                ssl=target.tls,
                **kwargs,
            )
            cluster.shown_url = target.shown
            return cluster
        except RedisClusterException as exc:
            # No seed gave a slot map. redis-py keeps the last seed's error only ("Cluster mode
            # is not enabled on this node" when it refused CLUSTER SLOTS, else e.g. a refused
            # connection): ask each seed what it is, and name those that are no cluster nodes.
            found = _not_cluster_nodes(target, client_kwargs)
            if not found and "Cluster mode is not enabled" in str(exc):
                seeds = ", ".join(host_port(h, p) for h, p in target.hosts)
                found = [f"{seeds} refused CLUSTER SLOTS: expected the HOST:PORT of Redis Cluster nodes"]
            if not found:
                raise
            raise NotClusterNodes(f"redis at {target.shown}: {'; '.join(found)}") from None
    except (ValueError, TypeError) as exc:
        raise bad_url(target.shown, f"was refused by the client: {exc}") from None
