"""``quorum-cron demo`` end to end: real agent processes, a node killed halfway, a clean tally."""

from __future__ import annotations

import re
import subprocess

import pytest
from click.testing import CliRunner

from quorum_cron.commands.demo import demo

pytestmark = pytest.mark.slow


def test_demo_runs_every_slot_once_and_cleans_up() -> None:
    result = CliRunner().invoke(demo, ["--nodes", "3", "--duration", "8"], catch_exceptions=False)
    out = result.output
    assert result.exit_code == 0, out
    assert "all 3 nodes joined" in out
    assert re.search(r"SIGKILL node3 .* 2 of 3 nodes remain", out), out
    assert re.search(r"^tick +\d\d:\d\d:\d\d\.000 +node\d +2 +\d+ ms$", out, re.M), out
    assert "ledger agrees with what the jobs wrote" in out
    assert "every due slot ran exactly once" in out
    rows = dict(re.findall(r"│ (tick|report) +│ +(\d+ +│ +\d+ +│ +0 +│ +0) │", out))
    assert set(rows) == {"tick", "report"}, out
    # Every process the demo started is gone (their command lines name the demo's temp dir).
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert [line for line in ps.splitlines() if "quorum-cron-demo-" in line] == []
