"""A long run of script calls goes in bounded pipelines (``quorum_cron.store.scripts.pipeline_parts``).

At a burst of 100,000 jobs an agent's votes were one pipeline of ~6 MB.
redis-py writes a pipeline with one ``sendall``, bounded as a whole by the
socket timeout, and the server reads it only as fast as it runs it: on a
3-master cluster every burst's vote failed with "Timeout writing to socket"
and no slot ran (benchmarks/scale.py, issue 27). These tests pin the cut
(a property over any calls) and that a cut run, on a real server and a real
cluster, still answers every call once, in call order — with ``WAIT`` after
each part.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.store.base import VoteRequest, VoteStatus
from quorum_cron.store.embedded.topology import EmbeddedCluster
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.scripts import MAX_PIPELINE_ARGS, READ, Call, ScriptRunner, Wait, pipeline_parts
from tests.topologies import cluster_client

T0 = 1_700_000_000_000


def _call(keys: int, args: int) -> Call:
    return Call(READ, [f"k{i}" for i in range(keys)], ["a"] * args)


@given(st.lists(st.tuples(st.integers(1, 3_000), st.integers(0, 5_000)), max_size=40))
def test_parts_cover_every_call_in_order_and_each_is_full_but_bounded(sizes: list[tuple[int, int]]) -> None:
    """Parts are consecutive runs covering every call once, in order; each holds at most
    ``MAX_PIPELINE_ARGS`` keys and arguments unless it is one call alone; and a part ends only
    where the next call would not fit (no needless round trip)."""
    calls = [_call(k, a) for k, a in sizes]
    parts = pipeline_parts(calls)
    assert [i for part in parts for i in part] == list(range(len(calls)))
    assert all(len(part) > 0 for part in parts) or parts == [range(0, 0)]
    weight = [len(c.keys) + len(c.args) for c in calls]
    for n, part in enumerate(parts):
        total = sum(weight[i] for i in part)
        assert total <= MAX_PIPELINE_ARGS or len(part) == 1
        if n + 1 < len(parts):
            assert total + weight[parts[n + 1][0]] > MAX_PIPELINE_ARGS


def _spy(client: redis.Redis, sizes: list[int]) -> None:
    """Record, for every pipeline this real client executes, its keys and arguments."""
    make = client.pipeline

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = make(*args, **kwargs)
        run = pipe.execute

        def execute(*a: Any, **kw: Any) -> Any:
            sizes.append(sum(max(0, len(cmd) - 3) for cmd, _ in pipe.command_stack if cmd[0] == "EVALSHA"))
            return run(*a, **kw)

        pipe.execute = execute  # type: ignore[method-assign]
        return pipe

    client.pipeline = pipeline  # type: ignore[method-assign]


def _votes(n: int, node: str = "n1") -> list[VoteRequest]:
    return [VoteRequest(f"job{i:05d}", T0, node, "h1", 2, 10**12, 10**12) for i in range(n)]


def test_a_burst_of_votes_goes_in_bounded_pipelines_and_every_vote_is_answered_in_order(
    redis_client: redis.Redis,
) -> None:
    store = RedisStore(redis_client, "pp")
    sizes: list[int] = []
    _spy(redis_client, sizes)
    requests = _votes(6_000)
    results = store.vote(requests)
    assert len(sizes) >= 2  # (one pipeline would have carried ~12,000 keys and arguments)
    assert max(sizes) <= MAX_PIPELINE_ARGS
    assert [r.status for r in results] == [VoteStatus.RECORDED] * len(requests)
    assert [(r.slot.job, r.slot.fire_ms) for r in results] == [(q.job, q.fire_ms) for q in requests]
    again = store.vote(_votes(6_000, "n2"))  # (the second vote of each slot: every one commits)
    assert [r.status for r in again] == [VoteStatus.COMMITTED] * len(requests)


def test_a_cut_run_with_wait_waits_after_every_part(redis_client: redis.Redis) -> None:
    """``WAIT`` ends each part (a part may go on another pooled connection, and WAIT covers the
    writes of its own): every call's reply comes back and the fewest acknowledgements count."""
    runner = ScriptRunner(redis_client)
    sizes: list[int] = []
    _spy(redis_client, sizes)
    waits: list[int] = []
    original = redis_client.pipeline

    def counting(*args: Any, **kwargs: Any) -> Any:
        pipe = original(*args, **kwargs)
        make_wait = pipe.wait

        def wait(*a: Any) -> Any:
            waits.append(1)
            return make_wait(*a)

        pipe.wait = wait  # type: ignore[method-assign, assignment]
        return pipe

    redis_client.pipeline = counting  # type: ignore[method-assign]
    calls = [Call(READ, ["qc:{pp:j}:meta"], ["x"] * 1_000) for _ in range(9)]
    replies = runner.call_many(calls, Wait(0, 100), errors=True)
    assert len(replies) == 9
    assert len(sizes) == len(waits) >= 3  # (9 calls of ~1,000 arguments: parts of 4 at most)


@pytest.mark.slow
def test_a_burst_of_votes_on_a_cluster_goes_in_bounded_pipelines_per_master(
    redis_cluster: EmbeddedCluster,
) -> None:
    client = cluster_client(redis_cluster)
    client.flushall()
    store = RedisStore(client, "pp")
    sizes: list[int] = []
    spied: set[str] = set()
    get = client.get_redis_connection

    def connection(node: Any) -> Any:
        conn = get(node)
        if node.name not in spied:
            spied.add(node.name)
            _spy(conn, sizes)
        return conn

    client.get_redis_connection = connection  # type: ignore[method-assign]
    try:
        requests = _votes(9_000)
        results = store.vote(requests)
        assert len(spied) == 3 and len(sizes) >= 4  # (~6,000 keys and arguments per master)
        # (A cluster call sends its keys twice, declared and in ARGV: see store/cluster.py.)
        assert max(sizes) <= 2 * MAX_PIPELINE_ARGS
        assert [r.status for r in results] == [VoteStatus.RECORDED] * len(requests)
        assert [r.slot.job for r in results] == [q.job for q in requests]
    finally:
        store.close()
