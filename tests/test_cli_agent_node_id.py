"""``QUORUM_CRON_NODE_ID`` set but empty is refused, not read as unset (then the host name).

An operator who writes ``QUORUM_CRON_NODE_ID=$NODE`` with ``NODE`` undefined
gets an empty variable; click treats that as no variable, and the agent ran
under the host name, a node id nobody chose (and one that may clash with
or outlive the intended one in the membership record). Each run below stops
at ``--grace bogus`` once the node id is settled, so no store is reached.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "node.toml"
    path.write_text(
        '[cluster]\nname = "node"\nsize = 1\nredis_url = "redis://127.0.0.1:1/0"\n\n'
        '[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


def _agent(config: Path, env: dict[str, str | None], *args: str) -> tuple[int, str]:
    result = CliRunner(env=env).invoke(main, ["agent", "--config", str(config), "--grace", "bogus", *args])
    return result.exit_code, result.stderr


def test_an_empty_node_id_variable_is_one_line_naming_it(config: Path) -> None:
    code, err = _agent(config, {"QUORUM_CRON_NODE_ID": ""})
    assert code == 1
    assert err == (
        "error: QUORUM_CRON_NODE_ID is set but empty (expected a node id, or unset it for the host name)\n"
    ), err


def test_an_unset_variable_still_means_the_host_name_and_the_flag_still_wins(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the package re-exports the command under the module's name: patch the module itself)
    monkeypatch.setattr(
        importlib.import_module("quorum_cron.commands.agent"), "default_node_id", lambda: "host-1"
    )
    for env, args in (
        ({"QUORUM_CRON_NODE_ID": None}, ()),
        ({"QUORUM_CRON_NODE_ID": ""}, ("--node-id", "n1")),
    ):
        code, err = _agent(config, env, *args)
        assert code == 1 and "--grace" in err and "QUORUM_CRON_NODE_ID" not in err, err


def test_a_blank_variable_is_refused_as_a_node_id(config: Path) -> None:
    code, err = _agent(config, {"QUORUM_CRON_NODE_ID": " "})
    assert code == 1 and err.startswith("error: node id ' ' is not valid"), err
