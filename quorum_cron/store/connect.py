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
"""

from __future__ import annotations

import re
from typing import Any, Final

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from quorum_cron.errors import ConfigError
from quorum_cron.redact import redact_text
from quorum_cron.store.sentinels import MasterPool, Sentinels
from quorum_cron.store.urls import RedisTarget, bad_url, parse_redis_url

__all__ = [
    "SOCKET_CONNECT_TIMEOUT_S",
    "SOCKET_TIMEOUT_S",
    "answer_problem",
    "fail_fast",
    "open_client",
    "options_problem",
]

SOCKET_TIMEOUT_S: Final = 2.0
SOCKET_CONNECT_TIMEOUT_S: Final = 1.0


def fail_fast() -> dict[str, Any]:
    """Client keywords that fail at once: short timeouts, one retry without backoff (a new
    ``Retry`` each call: redis-py's is mutable state per client)."""
    return {
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": SOCKET_CONNECT_TIMEOUT_S,
        "retry": Retry(NoBackoff(), 1),
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
        pool.make_connection()
        pool.disconnect()
    except TypeError as exc:
        name = re.search(r"argument '(\w+)'", str(exc))
        what = f"parameter {name.group(1)!r}" if name else "a parameter"
        return f"{target.shown!r} has {what} (not a connection option; expected e.g. ?db=0&socket_timeout=5)"
    except ValueError as exc:
        return f"{target.shown!r} has a parameter redis-py refuses ({redact_text(str(exc))})"
    return None


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
    except redis.RedisError as exc:
        first = redact_text(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return f"redis at {target.shown} did not answer: {first}"
    finally:
        client.close()
    return None


def open_client(target: RedisTarget, **client_kwargs: Any) -> redis.Redis | RedisCluster:
    """The redis-py client for ``target``; ``client_kwargs`` (timeouts, retry) go to every connection."""
    problem = options_problem(target)
    if problem is not None:
        raise ConfigError(f"invalid redis url: {problem}")
    try:
        if target.mode == "standalone":
            return redis.Redis.from_url(target.url, **client_kwargs)
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
        return RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in target.hosts],  # type: ignore[no-untyped-call]
            username=target.username,
            password=target.password,
            ssl=target.tls,
            **kwargs,
        )
    except (ValueError, TypeError) as exc:
        raise bad_url(target.shown, f"was refused by the client: {exc}") from None
