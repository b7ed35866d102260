"""A Redis Cluster master left without its replica, seen from a node's store (``wait_replicas = 1``).

That is the state after a master is killed and its replica promoted, until
the old master is restarted as a replica: the promoted master's ``WAIT 1``
falls short. What it must not do is fail the other masters' jobs, whose
writes are replicated. Real servers (:func:`tests.topologies.own_cluster`),
every wait bounded and for an event the servers report.
"""

from __future__ import annotations

import pytest

from quorum_cron.core.model import FencedRequest, TransitionResult, VoteRequest, VoteStatus
from quorum_cron.errors import StoreUnavailable
from quorum_cron.store.embedded.procs import await_until
from quorum_cron.store.embedded.topology import EmbeddedCluster
from quorum_cron.store.redis import RedisStore
from tests.topologies import cluster_client, connected_replicas, own_cluster

pytestmark = pytest.mark.slow

NS = "pw"


def _jobs_on_two_masters(cluster: EmbeddedCluster) -> tuple[str, str]:
    seen: dict[int, str] = {}
    for i in range(200):
        seen.setdefault(cluster.master_of(f"qc:{{{NS}:job{i}}}:meta").port, f"job{i}")
        if len(seen) == 2:
            a, b = seen.values()
            return a, b
    raise AssertionError("no two masters found")


def test_a_master_without_its_replica_fails_only_its_own_jobs_and_is_named() -> None:
    """Two jobs on two masters, both running; then the replica of the first job's master dies.
    The batch that finishes both used to fail as a whole ("WAIT: 0 of 1"): the second job's
    finish — replicated on its own master — was refused to the node too, which retried it until
    the run's lease ran out and the store recorded a run that had succeeded as ``lost``, and the
    next slots ``skipped`` (overlap), on every master. Now only the first job's finish is a lost
    reply, and the message names the master that lacks a replica."""
    with own_cluster() as cluster:
        client = cluster_client(cluster)
        store = RedisStore(client, NS, wait_replicas=1, wait_timeout_ms=1_000)
        try:
            short_job, ok_job = _jobs_on_two_masters(cluster)
            short_master = cluster.master_of(f"qc:{{{NS}:{short_job}}}:meta")
            fire = store.time_ms() // 1000 * 1000
            jobs = [short_job, ok_job]
            store.vote([VoteRequest(j, fire, "n1", "h", 2, 5_000, 60_000) for j in jobs])
            committed = store.vote([VoteRequest(j, fire, "n2", "h", 2, 5_000, 60_000) for j in jobs])
            assert [r.status for r in committed] == [VoteStatus.COMMITTED] * 2, committed
            slots = {r.slot.job: r.slot for r in committed}

            def fenced(op: str, **kw: object) -> list[FencedRequest]:
                return [
                    FencedRequest(op, j, fire, str(slots[j].executor), slots[j].token, **kw)  # type: ignore[arg-type]
                    for j in jobs
                ]

            started = store.fenced(fenced("start", lease_ms=30_000))
            assert all(isinstance(r, TransitionResult) and r.ok for r in started), started

            cluster.replica_of(short_master).kill()
            await_until(
                f"{short_master.name} to count no replica",
                lambda: connected_replicas(cluster, short_master.port) == 0,
                30.0,
                0.1,
            )

            finished = store.fenced(fenced("finish", succeeded=True, detail="exit 0"))
            lost, done = finished
            assert isinstance(done, TransitionResult) and done.ok, done
            assert isinstance(lost, StoreUnavailable), lost
            message = str(lost)
            assert "not replicated as required" in message, message
            assert f"on master 127.0.0.1:{short_master.port}" in message, message

            # A batch that cannot be split (votes) still fails as a whole, naming that master.
            with pytest.raises(StoreUnavailable, match=f"on master 127.0.0.1:{short_master.port}"):
                store.vote([VoteRequest(j, fire + 1000, "n1", "h", 2, 5_000, 60_000) for j in jobs])
        finally:
            store.close()
