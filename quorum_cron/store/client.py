"""The fail-fast redis-py client a node (and every command) opens the store on.

redis-py's default client retries a failed command ten times with backoff,
which would hold a vote for many seconds while Redis is down; the agent has
its own reconnect loop (with backoff) and must learn of an outage at once,
so its client fails fast. The single retry covers a pooled connection that
went stale when Redis restarted.

This module owns that client's settings and :data:`RedisClient`, the name
outside ``store/`` for "a redis-py client" (standalone, Sentinel-managed or
Cluster), so the agent and the faces can pass one along without importing
redis-py themselves (issue 25: no module outside ``quorum_cron/store/``
imports it).
"""

from __future__ import annotations

from typing import TypeAlias

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from quorum_cron.store.keys import DEFAULT_LEDGER_MAXLEN, DEFAULT_RETENTION_MS
from quorum_cron.store.redis import RedisStore

__all__ = ["SOCKET_CONNECT_TIMEOUT_S", "SOCKET_TIMEOUT_S", "RedisClient", "connect_store"]

RedisClient: TypeAlias = redis.Redis | RedisCluster
"""A redis-py client of any deployment form (:func:`quorum_cron.store.urls.open_client` builds one)."""

SOCKET_TIMEOUT_S = 2.0
SOCKET_CONNECT_TIMEOUT_S = 1.0


def connect_store(
    url: str,
    namespace: str,
    *,
    retention_ms: int = DEFAULT_RETENTION_MS,
    ledger_maxlen: int = DEFAULT_LEDGER_MAXLEN,
    wait_replicas: int = 0,
    wait_timeout_ms: int = 100,
    socket_timeout: float = SOCKET_TIMEOUT_S,
    socket_connect_timeout: float = SOCKET_CONNECT_TIMEOUT_S,
) -> RedisStore:
    """A :class:`RedisStore` on a fail-fast client for ``url`` (any form of :mod:`.urls`).

    Raises :class:`~quorum_cron.errors.ConfigError` for a URL the client
    refuses and :class:`~quorum_cron.errors.StoreUnavailable` for a cluster
    that cannot be reached (a cluster client connects at once); a standalone
    or Sentinel client connects on its first command.
    """
    return RedisStore.from_url(
        url,
        namespace,
        retention_ms=retention_ms,
        ledger_maxlen=ledger_maxlen,
        wait_replicas=wait_replicas,
        wait_timeout_ms=wait_timeout_ms,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_connect_timeout,
        retry=Retry(NoBackoff(), 1),
    )
