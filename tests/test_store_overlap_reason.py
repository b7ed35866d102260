"""An overlap skip names the state of the slot that held it: running, or committed and not started.

A day-2 audit: a slot committed during an outage never started, and under
``overlap = "forbid"`` it held the job's next slot ``skipped`` with the reason
``overlap forbidden: slot X active``, which read as a run in progress where
none was. A committed slot does count as active until its start timeout or
deadline (docs/protocol.md); the reason now says which it is. The scripts (a
real redis-server) and the memory model side by side: both word it the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from quorum_cron.core.model import Overlap, SlotState, VoteRequest, VoteStatus
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore

T0 = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def stores(redis_server: EmbeddedRedis) -> Iterator[tuple[Clock, list[Any]]]:
    clock = Clock()
    client = redis_server.client(retry=None, socket_timeout=5.0)
    client.flushall()
    try:
        yield clock, [RedisStore(client, "ovr", clock=clock), MemoryStore(clock)]
    finally:
        client.close()


def _commit(store: Any, fire: int) -> Any:
    votes = [VoteRequest("j", fire, n, "h", 2, 250, 30_000, Overlap.FORBID) for n in ("a", "b")]
    result = store.vote(votes)[-1]
    assert result.status == VoteStatus.COMMITTED, result
    return result.slot


def test_the_skip_says_whether_the_slot_holding_it_runs_or_was_only_committed(
    stores: tuple[Clock, list[Any]],
) -> None:
    clock, both = stores
    reasons = []
    for store in both:
        clock.now = T0
        first = _commit(store, T0)
        clock.now = T0 + 1_000
        held = _commit(store, T0 + 1_000)
        assert held.state == SlotState.SKIPPED
        assert store.start("j", T0, first.executor, first.token, 60_000).ok
        clock.now = T0 + 2_000
        running = _commit(store, T0 + 2_000)
        assert running.state == SlotState.SKIPPED
        reasons.append((held.reason, running.reason))
    assert (
        reasons[0]
        == reasons[1]
        == (
            f"overlap forbidden: slot {T0} committed, not started yet",
            f"overlap forbidden: slot {T0} running",
        )
    )


def test_a_slot_awaiting_its_retry_is_said_to_have_run(stores: tuple[Clock, list[Any]]) -> None:
    """A failed run is committed again for its retry (runs >= 1): "not started yet" denied the run
    it had. Both stores say it awaits a retry."""
    clock, both = stores
    reasons = []
    for store in both:
        clock.now = T0
        first = _commit(store, T0)
        assert store.start("j", T0, first.executor, first.token, 60_000).ok
        clock.now = T0 + 500
        failed = store.finish("j", T0, first.executor, first.token, False, "exit 1", 1, 10_000)
        assert failed.ok and failed.slot.state == SlotState.COMMITTED and failed.slot.runs == 1, failed
        clock.now = T0 + 1_000
        reasons.append(_commit(store, T0 + 1_000).reason)
    assert reasons[0] == reasons[1] == f"overlap forbidden: slot {T0} committed for a retry, not started yet"
