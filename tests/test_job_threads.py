"""Plain-function jobs run on threads of their own (an App audit's finding).

On the loop's default executor (six threads on two cores), six hung jobs starved the agent's own
``to_thread`` calls and the program's, a job queued behind them was reported timed out without
having started, and one job that never returned kept the process from exiting after its node
stopped (the interpreter joins that executor's threads).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading

from quorum_cron.agent.jobcallable import JobThreads
from quorum_cron.agent.jobprocess import CallableTarget, JobContext, JobRun, RunOutcome

SLOT_MS = 1_700_000_000_123


def _run(func: object, timeout_ms: int) -> JobRun:
    return JobRun(CallableTarget(func), job="j", fire_ms=SLOT_MS, token=1, node="n1", timeout_ms=timeout_ms)  # type: ignore[arg-type]


def test_hung_jobs_starve_neither_to_thread_nor_the_next_job() -> None:
    release = threading.Event()

    def hangs(ctx: JobContext) -> None:
        release.wait(60)

    def quick(ctx: JobContext) -> str:
        return "ok"

    async def main() -> tuple[int, RunOutcome]:
        hung = [_run(hangs, 60_000) for _ in range(12)]
        for r in hung:
            r.start(lambda outcome: None)
        got = await asyncio.wait_for(asyncio.to_thread(lambda: 7), 30)
        outcome = await asyncio.wait_for(_run(quick, 30_000).run(), 30)
        release.set()
        return got, outcome

    try:
        got, outcome = asyncio.run(main())
    finally:
        release.set()
    assert got == 7
    assert outcome.succeeded, outcome


def test_a_job_that_never_returns_does_not_keep_the_process_alive() -> None:
    script = textwrap.dedent(
        """
        import asyncio, threading
        from quorum_cron.agent.jobprocess import CallableTarget, JobRun

        def forever(ctx):
            threading.Event().wait()

        run = JobRun(CallableTarget(forever), job="j", fire_ms=0, token=1, node="n1", timeout_ms=200)
        outcome = asyncio.run(run.run())
        print(outcome.timed_out, flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out.strip() == "True", (proc.returncode, out)


def test_job_threads_are_reused_and_bounded() -> None:
    pool = JobThreads(limit=3)
    gate = threading.Event()

    async def main() -> list[object]:
        loop = asyncio.get_running_loop()
        futures = [pool.submit(loop, lambda i=i: (gate.wait(30), i)[1]) for i in range(6)]
        await asyncio.sleep(0.05)
        gate.set()
        return list(await asyncio.gather(*futures))

    began = threading.active_count()
    assert asyncio.run(main()) == list(range(6))
    assert threading.active_count() - began <= 3
    assert pool._threads == 3  # (they stay, waiting for the next call)
