"""RedisStore on a real Redis Cluster: sharded notices in the job's slot, store time, URL, WAIT per node.

The contract suite (tests/test_store_contract.py) proves the rules equal to
the model on the cluster; these tests check what only a cluster has.
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.agent.notify import Notice, NoticeListener, Trigger
from quorum_cron.commands.control import pause, trigger
from quorum_cron.commands.history import history
from quorum_cron.commands.status import status
from quorum_cron.embedded_topology import EmbeddedCluster
from quorum_cron.errors import StoreUnavailable
from quorum_cron.model import VoteRequest, VoteStatus
from quorum_cron.store.redis import RedisStore
from tests.agent_cluster import Cluster, job_toml
from tests.topologies import cluster_client

pytestmark = pytest.mark.slow


@pytest.fixture
def store(redis_cluster: EmbeddedCluster) -> Iterator[RedisStore]:
    client = cluster_client(redis_cluster)
    client.flushall()
    s = RedisStore(client, "nt")
    try:
        yield s
    finally:
        s.close()


def _jobs_on_two_masters(cluster: EmbeddedCluster, ns: str) -> list[str]:
    seen: dict[int, str] = {}
    for i in range(200):
        port = cluster.master_of(f"qc:{{{ns}:job{i}}}:meta").port
        seen.setdefault(port, f"job{i}")
        if len(seen) == 2:
            return sorted(seen.values())
    raise AssertionError("no two masters found")


def test_from_a_cluster_url(redis_cluster: EmbeddedCluster) -> None:
    s = RedisStore.from_url(redis_cluster.url, "u", socket_timeout=5.0)
    try:
        assert s.sharded and "redis+cluster://" in repr(s)
        assert abs(s.time_ms() - s.heartbeat("n1", "i", 5_000, {}).now_ms) < 1_000
    finally:
        s.close()


def test_an_unreachable_cluster_is_one_line_unavailable() -> None:
    with pytest.raises(StoreUnavailable) as info:
        RedisStore.from_url("redis+cluster://:hunter2@127.0.0.1:1", "u", socket_connect_timeout=0.5)
    assert "\n" not in str(info.value) and "hunter2" not in str(info.value)


def test_notices_are_sharded_in_the_jobs_slot_and_reach_the_node(
    store: RedisStore, redis_cluster: EmbeddedCluster
) -> None:
    jobs = _jobs_on_two_masters(redis_cluster, "nt")
    assignments, triggers = store.notice_channels("n1", jobs)
    got: queue.Queue[Notice | Trigger] = queue.Queue()
    listener = NoticeListener(store.client, assignments, triggers, got.put)
    listener.start()
    try:
        assert listener.subscribed.wait(10), "the sharded subscriptions were not confirmed"
        # Each job's channels are subscribed on the master that owns the job, and only there.
        for job, a, t in zip(jobs, assignments, triggers, strict=True):
            owner = redis_cluster.master_of(f"qc:{{nt:{job}}}:meta")
            for m in redis_cluster.masters():
                c = m.client(decode_responses=True)
                try:
                    listed = set(c.execute_command("PUBSUB", "SHARDCHANNELS"))  # type: ignore[no-untyped-call]
                    classic = set(c.execute_command("PUBSUB", "CHANNELS"))  # type: ignore[no-untyped-call]
                finally:
                    c.close()
                assert ({a, t} <= listed) == (m is owner), (job, m.port, listed)
                assert not classic, f"classic channels on {m.port}: {classic}"
        now = store.time_ms()
        fire = now // 1000 * 1000
        for job in jobs:
            votes = [VoteRequest(job, fire, n, "h", 1, 5_000, 60_000) for n in ("n1",)]
            [res] = store.vote(votes)
            assert res.status == VoteStatus.COMMITTED, res
            notice = got.get(timeout=5)
            assert notice == Notice(job, fire, res.slot.token), notice
            at = store.trigger(job, "ops")
            assert got.get(timeout=5) == Trigger(job, at)
    finally:
        listener.stop()
        listener.join(5)


def test_wait_is_sent_to_each_master_that_took_writes(redis_cluster: EmbeddedCluster) -> None:
    """Votes over two masters with wait_replicas = 1: every master has its replica, all succeed;
    wait_replicas = 2 (more than any master has) makes the outcome unknown."""
    client = cluster_client(redis_cluster)
    client.flushall()
    jobs = _jobs_on_two_masters(redis_cluster, "w")
    # A generous timeout for the satisfiable WAIT (a loaded machine), a short one for the other.
    ok = RedisStore(client, "w", wait_replicas=1, wait_timeout_ms=5_000)
    short = RedisStore(client, "w", wait_replicas=2, wait_timeout_ms=100)
    try:
        now = ok.time_ms()
        votes = [VoteRequest(j, now // 1000 * 1000, "n1", "h", 2, 5_000, 60_000) for j in jobs]
        assert [r.status for r in ok.vote(votes)] == [VoteStatus.RECORDED] * 2
        assert ok.replicas_connected() == 1
        with pytest.raises(StoreUnavailable, match="1 of 2 replicas"):
            short.vote(votes)
    finally:
        client.close()


def test_operator_commands_take_a_cluster_url(redis_cluster: EmbeddedCluster, tmp_path: Path) -> None:
    """status, trigger, pause, history with ``--redis redis+cluster://...``; a bad URL is one line."""
    c = Cluster(tmp_path, redis_cluster.url, 3, namespace="cli")
    cfg = str(c.config(job_toml("nightly", "0 3 * * *", c.out)))
    try:
        out = CliRunner().invoke(trigger, ["nightly", "--config", cfg, "--redis", redis_cluster.url])
        assert out.exit_code == 0, out.output
        out = CliRunner().invoke(pause, ["nightly", "--config", cfg, "--redis", redis_cluster.url])
        assert out.exit_code == 0, out.output
        out = CliRunner().invoke(status, ["--config", cfg, "--redis", redis_cluster.url, "--json"])
        assert out.exit_code == 1, out.output  # no agent runs: quorum lost, said by the exit status
        doc = json.loads(out.output)
        assert doc["members"] == [] and not doc["quorum_ok"]
        [job] = [j for j in doc["jobs"] if j["job"] == "nightly"]
        assert job["paused"], job
        out = CliRunner().invoke(history, ["nightly", "--config", cfg, "--redis", redis_cluster.url])
        assert out.exit_code == 0, out.output
        bad = CliRunner().invoke(status, ["--config", cfg, "--redis", "redis+sentinel://:hunter2@s1/m/x"])
        assert bad.exit_code == 1
        lines = [ln for ln in bad.output.splitlines() if ln]
        assert len(lines) == 1 and "has path '/m/x'" in lines[0] and "hunter2" not in lines[0], bad.output
    finally:
        c.close()


def test_votes_follow_ask_and_moved_while_a_jobs_slot_moves(redis_cluster: EmbeddedCluster) -> None:
    """A job's keys have moved but the slot is not reassigned yet: the source answers ASK and the
    vote runs on the importing master, where it sees the earlier vote (it commits); once the slot
    is reassigned the source answers MOVED and the next vote finds the decided slot. The slot is
    moved back at the end (the session cluster is shared)."""
    client = cluster_client(redis_cluster)
    client.flushall()
    now = [1_700_000_000_000]
    store = RedisStore(client, "mig", clock=lambda: now[0])
    key = "qc:{mig:moving}:meta"
    source = redis_cluster.master_of(key)
    target = next(m for m in redis_cluster.masters() if m is not source)
    fire = now[0]

    def vote(node: str) -> VoteStatus:
        [res] = store.vote([VoteRequest("moving", fire, node, "h", 2, 5_000, 60_000)])
        return res.status

    def asking_calls() -> int:
        c = target.client()
        try:
            return int(c.info("commandstats").get("cmdstat_asking", {}).get("calls", 0))
        finally:
            c.close()

    got: dict[str, VoteStatus] = {}
    try:
        assert vote("n1") == VoteStatus.RECORDED
        before = asking_calls()
        redis_cluster.migrate_slot(key, target, moved=lambda: got.setdefault("ask", vote("n2")))
        assert got["ask"] == VoteStatus.COMMITTED, got  # n1's vote was found on the target
        assert asking_calls() > before, "the vote did not reach the target through ASKING"
        assert vote("n3") == VoteStatus.DECIDED  # MOVED: the store's slot map is refreshed
        assert store._cluster_runner is not None
        assert store._cluster_runner.owner(key).port == target.port
        assert redis_cluster.master_of(key) is target
    finally:
        if redis_cluster.master_of(key) is not source:
            redis_cluster.migrate_slot(key, source)
        client.close()
