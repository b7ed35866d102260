"""Fixtures that start the real thing: a Redis Cluster (3 masters + 3 replicas) and a Sentinel set.

Loaded by ``tests/conftest.py`` (``pytest_plugins``). The session-scoped
``redis_cluster`` is shared by the tests that leave it as they found it;
tests that kill a master or move slots start their own with
:func:`own_cluster` / :func:`own_sentinel`. Every process is stopped by its
handle when the fixture ends, also on failure. Outside CI a missing
``redis-cli`` / ``redis-sentinel`` skips with the tool named; in CI it fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from redis.cluster import RedisCluster

from quorum_cron.embedded import RedisServerNotFound
from quorum_cron.embedded_topology import EmbeddedCluster, EmbeddedSentinel
from tests.tools import require_tool

__all__ = ["cluster_client", "own_cluster", "own_sentinel", "redis_cluster"]


def own_cluster(**kwargs: Any) -> EmbeddedCluster:
    """A started 3 + 3 cluster (the caller stops it: ``with own_cluster() as c``)."""
    require_tool("redis-cli")
    try:
        return EmbeddedCluster(**kwargs).start()
    except RedisServerNotFound as exc:
        pytest.fail(f"the cluster tests need a redis-server binary: {exc}", pytrace=False)


def own_sentinel(**kwargs: Any) -> EmbeddedSentinel:
    """A started master + 2 replicas + 3 sentinels (the caller stops it); ``kwargs`` as
    :class:`EmbeddedSentinel` takes them (``password=``, ``sentinel_password=``...)."""
    require_tool("redis-sentinel")
    try:
        return EmbeddedSentinel(**kwargs).start()
    except RedisServerNotFound as exc:
        pytest.fail(f"the sentinel tests need a redis-server binary: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[EmbeddedCluster]:
    """A 3-master + 3-replica Redis Cluster for the whole session (tests must not break it)."""
    with own_cluster() as cluster:
        yield cluster


def cluster_client(cluster: EmbeddedCluster) -> RedisCluster:
    """A cluster client without retries beyond redis-py's redirect handling."""
    return RedisCluster(host="127.0.0.1", port=cluster.ports[0], socket_timeout=5.0)
