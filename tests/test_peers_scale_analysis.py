"""The analysis of benchmarks/peers_scale.py: missed, duplicated, lateness, /proc parsing, the table.

Pure functions on hand-written records; nothing is started (the benchmark
itself never runs in the test suite).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.benchmark_module import load_benchmark

ps = load_benchmark("peers_scale.py", "peers_scale")

M0 = 1_800_000_000_000 // 60_000 * 60_000  # a whole minute, in ms
JOBS = ["j000000", "j000001", "j000002"]


def lines(*starts: tuple[str, int, int, float]) -> str:
    """Records ``job slot pid start_s`` for (job, slot offset in minutes, pid, start offset ms)."""
    return "".join(
        f"{j} {M0 + m * 60_000} {pid} {(M0 + m * 60_000 + t) / 1000:.6f}\n" for j, m, pid, t in starts
    )


def test_parse_records_reads_fields_and_skips_bad_lines() -> None:
    text = lines(("j000001", 0, 42, 250.5)) + "garbage\nj1 notaslot 1 2.0\nj1 1 2\n"
    (rec,) = ps.parse_records(text)
    assert (rec.job, rec.slot_ms, rec.pid) == ("j000001", M0, 42)
    assert rec.start_ms == pytest.approx(M0 + 250.5, abs=0.01)


def test_every_job_once_per_minute_is_neither_missed_nor_duplicated() -> None:
    recs = ps.parse_records(lines(*((j, m, 7, 100 * (i + 1)) for m in (0, 1) for i, j in enumerate(JOBS))))
    f = ps.burst_figures(recs, JOBS, M0, 2, names={7: "aps1"})
    assert (f["due"], f["started"], f["missed"], f["duplicated"]) == (6, 6, 0, 0)
    assert f["lateness_ms"] == {"n": 6, "p50": 200.0, "p99": 300.0, "max": 300.0}
    assert [b["started"] for b in f["bursts_detail"]] == [3, 3]
    assert f["bursts_detail"][1]["fire_ms"] == M0 + 60_000
    assert f["by_process"] == {"aps1": 6}


def test_two_schedulers_running_the_same_slot_is_one_duplicate_and_the_first_start_counts() -> None:
    recs = ps.parse_records(
        lines(("j000000", 0, 1, 900), ("j000000", 0, 2, 40), ("j000001", 0, 1, 50), ("j000002", 0, 2, 60))
    )
    f = ps.burst_figures(recs, JOBS, M0, 1, names={1: "aps1", 2: "aps2"})
    assert (f["missed"], f["duplicated"]) == (0, 1)
    assert f["lateness_ms"]["max"] == 60.0  # j000000's first start (40 ms), not its duplicate (900 ms)
    assert f["by_process"] == {"aps1": 2, "aps2": 2}


def test_a_slot_without_a_start_or_started_after_the_window_is_missed() -> None:
    recs = ps.parse_records(lines(("j000000", 0, 1, 10), ("j000001", 0, 1, 70_000)))
    f = ps.burst_figures(recs, JOBS, M0, 1, until_ms=M0 + 58_000)
    assert (f["started"], f["missed"], f["duplicated"]) == (1, 2, 0)
    assert f["bursts_detail"][0]["started"] == 1


def test_warm_up_and_later_slots_and_unknown_jobs_are_not_counted() -> None:
    recs = ps.parse_records(
        lines(("j000000", -1, 1, 5), ("j000000", 0, 1, 5), ("j000000", 2, 1, 5), ("zzz", 0, 1, 5))
    )
    f = ps.burst_figures(recs, JOBS, M0, 1)
    assert (f["started"], f["missed"], f["duplicated"], f["unknown_jobs"]) == (1, 2, 0, 1)
    assert f["by_process"] == {"pid 1": 1}
    warm = ps.warm_up_lateness(recs, M0 - 60_000)
    assert (warm["n"], warm["p50"]) == (1, 5.0)


def test_window_starts_counts_every_start_in_the_window_by_its_slot() -> None:
    # A peer that is behind: in the window it runs minutes before it (-3: three minutes earlier).
    recs = ps.parse_records(
        lines(("j000000", -3, 1, 190_000), ("j000001", -1, 1, 61_000), ("j000000", 0, 1, -3000))
    )
    w = ps.window_starts(recs, M0 - 2000, M0 + 58_000, M0)
    assert w["starts"] == 2  # the start 3 s before its slot is before the window (from 2 s before)
    assert w["by_slot_minute"] == {"-3": 1, "-1": 1}
    assert (w["lateness_ms"]["p50"], w["lateness_ms"]["max"]) == (61_000.0, 190_000.0)
    behind = _ok(missed=20_000, started=0, window_starts=w)
    assert ps.status_of(behind) == (
        "20,000 of 20,000 missed; the window's 2 starts were runs of earlier minutes, 61-190 s late"
    )
    idle = _ok(missed=20_000, started=0, window_starts=ps.window_starts([], M0 - 2000, M0 + 58_000, M0))
    assert ps.status_of(idle) == "20,000 of 20,000 missed; no job started in the window"


def test_lateness_stats_of_nothing_are_nan() -> None:
    stats = ps.lateness_stats([])
    assert stats["n"] == 0 and math.isnan(stats["p99"])
    assert ps.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert ps.floor_minute_ms(M0 + 59_999.9) == M0


def test_a_celery_run_is_due_at_the_first_minute_after_its_last_run() -> None:
    assert ps.next_minute_ms(M0 + 12_345, M0 + 61_000) == M0 + 60_000
    assert ps.next_minute_ms(M0, M0 + 60_000) == M0 + 60_000  # strictly after the last run
    # Sent 70 s late: the next run is the minute after that send (one minute skipped).
    assert ps.next_minute_ms(M0 + 70_000, M0 + 125_000) == M0 + 120_000
    assert ps.next_minute_ms(None, M0 + 5_000) == M0


def test_proc_stat_and_status_parsing() -> None:
    # The command may hold spaces and parentheses: fields are counted after the last ')'.
    stat = "4242 (celery (w) x) S 1 4240 4240 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1 2 3"
    assert ps.proc_stat(stat) == (1, 4240, 300.0)
    assert ps.status_rss_kb("Name:\tpython\nVmRSS:\t   51200 kB\nThreads:\t3\n") == 51200
    assert ps.status_rss_kb("Name:\tzombie\n") == 0


def _ok(**over: Any) -> dict[str, Any]:
    res: dict[str, Any] = {
        "peer": "apscheduler",
        "jobs": 10_000,
        "status": "ok",
        "registered_s": 12.34,
        "lateness_ms": {"n": 20_000, "p50": 1500.0, "p99": 25_000.0, "max": 29_999.0},
        "missed": 0,
        "duplicated": 0,
        "due": 20_000,
        "procs": {
            "aps1": {"kind": "scheduler", "cpu_s": 40.25, "rss_mb": 150.0, "alive": True},
            "aps2": {"kind": "scheduler", "cpu_s": 38.0, "rss_mb": 149.5, "alive": True},
        },
    }
    res.update(over)
    return res


def test_row_of_a_peer_that_kept_up() -> None:
    row = ps.row_of(_ok())
    assert row["lateness p50 / p99 / max s"] == "1.50 / 25.0 / 30.0"
    assert row["missed"] == "0 of 20,000"
    assert row["scheduler CPU s"] == "40.2 + 38.0"
    assert row["worker CPU s"] == "-"
    assert row["RSS MB"] == "150 / 150"
    assert row["registered in"] == "12.3 s"
    assert row["status"] == "all ran once"


def test_status_says_what_went_wrong() -> None:
    res = _ok(missed=1234, duplicated=9_000, queued_at_window_end=5000)
    res["procs"]["aps2"]["alive"] = False
    assert ps.status_of(res) == (
        "1,234 of 20,000 missed; 9,000 duplicated; exited: aps2; 5,000 tasks still queued at the window's end"
    )
    refused = _ok(missed=20_000, aps_misfired={"aps1": 30_000, "aps2": 1})
    assert ps.status_of(refused) == (
        "20,000 of 20,000 missed; 30,001 runs refused as misfired in the whole run (warm-up included)"
    )


def test_a_peer_that_did_not_register_says_so_in_the_table() -> None:
    note = ps.registration_note("celery-redbeat", 100_000, 320, 61_234, ["beat2", "no beat holds the lock"])
    assert note == (
        "did not finish registering 100,000 jobs in 320 s (61,234 in the store; not done: beat2, "
        "no beat holds the lock)"
    )
    row = ps.row_of({"peer": "celery-redbeat", "jobs": 100_000, "status": "not registered", "note": note})
    assert row["status"] == note
    assert row["registered in"] == "-"
    assert "missed" not in row
    assert ps.markdown([row]).splitlines()[2].startswith("| Celery beat + RedBeat")


def _scale(when: str, **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "when": when,
        "variant": "10k-3a-standalone",
        "jobs": 10_000,
        "agents": 3,
        "schedule": "* * * * *",
        "topology": "standalone",
        "callable": "async",
        "start_timeout": "default (5s)",
        "lateness_ms": {"n": 20_000, "p50": 3561.0, "p99": 5001.8, "max": 5100.0},
        "missed": 0,
        "duplicated": 0,
        "slots_due": 20_000,
        "agents_detail": [
            {"node": f"n{i}", "ready_s": 10.0 + i, "cpu_s": 30.0, "rss_mb": 200.0} for i in (1, 2, 3)
        ],
    }
    doc.update(over)
    return doc


def test_the_reference_is_the_latest_comparable_scale_result() -> None:
    docs = [
        ("scale-a.json", _scale("20261203T054902")),
        (
            "scale-b.json",
            _scale("20261203T060000", variant="10k-3a-standalone-spread", schedule="H * * * * *"),
        ),
        ("scale-c.json", _scale("20261203T070000", jobs=50_000)),
        ("scale-d.json", _scale("20261203T080000", variant="10k-3a-standalone-code-1b30cbb")),
        ("scale-e.json", _scale("20261203T090000", start_timeout="60s")),
        ("scale-f.json", _scale("20261202T000000")),
    ]
    picked = ps.pick_reference(docs, 10_000)
    assert picked is not None and picked[0] == "scale-a.json"
    assert ps.pick_reference(docs, 100_000) is None
    row = ps.reference_row(picked[1], picked[0])
    assert row["lateness p50 / p99 / max s"] == "3.56 / 5.00 / 5.10"
    assert row["scheduler CPU s"] == "30.0 + 30.0 + 30.0"
    assert row["registered in"] == "13.0 s"
    assert row["status"] == "all ran once (from scale-a.json)"
    assert row["setup"] == "quorum-cron, 3 agents (scale.py, separate run)"


def test_quorum_cron_of_the_same_run_is_its_own_row_and_no_reference_is_added() -> None:
    scale = _scale("20261204T120000", ledger={"succeeded": 20_000}, redis_cpu_s=6.5)
    res = ps.from_scale(scale)
    assert res["peer"] == "quorum-cron" and res["due"] == 20_000 and res["redis_cpu_s"] == 6.5
    assert res["scale"] == scale
    doc = {"jobs": 10_000, "peers": [res, _ok()]}
    rows = ps.table(doc)
    assert [r["setup"] for r in rows] == [
        "quorum-cron, 3 agents (scale.py, this run)",
        "APScheduler 3, 2 schedulers, shared RedisJobStore",
    ]
    assert rows[0]["status"] == "all ran once"
    assert rows[0]["lateness p50 / p99 / max s"] == "3.56 / 5.00 / 5.10"


def test_a_ledger_with_other_outcomes_than_succeeded_is_in_the_status() -> None:
    res = ps.from_scale(_scale("20261204T120000", ledger={"succeeded": 12_000, "lost": 8_000}))
    assert ps.status_of(res) == "the ledger: 8,000 lost, 12,000 succeeded"
