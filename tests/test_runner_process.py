"""The runner's process settings for imported cron jobs: stdin, a clean environment, the directory."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from quorum_cron.agent.jobprocess import CommandTarget, JobRun

SLOT_MS = 1_700_000_000_123


def run(target: CommandTarget, timeout_ms: int = 10_000) -> JobRun:
    return JobRun(target, job="j", fire_ms=SLOT_MS, token=7, node="n1", timeout_ms=timeout_ms)


def test_stdin_reaches_the_process_and_then_ends() -> None:
    data = b"line one\n100% sure\\\n"
    read = "import sys; print(repr(sys.stdin.buffer.read()))"
    out = asyncio.run(run(CommandTarget(argv=(sys.executable, "-c", read), stdin=data)).run())
    assert out.succeeded, out.detail
    assert out.detail == f"exit 0\n--- stdout ---\n{data!r}"


def test_stdin_a_job_does_not_read_is_no_failure_and_no_hang() -> None:
    # More than a pipe buffer holds: writing it blocks until the job exits without reading.
    t0 = time.monotonic()
    out = asyncio.run(run(CommandTarget(shell="exit 0", stdin=b"x" * 300_000)).run())
    assert out.succeeded and out.detail == "exit 0"
    assert time.monotonic() - t0 < 5


def test_without_stdin_the_process_reads_end_of_file() -> None:
    out = asyncio.run(run(CommandTarget(shell="wc -c")).run())
    assert out.succeeded and out.detail.endswith("--- stdout ---\n0")


def test_a_clean_environment_has_only_the_jobs_variables_and_the_slot() -> None:
    # (An LC_* variable: inherit_env = true passes on only the allowlist of agent/jobenv.py.)
    os.environ["LC_QUORUM_CRON_TEST_LEAK"] = "1"
    try:
        env = {"A": "1", "PATH": "/usr/bin:/bin"}
        clean = asyncio.run(run(CommandTarget(argv=("/usr/bin/env", "-0"), env=env, inherit_env=False)).run())
        leak = "printenv LC_QUORUM_CRON_TEST_LEAK"
        inherited = asyncio.run(run(CommandTarget(shell=leak, env=env)).run())
        not_inherited = asyncio.run(run(CommandTarget(shell=leak, env=env, inherit_env=False)).run())
    finally:
        del os.environ["LC_QUORUM_CRON_TEST_LEAK"]
    assert clean.succeeded, clean.detail
    items = clean.detail.split("--- stdout ---\n", 1)[1].split("\0")
    names = {item.split("=", 1)[0] for item in items if item}
    assert names == {
        "A",
        "PATH",
        "QUORUM_CRON_JOB",
        "QUORUM_CRON_SLOT",
        "QUORUM_CRON_SLOT_MS",
        "QUORUM_CRON_TOKEN",
        "QUORUM_CRON_NODE",
    }
    assert inherited.detail == "exit 0\n--- stdout ---\n1"
    assert not_inherited.detail == "exit 1"


def test_cwd_is_where_the_process_starts(tmp_path: Path) -> None:
    out = asyncio.run(run(CommandTarget(shell="pwd", cwd=str(tmp_path))).run())
    assert out.succeeded and out.detail.endswith(f"--- stdout ---\n{tmp_path}")
