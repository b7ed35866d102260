"""A run's result the agent had to drop is said, in process on a real redis-server.

The core drops a result only when its ``Finish`` failed and the resend
buffer is full (``core.finish``; tests/test_core_finish_buffer.py has the
rule). Here the whole agent meets it: a store that refuses every finish, and
a buffer of 0, so the first failure drops. The agent must log one ERROR
``finish_dropped`` line naming the slot, stop waiting for that result (a
stop does not hang on it), and the slot ends ``lost`` in the ledger once its
lease runs out, as the event says it will. Waits are on facts (the event,
the ledger), never a sleep that hopes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest
import redis

import quorum_cron.core.finish as finish_module
from quorum_cron.agent.build import agent_job, agent_settings
from quorum_cron.agent.runtime import Agent
from quorum_cron.config.settings import AUTO, ClusterConfig, JobSpec
from quorum_cron.core.model import FencedRequest, SlotState, TransitionResult
from quorum_cron.errors import StoreError
from quorum_cron.store.redis import RedisStore
from tests.polling import until

REFUSED = "finish refused by the test"


class NoFinishes(RedisStore):
    """The Redis store, refusing every finish (alone or in a batch) with a ``StoreError``."""

    def fenced(self, requests: Sequence[FencedRequest]) -> list[TransitionResult | StoreError]:
        others = [r for r in requests if r.op != "finish"]
        done = iter(super().fenced(others) if others else [])
        return [StoreError(REFUSED) if r.op == "finish" else next(done) for r in requests]

    def finish(self, *args: object, **kwargs: object) -> TransitionResult:
        raise StoreError(REFUSED)


def test_a_dropped_result_is_logged_and_its_slot_ends_lost(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(finish_module, "MAX_PENDING_FINISHES", 0)
    cluster = ClusterConfig(
        namespace="dropped", size=AUTO, members=("a",), heartbeat_ms=100, lease_ms=1_000, start_timeout_ms=500
    )
    job = JobSpec.create("tick", "@every 1s", command=("true",), starting_deadline_ms=900)
    store = NoFinishes(redis_client, "dropped")
    agent = Agent(agent_settings(cluster, "a"), [agent_job(job)], store)

    def dropped() -> list[logging.LogRecord]:
        return [r for r in caplog.records if getattr(r, "qc_event", "") == "finish_dropped"]

    def lost(slot: int) -> bool:
        view = store.read_slots([("tick", slot)])
        return bool(view) and view[0].state == SlotState.LOST

    async def main() -> None:
        running = asyncio.create_task(agent.run())
        try:
            await asyncio.wait_for(agent.ready.wait(), 15)
            await until("a finish_dropped event", lambda: bool(dropped()))
            slot = dropped()[0].qc_fields["slot"]  # type: ignore[attr-defined]
            await until("the slot recorded lost after its lease", lambda: lost(slot))
        finally:
            agent.request_stop("test over")
            await asyncio.wait_for(running, 15)  # (no result it dropped holds the stop up)

    with caplog.at_level(logging.INFO, logger="quorum_cron.agent"):
        asyncio.run(main())
    first = dropped()[0]
    assert first.levelno == logging.ERROR
    assert first.qc_fields["job"] == "tick"  # type: ignore[attr-defined]
    assert REFUSED in first.getMessage() and "resend buffer is full" in first.getMessage()
    assert agent.core.dropped_finishes >= 1
    assert not [r for r in caplog.records if getattr(r, "qc_event", "") == "finish"]
    assert not [r for r in caplog.records if "not recorded" in r.getMessage()], "the stop waited for it"
