"""The order a node's votes travel in: its rendezvous rank first (issue 27, executor spread).

The executor of a slot is picked among the voters that reached the quorum.
At a minute boundary the node whose calls the server happened to take first
was in nearly every quorum and ran half the slots of three nodes. The Redis
store therefore sends a node's votes in the order of the node's rendezvous
rank among the record's members (its own slots first); these tests pin that
order, that the replies still come back in request order, and that the rank
is the executor pick's own order.
"""

from __future__ import annotations

from typing import Any

import redis
from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.core.model import MembershipRecord
from quorum_cron.store.base import VoteRequest, VoteStatus
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.rendezvous import pick_executor, rank

T0 = 1_700_000_000_000
MEMBERS = ("n1", "n2", "n3")
RECORD = "1;3,2,n1,n2,n3"

node_ids = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters=","), min_size=1,
                   max_size=8)  # fmt: skip


@given(
    job=st.text(min_size=1, max_size=20),
    fire=st.integers(min_value=0, max_value=2**53 - 1),
    members=st.lists(node_ids, min_size=1, max_size=7, unique=True),
)
def test_rank_orders_the_members_as_the_executor_pick_does(job: str, fire: int, members: list[str]) -> None:
    """Ranks are 0..n-1, one each, and rank 0 is the node pick_executor picks among all members;
    dropping the winner leaves the rank-1 node the pick (the order, not just its head)."""
    ranks = {node: rank(job, fire, node, members) for node in members}
    assert sorted(ranks.values()) == list(range(len(members)))
    first = min(ranks, key=lambda n: ranks[n])
    assert first == pick_executor(job, fire, members)
    if len(members) > 1:
        rest = [n for n in members if n != first]
        assert pick_executor(job, fire, rest) == min(rest, key=lambda n: ranks[n])


def _recorded_calls(store: RedisStore) -> list[Any]:
    """Every script call the store sends from now on (wrapping its script runner)."""
    calls: list[Any] = []
    runner = store._scripts
    inner_many, inner_one = runner.call_many, runner.call

    def call_many(batch: Any, *args: Any, **kwargs: Any) -> Any:
        calls.extend(batch)
        return inner_many(batch, *args, **kwargs)

    def call(one: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(one)
        return inner_one(one, *args, **kwargs)

    runner.call_many = call_many  # type: ignore[method-assign,assignment]
    runner.call = call  # type: ignore[method-assign,assignment]
    return calls


def _job_of(key: str) -> str:
    return key[key.index(":", 4) + 1 : key.index("}:")]  # qc:{<ns>:<job>}:meta


def test_a_node_sends_the_slots_it_would_execute_first(redis_client: redis.Redis) -> None:
    """60 jobs, calls of 7 votes: the jobs travel in non-decreasing rank of the voting node, the
    replies come back in request order, and each node's rank-0 slots are about a third."""
    jobs = [f"job-{i:02d}" for i in range(60)]
    fire = T0
    for node in MEMBERS:
        store = RedisStore(redis_client, "ns", clock=lambda: T0, max_batch=7)
        calls = _recorded_calls(store)
        requests = [
            VoteRequest(job, fire, node, "h1", 2, 250, 30_000, epoch=1, membership=RECORD) for job in jobs
        ]
        results = store.vote(requests)
        assert [r.slot.job for r in results] == jobs  # request order, whatever the travel order
        sent = [_job_of(k) for c in calls for k in c.keys]
        assert sorted(sent) == jobs and len(calls) == 9
        ranks = [rank(job, fire, node, MEMBERS) for job in sent]
        assert ranks == sorted(ranks), f"{node}'s votes left out of rank order"
        assert 10 <= ranks.count(0) <= 30
    # The third voter found every slot decided: each slot has one executor among the members.
    final = RedisStore(redis_client, "ns", clock=lambda: T0).vote(
        [VoteRequest(job, fire, "n3", "h1", 2, 250, 30_000, epoch=1, membership=RECORD) for job in jobs]
    )
    assert {r.status for r in final} == {VoteStatus.DECIDED}


def test_legacy_votes_and_foreign_records_keep_the_callers_order(redis_client: redis.Redis) -> None:
    """No rank without a record naming the voter among two or more members: epoch-0 votes, and a
    record the node is not in, travel as given (one fire time, one parameter set)."""
    jobs = [f"job-{i:02d}" for i in range(20)]
    single = MembershipRecord.decode("1;1,1,n9").encode()
    variants: list[dict[str, Any]] = [{}, {"epoch": 1, "membership": single}]
    for kwargs in variants:
        store = RedisStore(redis_client, "ns2", clock=lambda: T0, max_batch=6)
        calls = _recorded_calls(store)
        store.vote([VoteRequest(job, T0, "n1", "h1", 2, 250, 30_000, **kwargs) for job in jobs])
        assert [_job_of(k) for c in calls for k in c.keys] == jobs
