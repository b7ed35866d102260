"""Bad input gets one line naming the value and what was expected, a non-zero exit, no traceback (issue 11).

Real processes (``python -m quorum_cron ...``) against real redis-servers:
one with a password, one with a ``maxmemory-policy`` other than
``noeviction``, one socket that is not Redis at all. Passwords of every
shape stay out of what the commands print.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from quorum_cron.agent.preflight import eviction_problem
from quorum_cron.store.embedded.single import EmbeddedRedis

CLI = [sys.executable, "-m", "quorum_cron"]


def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def one_line_error(res: subprocess.CompletedProcess[str], code: int | None = None) -> str:
    """The single ``error: ...`` line of a failed command (asserts there is exactly that)."""
    assert res.returncode != 0, res
    if code is not None:
        assert res.returncode == code, res
    assert "Traceback" not in res.stderr, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    assert len(errors[0]) < 600, errors[0]
    return errors[0]


def config(tmp_path: Path, url: str, name: str = "errs") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[cluster]\nname = "{name}"\nsize = 1\nredis_url = "{url}"\nntp_unreachable = "store-time"\n'
        'heartbeat = "500ms"\n\n[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


@pytest.fixture(scope="module")
def own_redis() -> Iterator[EmbeddedRedis]:
    """A server these tests may reconfigure (password, maxmemory-policy)."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture
def not_redis() -> Iterator[str]:
    """A TCP server on loopback that answers every connection like a web server."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"redis://127.0.0.1:{srv.getsockname()[1]}/0"
    finally:
        stop.set()
        t.join(5)
        srv.close()


def test_next_after_out_of_range_is_one_line(tmp_path: Path) -> None:
    cfg = config(tmp_path, "redis://127.0.0.1:1/0")
    for after in ("9999-12-31T23:59:59Z", "0001-01-01T00:00:00+05:00", "0001-01-01T00:00:00"):
        line = one_line_error(run("next", "a", "--config", str(cfg), "--after", after))
        assert after in line and "out of range" in line


@pytest.mark.parametrize("node_id", ["", "a\nb", "x}:{y", "n" * 100_000, "bad id", "\x1b[31m"])
def test_invalid_node_ids_are_refused(tmp_path: Path, node_id: str) -> None:
    cfg = config(tmp_path, "redis://127.0.0.1:1/0")
    line = one_line_error(run("agent", "--config", str(cfg), "--node-id", node_id, timeout=30), 1)
    assert "node id" in line and "expected 1-100 characters" in line
    assert "\x1b" not in line


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://:x@/0", "has no host"),
        ("redis://127.0.0.1:6379/notadb", "database 'notadb' is not a number"),
        ("redis://:pa/ss@127.0.0.1:6379/0", "percent-encoded"),
    ],
)
def test_bad_redis_urls_are_refused(tmp_path: Path, url: str, expected: str) -> None:
    cfg = config(tmp_path, "redis://127.0.0.1:1/0")
    for args in (("agent", "--node-id", "n1"), ("status",), ("pause", "a")):
        line = one_line_error(run(args[0], "--config", str(cfg), "--redis", url, *args[1:]))
        assert expected in line, line
        assert "pa/ss" not in line and ":x@" not in line


def test_a_bad_redis_url_from_the_environment_is_named_so(tmp_path: Path) -> None:
    """The file's URL is fine; the one that overrides it is not. The line said only "'http://x'
    has scheme 'http'", leaving the user to look for it in the file, where it is not."""
    cfg = config(tmp_path, "redis://127.0.0.1:1/0")
    env = {**os.environ, "QUORUM_CRON_REDIS_URL": "http://:hunter2@x/0"}
    for args in (("agent", "--node-id", "n1"), ("status",)):
        res = subprocess.run(
            [*CLI, args[0], "--config", str(cfg), *args[1:]],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
        line = one_line_error(res, 1)
        assert line.startswith(
            "error: --redis / QUORUM_CRON_REDIS_URL: 'http://:***@x/0' has scheme 'http'"
        ), line
        assert "hunter2" not in res.stderr


def test_by_is_bounded(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    cfg = config(tmp_path, redis_server.url)
    for by in ("x" * 1000, "a\x1bb", ""):
        line = one_line_error(run("pause", "a", "--config", str(cfg), "--by", by))
        assert "--by" in line and "expected 1-200 printable characters" in line


def test_wrong_password_is_one_line_without_the_password(tmp_path: Path, own_redis: EmbeddedRedis) -> None:
    admin = own_redis.client()
    admin.config_set("requirepass", "right-pass")
    try:
        url = own_redis.url.replace("redis://", "redis://:wrong-pass@")
        cfg = config(tmp_path, url)
        line = one_line_error(run("agent", "--config", str(cfg), "--node-id", "n1"), 1)
        assert "refused the credentials" in line and "wrong-pass" not in line
        line = one_line_error(run("status", "--config", str(cfg)))
        assert "wrong-pass" not in line
    finally:
        admin.config_set("requirepass", "")
        admin.close()


def test_server_that_is_not_redis(tmp_path: Path, not_redis: str) -> None:
    cfg = config(tmp_path, not_redis)
    line = one_line_error(run("agent", "--config", str(cfg), "--node-id", "n1"), 1)
    assert "does not answer like Redis" in line
    for args in (("trigger", "a"), ("pause", "a"), ("status",), ("history",)):
        line = one_line_error(run(*args, "--config", str(cfg)))
        assert "redis.call" not in line and "KEYS[" not in line  # no Lua source in the message


def test_every_command_says_a_server_that_is_not_redis_is_not_redis(tmp_path: Path, not_redis: str) -> None:
    """The agent's line, naming the address and what was expected, from every command that opens the
    store; they said "unavailable during time: Protocol error, got "H" as reply type byte", as for
    a server that is down (docs/operations.md: one line naming the value and what was expected)."""
    cfg = str(config(tmp_path, not_redis))
    expected = f"error: the server at {not_redis} does not answer like Redis ("
    for args in (
        ("status",),
        ("history",),
        ("trigger", "a"),
        ("pause", "a"),
        ("resume", "a"),
        ("members", "show"),
        ("members", "add", "x", "--reason", "r"),
    ):
        line = one_line_error(run(*args, "--config", cfg), 1)
        assert line.startswith(expected) and line.endswith("): expected a Redis server"), (args, line)
    res = run("check-store", not_redis)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res
    said = f"PROBLEM connect   the server at {not_redis} does not answer like Redis ("
    assert said in res.stdout and "expected a Redis server" in res.stdout, res.stdout
    line = one_line_error(run("demo", "--redis", not_redis), 1)  # (its own check: store/connect.py)
    assert line.startswith(expected) and line.endswith("): expected a Redis server"), line


def test_metrics_port_in_use_and_bad_address(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    cfg = config(tmp_path, redis_server.url, "metrics")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = str(busy.getsockname()[1])
        args = ("agent", "--config", str(cfg), "--node-id", "m1", "--metrics-addr", "127.0.0.1")
        line = one_line_error(run(*args, "--metrics-port", port), 1)
        assert port in line and "cannot serve metrics" in line
    args = ("agent", "--config", str(cfg), "--node-id", "m1", "--metrics-port", "0")
    line = one_line_error(run(*args, "--metrics-addr", "not an address"), 1)
    assert "'not an address'" in line


def test_corrupt_members_key_is_refused_at_start(tmp_path: Path, own_redis: EmbeddedRedis) -> None:
    client = own_redis.client()
    try:
        client.set("qc:{corrupt}:members", "not a hash")
        cfg = config(tmp_path, own_redis.url, "corrupt")
        line = one_line_error(run("agent", "--config", str(cfg), "--node-id", "n1"), 1)
        assert "qc:{corrupt}:members" in line and "is a string" in line
    finally:
        client.delete("qc:{corrupt}:members")
        client.close()


def _start_agent(cfg: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "agent", "--config", str(cfg), "--node-id", "n1", "--log-json", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(proc: subprocess.Popen[str], needle: str, timeout: float = 30) -> list[str]:
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"no {needle!r} in {lines}")


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def test_own_corrupt_member_entry_does_not_stop_the_start(tmp_path: Path, own_redis: EmbeddedRedis) -> None:
    client = own_redis.client()
    client.hset("qc:{ownjunk}:members", "n1", "[" * 10_000)
    cfg = config(tmp_path, own_redis.url, "ownjunk")
    proc = _start_agent(cfg)
    try:
        _wait_for(proc, '"event":"joined"')
    finally:
        assert _stop(proc) == 0
        client.close()


@pytest.mark.parametrize(
    "policy", ["allkeys-lru", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"]
)
def test_any_policy_but_noeviction_is_refused(tmp_path: Path, own_redis: EmbeddedRedis, policy: str) -> None:
    # volatile-* evicts keys with a TTL: every slot key has one.
    admin: redis.Redis = own_redis.client()
    admin.config_set("maxmemory-policy", policy)
    try:
        cfg = config(tmp_path, own_redis.url, "evict")
        line = one_line_error(run("agent", "--config", str(cfg), "--node-id", "n1"), 1)
        assert f"maxmemory-policy {policy}," in line and "expected noeviction" in line
        assert "--allow-evicting-redis" in line
    finally:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()


def test_eviction_check_is_an_allowlist() -> None:
    url = "redis://h:6379/0"
    assert eviction_problem("noeviction", url) is None
    # A policy a later Redis adds is refused until someone checks what it evicts.
    problem = eviction_problem("allkeys-newfangled", url)
    assert problem is not None and "maxmemory-policy allkeys-newfangled," in problem
    # Unknown (no INFO in the ACL, Redis not up yet): no verdict, the agent starts without the check.
    assert eviction_problem(None, url) is None and eviction_problem("", url) is None


def test_evicting_maxmemory_policy_is_refused_unless_overridden(
    tmp_path: Path, own_redis: EmbeddedRedis
) -> None:
    admin: redis.Redis = own_redis.client()
    admin.config_set("maxmemory-policy", "volatile-ttl")
    try:
        cfg = config(tmp_path, own_redis.url, "evict")
        line = one_line_error(run("agent", "--config", str(cfg), "--node-id", "n1"), 1)
        assert "maxmemory-policy volatile-ttl" in line and "--allow-evicting-redis" in line
        proc = _start_agent(cfg, "--allow-evicting-redis")
        try:
            lines = _wait_for(proc, '"event":"joined"')
            assert any('"event":"eviction"' in x and '"level":"error"' in x for x in lines), lines
        finally:
            assert _stop(proc) == 0
    finally:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()


@pytest.fixture
def silent_ntp() -> Iterator[str]:
    """An NTP server address on loopback that never answers (a bound UDP socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(
    ("url", "expected", "secret"),
    [
        ("redis+sentinel://admin:Xk9q/Zz@sent1/mymaster", "percent-encoded", "Xk9q"),
        ("redis+cluster://:Xk9q#Zz@node1", "percent-encoded", "Xk9q"),
        ("redis+sentinel://admin:4242/mymaster@127.0.0.1", "percent-encoded", "4242"),
        ("redis://127.0.0.1:6379/²", "database '²' is not a number", None),
        ("redis+sentinel://127.0.0.1:²/m", "has port '²'", None),
    ],
)
def test_sentinel_and_cluster_passwords_and_unicode_digits_are_one_line(
    tmp_path: Path, url: str, expected: str, secret: str | None
) -> None:
    """The security review's cases, through validate (the file) and status (--redis): a raw ``/``
    or ``#`` in a Sentinel or Cluster password was printed as a path or a host, or taken as the
    host ``admin:4242``; ``'²'`` passed ``isdigit`` and ``int`` raised."""
    cfg = config(tmp_path, url)
    for res in (run("validate", str(cfg)), run("status", "--config", str(cfg), "--redis", url)):
        line = one_line_error(res)
        assert expected in line, line
        if secret is not None:
            assert secret not in res.stdout + res.stderr, line


@pytest.mark.parametrize(
    ("password", "userinfo", "secrets"),
    [
        ("se/cr#et", ":se%2Fcr%23et", ("se/cr#et", "se%2Fcr%23et", "se%2F", "cr#et", "cr%23et")),
        ("PwOnly", "PwOnly", ("PwOnly",)),
    ],
)
def test_validate_and_check_clock_never_print_the_password(
    tmp_path: Path,
    own_redis: EmbeddedRedis,
    silent_ntp: str,
    password: str,
    userinfo: str,
    secrets: tuple[str, ...],
) -> None:
    """A percent-encoded ``/`` (and ``#``) in the password; a bare ``redis://PwOnly@host``."""
    url = own_redis.url.replace("redis://", f"redis://{userinfo}@")
    admin: redis.Redis = own_redis.client()
    if password != "PwOnly":
        admin.config_set("requirepass", password)
    try:
        cfg = config(tmp_path, url, "secret")
        res = run("validate", str(cfg))
        out = res.stdout + res.stderr
        assert res.returncode == 0, out
        assert (
            "redis: redis://***@127.0.0.1:" if password == "PwOnly" else "redis: redis://:***@127.0.0.1:"
        ) in out
        args = ("--server", silent_ntp, "--samples", "1", "--timeout", "0.05", "--sample-interval", "0")
        res = run("check-clock", *args, "--redis", url)
        out = res.stdout + res.stderr
        assert "Traceback" not in out, out
        assert "store TIME (redis://" in out, out
        if password != "PwOnly":  # the right password: the store's clock was read
            assert "store TIME (redis://:***@" in out and "failed" not in out.split("store TIME", 1)[1], out
        for secret in secrets:
            assert secret not in out, (secret, out)
    finally:
        admin.config_set("requirepass", "")
        admin.close()
