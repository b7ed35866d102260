"""A vote held back for a short cluster master says nothing of whether the store answers.

The store worker answers the votes of a master whose writes fall short at
once, unsent (quorum_cron/agent/shortmasters.py). Such an answer never
reached the store, so the runtime must not tell the core it learnt anything
from it: told ``REFUSED`` ("the store answered") while the store was
unreachable, the core released every vote it held until the store answers,
every ``retry_ms`` (each into a connect timeout); told ``UNREACHABLE``
because the master's state ended while the answer was on its way, the core
took a store that answers for a lost one. Real cluster (the session's
:func:`tests.topologies.redis_cluster`), the real ``RedisStore``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from quorum_cron.agent.alerts import AlertHook
from quorum_cron.agent.shortmasters import UNSENT, ShortMasters
from quorum_cron.core.model import VoteRequest
from quorum_cron.core.node import CoreJob, Failure, NodeCore, NodeSettings, Now, Vote
from quorum_cron.errors import StoreUnreplicated
from quorum_cron.store.embedded.topology import EmbeddedCluster
from quorum_cron.store.redis import RedisStore
from tests.core_driver import Every, boot
from tests.topologies import cluster_client

pytestmark = pytest.mark.slow

SHORT = "WAIT: 0 of 1 replicas acknowledged within 50 ms"
HOLD_MS = 1_000


def _held(store: RedisStore, mono: list[int]) -> tuple[ShortMasters, StoreUnreplicated]:
    """A ShortMasters holding the master of job ``a``, and the error its vote is answered with."""
    masters = ShortMasters(store, lambda: mono[0], HOLD_MS, AlertHook("n1"))
    short = store.master_of("a")
    assert masters.down(
        f"redis at x: outcome of vote unknown, {StoreUnreplicated.MARKER}{SHORT} on master {short}"
    )
    sent, unsent = masters.split(Vote((VoteRequest("a", 60_000, "n1", "h", 2, 5_000, 60_000),)))
    assert not sent and len(unsent) == 1
    exc = unsent[0][1]
    assert isinstance(exc, StoreUnreplicated) and UNSENT in str(exc)
    return masters, exc


async def _now(fn: Callable[[], bool]) -> bool:
    return fn()


def test_an_unsent_vote_answered_after_its_master_came_back_is_no_lost_store(
    redis_cluster: EmbeddedCluster,
) -> None:
    store = RedisStore(cluster_client(redis_cluster), "unsent1")
    try:
        mono = [0]
        masters, exc = _held(store, mono)
        # The master's state ends (its probe replicated: this store asks no WAIT) while the unsent
        # answer waits for the loop.
        mono[0] += HOLD_MS
        asyncio.run(masters.probe(_now))
        assert not masters.held
        assert masters.failure(exc) == Failure.REFUSED
    finally:
        store.close()


def test_an_unsent_vote_keeps_an_unreachable_store_unreachable(redis_cluster: EmbeddedCluster) -> None:
    store = RedisStore(cluster_client(redis_cluster), "unsent2")
    try:
        masters, exc = _held(store, [0])
        job = CoreJob(name="a", schedule=Every(60_000), spec_hash="h", deadline_ms=5_000, timeout_ms=60_000)
        core = NodeCore(NodeSettings(node_id="n1", quorum=2), [job])
        core.set_trust(True)
        (vote,) = [a for a in boot(core, Now(60_000, 0)) if isinstance(a, Vote)]
        core.set_store_reachable(False, "connection refused")
        # As the runtime tells it (agent/runtime.py, _on_store_done).
        core.on_failure(vote, Now(60_100, 100), masters.failure(exc, core.store_reachable), str(exc))
        assert not core.store_reachable, "an answer that never reached the store said it answers"
        core.set_store_reachable(True)
        core.on_failure(vote, Now(60_200, 200), masters.failure(exc, core.store_reachable), str(exc))
        assert core.store_reachable
    finally:
        store.close()
