"""benchmarks/log_lines.py on a few lines: both handlers write every line, the baseline one write
per line and the agent's handler in batches, into a pipe and into a file.

The figures are not asserted (performance is measured in benchmarks/, not by tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark_module import load_benchmark

bench = load_benchmark("log_lines.py", "bench_log_lines")


@pytest.mark.parametrize("sink", ["pipe", "file"])
def test_the_baseline_writes_each_line_and_the_agent_batches_them(sink: str, tmp_path: Path) -> None:
    plain = bench.measure("plain", sink, 2000, tmp_path)
    batched = bench.measure("batched", sink, 2000, tmp_path)
    assert plain["writes"] == 2000
    # (One write per 50 ms of logging: a few on a slow machine, never one per line.)
    assert 1 <= batched["writes"] <= 100
    assert plain["cpu_us"] > 0 and batched["cpu_us"] > 0
