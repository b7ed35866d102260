"""A real Redis whose contents an attacker (or a bug) wrote: each bad value harms only its own job.

Issue 11: a token counter that is not a count, a key of the wrong type, a
garbage slot, member or ledger entry. The store must report the value, keep
every other job working, never hand out a repeated token, and never apply a
multi-step write part-way. The last test feeds hypothesis-generated garbage
into every key the project reads.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quorum_cron.errors import StoreError
from quorum_cron.store.base import (
    FencedRequest,
    Member,
    MissedRequest,
    SlotState,
    SlotView,
    SweepParams,
    TransitionResult,
    VoteRequest,
    VoteStatus,
)
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.ports import with_job_tables
from quorum_cron.store.redis import RedisStore

T0 = 1_700_000_000_000
NS = "h"


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def vote(job: str, fire: int, node: str = "n1", quorum: int = 1) -> VoteRequest:
    return VoteRequest(
        job=job, fire_ms=fire, node=node, spec_hash="h1", quorum=quorum, max_skew_ms=250, deadline_ms=30_000
    )


def key(job: str, suffix: str) -> str:
    return f"qc:{{{NS}:{job}}}:{suffix}"


@pytest.fixture
def store(redis_client: redis.Redis) -> Iterator[tuple[RedisStore, list[tuple[str, str]]]]:
    s = RedisStore(redis_client, NS, clock=Clock())
    seen: list[tuple[str, str]] = []
    s.on_bad_value = lambda what, problem: seen.append((what, problem))
    yield s, seen


@pytest.mark.parametrize("counter", ["abc", "9007199254740992", "1e300", "0", "-5", "1.5", " 7"])
def test_corrupt_token_counter_stops_the_job_instead_of_reusing_tokens(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]], counter: str
) -> None:
    s, seen = store
    redis_client.hset(key("a", "meta"), "tk", counter)
    bad, good = s.vote([vote("a", T0), vote("b", T0)])
    assert bad.status == VoteStatus.DECIDED and bad.slot.state == SlotState.ABSENT
    assert good.status == VoteStatus.COMMITTED and good.slot.token == 1
    assert any("token counter" in p for _, p in seen), seen
    assert redis_client.hget(key("a", "meta"), "tk") == counter.encode()  # untouched
    assert redis_client.get(key("a", f"slot:{T0}")) is None


@pytest.mark.parametrize(
    ("suffix", "bad_type", "expected"),
    [
        ("ledger", "string", "stream"),
        ("open", "string", "zset"),
        ("slots", "list", "zset"),
        ("slots", "hash", "zset"),
    ],
)
def test_wrong_type_index_or_ledger_refuses_finish_whole(
    redis_client: redis.Redis,
    store: tuple[RedisStore, list[tuple[str, str]]],
    suffix: str,
    bad_type: str,
    expected: str,
) -> None:
    """Every key a finish writes after the slot itself is checked before the first write (the
    trim's read, a TYPE of the ledger, the ZREM from the open index): a key of the wrong type
    refuses the finish with an error naming it, and nothing of it is applied."""
    s, _ = store
    [res] = s.vote([vote("a", T0)])
    assert res.status == VoteStatus.COMMITTED
    assert s.start("a", T0, "n1", res.slot.token, 10_000).ok
    bad = key("a", suffix)
    index_before = redis_client.zrange(key("a", "open"), 0, -1)
    _write(redis_client, suffix, bad_type, "not a " + expected)
    with pytest.raises(
        StoreError, match=rf"corrupt store: {re.escape(bad)} is a {bad_type} \(expected a {expected}\)"
    ):
        s.finish("a", T0, "n1", res.slot.token, True, "exit 0")
    stored = redis_client.get(key("a", f"slot:{T0}"))
    assert isinstance(stored, bytes) and stored.startswith(b"running "), stored  # nothing applied
    if suffix != "open":
        assert redis_client.zrange(key("a", "open"), 0, -1) == index_before == [str(T0).encode()]
    if suffix != "ledger":
        assert not redis_client.exists(key("a", "ledger"))
    assert redis_client.type(bad) == bad_type.encode()  # left for the operator
    redis_client.delete(bad)
    if suffix == "open":
        redis_client.zadd(bad, {str(T0): T0})
    done = s.finish("a", T0, "n1", res.slot.token, True, "exit 0")
    assert done.ok and done.slot.state == SlotState.SUCCEEDED
    assert [e.state for e in s.ledger("a", 10)] == [SlotState.SUCCEEDED]
    assert redis_client.zrange(key("a", "open"), 0, -1) == []


def test_a_corrupt_ledger_in_a_batch_of_finishes_fails_only_its_own_finish(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    """``fenced`` (the agent's batched starts and finishes): job a's wrong-type ledger refuses a's
    finish whole, with the corrupt-store error in its place; b's finish in the same pipeline lands."""
    s, _ = store
    tokens = {}
    for job in ("a", "b"):
        [res] = s.vote([vote(job, T0)])
        tokens[job] = res.slot.token
    started = s.fenced([FencedRequest("start", j, T0, "n1", tokens[j], lease_ms=10_000) for j in ("a", "b")])
    assert [isinstance(r, TransitionResult) and r.ok for r in started] == [True, True]
    redis_client.set(key("a", "ledger"), "not a stream")
    got = s.fenced(
        [FencedRequest("finish", j, T0, "n1", tokens[j], succeeded=True, detail="exit 0") for j in ("a", "b")]
    )
    assert isinstance(got[0], StoreError) and "ledger is a string" in str(got[0]), got[0]
    assert isinstance(got[1], TransitionResult) and got[1].ok and got[1].slot.state == SlotState.SUCCEEDED
    assert s.slot("a", T0).state == SlotState.RUNNING  # nothing of a's finish applied


@pytest.mark.parametrize("stored", ["abc", "-2", "1e300", "2.5", "99999999999"])
def test_a_corrupt_failure_streak_reads_as_none_and_harms_only_the_recovery_count(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]], stored: str
) -> None:
    """Meta ``fs`` that is not a plain count: the success lands, reports 0 failures before it
    (only job_recovered is lost), and the streak starts over from there."""
    s, _ = store
    redis_client.hset(key("a", "meta"), "fs", stored)
    got = []
    for fire, ok in ((T0 - 2_000, True), (T0 - 1_000, False), (T0, True)):
        [res] = s.vote([vote("a", fire)])
        assert s.start("a", fire, "n1", res.slot.token, 10_000).ok
        done = s.finish("a", fire, "n1", res.slot.token, ok, "exit 0" if ok else "exit 1")
        assert done.ok and done.slot.state == (SlotState.SUCCEEDED if ok else SlotState.FAILED)
        got.append(done.failures_before)
    assert got == [0, 0, 1], (stored, got)


def test_a_corrupt_job_table_is_left_out_and_reported_and_the_others_read(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    """``qc:{ns}:jobs`` holds what any writer put there: a table that is not UTF-8 is left out of
    the reply (reported once), the other nodes' tables are still read; a key of the wrong type
    fails the read with a StoreError (the agent's heartbeat goes on without the table)."""
    s, seen = store
    s.publish_jobs("n1", "a=0123456789abcdef")
    redis_client.hset(f"qc:{{{NS}}}:jobs", "n2", b"\xff\xfe not text")
    assert s.published_jobs(["n1", "n2", "n3"]) == {"n1": "a=0123456789abcdef"}
    assert [what for what, _ in seen] == ["job table of node n2"]
    redis_client.delete(f"qc:{{{NS}}}:jobs")
    redis_client.set(f"qc:{{{NS}}}:jobs", "not a hash")
    with pytest.raises(StoreError, match="WRONGTYPE"):
        s.published_jobs(["n1"])
    # status and the dashboard show the members all the same, without the tables.
    member = Member("n1", "i1", 0, 2**52, {"jobs_digest": "d"})
    assert with_job_tables(s, [member]) == [member]


def test_one_read_call_carries_many_jobs_and_a_corrupt_slot_costs_only_its_own_read(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    """``read_slots`` (a node's polls) travels as ONE script call for many jobs (issue 27); job b's
    corrupt slot is reported and read as absent, a's and c's are read as they are."""
    s, seen = store
    for job in ("a", "b", "c"):
        [res] = s.vote([vote(job, T0)])
        assert res.status == VoteStatus.COMMITTED
    redis_client.set(key("b", f"slot:{T0}"), "committed 99999999999999 {not json")
    redis_client.config_resetstat()
    got = s.read_slots([("a", T0), ("b", T0), ("c", T0), ("a", T0 + 1)])
    calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert calls == 1, f"{calls} script calls for one read of three jobs"
    assert [(v.job, v.state) for v in got] == [
        ("a", SlotState.COMMITTED),
        ("b", SlotState.ABSENT),
        ("c", SlotState.COMMITTED),
        ("a", SlotState.ABSENT),
    ]
    assert [what for what, _ in seen] == [f"slot b@{T0}"]


def test_one_fence_call_carries_many_jobs_and_a_corrupt_one_fails_only_its_own_requests(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    """The batch travels as ONE script call (issue 27: a call per request paid the script's
    set-up each time); job b's corrupt ledger fails both of b's requests, and the jobs before
    and after it in the same call, a's start-then-finish and c's, land in order."""
    s, _ = store
    tokens = {}
    for job in ("a", "b", "c"):
        [res] = s.vote([vote(job, T0)])
        tokens[job] = res.slot.token
    assert s.start("b", T0, "n1", tokens["b"], 10_000).ok
    redis_client.set(key("b", "ledger"), "not a stream")
    redis_client.config_resetstat()
    got = s.fenced(
        [
            FencedRequest("start", "a", T0, "n1", tokens["a"], lease_ms=10_000),
            FencedRequest("finish", "b", T0, "n1", tokens["b"], succeeded=True, detail="exit 0"),
            FencedRequest("finish", "a", T0, "n1", tokens["a"], succeeded=True, detail="exit 0"),
            FencedRequest("renew", "b", T0, "n1", tokens["b"], lease_ms=20_000),
            FencedRequest("start", "c", T0, "n1", tokens["c"], lease_ms=10_000),
        ]
    )
    calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert calls == 1, f"{calls} script calls for one batch of three jobs"
    assert isinstance(got[0], TransitionResult) and got[0].ok
    assert isinstance(got[1], StoreError) and "ledger is a string" in str(got[1]), got[1]
    assert isinstance(got[2], TransitionResult) and got[2].ok and got[2].slot.state == SlotState.SUCCEEDED
    assert isinstance(got[3], TransitionResult) and got[3].ok and got[3].slot.lease_until_ms == T0 + 20_000
    assert isinstance(got[4], TransitionResult) and got[4].ok and got[4].slot.state == SlotState.RUNNING
    assert s.slot("b", T0).state == SlotState.RUNNING  # nothing of b's finish applied


def test_one_missed_call_carries_many_jobs_and_a_corrupt_one_fails_only_its_own_record(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    """``record_missed_many`` (a node starting after a minute boundary accounts for that minute's
    slot of every job) travels as ONE script call; job b's corrupt ledger fails b's record with
    the corrupt-store error in its place and writes nothing of it; a and c end missed."""
    s, _ = store
    fire = T0 - 60_000
    redis_client.set(key("b", "ledger"), "not a stream")
    redis_client.config_resetstat()
    got = s.record_missed_many([MissedRequest(j, fire, 30_000, "nobody voted") for j in ("a", "b", "c")])
    calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert calls == 1, f"{calls} script calls for one batch of three jobs"
    assert isinstance(got[1], StoreError) and "ledger is a string" in str(got[1]), got[1]
    for view in (got[0], got[2]):
        assert isinstance(view, SlotView) and view.state == SlotState.MISSED and view.reason == "nobody voted"
    assert s.slot("b", fire).state == SlotState.ABSENT  # nothing of b's record applied
    assert [e.state for e in s.ledger("c", 10)] == [SlotState.MISSED]


@pytest.mark.parametrize(
    ("op", "bad_key", "bad_type"),
    [
        ("pause", "audit", "string"),
        ("pause", "audit", "hash"),
        ("resume", "audit", "string"),
        ("trigger", "audit", "string"),
        ("trigger", "audit", "list"),
        ("trigger", "triggers", "string"),
    ],
)
def test_wrong_type_key_refuses_pause_and_trigger_whole(
    redis_client: redis.Redis,
    store: tuple[RedisStore, list[tuple[str, str]]],
    op: str,
    bad_key: str,
    bad_type: str,
) -> None:
    s, _ = store
    if op == "resume":
        s.pause("a", "ops", "before")
        redis_client.delete(key("a", "audit"))
    meta_before = redis_client.hgetall(key("a", "meta"))
    if bad_key == "triggers":
        redis_client.delete(key("a", "triggers"))
    bad = key("a", bad_key)
    _write(redis_client, bad_key, bad_type, "not a stream")
    calls = {"pause": lambda: s.pause("a", "ops", "why"), "resume": lambda: s.resume("a", "ops")}
    calls["trigger"] = lambda: s.trigger("a", "ops")
    expected = {"audit": "stream", "triggers": "zset"}[bad_key]
    with pytest.raises(
        StoreError,
        match=rf"failed {op}: corrupt store: {re.escape(bad)} is a {bad_type} "
        rf"\(expected a {expected}\)",
    ):
        calls[op]()
    assert redis_client.hgetall(key("a", "meta")) == meta_before  # not paused, not resumed
    assert redis_client.type(bad).decode() == bad_type  # the bad key itself is left for the operator
    if bad_key != "triggers":
        assert not redis_client.exists(key("a", "triggers"))  # no unaudited trigger
    else:
        assert not redis_client.exists(key("a", "audit"))  # no audit entry for a trigger that is not stored
    assert s.control("a").paused == (op == "resume")
    # Once the operator removes the bad key, the same call goes through, audited.
    redis_client.delete(bad)
    calls[op]()
    assert [e.action.value for e in s.audit("a", 10)] == [op]


def test_garbage_trigger_set_does_not_block_pause(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    s, _ = store
    redis_client.set(key("a", "triggers"), "garbage")
    assert s.pause("a", "ops", "incident").paused
    assert [e.action.value for e in s.audit("a", 10)] == ["pause"]


def test_garbage_members_are_skipped_and_own_garbage_entry_is_overwritten(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    s, seen = store
    assert s.heartbeat("n1", "inc1", 10_000, {"host": "a"}).ok
    members_key = f"qc:{{{NS}}}:members"
    redis_client.hset(members_key, "deep", "[" * 5000 + "]" * 5000)
    redis_client.hset(members_key, "huge", json.dumps(["i", 1, 2**60, "{}"]))
    redis_client.hset(members_key, "spec", json.dumps(["i", T0, T0 + 10_000, "x" * 60_000]))
    redis_client.hset(members_key, "n2", "not json")
    assert [m.node for m in s.members()] == ["n1"]
    assert {w.split()[1].rstrip(":") for w, _ in seen} >= {"'deep'", "'huge'", "'spec'", "'n2'"}
    assert s.heartbeat("n2", "inc2", 10_000, {}).ok  # its own corrupt entry does not block it
    assert [m.node for m in s.members()] == ["n1", "n2"]


@pytest.mark.parametrize("mark", ["abc", "-5", "9" * 400, "wrong type"])
def test_a_corrupt_high_water_mark_reads_as_0_and_leaves_the_other_jobs_marks(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]], mark: str
) -> None:
    """A node's first votes wait for its one high-water read of every job: one job's bad mark
    must not fail that read for all of them."""
    s, seen = store
    for job in ("a", "b"):
        [res] = s.vote([vote(job, T0)])
        assert res.status == VoteStatus.COMMITTED
    if mark == "wrong type":
        redis_client.delete(key("a", "meta"))
        redis_client.set(key("a", "meta"), "x")
    else:
        redis_client.hset(key("a", "meta"), "hw", mark)
    assert s.high_waters(["a", "b", "c"]) == [0, T0, 0]
    assert [what for what, _ in seen] == ["high-water mark of a"]


def test_one_bad_ledger_entry_does_not_hide_the_others(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    s, seen = store
    for fire in (T0, T0 + 100):
        [res] = s.vote([vote("a", fire)])
        s.start("a", fire, "n1", res.slot.token, 10_000)
        s.finish("a", fire, "n1", res.slot.token, True, "exit 0")
    redis_client.xadd(key("a", "ledger"), {"fire": "9" * 400, "state": "succeeded", "finished": "1"})
    redis_client.xadd(key("a", "ledger"), {"fire": "1", "state": "nonsense", "finished": "1"})
    redis_client.xadd(key("a", "ledger"), {"fire": "1", "state": "failed", "finished": "1", "voters": "[[[["})
    assert [e.fire_ms for e in s.ledger("a", 10)] == [T0 + 100, T0]
    assert len(seen) == 3


# -- hypothesis: garbage into every key and channel value the project reads ------------------

_GARBAGE = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=64),
    st.integers().map(str),
    st.just("[" * 3000 + "]" * 3000),
    st.just("9" * 500),
    st.just(f"proposed {T0 + 10**9} 0 " + "{" * 2000),
    st.just(f"committed {T0 + 10**9} " + json.dumps({"st": "committed", "ex": "n1", "tk": "1e300"})),
    st.just(f"running {T0 + 10**9} " + json.dumps({"st": "running", "ex": "n1", "tk": 2**60, "lu": "x"})),
    st.just(f"succeeded {T0 + 10**9} " + json.dumps({"st": "succeeded", "v": [[[]]]})),
    st.just(json.dumps(["inc", 0, 2**70, "{" * 100])),
)
# (key suffix, redis type to write it as)
_TARGETS = st.sampled_from(
    [
        ("meta", "hash:tk"),
        ("meta", "hash:q"),
        ("meta", "hash:p"),
        ("meta", "hash:pb"),
        ("meta", "hash:pa"),
        ("meta", "hash:hw"),
        ("meta", "string"),
        ("open", "zset"),
        ("open", "string"),
        ("slots", "zset"),
        ("slots", "list"),
        ("ledger", "stream"),
        ("ledger", "string"),
        ("audit", "stream"),
        ("triggers", "zset"),
        ("triggers", "string"),
        (f"slot:{T0}", "string"),
        (f"slot:{T0}", "hash"),
        (f"slot:{T0}", "list"),
        (f"slot:{T0 + 100}", "string"),
        ("members", "hash"),
        ("members", "string"),
    ]
)


def _write(client: redis.Redis, suffix: str, kind: str, value: bytes | str) -> None:
    k = f"qc:{{{NS}}}:members" if suffix == "members" else key("a", suffix)
    if kind.startswith("hash:"):
        if client.type(k) not in (b"hash", b"none"):
            client.delete(k)
        client.hset(k, kind[5:], value)
    elif kind == "hash":
        client.delete(k)
        client.hset(k, "n9" if suffix == "members" else "x", value)
    elif kind == "string":
        client.delete(k)
        client.set(k, value)
    elif kind == "zset":
        client.delete(k)
        client.zadd(k, {value: T0})
    elif kind == "list":
        client.delete(k)
        client.rpush(k, value)
    elif kind == "stream":
        client.delete(k)
        client.xadd(k, {"fire": value, "state": value, "finished": value, "action": value, "at": value})


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writes=st.lists(st.tuples(_TARGETS, _GARBAGE), min_size=1, max_size=4))
def test_garbage_in_one_job_never_breaks_the_other_or_runs_uncommitted(
    redis_server: EmbeddedRedis, writes: list[tuple[tuple[str, str], bytes | str]]
) -> None:
    client = redis_server.client(retry=None, socket_timeout=5.0)
    client.flushall()
    clock = Clock()
    s = RedisStore(client, NS, clock=clock)
    s.on_bad_value = lambda what, problem: None
    try:
        s.heartbeat("n1", "i1", 60_000, {"host": "h"})
        for (suffix, kind), value in writes:
            _write(client, suffix, kind, value)
        # Job "b" is untouched: its slot commits, runs and finishes as usual.
        results = s.vote([vote("a", T0), vote("b", T0), vote("a", T0 + 100), vote("b", T0 + 100)])
        b_results = [results[1], results[3]]
        assert [r.status for r in b_results] == [VoteStatus.COMMITTED] * 2, results
        assert [r.slot.token for r in b_results] == [1, 2]
        # Whatever job "a" answered: a slot this node is told to run is committed to it with a token.
        for r in (results[0], results[2]):
            if r.slot.state == SlotState.COMMITTED and r.slot.executor == "n1":
                assert r.slot.token >= 1
                stored = s.slot("a", r.slot.fire_ms)
                assert stored.state == SlotState.COMMITTED and stored.token == r.slot.token
        clock.now += 5_000
        s.sweep([SweepParams("a", 30_000, 60_000), SweepParams("b", 30_000, 60_000)])
        for fire, r in zip((T0, T0 + 100), b_results, strict=True):
            assert s.start("b", fire, "n1", r.slot.token, 10_000).ok
            assert s.finish("b", fire, "n1", r.slot.token, True, "exit 0").ok
        assert {e.fire_ms for e in s.ledger("b", 10)} == {T0, T0 + 100}
        # One call reads every job's high-water mark: a's garbage reads as a mark or 0, not b's.
        hw_a, hw_b = s.high_waters(["a", "b"])
        assert hw_b == T0 + 100 and hw_a >= 0
        # Reads of "a" drop what is corrupt; single-key reads of a wrong-type
        # key (the members hash itself, a's meta) raise a StoreError, nothing else.
        s.slots("a", 0, T0 * 2)
        reads = (s.members, lambda: s.ledger("a", 10), lambda: s.control("a"))
        for op in (*reads, lambda: s.audit("a", 10), lambda: s.triggers("a", 0)):
            with contextlib.suppress(StoreError):
                op()
    finally:
        client.close()
