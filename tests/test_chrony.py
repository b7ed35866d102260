"""``check-clock`` against a real chronyd serving this machine's clock on a loopback port.

chronyd runs in the foreground (``-d``), without touching the system clock
(``-x``), as a local stratum-8 server on a free UDP port, with no command
port and every file in a temporary directory. CI installs the ``chrony``
package; elsewhere the test skips naming chronyd when it is missing.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.clock.check import check_clock
from quorum_cron.clock.ntp import NtpQueryError, NtpServer, query_once
from tests.tools import require_tool

READY_TIMEOUT_S = 15.0


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _await_synchronised(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll with NTP queries until chronyd answers as a synchronised server (bounded)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    last = "no query yet"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"chronyd exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            sample = query_once(NtpServer("127.0.0.1", port), timeout_s=0.2)
        except NtpQueryError as exc:
            last = str(exc)
            time.sleep(0.05)  # polling interval while chronyd binds its port
            continue
        if sample.leap != 3 and 0 < sample.stratum < 16:
            return
        last = f"stratum {sample.stratum}, leap {sample.leap}"
    pytest.fail(f"chronyd not serving time within {READY_TIMEOUT_S} s ({last}):\n{log.read_text()[-2000:]}")


@pytest.fixture
def chronyd(tmp_path: Path) -> Iterator[int]:
    binary = require_tool("chronyd")
    # chronyd drops root privileges to its own user: let it write its pidfile here.
    tmp_path.chmod(0o777)
    port = _free_udp_port()
    conf = tmp_path / "chrony.conf"
    conf.write_text(
        f"port {port}\n"
        "bindaddress 127.0.0.1\n"
        "allow 127.0.0.1\n"
        "local stratum 8\n"
        "cmdport 0\n"
        "bindcmdaddress /\n"  # no Unix command socket either
        f"pidfile {tmp_path / 'chronyd.pid'}\n"
    )
    log = tmp_path / "chronyd.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, "-d", "-x", "-f", str(conf)], stdout=out, stderr=subprocess.STDOUT)
    try:
        _await_synchronised(port, proc, log)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_check_clock_against_chronyd_reports_an_offset_near_zero(chronyd: int) -> None:
    result = CliRunner().invoke(
        check_clock, ["--server", f"127.0.0.1:{chronyd}", "--samples", "4", "--sample-interval", "0"]
    )
    assert result.exit_code == 0, result.output
    samples = re.findall(
        r"^  #\d offset ([+-][\d.]+) ms  delay ([\d.]+) ms  stratum (\d+)", result.output, re.M
    )
    assert len(samples) == 4, result.output
    for offset, delay, stratum in samples:
        # NTP's own bound (offset ± delay/2) holds the true offset, 0 on one machine, within 5 ms.
        assert abs(float(offset)) <= 5 + float(delay) / 2, result.output
        assert stratum == "8"
    assert "verdict: clock trusted: NTP bound" in result.output
