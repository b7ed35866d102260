"""``quorum-cron web --bind``: a port out of range is said to be one, not "not HOST:PORT".

``--bind 127.0.0.1:99999`` is HOST:PORT; what is wrong is the port, and the line now says which
ports are taken (0 too: any free port). A port of thousands of digits was a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette")

from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.errors import ConfigError
from quorum_cron.web.server import parse_bind

_RANGE = "is out of range (expected 0-65535, 0 for any free port; e.g. 127.0.0.1:8787)"


@pytest.mark.parametrize(
    ("bind", "line"),
    [
        ("127.0.0.1:99999", f"--bind '127.0.0.1:99999': port 99999 {_RANGE}"),
        ("[::1]:65536", f"--bind '[::1]:65536': port 65536 {_RANGE}"),
        ("h:" + "9" * 5000, f"--bind '{'h:' + '9' * 78}...': port {'9' * 20}... (5000 digits) {_RANGE}"),
        ("nowhere", "--bind 'nowhere' is not HOST:PORT (expected e.g. 127.0.0.1:8787)"),
    ],
)
def test_parse_bind_names_what_is_wrong(bind: str, line: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_bind(bind)
    assert str(refused.value) == line


def test_parse_bind_takes_the_whole_range() -> None:
    assert parse_bind("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind("[::1]:65535") == ("::1", 65535)
    assert parse_bind("localhost:08787") == ("localhost", 8787)


def test_the_web_command_says_the_port_is_out_of_range(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "w"\nsize = 1\nredis_url = "redis://127.0.0.1:1/0"\n')
    result = CliRunner().invoke(main, ["web", "--config", str(cfg), "--bind", "127.0.0.1:99999"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"error: --bind '127.0.0.1:99999': port 99999 {_RANGE}"]
