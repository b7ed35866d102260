"""The epoch a slot names as deciding it, on every path that ends or keeps a decided slot.

The scripts (a real redis-server) and the memory model side by side, as the
contract suites hold them: an overlap skip after the quorum names the record
(a quorum decided it), a paused job's skip and a slot missed before any
quorum name 0; a vote that adopts a newer record and commits names the new
one; a retry under a new token and a sweep's takeover keep the epoch of the
vote that decided the slot, and every ledger entry copies it. Each store's
views must also agree with the other's, field for field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from quorum_cron.core.model import (
    Configuration,
    MembershipRecord,
    Overlap,
    SlotState,
    SweepParams,
    VoteRequest,
    VoteStatus,
)
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore

T0 = 1_700_000_000_000
ABC = MembershipRecord(1, Configuration.of(["a", "b", "c"]))
NEXT = MembershipRecord(2, Configuration.of(["a", "b", "c"]))
"""The namespace's next epoch (a seat filled again by the same node: the same members)."""


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
        yield clock, [RedisStore(client, "ep", clock=clock), MemoryStore(clock)]
    finally:
        client.close()


def _vote(
    s: Any, node: str, rec: MembershipRecord, fire: int, job: str = "j", overlap: Overlap = Overlap.ALLOW
) -> Any:
    req = VoteRequest(job, fire, node, "h", 2, 250, 5_000, overlap, epoch=rec.epoch, membership=rec.encode())
    return s.vote([req])[0]


def _same(stores: list[Any], job: str, fire: int) -> Any:
    redis_view, model_view = (s.slot(job, fire) for s in stores)
    assert redis_view == model_view
    return redis_view


def test_an_overlap_skip_after_the_quorum_names_the_record_a_pause_or_a_miss_names_none(
    stores: tuple[Clock, list[Any]],
) -> None:
    clock, both = stores
    for s in both:
        clock.now = T0
        _vote(s, "a", ABC, T0)
        assert _vote(s, "b", ABC, T0).status == VoteStatus.COMMITTED  # active, under epoch 1
        clock.now = T0 + 1_000
        _vote(s, "a", ABC, T0 + 1_000, overlap=Overlap.FORBID)
        assert _vote(s, "b", ABC, T0 + 1_000, overlap=Overlap.FORBID).status == VoteStatus.COMMITTED
        # A slot missed before any quorum: the deadline passed with one vote.
        _vote(s, "a", ABC, T0 + 2_000)
        clock.now = T0 + 2_000 + 6_000
        assert _vote(s, "b", ABC, T0 + 2_000).status == VoteStatus.MISSED
        s.pause("p", "ops", "")
        assert _vote(s, "a", ABC, T0 + 8_000, job="p").status == VoteStatus.SKIPPED
    skipped = _same(both, "j", T0 + 1_000)
    assert (skipped.state, skipped.epoch) == (SlotState.SKIPPED, 1)
    missed = _same(both, "j", T0 + 2_000)
    assert (missed.state, missed.epoch) == (SlotState.MISSED, 0)
    paused = _same(both, "p", T0 + 8_000)
    assert (paused.state, paused.epoch) == (SlotState.SKIPPED, 0)
    for job in ("j", "p"):
        redis_ledger, model_ledger = (s.ledger(job, 10) for s in both)
        assert [(e.fire_ms, e.state, e.epoch) for e in redis_ledger] == [
            (e.fire_ms, e.state, e.epoch) for e in model_ledger
        ]
    assert {(e.fire_ms, e.epoch) for e in both[0].ledger("j", 10)} == {(T0 + 1_000, 1), (T0 + 2_000, 0)}


def test_a_vote_that_adopts_a_newer_record_and_commits_names_it_and_retry_and_takeover_keep_it(
    stores: tuple[Clock, list[Any]],
) -> None:
    clock, both = stores
    for s in both:
        clock.now = T0
        assert _vote(s, "a", ABC, T0).status == VoteStatus.RECORDED
        # b's vote brings epoch 2 (the job adopts it) and, with a's, commits under it.
        assert _vote(s, "b", NEXT, T0).status == VoteStatus.COMMITTED
        view = s.slot("j", T0)
        assert s.start("j", T0, view.executor, view.token, 60_000).ok
        assert s.finish("j", T0, view.executor, view.token, False, "", retries=1).ok  # retried
        # The retry's executor never starts: a sweep hands it on (a takeover).
        clock.now = T0 + 10_000
        s.sweep([SweepParams("j", 5_000, 1_000)])
    view = _same(both, "j", T0)
    assert view.epoch == 2 and view.token >= 3  # (vote, retry, takeover: the epoch stays)
    redis_ledger, model_ledger = (s.ledger("j", 10) for s in both)
    assert [(e.state, e.epoch) for e in redis_ledger] == [(e.state, e.epoch) for e in model_ledger]
    assert [e.epoch for e in redis_ledger] == [2] * len(redis_ledger) and redis_ledger


@pytest.mark.parametrize("bad", ['"abc"', '"-1"', '"99999999999999999999"', "{}", "1.5"])
def test_a_hostile_epoch_in_redis_harms_only_its_own_job(redis_server: EmbeddedRedis, bad: str) -> None:
    clock = Clock()
    client = redis_server.client(retry=None, socket_timeout=5.0)
    client.flushall()
    try:
        s = RedisStore(client, "ep", clock=clock)
        for job in ("j", "k"):
            _vote(s, "a", ABC, T0, job=job)
            assert _vote(s, "b", ABC, T0, job=job).status == VoteStatus.COMMITTED
        key = "qc:{ep:j}:slot:" + str(T0)
        raw = client.get(key).decode()
        assert '"ep":"1"' in raw
        client.set(key, raw.replace('"ep":"1"', f'"ep":{bad}'), keepttl=True)
        said: list[str] = []
        s.on_bad_value = lambda what, problem: said.append(f"{what}: {problem}")
        assert s.slot("j", T0).state == SlotState.ABSENT  # (left out of the read, reported)
        assert len(said) == 1 and "'ep'" in said[0] and len(said[0]) < 300, said
        assert s.slot("k", T0).epoch == 1
        # A vote of another slot of the bad job goes on.
        clock.now = T0 + 60_000
        _vote(s, "a", ABC, T0 + 60_000, job="j")
        assert _vote(s, "b", ABC, T0 + 60_000, job="j").status == VoteStatus.COMMITTED
        # A ledger entry naming a hostile epoch is left out (reported), the others read.
        client.xadd(
            "qc:{ep:k}:ledger",
            {"fire": str(T0), "state": "succeeded", "finished": str(T0), "epoch": "x" * 30},
        )
        client.xadd(
            "qc:{ep:k}:ledger", {"fire": str(T0 + 1), "state": "succeeded", "finished": str(T0), "epoch": "3"}
        )
        assert [(e.fire_ms, e.epoch) for e in s.ledger("k", 10)] == [(T0 + 1, 3)]
    finally:
        client.close()
