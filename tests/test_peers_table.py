"""The README's and docs/benchmarks.md's peer comparison tables are the latest peers JSON, as generated.

``benchmarks/peers.py --table --readme`` writes the table between the
``peers-table`` markers from ``benchmarks/results/peers-*.json``; a figure
edited by hand, or a result file replaced without regenerating the table,
fails here (issue 16: each figure in the table comes from that JSON).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from tests.benchmark_module import load_benchmark

ROOT = Path(__file__).resolve().parent.parent


def _peers() -> ModuleType:
    return load_benchmark("peers.py", "peers_for_table_test")


def test_the_comparison_tables_are_generated_from_the_latest_result() -> None:
    peers = _peers()
    latest = peers.latest_result()
    table = peers.markdown(json.loads(latest.read_text()))
    assert "| quorum-cron, 3 agents |" in table  # the generator sees the measured setups
    for doc in (ROOT / "README.md", ROOT / "docs" / "benchmarks.md"):
        text = doc.read_text()
        shown = text.split(peers.README_START, 1)[1].split(peers.README_END, 1)[0]
        assert shown == f"\n{table}", f"{doc.name}: the table is not {latest.name} as generated"
