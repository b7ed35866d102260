"""A run_all.py run in which a benchmark failed replaces neither latest.md nor the older summary.

Why: such a run's table lacks the failed benchmark's rows (all of them when
no server could start), and it overwrote latest.md, the README's table, and
pruned the summary it came from. The benchmarks themselves do not run here:
``_run`` reports a failure, in a temporary results directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_module import load_benchmark

run_all = load_benchmark("run_all.py", "bench_run_all_failed")


def test_a_failed_run_writes_its_summary_and_leaves_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    monkeypatch.setattr(run_all, "ROOT", tmp_path)
    monkeypatch.setattr(run_all, "RESULTS", results)
    older = results / "summary-20260101T000000.json"
    older.write_text(json.dumps({"when": "20260101T000000"}))
    table = results / "latest.md"
    table.write_text("the table of 20260101T000000\n")
    monkeypatch.setattr(run_all, "_run", lambda name, args, label: (1, 0.5))

    assert run_all.main(["--only", "memory", "sim_speed"]) == 1

    assert table.read_text() == "the table of 20260101T000000\n"
    summaries = sorted(results.glob("summary-*.json"))
    assert summaries[0] == older and len(summaries) == 2
    assert json.loads(summaries[1].read_text())["exit_codes"] == {"memory": 1, "sim_speed": 1}
    out = capsys.readouterr().out
    assert "benchmarks that failed: {'memory': 1, 'sim_speed': 1}" in out
    assert "latest.md and the older summaries left as they were" in out
