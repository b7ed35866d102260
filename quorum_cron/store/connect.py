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

from typing import Any, Final

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from quorum_cron.store.sentinels import Sentinels
from quorum_cron.store.urls import RedisTarget, bad_url

__all__ = ["SOCKET_CONNECT_TIMEOUT_S", "SOCKET_TIMEOUT_S", "fail_fast", "open_client"]

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


def open_client(target: RedisTarget, **client_kwargs: Any) -> redis.Redis | RedisCluster:
    """The redis-py client for ``target``; ``client_kwargs`` (timeouts, retry) go to every connection."""
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
            master: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call, unused-ignore]
                target.master, db=target.db, username=target.username, password=target.password,
                **client_kwargs,
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
