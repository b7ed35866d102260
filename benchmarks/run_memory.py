"""Benchmark: an executor's memory and CPU per run while a minute burst's callables run at once.

Usage::

    .venv/bin/python benchmarks/run_memory.py [--runs 10000] [--label NAME]

Why: at a minute boundary an executor starts every slot it won at once
(``scale.py``: ~3,300 per agent at 10,000 jobs on 3 agents; all of them on
one agent). Whatever the agent keeps per running slot is held by thousands
of runs together, and the peak stays in the process's RSS after the burst
(CPython's allocator frees an arena only when all of it is free, and the
long-lived objects made during the burst pin most of them). ``scale.py``
sees this only as RSS per job, minutes per run and noisy; this measures the
executor's part alone, in bytes Python allocated (``tracemalloc``), which do
not depend on the machine's load, in seconds.

It drives :class:`~quorum_cron.agent.executions.Runs` as the runtime does:
``--runs`` callable jobs (a coroutine that waits until every run of the
burst was started, so that all are running at once, then returns), one warm-up
burst (so each job's metric series exist, as after the first minute), then
the measured burst: every job's ``Run`` at once. Reported, per run:

* **held** — traced bytes once every run was started and the loop took one
  turn (each job's coroutine began and waits): what a running slot costs;
* **peak** — ``tracemalloc``'s peak over the burst, from the same base;
* **left** — what stays once every run ended and was reported (per-job
  state the burst made: should be ~0 after the warm-up);
* **CPU** — the process's CPU from the first start to the last report, in
  a second pass without ``tracemalloc``.

Same-run baseline, ``floor``: per run only what any scheduler needs to run
the job concurrently — a :class:`~quorum_cron.agent.jobprocess.JobContext`
and one task of the job's coroutine, gathered at the end.

Every run must be reported once, ``succeeded``: the script exits non-zero
otherwise.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import logging
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ArgumentParser, write_result

from quorum_cron.agent.executions import Runs
from quorum_cron.agent.jobprocess import CallableTarget, JobContext
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.spec import AgentJob
from quorum_cron.clock.base import SystemClock
from quorum_cron.config.schedule import Schedule
from quorum_cron.core.actions import CoreJob, Run

FIRE_MS = 1_700_000_040_000
"""The warm-up burst's slot; the measured one is a minute later."""


_GATE: list[asyncio.Event] = []
"""The measured burst's jobs wait here until every run was started (then all are running at once)."""


async def _job(ctx: JobContext) -> None:
    """The job: waits for the gate, if one is shut, then returns (what is measured is the agent's part)."""
    if _GATE:
        await _GATE[0].wait()


def _jobs(n: int) -> dict[str, AgentJob]:
    schedule = Schedule.parse("* * * * *", job="job")
    return {
        name: AgentJob(
            core=CoreJob(name=name, schedule=schedule, spec_hash="h", deadline_ms=60_000, timeout_ms=60_000),
            target=CallableTarget(func=_job),
        )
        for name in (f"job-{i:06d}" for i in range(n))
    }


async def _executor(n: int) -> dict[str, Any]:
    jobs = _jobs(n)
    reports = dict.fromkeys(jobs, 0)  # per job, reports of the current burst (no allocation per report)
    pending, failed = [0], [0]
    done: list[asyncio.Future[None]] = []

    def report(job: str, fire_ms: int, token: int, succeeded: bool, detail: str) -> None:
        reports[job] += 1
        failed[0] += not succeeded
        pending[0] -= 1
        if pending[0] == 0:
            done[-1].set_result(None)

    runs = Runs(
        "n1",
        jobs,
        clock=SystemClock(),
        metrics=Metrics(),
        tail_bytes=4096,
        report=report,
        poke=lambda: None,
    )
    loop = asyncio.get_running_loop()

    async def burst(fire_ms: int, token: int) -> None:
        pending[0] = len(jobs)
        reports.update(dict.fromkeys(jobs, 0))
        done.append(loop.create_future())
        for name in jobs:
            runs.start(Run(name, fire_ms, token, 60_000))
        await asyncio.sleep(0)

    await burst(FIRE_MS, 1)  # warm-up: each job's metric series made
    await done[-1]
    gc.collect()
    base = _traced()
    tracemalloc.reset_peak()
    cpu0 = time.process_time()
    _GATE.append(asyncio.Event())
    await burst(FIRE_MS + 60_000, 2)
    held = _traced()
    _GATE.pop().set()
    await done[-1]
    cpu = time.process_time() - cpu0
    peak = tracemalloc.get_traced_memory()[1]
    gc.collect()
    left = _traced()
    once = sum(1 for c in reports.values() if c == 1)
    if failed[0] or once != n or len(runs):
        raise SystemExit(
            f"runs not reported once succeeded: {failed[0]} failed, {once} of {n} reported once, "
            f"{len(runs)} still running"
        )
    return _per_run(n, held - base, peak - base, left - base, cpu)


async def _floor(n: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()

    def burst(fire_ms: int) -> list[asyncio.Task[None]]:
        slot = dt.datetime.fromtimestamp(fire_ms / 1000, tz=dt.UTC)
        return [
            loop.create_task(
                _job(JobContext(job=f"job-{i:06d}", slot=slot, slot_ms=fire_ms, token=1, node="n1"))
            )
            for i in range(n)
        ]

    await asyncio.gather(*burst(FIRE_MS))
    gc.collect()
    base = _traced()
    tracemalloc.reset_peak()
    cpu0 = time.process_time()
    _GATE.append(asyncio.Event())
    tasks = burst(FIRE_MS + 60_000)
    await asyncio.sleep(0)
    held = _traced()
    _GATE.pop().set()
    await asyncio.gather(*tasks)
    cpu = time.process_time() - cpu0
    peak = tracemalloc.get_traced_memory()[1]
    del tasks
    gc.collect()
    left = _traced()
    return _per_run(n, held - base, peak - base, left - base, cpu)


def _traced() -> int:
    """Bytes traced now (0 when tracing is off: the CPU pass)."""
    return tracemalloc.get_traced_memory()[0]


def _per_run(n: int, held: int, peak: int, left: int, cpu_s: float) -> dict[str, Any]:
    return {
        "held_bytes_per_run": round(held / n),
        "peak_bytes_per_run": round(peak / n),
        "left_bytes_per_run": round(left / n, 1),
        "cpu_us_per_run": round(cpu_s * 1e6 / n, 1),
    }


def measure(n: int) -> dict[str, dict[str, Any]]:
    """Both arms, each in a fresh event loop: bytes under ``tracemalloc``, then CPU without it
    (tracing costs more CPU than the runs themselves)."""
    logging.getLogger("quorum_cron").setLevel(logging.INFO)  # the run/ended events are built as in an agent
    got: dict[str, dict[str, Any]] = {}
    for name, arm in (("floor", _floor), ("executor", _executor)):
        tracemalloc.start()
        try:
            traced = asyncio.run(arm(n))
        finally:
            tracemalloc.stop()
        untraced = asyncio.run(arm(n))
        got[name] = {**traced, "cpu_us_per_run": untraced["cpu_us_per_run"]}
    return got


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000, help="jobs, all due in the same burst")
    ap.add_argument("--label", default="", help="suffix of the JSON file name")
    args = ap.parse_args(argv)
    if args.runs < 1:
        raise SystemExit(f"--runs {args.runs}: expected an integer >= 1")
    logging.basicConfig(stream=open(os.devnull, "w"), level=logging.INFO)  # noqa: SIM115 (for the process)
    got = measure(args.runs)
    cols = ("held_bytes_per_run", "peak_bytes_per_run", "left_bytes_per_run", "cpu_us_per_run")
    print(f"{args.runs:,} callables started at once (bytes by tracemalloc; CPU in a pass without it)")
    print(f"{'':18}" + "".join(f"{c.removesuffix('_per_run'):>14}" for c in cols))
    for name in ("floor", "executor"):
        print(f"{name:18}" + "".join(f"{got[name][c]:>14}" for c in cols))
    doc = {"python": platform.python_version(), "runs": args.runs, **got}
    write_result("run_memory", doc, args.label)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
