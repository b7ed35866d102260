"""A config "file" without end (``--config /dev/zero``) is one line, not a read until memory runs out.

``load_config`` read the whole file: ``quorum-cron validate /dev/zero`` (or a
``--config`` naming any endless device) grew until the kernel killed it. It
reads at most ``MAX_CONFIG_BYTES`` and says the file is larger. Run under an
address-space limit, so the old behaviour fails fast instead of taking the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``quorum-cron ARGS`` in a process of its own, under the memory limit."""
    return subprocess.run(
        [sys.executable, "-m", "quorum_cron", *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero on this system")
def test_an_endless_config_is_one_line() -> None:
    res = _cli("validate", "/dev/zero")
    assert res.returncode == 1, res.stderr[-2000:]
    assert res.stderr.splitlines() == [
        "error: /dev/zero: larger than 64 MiB (expected a TOML config file)"
    ], res.stderr[-2000:]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero on this system")
def test_an_endless_admin_token_file_is_one_line(tmp_path: os.PathLike[str]) -> None:
    """``web --admin-token-file /dev/zero`` read until memory ran out (a MemoryError traceback here)."""
    cfg = os.path.join(tmp_path, "c.toml")
    with open(cfg, "w") as fh:
        fh.write('[cluster]\nname = "w"\nsize = 1\nredis_url = "redis://127.0.0.1:1/0"\n')
    args = ["web", "--config", cfg, "--bind", "127.0.0.1:0", "--admin-token-file", "/dev/zero"]
    res = _cli(*args)
    assert res.returncode == 1, res.stderr[-2000:]
    assert res.stderr.splitlines() == [
        "error: admin token file '/dev/zero' is larger than 1 MiB (expected NAME:SECRET lines)"
    ], res.stderr[-2000:]
