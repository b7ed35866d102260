"""The agent's ``summary`` log line on real nodes: what each node counted adds up to what ran.

Per-slot lines that say "as planned" are DEBUG on the voters (issue 27: the
``commit`` event); the minute's ``summary`` line is what an operator reads
instead, so its counts must be the truth. Three in-process nodes of the
Python API on a real redis-server run a job every second; when they stop,
each logs the counts of its last (partial) interval, and summed over the
nodes ``started`` and ``succeeded`` equal the runs the job itself saw, and
no slot is counted committed twice.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.observe import SUMMARY_INTERVAL_S
from quorum_cron.app import App, JobContext
from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore


class _Keep(logging.Handler):
    """Every record of the agent's logger, whatever else configured logging in this process."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def events(self, name: str) -> list[logging.LogRecord]:
        return [r for r in self.records if getattr(r, "qc_event", None) == name]


@pytest.fixture
def kept() -> Iterator[_Keep]:
    logger = logging.getLogger(EVENT_LOGGER)
    handler, level = _Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # the default level: the commit lines are not even formatted
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_the_nodes_summaries_add_up_to_the_runs_and_commit_lines_stay_below_info(
    redis_server: EmbeddedRedis, kept: _Keep
) -> None:
    runs: list[JobContext] = []
    lock = threading.Lock()
    apps = []
    for i in range(1, 4):
        app = App(
            namespace="summary-test",
            size=3,
            redis_url=redis_server.url,
            node_id=f"s{i}",
            heartbeat="500ms",
            start_timeout="1s",
        )

        @app.cron("@every 1s", name="tick", starting_deadline="1s")
        def tick(ctx: JobContext) -> None:
            with lock:
                runs.append(ctx)

        apps.append(app)

    async def main() -> None:
        tasks = [asyncio.ensure_future(a.serve()) for a in apps]
        await asyncio.wait_for(asyncio.gather(*(a.ready() for a in apps)), 20)
        deadline = time.monotonic() + 30
        while len(runs) < 5:
            assert time.monotonic() < deadline, f"only {len(runs)} runs"
            await asyncio.sleep(0.1)
        for a in apps:
            a.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)

    began = time.monotonic()
    asyncio.run(main())
    intervals = 1 + int((time.monotonic() - began) // SUMMARY_INTERVAL_S)
    summaries = [r.qc_fields for r in kept.events("summary")]  # type: ignore[attr-defined]
    # One per node that saw anything (the last, partial interval), and one per whole interval the
    # run lasted (on a loaded machine it may pass one).
    assert 1 <= len(summaries) <= 3 * intervals
    total = {key: sum(int(s[key]) for s in summaries) for key in ("started", "succeeded", "committed")}
    assert total["started"] == total["succeeded"] == len(runs), (total, len(runs))
    store = RedisStore.from_url(redis_server.url, "summary-test")
    try:
        decided = [e for e in store.ledger("tick", 1000) if e.state != SlotState.MISSED]
    finally:
        store.close()
    # Each slot is committed by the one vote that completed its quorum (a takeover is not a commit).
    assert 1 <= total["committed"] <= len({e.fire_ms for e in decided})
    assert kept.events("commit") == []  # DEBUG, below the level: never even built
    assert len(kept.events("run")) == len(runs)  # the executor still says each run
