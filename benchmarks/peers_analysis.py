"""Ground-truth analysis of ``peers.py``: the job's own lines → lateness, missed, duplicated, next run.

Pure functions on the lines the job wrote (``job slot who start``, start in
seconds since the epoch, real clock), so that a fast unit test can check
them without starting anything.

Two ways of counting, because two of the peers have no fixed fire
times: Celery beat schedules a run 1 s after it *sent* the previous one and
rq-scheduler re-queues 1 s after it *enqueued* it, so their runs drift
through the second. What every setup promises is one run per second:

* ``basis="slot"`` (quorum-cron, the lease baseline, APScheduler's cron
  trigger: runs on whole seconds): each whole second of real time in the
  window should see one run start; a second without one is **missed**, each
  run beyond the first in a second is **duplicated**. Real time, not the
  reported slot, so that a run fired early by a fast clock counts where it
  happened;
* ``basis="period"`` (Celery, rq-scheduler): a run starting less than half a
  period after the previous run is **duplicated**; a gap of ``g`` between
  consecutive runs stands for ``round(g / period) - 1`` **missed** runs
  (also from the window's start to the first run and from the last run to
  the window's end);
* **lateness** is ``start - nominal``: the nominal time the scheduler
  reports to the job (quorum-cron, the lease baseline), or the whole second
  the run started in (APScheduler); for ``basis="period"`` it is the gap to
  the previous run minus one period, i.e. how much later than one period
  after the previous run;
* **fault → next run**: from the SIGKILL / SIGSTOP to the first start after it.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Run", "next_run_ms", "parse", "percentile", "window"]


@dataclass(frozen=True)
class Run:
    slot_ms: int | None  # the nominal time the scheduler told the job, when it tells one
    who: str  # the process that ran it
    start_ms: float  # real time, from the job itself


def parse(text: str) -> list[Run]:
    """The runs in ``text`` (lines ``job slot who start``), sorted by start; malformed lines skipped."""
    runs = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        try:
            start = float(parts[3]) * 1000
        except ValueError:
            continue
        slot = int(parts[1]) if parts[1].isdigit() else None
        runs.append(Run(slot, parts[2], start))
    runs.sort(key=lambda r: r.start_ms)
    return runs


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (as benchmarks/_common.py); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


def _lateness(runs: Sequence[Run], basis: str, period_ms: int) -> list[float]:
    out: list[float] = []
    if basis == "period":
        for prev, cur in itertools.pairwise(runs):
            gap = cur.start_ms - prev.start_ms
            if period_ms / 2 <= gap < period_ms * 1.5:
                out.append(gap - period_ms)
        return out
    seen: set[int] = set()
    for r in runs:
        slot = r.slot_ms if r.slot_ms is not None else int(r.start_ms // period_ms * period_ms)
        if slot not in seen:  # first run of each slot only
            seen.add(slot)
            out.append(r.start_ms - slot)
    return out


def window(
    runs: Iterable[Run], lo_ms: float, hi_ms: float, *, basis: str = "slot", period_ms: int = 1000
) -> dict[str, Any]:
    """Figures for the runs that started in ``[lo_ms, hi_ms)``: one run per period expected."""
    inside = sorted((r for r in runs if lo_ms <= r.start_ms < hi_ms), key=lambda r: r.start_ms)
    starts = [r.start_ms for r in inside]
    edges = [lo_ms, *starts, hi_ms]
    if basis == "slot":
        seconds = Counter(int((s - lo_ms) // period_ms) for s in starts)  # lo_ms: a whole second
        missed = sum(1 for i in range(round((hi_ms - lo_ms) / period_ms)) if seconds[i] == 0)
        duplicated = sum(n - 1 for n in seconds.values())
    else:
        missed, duplicated = _by_gaps(edges, period_ms)
    late = _lateness(inside, basis, period_ms)
    return {
        "expected": round((hi_ms - lo_ms) / period_ms),
        "runs": len(inside),
        "missed": missed,
        "duplicated": duplicated,
        "longest_gap_ms": round(max((b - a for a, b in itertools.pairwise(edges)), default=0.0), 1),
        "lateness_basis": basis,
        "lateness_ms": {
            "n": len(late),
            "p50": round(percentile(late, 50), 1),
            "p99": round(percentile(late, 99), 1),
            "max": round(max(late), 1) if late else math.nan,
        },
        "by_process": _count(r.who for r in inside),
    }


def _by_gaps(edges: Sequence[float], period_ms: int) -> tuple[int, int]:
    """(missed, duplicated) from the gaps between ``edges`` (window start, starts, window end)."""
    missed = duplicated = 0
    for i, (a, b) in enumerate(itertools.pairwise(edges)):
        gap = b - a
        if i == 0 or i == len(edges) - 2:
            missed += int(gap // period_ms)
        elif gap < period_ms / 2:
            duplicated += 1
        else:
            missed += max(0, round(gap / period_ms) - 1)
    return missed, duplicated


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return dict(sorted(out.items()))


def next_run_ms(runs: Iterable[Run], after_ms: float) -> float | None:
    """Milliseconds from ``after_ms`` to the first run that started after it; None when none did."""
    later = [r.start_ms for r in runs if r.start_ms > after_ms]
    return round(min(later) - after_ms, 1) if later else None
