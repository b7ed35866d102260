"""RedisStore on a real Redis Cluster: sharded notices, store time, URL, WAIT and reads per node, NOSCRIPT.

The contract suite (tests/test_store_contract.py) proves the rules equal to
the model on the cluster; these tests check what only a cluster has.
"""

from __future__ import annotations

import json
import queue
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis
from click.testing import CliRunner
from redis.cluster import RedisCluster
from redis.crc import key_slot

from quorum_cron.commands.control import pause, trigger
from quorum_cron.commands.history import history
from quorum_cron.commands.status import status
from quorum_cron.core.model import VoteRequest, VoteStatus
from quorum_cron.errors import StoreUnavailable
from quorum_cron.store.base import Notice, Trigger
from quorum_cron.store.cluster import cluster_variant
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.embedded.procs import command
from quorum_cron.store.embedded.topology import EmbeddedCluster, ServerProc
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.scripts import VOTE
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
    listener = store.listen_notices("n1", jobs, got.put)
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


def _ssubscribe_calls(cluster: EmbeddedCluster) -> int:
    total = 0
    for m in cluster.masters():
        c = m.client()
        try:
            total += int(c.info("commandstats").get("cmdstat_ssubscribe", {}).get("calls", 0))
        finally:
            c.close()
    return total


def test_a_node_subscribes_with_one_ssubscribe_per_hash_slot_of_its_jobs(
    store: RedisStore, redis_cluster: EmbeddedCluster
) -> None:
    """Both channels of a job live in its hash slot, and jobs share slots: one ``SSUBSCRIBE`` per
    slot carries them all (redis-py's ``ClusterPubSub`` sent one per channel and copied its
    table of channels after each: minutes for 100,000 jobs; issue 27)."""
    jobs = [f"j{i}" for i in range(3_000)]  # (about 2,700 distinct slots of 16,384)
    assignments, triggers = store.notice_channels("n1", jobs)
    slots = {key_slot(c.encode()) for c in assignments + triggers}
    assert len(slots) < len(jobs)
    before = _ssubscribe_calls(redis_cluster)
    listener = store.listen_notices("n1", jobs, lambda _: None)
    listener.start()
    try:
        assert listener.subscribed.wait(20), "the sharded subscriptions were not confirmed"
        assert _ssubscribe_calls(redis_cluster) - before == len(slots)
    finally:
        listener.stop()
        listener.join(5)


def test_a_moved_slot_is_subscribed_again_on_its_new_master(
    store: RedisStore, redis_cluster: EmbeddedCluster
) -> None:
    """The server drops the subscriptions of a slot that moves (``sunsubscribe``): the listener
    subscribes again from a refreshed slot map, says so (``on_subscribed``, the caller's cue to
    catch up), and the next notice of a job in that slot arrives from the new master."""
    jobs = _jobs_on_two_masters(redis_cluster, "nt")
    got: queue.Queue[Notice | Trigger] = queue.Queue()
    resubscribed: queue.Queue[int] = queue.Queue()
    listener = store.listen_notices("n1", jobs, got.put, on_subscribed=lambda: resubscribed.put(1))
    listener.start()
    key = f"qc:{{nt:{jobs[0]}}}:meta"
    source = redis_cluster.master_of(key)
    target = next(m for m in redis_cluster.masters() if m is not source)
    try:
        assert resubscribed.get(timeout=20) == 1
        redis_cluster.migrate_slot(key, target)
        assert resubscribed.get(timeout=20) == 1, "the listener did not subscribe again"
        at = store.trigger(jobs[0], "ops")  # (SPUBLISH on the new master)
        assert got.get(timeout=10) == Trigger(jobs[0], at)
    finally:
        listener.stop()
        listener.join(5)
        if redis_cluster.master_of(key) is not source:
            redis_cluster.migrate_slot(key, source)


def test_a_dropped_pubsub_connection_of_one_master_is_caught_up_after(redis_cluster: EmbeddedCluster) -> None:
    """One master drops the node's sharded pub/sub connection, under the agent's client settings
    (one retry): notices published until it is back are lost, so the listener tells its caller
    again (``on_subscribed``: catch up, read the awaited slots), and the next notice arrives.
    (Here the listener sees the connection closed and subscribes anew; a reconnect redis-py
    makes by itself is the single-server test's, tests/test_agent_inproc_intake.py.)"""
    client = RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0], **fail_fast())
    client.flushall()
    store = RedisStore(client, "nt")
    jobs = _jobs_on_two_masters(redis_cluster, "nt")
    got: queue.Queue[Notice | Trigger] = queue.Queue()
    told: queue.Queue[int] = queue.Queue()
    listener = store.listen_notices("n1", jobs, got.put, on_subscribed=lambda: told.put(1))
    listener.start()
    owner = redis_cluster.master_of(f"qc:{{nt:{jobs[0]}}}:meta").client()
    try:
        assert told.get(timeout=20) == 1
        assert owner.client_kill_filter(_type="pubsub") == 1
        assert told.get(timeout=10) == 1, "the listener did not tell its caller after the reconnect"
        at = store.trigger(jobs[0], "ops")
        assert got.get(timeout=10) == Trigger(jobs[0], at)
    finally:
        listener.stop()
        listener.join(5)
        owner.close()
        store.close()


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


def _jobs_per_master(cluster: EmbeddedCluster, ns: str, per_master: int) -> dict[int, list[str]]:
    """Job names, ``per_master`` on each master (by the nodes' own slot map), by master port."""
    by_master: dict[int, list[str]] = {m.port: [] for m in cluster.masters()}
    for i in range(1000):
        port = cluster.master_of(f"qc:{{{ns}:job{i}}}:meta").port
        if len(by_master[port]) < per_master:
            by_master[port].append(f"job{i}")
        if all(len(v) == per_master for v in by_master.values()):
            return by_master
    raise AssertionError(f"no spread over every master found: {by_master}")


def _stat(server: ServerProc, section: str, name: str) -> int:
    c = server.client()
    try:
        value = c.info(section).get(name, 0)
    finally:
        c.close()
    return int(value.get("calls", 0)) if isinstance(value, dict) else int(value)


class SendCounter(redis.Connection):
    """Counts this client's writes to each node's socket, by port: one per command, one per pipeline.

    Counted in the client, not from the server's ``total_reads_processed``:
    that counter also moves for every other client of the master (its
    replica's ``REPLCONF ACK``, sent once a second; the test's own ``INFO``),
    so it cannot say how many round trips the code under test made.
    """

    sends: ClassVar[Counter[int]] = Counter()

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        type(self).sends[self.port] += 1
        super().send_packed_command(command, check_health)


def test_ledgers_of_jobs_on_every_master_fan_out_one_round_trip_per_master(
    redis_cluster: EmbeddedCluster,
) -> None:
    """``ledgers`` (what ``history`` reads) equals ``ledger`` job by job, for jobs on all three
    masters; each master serves exactly its own jobs' XREVRANGEs (its commandstats: no other
    client sends XREVRANGE), and the client writes them to each master's socket once (a
    pipeline), not once per job, and to no other node."""
    client = RedisCluster.from_url(  # from a URL: its nodes' pools take the connection class
        f"redis://127.0.0.1:{redis_cluster.ports[0]}", socket_timeout=5.0, connection_class=SendCounter
    )
    client.flushall()
    now = [1_700_000_000_000]
    s = RedisStore(client, "lg", clock=lambda: now[0])
    per_master = 8
    spread = _jobs_per_master(redis_cluster, "lg", per_master)
    jobs = sorted(j for names in spread.values() for j in names)
    watch = {m.port: m.client() for m in redis_cluster.masters()}

    def served() -> dict[int, int]:
        return {port: int(c.info("commandstats")["cmdstat_xrevrange"]["calls"]) for port, c in watch.items()}

    try:
        for k, job in enumerate(jobs):  # 1 to 3 missed entries per job, so the limit cuts some
            for i in range(1 + k % 3):
                s.record_missed(job, now[0] - 60_000 * (i + 1), 1_000, f"outage {i}")
        expected = {job: s.ledger(job, 2) for job in jobs}  # also opens a connection to each master
        assert sum(len(v) for v in expected.values()) > len(jobs)  # some jobs have 2 entries
        before = served()
        SendCounter.sends.clear()
        got = s.ledgers(jobs, 2)
        sends = dict(SendCounter.sends)
        after = served()
        assert dict(zip(jobs, got, strict=True)) == expected
        assert {port: after[port] - before[port] for port in spread} == {
            port: len(names) for port, names in spread.items()
        }
        assert sends == {port: 1 for port in spread}  # a round trip per job would be per_master
        assert s.ledgers(jobs, 0) == [[] for _ in jobs]
        assert s.ledgers([], 5) == []
    finally:
        s.close()
        for c in watch.values():
            c.close()


def test_history_of_every_job_reads_the_ledgers_of_all_masters(
    redis_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    """``history`` without a job, on a cluster URL: the entries of jobs on every master, merged."""
    spread = _jobs_per_master(redis_cluster, "hi", 1)
    jobs = sorted(j for names in spread.values() for j in names)
    c = Cluster(tmp_path, redis_cluster.url, 3, namespace="hi")
    cfg = str(c.config("".join(job_toml(j, "0 3 * * *", c.out) for j in jobs)))
    client = cluster_client(redis_cluster)
    client.flushall()
    s = RedisStore(client, "hi")
    try:
        fire = (s.time_ms() - 3_600_000) // 1000 * 1000
        for k, job in enumerate(jobs):
            s.record_missed(job, fire + k * 1000, 1_000, "outage")
        out = CliRunner().invoke(history, ["--config", cfg, "--redis", redis_cluster.url, "--json"])
        assert out.exit_code == 0, out.output
        docs = [json.loads(line) for line in out.output.splitlines()]
        assert [(d["job"], d["slot_ms"], d["state"]) for d in docs] == [
            (job, fire + k * 1000, "missed") for k, job in reversed(list(enumerate(jobs)))
        ]
    finally:
        s.close()
        c.close()


def test_a_master_that_lost_its_scripts_gets_them_again_and_the_vote_runs(
    redis_cluster: EmbeddedCluster,
) -> None:
    """SCRIPT FLUSH on one master (what a restarted or promoted node looks like): the store's next
    vote meets NOSCRIPT there, loads the script on that master and re-sends — one ``vote`` call
    over jobs on every master still returns every vote's outcome."""
    client = cluster_client(redis_cluster)
    client.flushall()
    s = RedisStore(client, "ns")
    spread = _jobs_per_master(redis_cluster, "ns", 2)
    jobs = sorted(j for names in spread.values() for j in names)
    masters = {m.port: m for m in redis_cluster.masters()}
    flushed_port = sorted(spread)[0]
    flushed = masters[flushed_port]
    try:
        fire = s.time_ms() // 1000 * 1000
        first = s.vote([VoteRequest(j, fire, "n1", "h", 2, 5_000, 60_000) for j in jobs])
        assert [r.status for r in first] == [VoteStatus.RECORDED] * len(jobs)
        sha = cluster_variant(VOTE).sha  # what a cluster call runs (see store/cluster.py)
        c = flushed.client()
        try:
            assert command(c, "SCRIPT", "EXISTS", sha) == [1]
            command(c, "SCRIPT", "FLUSH")
            assert command(c, "SCRIPT", "EXISTS", sha) == [0]
        finally:
            c.close()
        loads = {p: _stat(m, "commandstats", "cmdstat_script|load") for p, m in masters.items()}
        second = s.vote([VoteRequest(j, fire, "n2", "h", 2, 5_000, 60_000) for j in jobs])
        assert [r.status for r in second] == [VoteStatus.COMMITTED] * len(jobs), second
        for port, m in masters.items():
            reloaded = _stat(m, "commandstats", "cmdstat_script|load") - loads[port]
            assert reloaded == (1 if port == flushed_port else 0), (port, reloaded)
        c = flushed.client()
        try:
            assert command(c, "SCRIPT", "EXISTS", sha) == [1]
        finally:
            c.close()
    finally:
        s.close()


def test_read_slots_of_jobs_on_every_master_equals_slot_by_slot(redis_cluster: EmbeddedCluster) -> None:
    """``read_slots`` (a node's polls in one call) reads jobs of all three masters, one pipeline
    per master, and answers each slot as ``slot`` does, in the order asked, unknown ones ABSENT;
    ``high_waters`` (a node's boot read) likewise gives each job's mark in the order asked."""
    client = cluster_client(redis_cluster)
    client.flushall()
    now = [1_700_000_000_000]
    s = RedisStore(client, "rs", clock=lambda: now[0])
    try:
        spread = _jobs_per_master(redis_cluster, "rs", 2)
        jobs = sorted(j for names in spread.values() for j in names)
        fire = now[0] - 1_000
        reqs = [
            VoteRequest(
                job=j, fire_ms=fire, node=n, spec_hash="h", quorum=2, max_skew_ms=250, deadline_ms=5_000
            )
            for j in jobs[::2]
            for n in ("n1", "n2")
        ]
        s.vote(reqs)
        asked = [(j, f) for j in reversed(jobs) for f in (fire, fire + 60_000)]
        got = s.read_slots(asked)
        assert got == [s.slot(j, f) for j, f in asked]
        assert {v.state.value for v in got} == {"committed", "absent"}
        assert s.read_slots([]) == []
        marks = s.high_waters(list(reversed(jobs)))
        assert marks == [fire if j in jobs[::2] else 0 for j in reversed(jobs)]
        assert s.high_waters([]) == []
    finally:
        s.close()


def test_job_tables_are_kept_and_read_back_on_a_cluster(store: RedisStore) -> None:
    """``publish_jobs`` / ``published_jobs`` on a cluster: a table as written, none for a node without."""
    store.publish_jobs("n1", "a=h1")
    assert store.published_jobs(["n1", "n2"]) == {"n1": "a=h1"}
