"""benchmarks/results/ keeps a result the README or docs/ cite, whatever newer run of its kind is written.

Why: ``run_all.py``, the documented reproduction, writes a result of each
benchmark and used to remove every older one of the same variant, among
them the files the README's table comes from. Only the file handling of
benchmarks/_common.py and run_all.py runs here, in a temporary directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_module import load_benchmark

common = load_benchmark("_common.py", "bench_common_cited")
run_all = load_benchmark("run_all.py", "bench_run_all_cited")


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(common, "RESULTS", results)
    monkeypatch.setattr(common, "ROOT", tmp_path)
    return tmp_path


def put(directory: Path, name: str, doc: dict[str, object]) -> None:
    (directory / name).write_text(json.dumps(doc))


def test_a_new_result_keeps_the_older_ones_the_docs_cite(root: Path) -> None:
    results = root / "benchmarks" / "results"
    put(results, "sim_speed-20260101T000000.json", {"variant": ""})  # the README's row
    put(results, "sim_speed-20260101T000001-old.json", {"variant": ""})  # a docs page's
    put(results, "sim_speed-20260101T000002.json", {"variant": ""})  # nobody's
    put(results, "scale-20260102T220341-100k.json", {"variant": ""})  # cited as …T220341-100k.json
    put(results, "scale-20260102T220342.json", {"variant": ""})
    (root / "README.md").write_text("| simulator | 1,745x (`sim_speed-20260101T000000.json`) |\n")
    (root / "docs" / "simulator.md").write_text(
        "The old code: sim_speed-20260101T000001-old.json. Scale: `scale-20260102T000000.json`, "
        "`…T220341-100k.json`.\n"
    )

    new = common.write_result("sim_speed", {"results": []})
    scale = common.write_result("scale", {"results": []})

    assert sorted(p.name for p in results.iterdir()) == sorted(
        [
            "sim_speed-20260101T000000.json",
            "sim_speed-20260101T000001-old.json",
            new.name,
            "scale-20260102T220341-100k.json",
            scale.name,
        ]
    )


def test_the_summary_table_names_its_file_so_the_readme_citing_it_keeps_it(root: Path) -> None:
    results = root / "benchmarks" / "results"
    meta = {"cpus": 2, "loadavg_1m_at_start": 0.1, "redis": "7.0.15"}
    (root / "README.md").write_text(run_all.markdown([], "20260101T000000", meta))
    put(results, "summary-20260101T000000.json", {"when": "20260101T000000"})
    put(results, "summary-20260101T000001.json", {"when": "20260101T000001"})
    latest = results / "summary-20260101T000002.json"
    put(results, latest.name, {"when": "20260101T000002"})

    removed = common.keep_latest("summary", latest)

    assert [p.name for p in removed] == ["summary-20260101T000001.json"]
    assert "summary-20260101T000000.json" in (root / "README.md").read_text()
