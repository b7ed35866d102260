"""``ntp_servers = []`` is refused with the advice docs/configuration.md gives: leave the key out.

It was refused as "expected 1-16 strings (NTP server host names)", which read as if a list of
servers were required, when no key at all is the documented way to have none.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from quorum_cron.cli import main

_CLUSTER = '[cluster]\nname = "prod"\nsize = 3\n'


def test_an_empty_ntp_servers_list_says_to_leave_the_key_out(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(_CLUSTER + "ntp_servers = []\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: {path}: cluster: field 'ntp_servers': [] is an empty list "
        "(expected 1-16 NTP server host names; leave the key out for none)"
    ]
    docs = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    assert "an empty list `[]` (leave the key out for none)" in docs


def test_the_key_left_out_is_no_ntp_servers(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(_CLUSTER)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
