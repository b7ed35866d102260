"""The agent's heap settling (:mod:`quorum_cron.agent.heap`): a large job table is frozen out of
the collector's full passes at ready, a small one leaves the interpreter's collector alone."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator

import pytest

from quorum_cron.agent import heap
from quorum_cron.app import App, JobContext
from quorum_cron.store.memory import MemoryStore


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    """Each test starts and ends with nothing frozen and the interpreter's thresholds (both are
    process-wide)."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settle_collects_garbage_then_freezes_the_survivors() -> None:
    dead = _Cycle()
    gone = weakref.ref(dead)
    kept = _Cycle()
    del dead
    assert heap.settle(heap.SETTLE_MIN_JOBS) is True
    assert gone() is None, "a cycle that was already garbage is collected before the freeze"
    assert gc.get_freeze_count() > 0
    assert kept.me is kept


def _third_threshold_kept() -> bool:
    """Whether this interpreter's collector has a full-collection threshold (CPython 3.14's
    incremental collector ignores the third value and reports 0)."""
    gc.set_threshold(700, 10, 11)
    kept = gc.get_threshold()[2] == 11
    gc.set_threshold(700, 10, 10)
    return kept


FULL = heap.FULL_EVERY if _third_threshold_kept() else 0
"""What the third threshold reads once settled on this interpreter."""


def test_settle_makes_full_collections_rarer_and_young_ones_only_for_a_large_table() -> None:
    assert heap.settle(heap.SETTLE_MIN_JOBS) is True
    assert gc.get_threshold() == (700, 10, FULL)  # (1,000 jobs: a tenth is below the default)
    assert heap.settle(30_000) is True
    assert gc.get_threshold() == (3_000, 10, FULL)
    assert heap.settle(1_000_000) is True
    assert gc.get_threshold() == (heap.YOUNG_EVERY, 10, FULL)


def test_settle_never_lowers_a_threshold_the_application_raised() -> None:
    gc.set_threshold(heap.YOUNG_EVERY * 2, 20, heap.FULL_EVERY * 3)
    assert heap.settle(heap.SETTLE_MIN_JOBS) is True
    assert gc.get_threshold() == (heap.YOUNG_EVERY * 2, 20, heap.FULL_EVERY * 3 if FULL else 0)


def test_settle_leaves_a_small_table_to_the_collector() -> None:
    assert heap.settle(heap.SETTLE_MIN_JOBS - 1) is False
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == (700, 10, 10 if FULL else 0)


def _app(jobs: int) -> App:
    app = App(
        namespace="heap", members=["n1"], node_id="n1", store=MemoryStore(lambda: int(time.time() * 1000))
    )

    async def noop(ctx: JobContext) -> None:
        return None

    for i in range(jobs):
        app.cron("0 0 1 1 *", name=f"job-{i}")(noop)
    return app


@pytest.mark.parametrize(("jobs", "frozen"), [(heap.SETTLE_MIN_JOBS, True), (10, False)])
def test_an_agent_settles_its_heap_at_ready_only_for_a_large_table(jobs: int, frozen: bool) -> None:
    app = _app(jobs)

    async def run() -> int:
        task = asyncio.ensure_future(app.serve())
        await asyncio.wait_for(app.ready(), 60)
        count = gc.get_freeze_count()
        app.stop()
        await asyncio.wait_for(task, 60)
        return count

    assert (asyncio.run(run()) > 0) is frozen
    assert gc.get_threshold()[2] == (FULL if frozen else 10 if FULL else 0)
