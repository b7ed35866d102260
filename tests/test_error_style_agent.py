"""Issue 26 item 6 (one error style), the agent's and the config reader's side.

* A second Ctrl-C stops the running jobs at once; their slots record that
  cause, not "shutdown grace period expired" (the grace had not expired).
* A node refused because its id is held never joined: its log must not say
  ``left ... exit_code=0`` before the command's ``error: ... (exit 3)``.
* ``validate`` reports every problem of a file in one run, duplicate job
  names included (they used to show only once the other problems were fixed).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from quorum_cron.config.file import parse_config
from quorum_cron.config.settings import InvalidConfig
from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, job_toml


@pytest.fixture
def made(redis_server: EmbeddedRedis) -> Iterator[list[Cluster]]:
    out: list[Cluster] = []
    yield out
    for c in out:
        c.close()


@pytest.mark.slow
def test_second_sigint_records_its_cause_not_an_expired_grace(
    tmp_path: Path, redis_server: EmbeddedRedis, made: list[Cluster]
) -> None:
    c = Cluster(tmp_path, redis_server.url, 1, namespace="cutgrace")
    made.append(c)
    cfg = c.config(job_toml("long", "@every 1s", c.out, secs=120, timeout='"10m"'))
    node = c.start("n1", cfg, "--grace", "10m")
    [run] = c.wait("the job to start", lambda: c.lines("start", "long"), 30)[:1]
    c.signal("n1", signal.SIGINT)
    c.wait("the first stop", lambda: node.logged("stopping"), 15)
    c.signal("n1", signal.SIGINT)
    assert node.proc.wait(timeout=30) == 0, c.describe()
    said = [str(e.get("msg")) for e in node.logged("stopping")]
    assert any("second SIGINT before the grace period ended: stopping 1 job(s)" in m for m in said), said
    assert not any("grace period over" in m for m in said), said
    entry = c.ledger("long")[run.slot]
    assert entry.state == SlotState.FAILED, entry
    assert "second SIGINT before the grace period ended" in entry.detail, entry.detail
    assert "expired" not in entry.detail, entry.detail


@pytest.mark.slow
def test_refused_duplicate_node_id_never_says_it_left(
    tmp_path: Path, redis_server: EmbeddedRedis, made: list[Cluster]
) -> None:
    c = Cluster(tmp_path, redis_server.url, 3, namespace="dupid")
    made.append(c)
    cfg = c.config("")
    c.start("n1", cfg)
    c.wait_joined(["n1"])
    c.nodes["holder"] = c.nodes.pop("n1")  # keep the holder for cleanup; the next start reuses "n1"
    dup = c.start("n1", cfg)
    assert dup.proc.wait(timeout=30) == 3, c.describe()
    # The exit may come before the reader thread has taken the last lines: await them.
    c.wait(
        "the refusal's lines",
        lambda: bool(dup.logged("not_joined")) and any(t.startswith("error: ") for t in dup.text),
        10,
    )
    assert not dup.logged("joined") and not dup.logged("left"), c.describe()
    [gone] = dup.logged("not_joined")
    assert gone.get("exit_code") == 3, gone
    errors = [t for t in dup.text if t.startswith("error: ")]
    assert len(errors) == 1 and "n1" in errors[0], dup.text
    assert list(c.stop(["holder"]).values()) == [0], c.describe()  # the holder ran on, unharmed


BAD = """\
[cluster]
namespace = "x"
size = 3
max_skew = "5 parsecs"
bogus = 1

[[jobs]]
name = "a"
schedule = "*/0 * * * *"
command = ["true"]
timout = "3s"

[[jobs]]
name = "a"
schedule = "@hourly"
command = "true"
"""


def test_validate_reports_every_problem_in_one_run(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    res = subprocess.run(
        [sys.executable, "-m", "quorum_cron", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1, res
    lines = res.stderr.splitlines()
    expected = [
        "cluster: field 'bogus': unknown key",
        "cluster: field 'max_skew': '5 parsecs' is not a duration",
        "job 'a': field 'timout': unknown key",
        "job 'a': field 'schedule': invalid cron expression '*/0 * * * *'",
        "job 'a': field 'name': duplicate job name (jobs #1 and #2)",
        "job 'a': field 'command': 'true' is a string",
    ]
    for want in expected:
        assert sum(want in line for line in lines) == 1, (want, lines)
    assert len(lines) == len(expected) and all(line.startswith("error: ") for line in lines), lines


def test_duplicate_name_is_reported_when_neither_job_parses() -> None:
    data = {
        "cluster": {"name": "x", "size": 1},
        "jobs": [
            {"name": "a", "schedule": "nonsense", "command": ["true"]},
            {"name": "b", "schedule": "@hourly", "command": ["true"]},
            {"name": "a", "schedule": "@hourly", "command": "true"},
        ],
    }
    with pytest.raises(InvalidConfig) as info:
        parse_config(data, "t.toml")
    message = "\n".join(info.value.errors)
    assert "t.toml: job 'a': field 'name': duplicate job name (jobs #1 and #3)" in message, message
    assert "field 'schedule'" in message and "field 'command'" in message, message
