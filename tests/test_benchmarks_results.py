"""benchmarks/results/ keeps the latest run of each benchmark and variant: ``write_result`` prunes the rest.

Only the file handling of benchmarks/_common.py runs here, in a temporary
directory; no benchmark is started.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_module import load_benchmark

common = load_benchmark("_common.py", "bench_common")


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "ROOT", tmp_path)  # (paths are printed relative to it)
    return tmp_path


def put(directory: Path, name: str, doc: object) -> None:
    (directory / name).write_text(doc if isinstance(doc, str) else json.dumps(doc))


def test_a_new_result_removes_the_older_ones_of_its_benchmark_and_variant(results: Path) -> None:
    put(results, "store_vote-20260101T000000-a.json", {"variant": "python"})
    put(results, "store_vote-20260101T000001-all-20260101T000000-python.json", {"variant": "python"})
    kept = {
        "store_vote-20260101T000002-b.json": {"variant": "hiredis"},  # another variant
        "store_vote-20260101T000003.json": {"benchmark": "store_vote"},  # no variant: ""
        "store_vote-extra-20260101T000000.json": {"variant": "python"},  # no stamp after the name
        "store_vote-20260101T000004-broken.json": "{not json",  # cannot tell: left alone
        "fire_latency-20260101T000000.json": {"variant": "python"},  # another benchmark
    }
    for name, doc in kept.items():
        put(results, name, doc)

    new = common.write_result("store_vote", {"results": []}, "c", variant="python")

    assert sorted(p.name for p in results.iterdir()) == sorted([new.name, *kept])
    assert json.loads(new.read_text())["variant"] == "python"


def test_without_a_variant_the_latest_run_of_the_benchmark_is_kept(results: Path) -> None:
    put(results, "sim_speed-20260101T000000-baseline.json", {"benchmark": "sim_speed"})
    put(results, "sim_speed-20260101T000001.json", {"benchmark": "sim_speed", "variant": ""})

    new = common.write_result("sim_speed", {"results": []})

    assert [p.name for p in results.iterdir()] == [new.name]


def test_keep_latest_prunes_summaries_too(results: Path) -> None:
    """run_all.py's summary files follow the same rule (they have no ``benchmark`` field)."""
    put(results, "summary-20260101T000000.json", {"when": "20260101T000000"})
    latest = results / "summary-20260101T000001.json"
    put(results, latest.name, {"when": "20260101T000001"})

    removed = common.keep_latest("summary", latest)

    assert [p.name for p in removed] == ["summary-20260101T000000.json"]
    assert [p.name for p in results.iterdir()] == [latest.name]
