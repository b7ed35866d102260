"""Measurement: how often an at-most-once slot ends ``lost`` when its start was folded into the commit.

Usage::

    .venv/bin/python benchmarks/fold_loss.py [--seeds 300] [--first-seed 0] [--hours 0.5] [--workers 2]

Why: since the executor's start can be folded into the commit (docs/protocol.md,
"A start folded into the commit"), the lease of a folded start counts from
the vote, and a crash, pause or lost reply between that vote and the job's
spawn leaves an at-most-once slot ``lost`` when its lease ends. The protocol
page argues the exposure is a start reply's; this counts it, in the
simulator, against starts made by a call in the same runs.

For each seed: the explorer's random scenario (``sim.explore.explore_scenario``:
jobs, partitions, crashes, pauses, clock faults, lossy and slow links, store
failovers, membership changes) is run twice, with ``vote_lead`` 0 (nodes vote
at the fire time, so a commit after it by the executor's own vote starts the
slot in the same step) and with 50 ms (commits land before the fire time, so
starts are calls). In each run every accepted start of an at-most-once job is
classed **folded** (traced at the same instant as its commit, the same token)
or **call**, and every ``lost`` ledger entry of such a job by how its slot
started. Reported: per class, starts, slots lost and lost per 1,000 starts;
per ``vote_lead``, the lost slots of all at-most-once jobs. The same-run
baseline is the call-started slots. A start by a call is traced when the
store takes it, at least a network hop after the commit; on a network of
zero delay it would be taken for folded.

Each run is checked as the explorer checks it: a run whose core raised, or
whose report has a violation other than the known limits, is listed (seed,
lead, what) and its counts are left out; the script then exits 1.

Deterministic: the same seeds and code give the same counts on any machine.
JSON under ``benchmarks/results/``.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from itertools import repeat
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from _common import ArgumentParser, write_result  # noqa: E402

from sim.explore import explore_scenario  # noqa: E402
from sim.runner import run  # noqa: E402

LEADS_MS = (0, 50)


def count_seed(seed: int, hours: float) -> tuple[dict[str, int], list[str]]:
    """One seed's counts, keyed ``<lead> <class> starts|lost`` and ``<lead> all lost``, and its
    failed runs (``<seed> lead <ms>: <what>``: the core raised, or a violation the checker does
    not know as a limit)."""
    scenario = explore_scenario(seed, hours=hours)
    at_most_once = {j.name for j in scenario.jobs if j.delivery.value == "at-most-once"}
    counts: Counter[str] = Counter()
    failures: list[str] = []
    for lead in LEADS_MS:
        try:
            res = run(replace(scenario, settings=replace(scenario.settings, vote_lead_ms=lead)), seed)
        except Exception as exc:  # (a core that raises is a finding of the sweep, not its end)
            failures.append(f"{seed} lead {lead}: {type(exc).__name__}: {exc}"[:300])
            continue
        bad = res.report.unexpected()
        if bad:
            failures.append(f"{seed} lead {lead}: " + ", ".join(sorted({v.kind for v in bad})))
            continue
        records = res.trace.records
        commits = {(r["job"], r["fire"], r["token"]): r["t"] for r in records if r["ev"] == "commit"}
        started: dict[tuple[str, int], str] = {}
        for r in records:
            if r["ev"] == "start" and r.get("ok") and r["job"] in at_most_once:
                how = "folded" if commits.get((r["job"], r["fire"], r["token"])) == r["t"] else "call"
                started[(r["job"], r["fire"])] = how  # (a slot's last start decides its class)
                counts[f"{lead} {how} starts"] += 1
        for r in records:
            if r["ev"] == "ledger" and r.get("state") == "lost" and r["job"] in at_most_once:
                counts[f"{lead} all lost"] += 1
                counts[f"{lead} {started.get((r['job'], r['fire']), 'unstarted')} lost"] += 1
    return dict(counts), failures


def summarize(counts: Counter[str]) -> dict[str, Any]:
    """Per ``vote_lead``: each class's starts, lost and lost per 1,000 starts, all lost, and how far
    the folded count is above what the pooled rate predicts, in its standard deviations (Poisson)."""
    out: dict[str, Any] = {}
    for lead in LEADS_MS:
        row: dict[str, Any] = {"all_lost": counts[f"{lead} all lost"]}
        for how in ("folded", "call"):
            starts, lost = counts[f"{lead} {how} starts"], counts[f"{lead} {how} lost"]
            row[how] = {
                "starts": starts,
                "lost": lost,
                "lost_per_1000": round(1000 * lost / starts, 2) if starts else None,
            }
        folded, call = row["folded"], row["call"]
        pooled = (folded["lost"] + call["lost"]) / max(1, folded["starts"] + call["starts"])
        expected = pooled * folded["starts"]
        row["folded_excess_sd"] = (
            round((folded["lost"] - expected) / math.sqrt(expected), 2) if expected else None
        )
        out[f"vote_lead_{lead}ms"] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=300)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--hours", type=float, default=0.5, help="simulated hours per run")
    ap.add_argument("--workers", type=int, default=2, help="processes")
    ap.add_argument("--label", default="", help="suffix of the JSON file name")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.workers < 1 or not 0 < args.hours <= 24:
        raise SystemExit("--seeds and --workers must be >= 1, --hours in (0, 24]")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    total: Counter[str] = Counter()
    failures: list[str] = []
    with ProcessPoolExecutor(args.workers) as pool:
        for counts, failed in pool.map(count_seed, seeds, repeat(args.hours), chunksize=4):
            total.update(counts)
            failures += failed
    summary = summarize(total)
    print(f"{args.seeds} seeds from {args.first_seed}, {args.hours} h each, at-most-once jobs:")
    for key, row in summary.items():
        print(f"  {key}: all lost {row['all_lost']}; excess of folded {row['folded_excess_sd']} sd")
        for how in ("folded", "call"):
            r = row[how]
            print(
                f"    {how:6} starts {r['starts']:>7,}  lost {r['lost']:>4}  per 1,000 {r['lost_per_1000']}"
            )
    for failure in failures:
        print(f"  failed (left out): {failure}")
    doc = {"seeds": args.seeds, "first_seed": args.first_seed, "hours": args.hours, **summary}
    write_result("fold_loss", {**doc, "failures": failures}, args.label)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
