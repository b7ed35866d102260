"""Connecting a node to Redis: short timeouts, one retry, and the default node id.

redis-py's default client retries a failed command ten times with backoff,
which would hold a vote for many seconds while Redis is down; the agent has
its own reconnect loop (with backoff) and must learn of an outage at once,
so its client fails fast. The single retry covers a pooled connection that
went stale when Redis restarted.
"""

from __future__ import annotations

import socket

from redis.backoff import NoBackoff
from redis.retry import Retry

from quorum_cron.store.keys import DEFAULT_LEDGER_MAXLEN, DEFAULT_RETENTION_MS
from quorum_cron.store.redis import RedisStore

__all__ = ["SOCKET_CONNECT_TIMEOUT_S", "SOCKET_TIMEOUT_S", "connect_store", "default_node_id"]

SOCKET_TIMEOUT_S = 2.0
SOCKET_CONNECT_TIMEOUT_S = 1.0


def default_node_id() -> str:
    """The node id when none is given: the host name (unique per server in a typical deployment)."""
    return socket.gethostname()


def connect_store(
    url: str,
    namespace: str,
    *,
    retention_ms: int = DEFAULT_RETENTION_MS,
    ledger_maxlen: int = DEFAULT_LEDGER_MAXLEN,
    wait_replicas: int = 0,
    wait_timeout_ms: int = 100,
) -> RedisStore:
    """A :class:`RedisStore` on a fail-fast client for ``url``."""
    return RedisStore.from_url(
        url,
        namespace,
        retention_ms=retention_ms,
        ledger_maxlen=ledger_maxlen,
        wait_replicas=wait_replicas,
        wait_timeout_ms=wait_timeout_ms,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=SOCKET_CONNECT_TIMEOUT_S,
        retry=Retry(NoBackoff(), 1),
    )
