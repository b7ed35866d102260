"""The ground-truth analysis of benchmarks/peers.py: missed, duplicated, lateness, next run.

Pure functions on hand-written job lines; nothing is started (the benchmark
itself never runs in the test suite).
"""

from __future__ import annotations

import pytest

from tests.benchmark_module import load_benchmark

pa = load_benchmark("peers_analysis.py", "peers_analysis")

T0 = 1_800_000_000_000  # a whole second, in ms


def lines(*runs: tuple[int | None, str, float]) -> str:
    """Job lines ``tick slot who start`` for (slot offset ms or None, who, start offset ms)."""
    out = []
    for slot, who, start in runs:
        out.append(f"tick {'-' if slot is None else T0 + slot} {who} {(T0 + start) / 1000:.6f}\n")
    return "".join(out)


def test_parse_reads_slots_and_real_starts_and_skips_bad_lines() -> None:
    text = lines((1000, "n1", 1004.5), (None, "w", 5.25)) + "garbage\ntick 1 n2 not-a-time\n"
    runs = pa.parse(text)
    assert [(r.slot_ms, r.who) for r in runs] == [(None, "w"), (T0 + 1000, "n1")]
    assert runs[0].start_ms == pytest.approx(T0 + 5.25, abs=0.01)
    assert runs[1].start_ms == pytest.approx(T0 + 1004.5, abs=0.01)


def test_one_run_per_second_is_neither_missed_nor_duplicated() -> None:
    runs = pa.parse(lines(*((s * 1000, "n1", s * 1000 + 7) for s in range(10))))
    w = pa.window(runs, T0, T0 + 10_000)
    assert (w["expected"], w["runs"], w["missed"], w["duplicated"]) == (10, 10, 0, 0)
    assert w["lateness_ms"]["p50"] == pytest.approx(7, abs=0.1)
    assert w["by_process"] == {"n1": 10}


def test_a_gap_counts_its_missed_runs_and_two_runs_in_one_second_one_duplicate() -> None:
    # Runs at 0, 1, [2, 3, 4 missing], 5, 5 (twice: two schedulers), 6 .. 9.
    secs = [0, 1, 5, 6, 7, 8, 9]
    runs = pa.parse(lines(*((None, "a", s * 1000 + 10) for s in secs), (None, "b", 5012)))
    w = pa.window(runs, T0, T0 + 10_000)
    assert (w["missed"], w["duplicated"]) == (3, 1)
    assert w["longest_gap_ms"] == pytest.approx(4000, abs=1)


def test_a_takeover_late_in_a_second_then_on_time_is_not_a_duplicate() -> None:
    # A new leader runs second 3's slot at 3.6 s, then second 4's at 4.05 s: 450 ms apart,
    # two different seconds. Seconds 1 and 2 had no run.
    runs = pa.parse(lines((0, "old", 10), (3000, "new", 3600), (4000, "new", 4050)))
    w = pa.window(runs, T0, T0 + 5000)
    assert (w["missed"], w["duplicated"]) == (2, 0)
    assert w["lateness_ms"]["max"] == pytest.approx(600, abs=0.1)


def test_two_runs_close_together_on_a_drifting_schedule_are_a_duplicate() -> None:
    starts = [0, 1050, 1060, 2110, 3160]
    runs = pa.parse(lines(*((None, "w", s) for s in starts)))
    w = pa.window(runs, T0, T0 + 4000, basis="period")
    assert (w["missed"], w["duplicated"]) == (0, 1)


def test_missed_runs_at_the_window_edges_count() -> None:
    runs = pa.parse(lines(*((None, "a", s * 1000 + 5) for s in (3, 4, 5))))
    w = pa.window(runs, T0, T0 + 10_000)
    assert w["missed"] == 3 + 4  # 0, 1, 2 before the first run; 6 .. 9 after the last


def test_a_drifting_schedule_is_counted_by_gaps_and_late_by_its_period() -> None:
    # Each run 1.05 s after the previous one (a schedule relative to the last send):
    # 20 runs over 21 s drift through every phase of the second, yet none is a
    # duplicate, and the single 2.1 s gap is one missed run.
    starts = [i * 1050 for i in range(10)] + [9 * 1050 + 2100 + i * 1050 for i in range(10)]
    runs = pa.parse(lines(*((None, "w", s) for s in starts)))
    w = pa.window(runs, T0, T0 + starts[-1] + 1, basis="period")
    assert (w["duplicated"], w["missed"]) == (0, 1)
    assert w["lateness_ms"]["n"] == 18
    assert w["lateness_ms"]["p50"] == pytest.approx(50, abs=0.1)


def test_lateness_uses_the_reported_slot_so_an_early_run_is_negative() -> None:
    # A scheduler whose clock is 5 s ahead fires slot t+5 s at real time t.
    runs = pa.parse(lines((5000, "fast", 3), (6000, "fast", 1004)))
    w = pa.window(runs, T0, T0 + 2000)
    assert w["lateness_ms"]["p50"] == pytest.approx(-4997, abs=0.1)


def test_next_run_after_a_fault() -> None:
    runs = pa.parse(lines((None, "a", 0), (None, "b", 5300)))
    assert pa.next_run_ms(runs, T0 + 500) == pytest.approx(4800, abs=0.1)
    assert pa.next_run_ms(runs, T0 + 6000) is None
