"""One error style through the real entry point (issue 26, item 6).

Every bad input — click's own usage errors included — is one ``error: ...``
line on stderr naming the value and what was expected, exit status 1. The
agent's first stop signal says that a second one stops running jobs at
once, and ``--log-json`` output is JSON only (real agent, real Redis).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.store.embedded.single import EmbeddedRedis


def config(tmp_path: Path, url: str = "redis://127.0.0.1:1/0") -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nname = "errs1"\nsize = 1\nredis_url = "{url}"\nheartbeat = "500ms"\n\n'
        '[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["history", "UNKNOWN"], "error: unknown job 'UNKNOWN': expected one of a"),
        (
            ["history", "--limit", "0"],
            "error: Invalid value for '--limit': 0 is not in the range 1<=x<=10000.",
        ),
        (["status", "--bogus"], "error: No such option '--bogus'. (see 'quorum-cron status --help')"),
        (["next"], "error: Missing argument 'JOB'. (see 'quorum-cron next --help')"),
        (["nosuch"], "error: No such command 'nosuch'. (see 'quorum-cron --help')"),
        (["status", "--format", "xml"], "error: Invalid value for '--format': 'xml' is not one of"),
        (["members", "add", "d"], "error: Missing option '--reason'."),
        (
            ["pause", "a", "--reason", "disk\nswap"],
            "error: --reason 'disk\\x0aswap' contains a newline: expected one line of printable text",
        ),
        (
            ["pause", "a", "--by", "eve\x1b[31m"],
            "error: --by 'eve\\x1b[31m' contains the control character \\x1b: expected 1-200 printable",
        ),
        (
            ["members", "add", "d", "--reason", "grow\nnow"],
            "error: --reason 'grow\\x0anow' contains a newline: expected one line saying why the membership",
        ),
        (["check-clock", "--max-skew", "250"], "error: --max-skew: '250' has no unit"),
        (
            ["import-crontab", "/dev/null", "--dst-from", "9998-01-01"],
            "error: --dst-from 9998-01-01 is out of range (expected a date from 1970-01-01 to 8999-12-31)",
        ),
        (
            ["import-crontab", "/dev/null", "--user", "x y"],
            "error: --user 'x y' is not a user name (expected letters, digits, '.', '_' or '-', at most 32)",
        ),
        (
            ["check-clock", "--max-skew", "0s"],
            "error: --max-skew: '0s' is out of range (expected more than 0",
        ),
        (
            ["check-clock", "--max-skew", "99999999999999999999d"],
            "error: --max-skew: '99999999999999999999d' is out of range (expected more than 0 and at most 1m",
        ),
    ],
)
def test_bad_input_is_one_error_line_with_exit_1(tmp_path: Path, args: list[str], expected: str) -> None:
    cfg = str(config(tmp_path))
    full = [*args, "--config", cfg] if args[0] not in ("nosuch", "next", "import-crontab") else args
    res = CliRunner().invoke(main, full, prog_name="quorum-cron")
    assert res.exit_code == 1, (res.stdout, res.stderr)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), lines


def test_first_stop_signal_says_a_second_stops_at_once(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    cfg = config(tmp_path, redis_server.url)
    cmd = [
        sys.executable,
        "-m",
        "quorum_cron",
        "agent",
        "--config",
        str(cfg),
        "--node-id",
        "e1",
        "--log-json",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_CRON_")}
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        lines: list[dict[str, object]] = []
        while not any(d.get("event") == "joined" for d in lines):
            line = proc.stderr.readline()
            assert line, (proc.wait(10), lines)
            lines.append(json.loads(line))  # --log-json: every line is JSON, the banner included
            assert time.monotonic() < deadline, lines
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    lines += [json.loads(line) for line in rest.splitlines() if line.strip()]
    assert proc.returncode == 0, lines
    assert lines[0]["event"] == "starting", lines[0]
    stopping = [d for d in lines if d.get("event") == "stopping"]
    assert stopping and "SIGINT received (a second signal stops running jobs at once)" in str(
        stopping[0].get("msg", stopping[0])
    ), stopping


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["sim", "run", "{bad}"], "field 'every' is '400d' (period must be between 1s and 366d)"),
        (["sim", "run", "minority-partition", "--seed", "x"], "'x' is not a valid integer"),
        (
            ["sim", "run", "minority-partition", "--trace", "/nonexistent/dir/t.jsonl"],
            "directory '/nonexistent/dir' does not exist",
        ),
        (["sim", "replay", "{garbage}"], "is not a trace written by 'sim run --trace'"),
    ],
)
def test_a_bad_simulator_input_is_one_error_line_with_exit_2(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    """The simulator's ``run`` and ``replay`` exit 1 when the checker finds a violation: a bad
    argument or input file exits 2, so that a script running it in CI tells them apart (and before
    the run, not after it: an unwritable ``--trace`` was found only once the run had ended)."""
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nnodes = 3\nduration = "1m"\n[[jobs]]\nname = "a"\nevery = "400d"\n')
    garbage = tmp_path / "t.jsonl"
    garbage.write_text("[1, 2]\n")
    full = [a.format(bad=bad, garbage=garbage) for a in args]
    res = CliRunner().invoke(main, full, prog_name="quorum-cron")
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
