"""Whether the store's server lets in a client without a password although the URL gives one.

A URL with a password (``redis://:secret@host/0``, ``redis://user:secret@host/0``)
at a server without one — no ``requirepass``: its ``default`` user has the
ACL flag ``nopass`` — connected without a word. redis-py 8 speaks RESP3
unless told otherwise, so it authenticates with ``HELLO 3 AUTH default
<password>``, and a ``nopass`` user accepts any password there: the server
answers OK, and there is no error for redis-py to hide. (Only RESP2's
one-argument ``AUTH <password>`` is answered "ERR AUTH <password> called
without any password configured for the default user", which redis-py
raises as ``AuthenticationError``; ``AUTH default <password>`` is accepted
as HELLO's is.) The operator believed the store protected while anyone who
can reach the server could write to it, and forge votes.

:func:`password_not_required` asks the server itself: it opens one
connection of its own to the server the client uses — same address, TLS
and timeouts, no user, no password — and sends ``HELLO`` (no arguments, so
nothing changes on that connection). A server that lets unauthenticated
clients in as its ``default`` user answers; any other answers ``NOAUTH``.
Chosen over ``ACL GETUSER`` on the store's own connection because the
least-privilege user (docs/operations.md) may not run ``ACL``, and each
refusal would be written to the server's ``ACL LOG``, which must record
nothing refused to that user: ``HELLO`` is one of the commands a server
never checks against an ACL, nor logs (Redis 7, Valkey 7.2 and later
alike; Redis 6 has it too), and an unauthenticated ``NOAUTH`` is not logged
either. It costs one connection at start, never a refusal.

What it reports, as one line (the URL with its password masked, never the
password): the URL's user is ``default`` (or none) — the password in the
URL is not checked at all; the URL names another user — that user's
password is checked, but the server also lets anyone in as ``default``,
with whatever that user's rules allow (out of the box, everything). It
cannot see a named user that has ``nopass`` itself (that takes ``ACL
GETUSER``, see above). A Sentinel URL is checked on its master (the data
connection; the sentinels' own ``sentinel_password`` is not), a Redis
Cluster URL on each primary (each node keeps its own users). It never
raises and never refuses: a URL without a password, a server that cannot be
reached, a proxy that does not know ``HELLO`` get None. The callers say the
line: the agent as a ``store_password`` warning event
(:func:`quorum_cron.agent.startup.report_preflight`), the commands that
open the store on stderr (:func:`quorum_cron.commands.common.store_for`).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, cast

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from quorum_cron.printable import printable
from quorum_cron.store.base import Store
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.urls import host_port

__all__ = ["DOCS", "MAX_NODES", "PROBE_TIMEOUT_S", "password_not_required"]

MAX_NODES: Final = 16
"""At most this many primaries of a Redis Cluster are asked (one connection each, at once)."""

PROBE_TIMEOUT_S: Final = 1.0
"""The probe's connect and read timeouts, at most (the client's own when shorter): a server that
is reached but does not answer costs a command at most this much more, and gets no verdict."""

DOCS: Final = 'docs/operations.md, "A password the server does not check"'
"""Where the line sends the operator."""

_ANONYMOUS: Final[Mapping[str, Any]] = {
    "username": None,
    "password": None,
    "credential_provider": None,
    "db": 0,
    "client_name": None,
    "driver_info": None,  # no CLIENT SETINFO: the probe sends HELLO and nothing else
    "protocol": 2,  # no HELLO 3 on connect
    "redis_connect_func": None,  # (a standalone URL's INFO check: not for this connection)
    "health_check_interval": 0,
}
"""What the probe's connection takes instead of the client's own settings."""


def _client_of(server: Store | redis.Redis | RedisCluster) -> redis.Redis | RedisCluster | None:
    if isinstance(server, RedisStore):
        return server.client
    if isinstance(server, redis.Redis | RedisCluster):
        return server
    return None


def _credentials(client: redis.Redis | RedisCluster) -> tuple[str, bool]:
    """The user the client authenticates as (``default`` when the URL names none), and whether it
    sends a password: read from the client's own connection settings, what it sends."""
    if isinstance(client, RedisCluster):
        kwargs: Mapping[str, Any] = client.nodes_manager.connection_kwargs
    else:
        kwargs = client.connection_pool.connection_kwargs
    return str(kwargs.get("username") or "default"), bool(kwargs.get("password"))


def _lets_in(pool: redis.ConnectionPool) -> bool | None:
    """Whether the server of ``pool`` answers ``HELLO`` on a connection without credentials: True,
    False for ``NOAUTH`` or any other refusal, None when it cannot tell (not reached, no answer
    within :data:`PROBE_TIMEOUT_S`, a reply redis-py could not read)."""
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k not in ("lib_name", "lib_version")}
    timeouts = {
        name: min(float(kwargs.get(name) or PROBE_TIMEOUT_S), PROBE_TIMEOUT_S)
        for name in ("socket_timeout", "socket_connect_timeout")
    }
    try:
        conn = pool.connection_class(**{**kwargs, **_ANONYMOUS, **timeouts, "retry": Retry(NoBackoff(), 0)})
    except (TypeError, ValueError):
        return None
    try:
        conn.connect()
        conn.send_command("HELLO")
        conn.read_response()
        return True
    except (redis.AuthenticationError, redis.ResponseError):
        # NOAUTH: an AuthenticationError, which redis-py makes a ConnectionError, not a
        # ResponseError; or a proxy that does not know HELLO.
        return False
    except (redis.RedisError, OSError, AttributeError, TypeError, ValueError):
        return None
    finally:
        conn.disconnect()


def _open_nodes(client: redis.Redis | RedisCluster) -> list[str]:
    """Where the probe got in: ``[""]`` for the one server and for every primary of a cluster,
    else the cluster's primaries that let it in, by address (``[]``: none, or no verdict).

    A cluster's primaries are asked at once, each on its own thread: one at a time, a command
    paid up to :data:`MAX_NODES` connections in a row. One that refuses or cannot tell hides
    nothing of the others: a password lost on one node (a restart without ``CONFIG REWRITE``)
    is named there."""
    if not isinstance(client, RedisCluster):
        return [""] if _lets_in(client.connection_pool) else []
    primaries = cast(Any, client).get_primaries()
    asked = primaries[:MAX_NODES]
    pools = [client.get_redis_connection(node).connection_pool for node in asked]
    with ThreadPoolExecutor(max_workers=max(1, len(pools)), thread_name_prefix="qc-password") as pool:
        verdicts = list(pool.map(_lets_in, pools))
    found = [host_port(str(n.host), int(n.port)) for n, v in zip(asked, verdicts, strict=True) if v]
    return [""] if found and all(verdicts) and len(asked) == len(primaries) else found


def password_not_required(server: Store | redis.Redis | RedisCluster, shown_url: str) -> str | None:
    """One line when the URL of ``server`` gives a password but its server lets clients in without
    one (as its ``default`` user), else None; never raises (see the module docstring).

    ``server``: a :class:`RedisStore` or a redis-py client; any other store
    (the memory model) has no server. ``shown_url``: the URL, password
    masked, as the line names it.
    """
    client = _client_of(server)
    if client is None:
        return None
    try:
        user, given = _credentials(client)
        if not given:
            return None
        nodes = _open_nodes(client)
    except (redis.RedisError, RedisClusterException, OSError, AttributeError, TypeError, ValueError):
        return None  # unreachable, or a reply redis-py could not read: no verdict
    if not nodes:
        return None
    where = f"redis at {shown_url}" + (f" (node {', '.join(nodes)})" if nodes != [""] else "")
    if user == "default":
        return (
            f"{where} accepts connections without a password (no requirepass: its default user has "
            f"nopass), so the password in the URL is not checked and anyone who can reach the server "
            f"can write to the store and forge votes: set one (requirepass, or ACL SETUSER default "
            f"resetpass >PASSWORD) and use it in the URL ({DOCS})"
        )
    return (
        f"{where} checks the password of user {printable(user, 100)!r} but also accepts connections "
        f"without a password (no requirepass: its default user has nopass): unless that user's ACL "
        f"rules keep it from the store's keys, anyone who can reach the server can write to the store "
        f"and forge votes: turn it off (ACL SETUSER default off) or give it a password ({DOCS})"
    )
