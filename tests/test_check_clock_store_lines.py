"""``check-clock --redis URL`` whose store ``TIME`` probe fails names the store once and says what failed.

Its store-TIME line and its verdict said the store layer's own line after the masked URL: the
address a second time (without its user), the internal operation ("unavailable during time",
"refused time"), and for a refused password the agent's question "changed under a running
agent?" (no agent runs here). Real servers: a port where nothing listens (a bound socket that
never listens: refused, and no one else can take the port) and a redis-server with a password.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from quorum_cron.clock.check import check_clock
from tests.store_lines import PASSWORD, locked_server, unlistened_port


def report(url: str) -> list[str]:
    """The report of a check against the store alone (no NTP server: its TIME decides)."""
    result = CliRunner().invoke(check_clock, ["--redis", url])
    assert result.exit_code == 2, result.output
    assert PASSWORD not in result.output
    return result.stdout.splitlines()


@pytest.fixture
def refused_port() -> Iterator[int]:
    with unlistened_port() as port:
        yield port


def test_nothing_listening(refused_port: int) -> None:
    shown = f"redis://:***@127.0.0.1:{refused_port}/0"
    lines = report(f"redis://:{PASSWORD}@127.0.0.1:{refused_port}/0")
    assert lines[1:] == [
        f"store TIME ({shown}): failed: unavailable: Connection refused",
        "verdict: clock trust unknown: no store TIME check yet "
        f"(last probe failed: {shown}: unavailable: Connection refused)",
    ]


def test_a_refused_password() -> None:
    with locked_server() as server:
        lines = report(f"redis://:wrong-{PASSWORD}@127.0.0.1:{server.port}/0")
    shown = f"redis://:***@127.0.0.1:{server.port}/0"
    why = (
        "the password or user was refused "
        "(wrong or disabled; expected the password, and user, of that server in the URL)"
    )
    assert lines[1:] == [
        f"store TIME ({shown}): failed: {why}",
        f"verdict: clock trust unknown: no store TIME check yet (last probe failed: {shown}: {why})",
    ]
