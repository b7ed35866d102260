"""Output that cannot be written (a full disk) is one line saying so and exit 1, never a traceback.

``import-crontab crontab > cluster.toml`` on a full disk left part of a config
in the file and a traceback (``OSError: [Errno 28] No space left on device``);
so did every command writing to ``/dev/full``, which fails every write as a
full disk does. Real processes, stdout on ``/dev/full``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = (
    '[cluster]\nname = "full"\nsize = 1\n\n[[jobs]]\nname = "a"\nschedule = "* * * * *"\ncommand = ["true"]\n'
)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("command", ["import-crontab", "next", "validate"])
def test_a_write_that_fails_is_one_line_saying_the_output_is_incomplete(tmp_path: Path, command: str) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text(CONFIG)
    crontab = tmp_path / "crontab"
    crontab.write_text("".join(f"{m} * * * * /usr/local/bin/job-{m}\n" for m in range(60)))
    args = {
        "import-crontab": ["import-crontab", str(crontab), "--timezone", "UTC", "--user", "ops"],
        "next": ["next", "a", "--config", str(config), "-n", "1000"],
        "validate": ["validate", str(config)],
    }[command]
    with open("/dev/full", "w") as full:
        res = subprocess.run(
            [sys.executable, "-m", "quorum_cron", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr and "Exception ignored" not in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: cannot write the output to /dev/full: No space left on device: what it holds is incomplete"
    ], res.stderr
