"""A rolling upgrade: what this version's store reads and decides on values older agents wrote.

During a roll, agents of two versions share one Redis, and each runs its
own copy of the Lua scripts (its own SHA). So this version's scripts and
readers meet, as they are, values written by older agents' scripts. The
values below are what an agent from before membership records (before
2026-12-02) wrote, copied byte for byte from a real run of it (docs/upgrading.md):

* a heartbeat entry of four fields, without the epoch;
* a proposed slot holding its vote;
* the legacy quorum floor ``q`` in a job's meta, which such an agent's vote
  writes again even after a newer agent's vote dropped it (its script knows
  nothing of ``mr``);
* a ledger entry.

Nothing here depends on git history: the old values are literals. A real
mix of processes was checked by hand (docs/upgrading.md says how); this
file pins the store's side of it so that a later change to a parser or a
script cannot quietly stop reading them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from quorum_cron.core.model import Configuration, MembershipRecord, SlotState, VoteRequest, VoteStatus
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore

NOW_MS = 1_796_640_000_000
ABC = MembershipRecord(1, Configuration.of(["a", "b", "c"]))
OLD_SLOT = b'proposed 1797244800000 1000 {"a":"h"}'
"""A slot at NOW_MS with a's vote for spec "h", as a pre-membership agent's vote.lua wrote it
(with the slot in the job's ``open`` index and ``q`` = 2 in its meta)."""
OLD_MEMBER = b'["inc1","1796640000000","1796640003000","{\\"k\\":\\"v\\"}"]'
"""A pre-membership heartbeat entry: incarnation, seen, expires, info; no epoch."""
OLD_LEDGER = {
    "fire": "1796640000000",
    "state": "succeeded",
    "finished": "1796640000141",
    "reason": "exit 0",
    "voters": '["b","a"]',
    "executor": "a",
    "token": "1",
    "committed": "1796639999952",
    "started": "1796640000001",
    "detail": "exit 0",
}
"""A ledger entry as a pre-membership agent's finish wrote it (the format has not changed since)."""


@pytest.fixture
def store(redis_server: EmbeddedRedis) -> Iterator[tuple[RedisStore, redis.Redis]]:
    client = redis_server.client(retry=None, socket_timeout=5.0)
    client.flushall()
    try:
        yield RedisStore(client, "up", clock=lambda: NOW_MS), client
    finally:
        client.close()


def _vote(s: RedisStore, node: str, rec: MembershipRecord, quorum: int = 2) -> VoteStatus:
    req = VoteRequest("j", NOW_MS, node, "h", quorum, 250, 1000, epoch=rec.epoch, membership=rec.encode())
    return s.vote([req])[0].status


def test_an_old_agents_heartbeat_is_a_live_member_of_epoch_0(store: tuple[RedisStore, redis.Redis]) -> None:
    """status lists such a node as alive, epoch "-", "not yet on epoch E": not as corrupt."""
    s, client = store
    client.hset("qc:{up}:members", "old-1", OLD_MEMBER)
    (m,) = s.members()
    assert (m.node, m.incarnation, m.seen_ms, m.expires_ms, m.epoch) == (
        "old-1", "inc1", NOW_MS, NOW_MS + 3000, 0,
    )  # fmt: skip
    assert m.info == {"k": "v"}


def test_an_old_agents_stored_vote_counts_toward_a_commit(store: tuple[RedisStore, redis.Redis]) -> None:
    """An upgraded node's vote completes a quorum with a vote an old node's script stored.

    Its script counts the stored votes of the record's members that agree, whoever
    wrote them: the first upgraded node does not make the old nodes' votes on
    that slot worthless (no slot is missed for it).
    """
    s, client = store
    client.set(f"qc:{{up:j}}:slot:{NOW_MS}", OLD_SLOT)
    client.zadd("qc:{up:j}:open", {str(NOW_MS): NOW_MS})
    client.hset("qc:{up:j}:meta", "q", "2")
    assert _vote(s, "b", ABC) == VoteStatus.COMMITTED
    view = s.slot("j", NOW_MS)
    assert view.state == SlotState.COMMITTED and dict(view.votes) == {"a": "h", "b": "h"}
    assert view.executor in ("a", "b") and view.token == 1
    # The job adopted the record and dropped the floor in the same step.
    assert client.hmget("qc:{up:j}:meta", ["q", "mr"]) == [None, b"1;3,2,a,b,c"]


def test_a_floor_an_old_agent_wrote_again_beside_the_record_is_ignored(
    store: tuple[RedisStore, redis.Redis],
) -> None:
    """An old agent's vote writes ``q`` back after the job adopted a record; the record still decides.

    Here ``q`` = 3 (an old node that once sent 3): 2 of the record's 3 members
    commit all the same, and the floor stays where the old script put it
    (nothing reads it while the job has a record).
    """
    s, client = store
    client.hset("qc:{up:j}:meta", mapping={"mr": "1;3,2,a,b,c", "q": "3"})
    assert _vote(s, "a", ABC) == VoteStatus.RECORDED
    assert _vote(s, "b", ABC) == VoteStatus.COMMITTED
    assert client.hget("qc:{up:j}:meta", "q") == b"3"


def test_an_old_agents_ledger_entry_reads(store: tuple[RedisStore, redis.Redis]) -> None:
    s, client = store
    client.xadd("qc:{up:j}:ledger", OLD_LEDGER)  # type: ignore[arg-type]
    (e,) = s.ledger("j", 10)
    assert (e.fire_ms, e.state, e.executor, e.token, e.voters, e.reason) == (
        NOW_MS, SlotState.SUCCEEDED, "a", 1, ("a", "b"), "exit 0",
    )  # fmt: skip
