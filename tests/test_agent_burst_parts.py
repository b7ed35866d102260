"""Three whole agents on a real redis-server, each sending its bursts' votes in parts.

:mod:`quorum_cron.agent.storeio` cuts a vote longer than ``VOTE_PART`` into
parts, answers each part at once, and sends the starts, renewals and finishes
queued meanwhile between them, in the order :mod:`quorum_cron.agent.burstorder`
gives (tests/test_agent_storeio.py and tests/test_agent_burst_order.py hold
those pieces). Here the pieces run together as in production — runtime,
core, store worker, the Redis scripts, notices — with ``VOTE_PART`` set low
so that a burst of 60 jobs is 3 parts per node: every slot of the measured
fire times runs exactly once, on each of the three nodes for some of them,
no start is refused and nothing is taken over. (Whether a part's answer
comes before the starts that overtake the next part is a matter of timing
here; tests/test_agent_storeio.py holds that order deterministically.)
Waits are on facts (the runs recorded), never a sleep that hopes.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
import redis

import quorum_cron.agent.storeio as storeio
from quorum_cron.agent.build import agent_job, agent_settings
from quorum_cron.agent.jobprocess import CallableTarget, JobContext
from quorum_cron.agent.runtime import Agent
from quorum_cron.config.settings import AUTO, ClusterConfig, JobSpec
from quorum_cron.store.redis import RedisStore
from tests.polling import until

JOBS = 60
PART = 20
NODES = ("a", "b", "c")


def test_bursts_sent_in_parts_run_every_slot_once_with_no_start_refused(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storeio, "VOTE_PART", PART)
    runs: Counter[tuple[str, int]] = Counter()
    ran_on: dict[tuple[str, int], str] = {}

    async def body(ctx: JobContext) -> None:
        runs[(ctx.job, ctx.slot_ms)] += 1
        ran_on[(ctx.job, ctx.slot_ms)] = ctx.node

    cluster = ClusterConfig(
        namespace="parts", size=AUTO, members=NODES, heartbeat_ms=500, lease_ms=10_000, start_timeout_ms=4_000
    )
    specs = [
        JobSpec.create(f"j{i:02d}", "@every 2s", in_process=True, starting_deadline_ms=1_900)
        for i in range(JOBS)
    ]
    agents = [
        Agent(
            agent_settings(cluster, node),
            [agent_job(spec, CallableTarget(body)) for spec in specs],
            RedisStore(redis_client, "parts"),
        )
        for node in NODES
    ]

    def complete() -> list[int]:
        """Fire times at which every job ran, after the first fire time seen (which may have
        come while an agent was still starting)."""
        by_fire = Counter(fire for _, fire in runs)
        fires = sorted(by_fire)[1:]
        return [fire for fire in fires if by_fire[fire] >= JOBS]

    async def main() -> None:
        tasks = [asyncio.create_task(agent.run()) for agent in agents]
        try:
            for agent in agents:
                await asyncio.wait_for(agent.ready.wait(), 20)
            await until("two fire times at which every job ran", lambda: len(complete()) >= 2, timeout=30)
        finally:
            for agent in agents:
                agent.request_stop("test over")
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 20)

    asyncio.run(main())
    measured = complete()[:2]
    assert all(runs[(f"j{i:02d}", fire)] == 1 for fire in measured for i in range(JOBS)), runs
    assert max(runs.values()) == 1, [slot for slot, n in runs.items() if n > 1]  # (no slot ever ran twice)
    for agent in agents:
        assert agent.observer.counts["start_refused"] == 0, (
            agent.settings.node.node_id,
            agent.observer.counts,
        )
        assert agent.observer.counts["takeovers"] == 0, (agent.settings.node.node_id, agent.observer.counts)
    # Each node executes some of them: a node left out of every quorum (its parts always landing
    # last) would run none; the rendezvous pick among each slot's top-ranked voters spreads them.
    executors = Counter(node for (_, fire), node in ran_on.items() if fire in measured)
    assert set(executors) == set(NODES), executors
