"""The server checks owned by ``store/server.py`` (issue 25 item 4): plain data out, no redis-py outside.

The agent's preflight asks :func:`~quorum_cron.store.server.preflight` and
decides (:func:`~quorum_cron.agent.preflight.check_server`); ``check-store``
asks a :class:`~quorum_cron.store.server.ServerProbe`; ``check-clock`` reads
the store's own ``TIME``. Real servers from tests/conftest.py; a refused
connection comes from a loopback socket bound without listening.
"""

from __future__ import annotations

import ast
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from quorum_cron.agent.preflight import PreflightError, check_server
from quorum_cron.commands.check_store import check_store
from quorum_cron.errors import StoreUnavailable
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.options import StoreOptions, open_store
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.server import ServerCheck, ServerProbe, preflight
from quorum_cron.store.urls import parse_redis_url

PKG = Path(__file__).resolve().parent.parent / "quorum_cron"

OFF_REDIS_PY = (
    "agent/preflight.py",
    "agent/redisclient.py",
    "agent/build.py",
    "commands/check_store.py",
    "clock/check.py",
)
"""The modules whose server questions moved into store/ (issue 25: none imports redis-py)."""


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A loopback port held by a socket that never listens: every connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


@pytest.mark.parametrize("name", OFF_REDIS_PY)
def test_the_server_checks_callers_import_no_redis_py(name: str) -> None:
    tree = ast.parse((PKG / name).read_text())
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    found |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert sorted(m for m in found if m == "redis" or m.startswith("redis.")) == []
    assert found - {"__future__"}  # the scan sees the imports


def test_a_memory_store_has_no_server_and_its_preflight_reports_nothing() -> None:
    store = MemoryStore(clock=lambda: 0)
    assert preflight(store, "memory") == ServerCheck(refusal=None, reachable=True, policy=None)
    assert check_server(store, "memory") is None


def test_check_server_takes_the_store_and_refuses_a_foreign_members_key(redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "checks")
    url = "redis://127.0.0.1/0"
    assert check_server(store, url) == "noeviction"
    redis_client.set(store.members_key, "not a hash")
    with pytest.raises(PreflightError) as raised:
        check_server(store, url)
    assert str(raised.value) == (
        f"redis at {url}: key {store.members_key!r} is a string, expected a hash of members "
        f"(it was not written by quorum-cron: delete it)"
    )
    with pytest.raises(PreflightError):  # the old call: the client and the key
        check_server(redis_client, url, store.members_key)


def test_a_server_that_cannot_be_reached_is_waited_for_not_refused(refused_url: str) -> None:
    store = open_store(refused_url, StoreOptions("checks"))
    try:
        assert preflight(store, refused_url) == ServerCheck(refusal=None, reachable=False, policy=None)
        assert check_server(store, refused_url) is None
    finally:
        store.close()


def test_the_probe_answers_in_plain_data(redis_server: EmbeddedRedis) -> None:
    probe = ServerProbe(parse_redis_url(redis_server.url), timeout_s=5.0)
    try:
        probe.ping()
        server = probe.server()
        assert server.product in ("Redis", "Valkey") and server.mode == "standalone"
        assert server.version is not None and server.api is not None and server.api <= server.version
        assert probe.memory_policies() == ["noeviction"]
        assert probe.whoami() == "default"
        assert probe.may_dryrun("default")
        assert probe.dryrun("default", ("GET", "qc:{check-store}:probe")) == "OK"
        assert probe.allowed(("GET", "qc:{check-store}:probe"))
        nodes = probe.replication()
        assert [str(n["role"]) for n in nodes] == ["master"]
    finally:
        probe.close()


def test_the_probe_says_unreachable_with_the_library_error(refused_url: str) -> None:
    probe = ServerProbe(parse_redis_url(refused_url), timeout_s=2.0)
    try:
        with pytest.raises(StoreUnavailable, match=r"Connection refused|connecting"):
            probe.ping()
        assert probe.whoami() is None and probe.memory_policies() == []
    finally:
        probe.close()


def test_check_store_on_an_unreachable_cluster_is_one_problem_line(refused_url: str) -> None:
    """A cluster client connects at once: that failure is the ``connect`` problem, not a traceback."""
    url = refused_url.replace("redis://", "redis+cluster://").removesuffix("/0")
    result = CliRunner().invoke(check_store, [url], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"PROBLEM connect   redis at {url}: ") and lines[1:] == [
        "1 problem(s): connect"
    ]
