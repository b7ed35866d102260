"""A reader that leaves early (``quorum-cron status | head -1``) does not change the exit status.

Click exits 1 on a closed pipe, and a ``set -o pipefail`` check reads 1 from
``status`` as "the cluster cannot run slots". Real processes, real pipes:
the reader closes its end before the command writes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = '[cluster]\nname = "pipes"\nsize = 1\n\n[[jobs]]\nname = "a"\nschedule = "* * * * *"\n'
CONFIG += 'command = ["true"]\n'


def _reader_gone_at_once(args: list[str]) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "quorum_cron", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader leaves before the command's first write: that write fails
    err = proc.stderr.read()
    return proc.wait(timeout=60), err


@pytest.mark.parametrize(("valid", "status"), [(True, 0), (False, 1)])
def test_the_exit_status_is_the_commands_own_when_the_reader_leaves(
    tmp_path: Path, valid: bool, status: int
) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text(CONFIG if valid else CONFIG.replace('"* * * * *"', '"*/0 * * * *"'))
    code, err = _reader_gone_at_once(["next", "a", "--config", str(config), "-n", "1000"])
    assert code == status, err
    if valid:
        assert err == "", err  # (no traceback, no "Broken pipe" line)
    else:
        assert err.startswith("error: ") and len(err.splitlines()) == 1, err
