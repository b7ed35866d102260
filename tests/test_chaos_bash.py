"""The harness names a bash too old for its jobs, on one line, before it starts anything.

The jobs timestamp the ground truth with ``$EPOCHREALTIME`` (bash >= 5.0); under an
older bash it expands to nothing and the checker misread every line. A fake ``bash``
first on PATH stands in for an old one: it prints the version it is told to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.__main__ import missing_tools
from chaos.bash import bash_problem, find_bash, parse_version

ROOT = Path(__file__).resolve().parent.parent


def _fake_bash(bin_dir: Path, version: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "bash"
    fake.write_text(f"#!/bin/sh\nprintf '%s' '{version}'\n")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5.2.15(1)-release", (5, 2)),
        ("5.0.0(1)-release", (5, 0)),
        ("4.4.20(1)-release", (4, 4)),
        ("3.2.57(1)-release", (3, 2)),
        ("", None),
        ("zsh 5.9", None),
    ],
)
def test_parse_version(text: str, expected: tuple[int, int] | None) -> None:
    assert parse_version(text) == expected


def test_an_old_bash_on_path_is_named_with_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_bash(tmp_path / "bin", "4.4.20(1)-release")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert find_bash() == str(fake)
    expected = (
        f"bash >= 5.0 (for $EPOCHREALTIME, the jobs' start time): {fake} is version '4.4.20(1)-release'"
    )
    assert bash_problem() == expected
    assert expected in missing_tools()
    _fake_bash(tmp_path / "bin", "")
    assert bash_problem() == (
        f"bash >= 5.0 (for $EPOCHREALTIME, the jobs' start time): {fake} reports no $BASH_VERSION"
    )
    _fake_bash(tmp_path / "bin", "5.0.17(1)-release")
    assert bash_problem() is None


def test_the_real_bash_passes() -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash on PATH")
    assert bash_problem() is None, bash_problem()


def test_run_refuses_an_old_bash_on_one_line(tmp_path: Path) -> None:
    """The whole CLI: exit 2, one line naming the bash, its version and what is expected. PATH
    holds the fake bash and ``ip`` only, so no run can start whatever the check does."""
    fake = _fake_bash(tmp_path / "bin", "4.4.20(1)-release")
    ip = shutil.which("ip")
    if ip is not None:
        (fake.parent / "ip").symlink_to(ip)
    done = subprocess.run(
        [sys.executable, "-m", "chaos", "run", "--seconds", "10", "--dir", str(tmp_path / "run")],
        cwd=ROOT,
        env=dict(os.environ, PATH=str(fake.parent)),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: the chaos harness needs"), line
    assert (
        f"bash >= 5.0 (for $EPOCHREALTIME, the jobs' start time): {fake} is version '4.4.20(1)-release'"
        in line
    )
