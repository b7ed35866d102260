"""benchmarks/run_memory.py on a few runs: the executor it drives reports every run of the burst
once, succeeded, and keeps none (the script refuses to report figures otherwise).

The figures are not asserted (performance is measured in benchmarks/, not by tests).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.benchmark_module import load_benchmark

bench = load_benchmark("run_memory.py", "bench_run_memory")


def test_the_burst_runs_every_callable_once_and_reports_both_arms() -> None:
    got = bench.measure(40)
    assert set(got) == {"floor", "executor"}
    for arm in got.values():
        assert set(arm) == {
            "held_bytes_per_run",
            "peak_bytes_per_run",
            "left_bytes_per_run",
            "cpu_us_per_run",
        }
        assert arm["held_bytes_per_run"] > 0  # every run of the burst was alive when measured


def test_a_run_not_reported_once_fails_the_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(ctx: object) -> None:
        raise RuntimeError("job bug")

    monkeypatch.setattr(bench, "_job", broken)
    with pytest.raises(SystemExit, match="10 failed"):  # the warm-up's 5 and the burst's
        asyncio.run(bench._executor(5))
