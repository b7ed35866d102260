"""A URL of the wrong kind for its server is refused with one line naming the address and the URL to use.

Against real servers (the suite's standalone server and Redis Cluster, a
sentinel of this module's own): a ``redis://`` URL at a cluster node (a
master: ``MOVED``/``CROSSSLOT``; a replica: ``WAIT cannot be used with replica
instances``) or at a Sentinel (``unknown command 'SCRIPT'``), a
``redis+cluster://`` URL at a standalone server or a sentinel ("Cluster mode is
not enabled on this node"), a ``redis+sentinel://`` URL at data servers. Each is
said where the store is used (a store call), by the agent's start-up checks,
by an operator command and by ``check-store``; never with a password.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from quorum_cron.agent.preflight import PreflightError, check_server
from quorum_cron.cli import main
from quorum_cron.commands.check_store import check_store
from quorum_cron.errors import ConfigError, StoreError, StoreUnavailable
from quorum_cron.redact import redact_url
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.embedded.topology import EmbeddedCluster, EmbeddedSentinel
from quorum_cron.store.redis import RedisStore
from tests.test_redis_security import documented_acl
from tests.topologies import own_sentinel

pytestmark = pytest.mark.slow

SECRET = "url-s3cret"


@pytest.fixture(scope="module")
def sentinel() -> Iterator[EmbeddedSentinel]:
    """One master, no replica, one sentinel: the least that answers as a Sentinel."""
    with own_sentinel(replicas=0, sentinels=1) as s:
        yield s


def _config(tmp_path: Path) -> str:
    path = tmp_path / "cluster.toml"
    path.write_text(
        "[cluster]\n"
        'name = "um"\n'
        'members = ["n1", "n2", "n3"]\n'
        'redis_url = "redis://127.0.0.1:1/0"\n'
        'ntp_servers = ["127.0.0.1"]\n'
        'ntp_unreachable = "store-time"\n'
        "\n[[jobs]]\n"
        'name = "j"\n'
        'schedule = "@hourly"\n'
        'command = ["true"]\n'
    )
    return str(path)


def _store_error(url: str) -> StoreError:
    """What the first store call on ``url`` raises (the store opens lazily)."""
    store = RedisStore.from_url(url, "um", **fail_fast())
    try:
        with pytest.raises(StoreError) as info:
            store.time_ms()
        return info.value
    finally:
        store.close()


def _preflight(url: str) -> str:
    """The agent's start-up refusal of ``url`` (check_server, as ``quorum-cron agent`` runs it)."""
    store = RedisStore.from_url(url, "um", **fail_fast())
    try:
        with pytest.raises(PreflightError) as info:
            check_server(store, redact_url(url))
        return str(info.value)
    finally:
        store.close()


def _status(tmp_path: Path, url: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["status", "--config", _config(tmp_path), "--redis", url])
    return result.exit_code, result.output


def _one_line(text: str) -> str:
    assert text.count("\n") <= 1 and "Traceback" not in text, text
    assert SECRET not in text, text
    return text.strip()


# -- a redis:// URL at a Redis Cluster node ---------------------------------------------------------


@pytest.mark.parametrize("which", ["master", "replica"])
def test_a_standalone_url_at_a_cluster_node_names_it_and_the_cluster_url(
    redis_cluster: EmbeddedCluster, tmp_path: Path, which: str
) -> None:
    """It used to fail every vote with MOVED/CROSSSLOT (a master) or "WAIT cannot be used with replica
    instances" (a replica), and the agent waited for it as for an outage."""
    roles = redis_cluster.roles()
    port = next(p for p, role in roles.items() if role == ("master" if which == "master" else "slave"))
    address = f"127.0.0.1:{port}"
    url = f"redis://:{SECRET}@{address}/0"
    want = f"{address} is a Redis Cluster node: use redis+cluster://:***@{address}"

    exc = _store_error(url)
    assert not isinstance(exc, StoreUnavailable), exc  # waiting will not change the server's kind
    assert want in _one_line(str(exc)), exc

    assert _one_line(_preflight(url)) == f"redis at {redact_url(url)}: {want}"

    code, out = _status(tmp_path, url)
    assert code == 1 and want in _one_line(out), out

    code, out = _run_check_store(url)
    assert code == 1, out
    assert f"PROBLEM mode      this server is a Redis Cluster node: use redis+cluster://:***@{address}" in out


def test_the_agent_refuses_a_standalone_url_at_a_cluster_node_and_exits(
    redis_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    """The whole agent: one line on stderr and exit 1, instead of running and never voting."""
    address = f"127.0.0.1:{redis_cluster.ports[0]}"
    args = ["agent", "--config", _config(tmp_path), "--node-id", "n1", "--redis", f"redis://{address}/0"]
    proc = subprocess.run(
        [sys.executable, "-m", "quorum_cron", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: redis at redis://{address}/0: {address} is a Redis Cluster node: use redis+cluster://{address}"
    ], proc.stderr
    assert "Traceback" not in proc.stderr


# -- a redis:// URL at a Sentinel ------------------------------------------------------------------


def test_a_standalone_url_at_a_sentinel_names_it_and_its_masters(
    sentinel: EmbeddedSentinel, tmp_path: Path
) -> None:
    """It used to fail with Redis's "unknown command 'SCRIPT'"."""
    address = f"127.0.0.1:{sentinel.sentinels[0].port}"
    url = f"redis://{address}/0"
    want = f"{address} is a Redis Sentinel: use redis+sentinel://{address}/qc (it monitors: 'qc')"

    exc = _store_error(url)
    assert not isinstance(exc, StoreUnavailable) and want in _one_line(str(exc)), exc
    assert "SCRIPT" not in str(exc)
    assert _one_line(_preflight(url)) == f"redis at {url}: {want}"

    code, out = _status(tmp_path, url)
    assert code == 1 and want in _one_line(out), out

    code, out = _run_check_store(url)
    assert code == 1, out
    assert (
        f"PROBLEM mode      this server is a Sentinel: use redis+sentinel://{address}/qc (it monitors: 'qc')"
    ) in out


# -- a redis+cluster:// URL at anything but cluster nodes ------------------------------------------


def test_a_cluster_url_at_a_standalone_server_names_it_and_the_redis_url(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """It used to say "Redis Cluster cannot be connected ...: Cluster mode is not enabled on this node",
    and call the store unavailable."""
    address = f"127.0.0.1:{redis_server.port}"
    url = f"redis+cluster://:{SECRET}@{address}"
    want = (
        f"redis at redis+cluster://:***@{address}: {address} is a standalone Redis server, "
        f"not a cluster node or a sentinel: use redis://:***@{address}"
    )
    with pytest.raises(ConfigError) as info:
        RedisStore.from_url(url, "um", **fail_fast())
    assert _one_line(str(info.value)) == want

    code, out = _status(tmp_path, url)
    assert code == 1 and out.strip() == f"error: {want}", out

    code, out = _run_check_store(url)
    assert code == 1 and f"PROBLEM mode      {want}" in out, out


def test_a_cluster_url_at_a_sentinel_names_it_among_unreachable_seeds(sentinel: EmbeddedSentinel) -> None:
    """redis-py keeps only the last seed's error (here a refused connection): each seed is asked."""
    address = f"127.0.0.1:{sentinel.sentinels[0].port}"
    with pytest.raises(ConfigError) as info:
        RedisStore.from_url(f"redis+cluster://{address},127.0.0.1:1", "um", **fail_fast())
    assert f"{address} is a Redis Sentinel: use redis+sentinel://{address}/qc" in _one_line(str(info.value))


def test_an_unreachable_cluster_url_is_still_unavailable() -> None:
    """Nothing answered: not a wrong kind, an outage (the agent waits, a command says it cannot reach it)."""
    with pytest.raises(StoreUnavailable):
        RedisStore.from_url("redis+cluster://127.0.0.1:1", "um", **fail_fast())


# -- a redis+sentinel:// URL at data servers ---------------------------------------------------------


def test_a_sentinel_url_at_data_servers_names_each_and_the_url_for_it(
    redis_server: EmbeddedRedis, redis_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    """The agent used to call it "does not answer like Redis"; each address is named with its kind."""
    data = f"127.0.0.1:{redis_server.port}"
    node = f"127.0.0.1:{redis_cluster.ports[0]}"
    url = f"redis+sentinel://{data},{node}/qc"
    for text in (str(_store_error(url)), _preflight(url)):
        _one_line(text)
        assert f"{data} is a standalone Redis server, not a sentinel: use redis://{data}" in text, text
        assert f"{node} is a Redis Cluster node, not a sentinel: use redis+cluster://{node}" in text, text
        assert "does not answer like Redis" not in text, text

    code, out = _status(tmp_path, url)
    assert code == 1 and f"use redis://{data}" in _one_line(out), out

    code, out = _run_check_store(url)
    assert code == 1 and "PROBLEM mode      no address of the URL is a usable sentinel" in out, out


# -- the right URLs still work, under the documented ACL too -----------------------------------------


def test_right_urls_pass_and_the_check_needs_no_grant_beyond_the_documented_acl() -> None:
    """The check asks ``INFO server`` (``+info`` is in the documented ACL): the documented user passes
    and its ACL LOG stays empty; a user without ``+info`` is not refused (left unchecked)."""
    with EmbeddedRedis() as server:
        admin = server.client()
        try:
            admin.execute_command("ACL", "SETUSER", "quorum-cron", "reset", *documented_acl(admin))
            admin.execute_command("ACL", "SETUSER", "quorum-cron", ">acl-pass")
            admin.execute_command("ACL", "SETUSER", "no-info", "reset", *documented_acl(admin), "-info")
            admin.execute_command("ACL", "SETUSER", "no-info", ">acl-pass")
            admin.execute_command("ACL", "LOG", "RESET")
            url = f"redis://quorum-cron:acl-pass@127.0.0.1:{server.port}/0"
            store = RedisStore.from_url(url, "um", **fail_fast())
            try:
                assert store.time_ms() > 0
                check_server(store, redact_url(url))
            finally:
                store.close()
            assert admin.execute_command("ACL", "LOG") == []
            store = RedisStore.from_url(url.replace("quorum-cron:", "no-info:"), "um", **fail_fast())
            try:
                assert store.time_ms() > 0
            finally:
                store.close()
        finally:
            admin.close()


def test_a_sentinel_url_at_sentinels_and_a_cluster_url_at_a_cluster_pass(
    sentinel: EmbeddedSentinel, redis_cluster: EmbeddedCluster
) -> None:
    for url in (sentinel.url, redis_cluster.url):
        store = RedisStore.from_url(url, "um", **fail_fast())
        try:
            assert store.time_ms() > 0
            check_server(store, redact_url(url))
        finally:
            store.close()
    # The master a Sentinel URL finds is a standalone server: its own redis:// URL passes too.
    client = redis.Redis(port=sentinel.master().port)
    try:
        info = client.info("server")
        assert info.get("redis_mode", info.get("server_mode")) == "standalone"  # (Valkey: server_mode)
    finally:
        client.close()
    store = RedisStore.from_url(f"redis://127.0.0.1:{sentinel.master().port}/0", "um", **fail_fast())
    try:
        assert store.time_ms() > 0
    finally:
        store.close()


def _run_check_store(url: str) -> tuple[int, str]:
    result = CliRunner().invoke(check_store, [url], catch_exceptions=False)
    return result.exit_code, result.output


def test_the_web_server_refuses_a_standalone_url_at_a_sentinel_before_serving(
    sentinel: EmbeddedSentinel, tmp_path: Path
) -> None:
    """``quorum-cron web`` (and every command opening the store) refuses before serving a page, with the
    agent's line; it used to start and show a store error on every page."""
    address = f"127.0.0.1:{sentinel.sentinels[0].port}"
    args = ["web", "--config", _config(tmp_path), "--redis", f"redis://{address}/0", "--bind", "127.0.0.1:0"]
    proc = subprocess.run(
        [sys.executable, "-m", "quorum_cron", *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.strip() == (
        f"error: redis at redis://{address}/0: {address} is a Redis Sentinel: "
        f"use redis+sentinel://{address}/qc (it monitors: 'qc')"
    ), proc.stderr
