"""`quorum-cron web --forwarded-allow-ips`: an entry that is no IP address or network is one line.

uvicorn takes such an entry for a literal compared with the peer's address as
text, so a typo (``10.0.0.300``, ``10.0.0.0/33``) or ``*`` inside a list (it
means "any" only alone) was accepted, the server started, and no proxy was
trusted: behind one, every request read as the proxy's own, without a word.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette")

from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.web.server import check_forwarded_ips

_EXPECTED = "is not an IP address or network (expected e.g. 127.0.0.1,10.0.0.0/8, or '*' alone for any)"


@pytest.mark.parametrize(
    ("value", "entry"),
    [
        ("x y", "x y"),
        ("10.0.0.300", "10.0.0.300"),
        ("127.0.0.1,10.0.0.0/33", "10.0.0.0/33"),
        ("127.0.0.1,*", "*"),
    ],
)
def test_an_entry_that_is_no_address_is_one_line(tmp_path: Path, value: str, entry: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "w"\nsize = 1\nredis_url = "redis://127.0.0.1:1/0"\n')
    args = ["web", "--config", str(cfg), "--bind", "127.0.0.1:0", "--forwarded-allow-ips", value]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [f"error: --forwarded-allow-ips: {entry!r} {_EXPECTED}"]


def test_addresses_networks_star_alone_and_none_are_taken() -> None:
    for value in ("127.0.0.1", "127.0.0.1, 10.0.0.0/8", "::1,fe80::/10", "*", " * ", ""):
        check_forwarded_ips(value)
