"""Catch-up reads of operator triggers (quorum_cron/agent/intake.py) against a killed redis-server.

Each time the store answers again the node reads its jobs' triggers (a
notice may have been lost meanwhile). During a failover the store answered
and failed in turn several times a second, and every answer started a read
that failed again: about 20 "cannot read triggers (store reachable again)"
lines per node within a second of the master being killed. A failed read is
now said once (until a read succeeds) and the next one waits a backoff, so
catch-ups asked for meanwhile go as one read.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import redis

from quorum_cron.agent.intake import CATCH_UP_BACKOFF_MIN_MS
from quorum_cron.clock.base import SystemClock
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.redis import RedisStore
from tests.agent_cluster import OwnedRedis
from tests.agent_inproc import agent_job, events
from tests.test_agent_inproc_intake import Node

FLAP_S = 1.0
"""How long the store is told to have answered again, over and over (as health flips did)."""


class CountingStore(RedisStore):
    """The real Redis store, counting its trigger reads."""

    reads = 0

    def triggers(self, job: str, since_ms: int) -> list[int]:
        type(self).reads += 1
        return super().triggers(job, since_ms)


def test_trigger_reads_back_off_and_are_said_once_while_the_master_is_dead(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    master = OwnedRedis(tmp_path)
    master.start()
    client = redis.Redis(port=master.port, **fail_fast())
    store = CountingStore(client, "inproc")
    master.kill()  # connection refused from now on: every read fails at once
    CountingStore.reads = 0

    async def main() -> int:
        node = Node(store, SystemClock(), jobs=[agent_job("a")])  # type: ignore[arg-type]
        asked = 0
        end = time.monotonic() + FLAP_S
        try:
            while time.monotonic() < end:  # (bounded: one second of "store reachable again")
                node.intake.catch_up("store reachable again")
                asked += 1
                await node.settle()  # the read (or the backoff before it) ended
        finally:
            node.close()
        return asked

    try:
        asked = asyncio.run(main())
    finally:
        client.close()
    lines = [r.getMessage() for r in events(caplog.records, "trigger")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("cannot read triggers (store reachable again): redis at ")
    # One read per backoff (200 ms doubling: reads at 0, 0.2, 0.6 and 1.4 s), not one per ask.
    assert CATCH_UP_BACKOFF_MIN_MS == 200
    assert 1 <= CountingStore.reads <= 4, (CountingStore.reads, asked)
