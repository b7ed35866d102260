"""The figures of benchmarks/scale.py from what its agents left behind: missed, duplicated, lateness, logs.

Only the analysis and the argument checks run here, on hand-written files in
a temporary directory; no agent or server is started (the benchmark itself
takes minutes and never runs in the test suite).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from tests.benchmark_module import load_benchmark

scale = load_benchmark("scale.py", "bench_scale")

M = 1_800_000_000_000 - 1_800_000_000_000 % 60_000  # a whole minute, in ms
WARM, FIRST = M, M + 60_000
LO, HI = FIRST - 2000, FIRST + 2 * 60_000 - 2000


def _snap(cpu: float, memory: int, evalsha: int) -> dict[str, Any]:
    server = {
        "cpu_s": cpu,
        "used_memory": memory,
        "calls": {"evalsha": evalsha},
        "usec": {"evalsha": evalsha},
    }
    return {"t": 0.0, "servers": [server]}


def _analyse(
    tmp: Path,
    jobs: int = 3,
    spread: bool = False,
    actions: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    args = argparse.Namespace(bursts=2, spread=spread, cluster=False, callable="async", start_timeout="")
    nodes = ["n1", "n2"]
    return scale.analyse(  # type: ignore[no-any-return]
        args,
        tmp,
        scale.job_names(jobs),
        nodes,
        {"n1": 100.0, "n2": 100.0},
        {"n1": {"registered": 101.0, "ready": 102.5, "first_vote": 103.0}, "n2": {}},
        empty=_snap(1.0, 1_000_000, 0),
        before=_snap(2.0, 1_300_000, 10),
        after=_snap(2.6, 1_400_000, 70),
        cpu=({"n1": 5.0, "n2": 5.0}, {"n1": 5.3, "n2": 5.06}),
        rss=({"n1": 1000, "n2": 1000}, {"n1": 3000, "n2": 1500}),
        alive={"n1": True, "n2": True},
        window=(LO, HI, WARM, FIRST),
        actions=actions,
        ref_at=None,
        redis="7",
    )


def _rec(path: Path, *rows: tuple[str, int, float]) -> None:
    path.write_text("".join(f"{j} {s} {t / 1000:.6f}\n" for j, s, t in rows))


def _log(path: Path, *events: tuple[int, str]) -> None:
    path.write_text("".join(json.dumps({"ts": ts, "event": ev}) + "\n" for ts, ev in events) + "not json\n")


def test_missed_duplicated_and_lateness_count_only_the_measured_minutes(tmp_path: Path) -> None:
    b1, b2 = FIRST, FIRST + 60_000
    _rec(
        tmp_path / "n1.rec",
        ("j000000", WARM, WARM + 9000),  # warm-up: not counted
        ("j000000", b1, b1 + 100),
        ("j000001", b1, b1 + 200),
        ("j000002", b1, b1 + 300),
        ("j000000", b2, b2 + 1000),
        ("j000001", b2, b2 + 2000),
    )
    # j000002's second slot never ran; j000001's second ran twice (n2 too, later).
    _rec(tmp_path / "n2.rec", ("j000001", b2, b2 + 2500), ("j000001", b2 + 60_000, b2 + 60_100))
    res = _analyse(tmp_path)
    assert (res["slots_due"], res["slots_started"]) == (6, 5)
    assert (res["missed"], res["duplicated"]) == (1, 1)
    assert res["lateness_ms"]["n"] == 5  # the first start of each slot
    assert res["lateness_ms"]["max"] == pytest.approx(2000, abs=0.01)
    assert [b["starts"] for b in res["bursts_detail"]] == [3, 2]
    assert res["warm_up_lateness_ms"]["max"] == pytest.approx(9000, abs=0.01)
    assert res["off_minute_slots"] == 0
    by = {a["node"]: a for a in res["agents_detail"]}
    assert (by["n1"]["executed"], by["n2"]["executed"]) == (5, 1)


def test_a_start_off_the_minute_or_of_an_unknown_job_is_reported(tmp_path: Path) -> None:
    _rec(tmp_path / "n1.rec", ("j000000", FIRST + 5, FIRST + 10), ("other", FIRST, FIRST + 1))
    res = _analyse(tmp_path, jobs=1)
    assert res["off_minute_slots"] == 1
    assert res["unknown_jobs"] == ["other"]
    assert res["missed"] == 1  # 2 minutes, 1 slot started (off the minute, flagged above)
    assert _analyse(tmp_path, jobs=1, spread=True)["off_minute_slots"] == 0  # H seconds are legitimate


def test_server_agent_and_log_figures_are_per_slot_over_the_window(tmp_path: Path) -> None:
    _log(
        tmp_path / "n1.log", (LO - 1, "takeover"), (LO, "takeover"), (LO + 5, "start_refused"), (HI, "commit")
    )
    _log(tmp_path / "n2.log", (LO + 1, "commit"))
    # The agents count takeovers and refused starts from their store's replies (their log
    # lines of an event are bounded): those counts win over the log's when the stats have them.
    said = {"takeovers": 7, "Start refused": 2}
    actions = (
        {"n1": {"actions": {"Vote": 1, "Vote items": 10, "takeovers": 2}}, "n2": {}},
        {
            "n1": {"actions": {"Vote": 4, "Vote items": 16, "Start": 6, **said}},
            "n2": {"actions": {"Sweep": 3}},
        },
    )
    assert _analyse(tmp_path)["takeovers"] == 1  # no stats: the log's, in the window [LO, HI)
    assert _analyse(tmp_path)["start_refused"] == 1
    res = _analyse(tmp_path, actions=actions)  # 3 jobs x 2 minutes = 6 slots due
    assert res["store_actions_per_slot"] == {"Start": 1.0, "Vote items": 1.0, "Vote": 0.5, "Sweep": 0.5}
    assert res["takeovers"] == 5 and res["start_refused"] == 2
    assert res["log_lines_per_slot"] == pytest.approx(3 / 6, abs=0.01)
    assert res["redis_cpu_us_per_slot"] == pytest.approx(0.6 / 6 * 1e6, rel=1e-6)
    assert res["redis_calls_per_slot"] == {"evalsha": 10.0}
    assert res["redis_memory_bytes_per_job"] == pytest.approx(100_000, abs=0.1)
    by = {a["node"]: a for a in res["agents_detail"]}
    assert by["n1"]["cpu_us_per_slot"] == pytest.approx(0.3 / 6 * 1e6, rel=1e-3)
    assert by["n1"]["rss_kb_per_job"] == pytest.approx(1000, abs=0.01)
    assert (by["n1"]["ready_s"], by["n1"]["first_vote_s"]) == (2.5, 3.0)
    assert by["n1"]["non_json_lines"] == 1


@pytest.mark.parametrize("flag", ["--jobs", "--agents", "--bursts"])
def test_a_count_below_one_is_refused_with_one_line(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        scale.main([flag, "0"])
    assert exc.value.code == 2
    assert f"{flag} 0: expected an integer >= 1" in capsys.readouterr().err
