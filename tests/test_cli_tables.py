"""``status``, ``history`` and ``next`` read in a pipe at 80 columns: every value whole (issue 26, item 4).

Real agent processes against a real redis-server; the commands run as real
processes behind ``| cat`` with ``COLUMNS=80``, the way an operator or a
cron mail sees them. The values that must survive are taken from the same
command's ``--format json`` output, so the test checks "nothing was cut",
not a layout. Also: next fire times in the job's own zone and in UTC, each
labelled; config drift (one node running another definition of a job) shown
with exit 0 while a quorum still votes; exit 1 once the cluster cannot run
slots; stable JSON types.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quorum_cron.commands.output import utc_label
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, job_toml, never_during_the_test

pytestmark = pytest.mark.slow

NEVER = never_during_the_test()
"""A schedule that does not fire during the test."""
LONG = "nightly-invoice-reconciliation-for-every-region-of-the-billing-cluster"


def cli(*args: str, pipe: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m quorum_cron ARGS | cat`` at 80 columns (the exit status is the command's: pipefail)."""
    cmd = " ".join(f"'{a}'" for a in [sys.executable, "-m", "quorum_cron", *args])
    if pipe:
        cmd = f"set -o pipefail; {cmd} | cat"
    env = {**os.environ, "COLUMNS": "80", "TERM": "xterm-256color"}
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def cluster(tmp_path: Path, redis_server: EmbeddedRedis) -> Iterator[Cluster]:
    c = Cluster(tmp_path, redis_server.url, 3, namespace="tables")
    yield c
    c.close()


def test_status_and_history_piped_at_80_columns_show_every_value(cluster: Cluster) -> None:
    c = cluster
    # LONG never fires by schedule: it runs once, by trigger, so the ledger holds still while read.
    jobs = job_toml(LONG, NEVER, c.out, timezone='"Asia/Tokyo"')
    jobs += job_toml("report", "30 2 * * *", c.out, timezone='"Asia/Tokyo"')
    cfg = c.config(jobs)
    other = c.config(jobs.replace('"-"]', '"other"]', 1), name="other.toml")  # n3: another definition of LONG
    c.start("n1", cfg)
    c.start("n2", cfg)
    c.start("n3", other)
    c.wait_joined(["n1", "n2", "n3"])

    def status_doc() -> dict[str, Any]:
        res = cli("status", "--config", str(cfg), "--format", "json", pipe=False)
        assert res.returncode in (0, 1), res.stderr
        return dict(json.loads(res.stdout))

    def settled() -> dict[str, Any] | None:
        doc = status_doc()
        offsets = [m["clock_offset_ms"] for m in doc["members"]]
        return doc if doc["voting"] == 3 and None not in offsets else None

    settled_doc = c.wait("three voting nodes with a measured clock", settled, 30)
    assert settled_doc["can_run_slots"] is True
    triggered = cli("trigger", LONG, "--config", str(cfg), "--by", "tester", pipe=False)
    assert triggered.returncode == 0, triggered.stderr
    c.wait("the triggered run recorded", lambda: c.succeeded(LONG) or None, 30)

    doc = status_doc()
    assert doc["can_run_slots"] is True and doc["voting"] == 3
    assert doc["drift"] == [{"node": "n3", "jobs": [LONG]}]
    for m in doc["members"]:  # stable types: numbers are numbers
        assert isinstance(m["clock_offset_ms"], float), m
        assert isinstance(m["seen_ms"], int) and isinstance(m["epoch"], int), m
    assert next(j for j in doc["jobs"] if j["job"] == LONG)["last"]["state"] == "succeeded", doc["jobs"]
    report = next(j for j in doc["jobs"] if j["job"] == "report")
    assert report["next_local"].endswith(" JST (Asia/Tokyo)") and " 02:30:00 " in report["next_local"]
    assert report["next_utc"].endswith("Z") and " 17:30:00" in report["next_utc"]

    res = cli("status", "--config", str(cfg))
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "…" not in out and "\x1b" not in out
    wanted = [LONG, NEVER, "30 2 * * *", "Asia/Tokyo", report["next_local"], report["next_utc"]]
    for m in doc["members"]:
        wanted += [m["node"], m["host"], m["clock"]]
    for j in doc["jobs"]:
        if j["last"] is not None:
            wanted += [j["last"]["reason"], j["last"]["executor"], j["last"]["state"]]
    for value in wanted:
        assert value and value in out, (value, out)
    assert f"DRIFT: n3 runs other definitions of {LONG} than this config" in out
    assert "next fire (job zone)" in out and "next fire (UTC)" in out and "last slot (UTC)" in out

    # (LONG alone: "report" fires at 17:30 UTC every day, which a run at that minute would see.)
    res = cli("history", LONG, "--config", str(cfg), "--limit", "5")
    assert res.returncode == 0, res.stderr
    assert "…" not in res.stdout
    lines = res.stdout.splitlines()
    assert lines[0] == "history (1 entry, newest first)" and lines[1].startswith("slot (UTC)"), lines
    assert len(lines) == 3, lines
    # Read after the rows (newer entries may have come since): every row is one of these, in full.
    docs = [
        json.loads(x)
        for x in cli("history", "--config", str(cfg), "--json", "--limit", "50").stdout.splitlines()
    ]
    by_slot = {utc_label(d["slot_ms"]): d for d in docs}
    for row in lines[2:]:
        e = by_slot[row.split("  ")[0]]
        for value in (e["job"], e["state"], e["reason"], e["executor"] or "-", *e["voters"]):
            assert value in row, (value, row)
        assert row.endswith(e["reason"]), row
    # (n3 votes its own definition of LONG: when its vote landed before the commit, the row lists
    # it apart, "n1,n2 [n3: voted another definition]", every voter still in full.)

    # The cluster cannot run slots once two of three are gone: exit 1, and it says why.
    c.stop(["n2", "n3"])
    res = cli("status", "--config", str(cfg))
    assert res.returncode == 1, res.stdout
    assert "QUORUM LOST: 1 of 3 alive, need 2 (down: n2, n3): no slot can run" in res.stdout
    assert (
        json.loads(cli("status", "--config", str(cfg), "--json", pipe=False).stdout)["can_run_slots"] is False
    )


def test_next_formats_label_the_zones(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[cluster]\nname = "n"\nsize = 3\n\n[[jobs]]\nname = "r"\nschedule = "30 2 * * *"\n'
        'timezone = "Asia/Tokyo"\ncommand = ["true"]\n'
    )
    args = ("next", "r", "--config", str(cfg), "-n", "2", "--after", "2025-12-31T12:00:00Z")
    plain = cli(*args)
    assert plain.stdout.splitlines() == [
        "2026-01-01T02:30:00+09:00  2025-12-31T17:30:00+00:00",
        "2026-01-02T02:30:00+09:00  2026-01-01T17:30:00+00:00",
    ]
    docs = json.loads(cli(*args, "--format", "json").stdout)
    assert docs[0] == {
        "fire_ms": 1767202200000,
        "local": "2026-01-01T02:30:00+09:00",
        "utc": "2025-12-31T17:30:00+00:00",
        "timezone": "Asia/Tokyo",
    }
    table = cli(*args, "--format", "table").stdout
    assert "in the job's zone (Asia/Tokyo)" in table and "UTC" in table
    both = cli(*args, "--json", "--format", "table")
    assert both.returncode == 1
    assert both.stderr == "error: --json and --format table disagree: expected one of them\n"
