"""The store worker holds back the votes of a Redis Cluster master whose writes fall short.

Real cluster (the session's :func:`tests.topologies.redis_cluster`), the real
:class:`~quorum_cron.store.redis.RedisStore`. One master is marked short as
the agent's health marks it (:meth:`ShortMasters.down` with the store's own
message); a tick's vote of jobs on every master, short and long (in parts,
beyond :data:`~quorum_cron.agent.storeio.VOTE_PART`), then answers each
request exactly once: the short master's as unsent, with the shortfall
(nothing of them reaches that master), the others with the store's reply.
The end-to-end behaviour with a replica really killed is in
``tests/test_agent_master_shortfall.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from quorum_cron.agent.alerts import AlertHook
from quorum_cron.agent.shortmasters import UNSENT, ShortMasters, per_master
from quorum_cron.agent.storeio import VOTE_PART, StoreWorker
from quorum_cron.core.actions import Failure, StoreAction, Vote
from quorum_cron.core.model import SlotState, VoteRequest, VoteResult, VoteStatus
from quorum_cron.errors import StoreUnavailable, StoreUnreplicated
from quorum_cron.store.embedded.topology import EmbeddedCluster
from quorum_cron.store.redis import RedisStore
from tests.topologies import cluster_client

pytestmark = pytest.mark.slow

SHORT = "WAIT: 0 of 1 replicas acknowledged within 50 ms"


def test_per_master_reads_the_masters_a_shortfall_names() -> None:
    assert per_master(SHORT) is None  # (standalone, Sentinel: the node's own state)
    assert per_master(f"{SHORT} on master 10.0.0.7:6379") == {
        "10.0.0.7:6379": f"{SHORT} on master 10.0.0.7:6379"
    }
    assert per_master(f"{SHORT} on masters a:1, b:2") == {
        "a:1": f"{SHORT} on master a:1",
        "b:2": f"{SHORT} on master b:2",
    }


@pytest.mark.parametrize("size", [30, VOTE_PART + 300])
def test_a_short_masters_votes_are_answered_unsent_and_the_others_go(
    size: int, redis_cluster: EmbeddedCluster
) -> None:
    ns = f"hb{size}"
    store = RedisStore(cluster_client(redis_cluster), ns)
    alerts = AlertHook("n1")
    masters = ShortMasters(store, lambda: 0, 1_000, alerts)
    jobs = [f"job{i}" for i in range(size)]
    short = store.master_of(jobs[0])
    assert {store.master_of(j) for j in jobs} > {short}  # (jobs on other masters too)
    message = f"redis at x: outcome of vote unknown, {StoreUnreplicated.MARKER}{SHORT} on master {short}"
    assert masters.down(message)
    assert masters.failure(StoreUnreplicated(message)) == Failure.REFUSED
    assert (
        masters.failure(StoreUnavailable("redis at x unavailable during vote: refused"))
        == Failure.UNREACHABLE
    )
    fire = store.time_ms() // 1000 * 1000
    requests = tuple(VoteRequest(j, fire, "n1", "h", 2, 5_000, 60_000) for j in jobs)

    async def main() -> dict[str, object]:
        worker = StoreWorker(store, "n1")
        worker.split = masters.split
        answers: dict[str, object] = {}
        done = asyncio.Event()

        def then(action: StoreAction, reply: object, exc: BaseException | None) -> None:
            assert isinstance(action, Vote)
            got = reply if exc is None else [exc] * len(action.requests)
            assert isinstance(got, list)
            for req, one in zip(action.requests, got, strict=True):
                assert req.job not in answers, f"{req.job} answered twice"
                answers[req.job] = one
            if len(answers) == len(requests):
                done.set()

        try:
            worker.submit_then(Vote(requests), then)
            await asyncio.wait_for(done.wait(), 30)
        finally:
            worker.shutdown()
        return answers

    try:
        answers = asyncio.run(main())
        for job in jobs:
            got = answers[job]
            if store.master_of(job) == short:
                assert isinstance(got, StoreUnreplicated), (job, got)
                assert f"{UNSENT}{StoreUnreplicated.MARKER}{SHORT} on master {short}" in str(got)
                assert store.slot(job, fire).state == SlotState.ABSENT, job  # (never sent)
            else:
                assert isinstance(got, VoteResult) and got.status == VoteStatus.RECORDED, (job, got)
        # An unsent vote does not renew the state: only a write that fell short does.
        assert masters.down(str(answers[jobs[0]]))
    finally:
        store.close()
