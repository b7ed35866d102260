"""The Python API examples run (issue 26, item 10): docs/python-api.md's program and the README's.

Both are taken from the documents as written and run as real processes
against a real redis-server. The docs example is complete (a one-node
cluster that stops itself after its jobs ran). The README example is the
production shape (three members, ``app.run()`` until SIGTERM); the test
changes only its schedule (every second instead of every five minutes) and
its namespace, runs two of its three members (a quorum), waits for the job's
line and stops both with SIGTERM, which must end them with exit 0.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quorum_cron.store.embedded.single import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent


def python_block(text: str) -> str:
    return text.split("```python\n", 1)[1].split("```", 1)[0]


def env_for(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_CRON_")}
    return {**env, "QUORUM_CRON_REDIS_URL": url, **extra}


def test_the_python_api_page_example_runs(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    script = tmp_path / "example.py"
    script.write_text(python_block((ROOT / "docs" / "python-api.md").read_text()))
    res = subprocess.run(
        [sys.executable, str(script)],
        env=env_for(redis_server.url),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert res.returncode == 0, res.stderr
    assert re.search(r"^sync-prices: slot \d\d:\d\d:\d\d UTC, token \d+, on web-1$", res.stdout, re.M), res


def test_the_tests_without_redis_example_runs_on_the_memory_store(tmp_path: Path) -> None:
    """docs/python-api.md's "Tests without Redis": no server at all (no URL in its environment)."""
    page = (ROOT / "docs" / "python-api.md").read_text()
    script = tmp_path / "memory_example.py"
    script.write_text(python_block(page.split("## Tests without Redis\n", 1)[1]) + 'print("ran", ran)\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_CRON_")}
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr
    assert re.fullmatch(r"ran \[\d+, \d+(, \d+)*\]\n", res.stdout), res


def test_the_readme_example_runs_with_a_quorum(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    readme = (ROOT / "README.md").read_text()
    code = python_block(readme.split("## Python API\n", 1)[1])
    assert code.count('"*/5 * * * *"') == 1 and code.count('namespace="shop"') == 1
    script = tmp_path / "readme_example.py"
    script.write_text(code.replace('"*/5 * * * *"', '"@every 1s"').replace('"shop"', '"readme-example"'))
    procs: list[tuple[subprocess.Popen[str], Path]] = []
    try:
        for node in ("web-1", "web-2"):
            out = tmp_path / f"{node}.out"
            with out.open("w") as sink:
                proc = subprocess.Popen(
                    [sys.executable, str(script)],
                    env=env_for(redis_server.url, QUORUM_CRON_NODE_ID=node),
                    stdout=sink,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            procs.append((proc, out))
        line = re.compile(r"^sync-prices: slot \d\d:\d\d token \d+ on web-[12]$", re.M)
        deadline = time.monotonic() + 60
        while not any(line.search(out.read_text()) for _, out in procs):
            for proc, _ in procs:
                assert proc.poll() is None, proc.communicate()
            if time.monotonic() > deadline:
                pytest.fail("the README example's job did not run within 60 s with 2 of 3 members")
            time.sleep(0.2)
        for proc, _ in procs:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
