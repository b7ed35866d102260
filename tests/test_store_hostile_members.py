"""The namespace's members hash and membership record under hostile contents (issue 11).

These two keys are shared by every job: a junk value in them must not stop
the cluster. A security review found four ways it did: junk fields, many or
large, made every node's list of members time out or hid live members from
it; a forged heartbeat entry with a far expiry held a node id for good; a
record of megabytes came back in every heartbeat's reply; and a record at the
largest epoch was stepped past it, into a text no parser accepts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from quorum_cron.core.model import Configuration
from quorum_cron.store.redis import RedisStore
from tests.test_store_hostile import T0, Clock

NS = "hm"
MEMBERS = f"qc:{{{NS}}}:members"
RECORD = f"qc:{{{NS}}}:membership"


@pytest.fixture
def store(redis_client: redis.Redis) -> Iterator[tuple[RedisStore, list[tuple[str, str]]]]:
    s = RedisStore(redis_client, NS, clock=Clock())
    seen: list[tuple[str, str]] = []
    s.on_bad_value = lambda what, problem: seen.append((what, problem))
    yield s, seen


def _reply_bytes(s: RedisStore, op: str, *args: str | int) -> int:
    """How many bytes of values the members script's reply carries (what every node reads)."""
    return sum(len(v) if isinstance(v, bytes | str) else 8 for v in s._members_call(op, *args))


def test_junk_members_neither_hide_live_ones_nor_swell_the_list(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    s, seen = store
    big = "x" * 3_000_000
    pipe = redis_client.pipeline(transaction=False)
    for i in range(1_500):
        pipe.hset(MEMBERS, f"junk{i:04}", "j")
    for i in range(5):
        pipe.hset(MEMBERS, f"big{i}", big)
    pipe.execute()
    for node in ("a", "b", "c"):
        assert s.heartbeat(node, f"inc-{node}", 10_000, {"host": node}).ok
    assert [m.node for m in s.members()] == ["a", "b", "c"]
    # The corrupt entries are reported, a bounded number of them, each cut short.
    assert seen and all("corrupt: " in problem for _, problem in seen), seen[:3]
    assert _reply_bytes(s, "m") < 100_000
    assert redis_client.hlen(MEMBERS) == 1_505 + 3  # left for the operator to look at


@pytest.mark.parametrize("expires", ["1e300", str(T0 + 10 * 365 * 86_400_000)])
def test_a_forged_entry_with_a_far_expiry_does_not_hold_a_node_id(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]], expires: str
) -> None:
    s, seen = store
    redis_client.hset(MEMBERS, "n1", f'["evil",{T0},{expires},"{{}}"]')
    assert s.heartbeat("n1", "inc1", 10_000, {}).ok
    assert [(m.node, m.incarnation) for m in s.members()] == [("n1", "inc1")]
    assert not seen


def test_a_huge_record_field_is_not_read_back_whole(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    s, seen = store
    s.init_membership(Configuration(("a", "b", "c"), 3, 2), "test")
    redis_client.hset(RECORD, "why", "w" * 2_000_000)
    result = s.heartbeat("a", "inc-a", 10_000, {})
    assert result.ok and result.membership is None
    assert any("field why of 2000000 bytes" in problem for _, problem in seen), seen
    assert _reply_bytes(s, "g") < 1_000
    assert s.membership() is None
    change = s.change_membership(1, Configuration(("a", "b", "d"), 3, 2), "ops", "swap")
    assert not change.ok and "corrupt" in change.reason


def test_no_epoch_follows_the_largest(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    s, _ = store
    top = 999_999_999_999_999
    redis_client.hset(RECORD, mapping={"r": f"{top};3,2,a,b,c", "at": str(T0), "by": "x", "why": "y"})
    change = s.change_membership(top, Configuration(("a", "b", "d"), 3, 2), "ops", "swap")
    assert not change.ok
    assert f"epoch {top} is the largest a record can have" in change.reason
    assert redis_client.hget(RECORD, "r") == f"{top};3,2,a,b,c".encode()  # unchanged, still readable
    # Nor does a heartbeat step it (a seat to fill in "size = N" mode).
    redis_client.hset(RECORD, "r", f"{top};3,2,a,b")
    assert s.heartbeat("c", "inc-c", 10_000, {}, epoch=top).ok
    assert redis_client.hget(RECORD, "r") == f"{top};3,2,a,b".encode()


def test_a_refused_heartbeat_names_a_bounded_holder(
    redis_client: redis.Redis, store: tuple[RedisStore, list[tuple[str, str]]]
) -> None:
    s, _ = store
    redis_client.hset(MEMBERS, "n1", json.dumps(["i" * 100_000, T0, T0 + 5_000, "{}"]))
    result = s.heartbeat("n1", "mine", 10_000, {})
    assert not result.ok and len(result.holder) <= 201
