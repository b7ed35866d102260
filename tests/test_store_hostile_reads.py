"""Reads of namespace-wide data that anyone with write access to Redis may have appended to.

Each test writes one bad entry beside good ones on a real redis-server and
checks that the bad one costs only itself: reported once (``on_bad_value``),
left out, and every other entry still read — by the store and by the
command an operator runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from quorum_cron.commands.members import members
from quorum_cron.commands.status import status
from quorum_cron.core.model import Configuration, SlotState, VoteRequest, VoteStatus
from quorum_cron.store import keys as store_keys
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.parse import MAX_MEMBERS, BadValue, bounded_json
from quorum_cron.store.redis import RedisStore

NS = "hr"


@pytest.fixture
def store(redis_client: redis.Redis, redis_server: EmbeddedRedis) -> Iterator[tuple[RedisStore, list[str]]]:
    s = RedisStore.from_url(redis_server.url, NS, socket_timeout=5.0)
    seen: list[str] = []
    s.on_bad_value = lambda what, problem: seen.append(f"{what}: {problem}")
    try:
        yield s, seen
    finally:
        s.close()


def test_a_log_entry_with_a_field_name_not_utf8_costs_only_itself(
    store: tuple[RedisStore, list[str]],
    redis_client: redis.Redis,
    redis_server: EmbeddedRedis,
    tmp_path: Path,
) -> None:
    """A membership log entry whose field name is not UTF-8 raised out of the log's loop: the
    whole log was unreadable (``members show`` failed with exit 1, the dashboard lost every job's
    voters line). It is left out and reported; the record and the other entries are read."""
    s, seen = store
    created = s.init_membership(Configuration(("n1",), 1, 1), "n1")
    log = store_keys.membership_log_key(NS)
    redis_client.xadd(log, {b"\xff": b"x", "r": "2;1,1,n1", "at": "5", "by": "x", "why": "forged"})
    assert s.membership_log(10) == [created]
    assert seen == [f"membership log entry of {log}: '\ufffd' is not UTF-8"]
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'[cluster]\nname = "{NS}"\nmembers = ["n1"]\nredis_url = "{redis_server.url}"\n')
    res = CliRunner().invoke(members, ["show", "--config", str(cfg)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "epoch 1: n1 (quorum 1 of 1) — by n1" in res.output


def test_an_index_member_with_a_leading_zero_costs_only_itself_not_the_batch(
    store: tuple[RedisStore, list[str]], redis_client: redis.Redis
) -> None:
    """``0<fire>`` in a job's open index, with a slot value under that key, matched the scripts'
    ``^%d+$`` and read as ``<fire>``: a second view of the job's real slot, which made
    ``read_slots`` raise for every job in the batch (an agent's polls of all its jobs). It is
    reported and left out; the real slots of both jobs are read."""
    s, seen = store
    fire = s.time_ms()  # (the store's clock: a vote is judged by it)
    votes = [VoteRequest(job, fire, "n1", "h1", 1, 250, 30_000) for job in ("a", "b")]
    assert [r.status for r in s.vote(votes)] == [VoteStatus.COMMITTED] * 2
    prefix = store_keys.job_prefix(NS, "a")
    real = redis_client.get(f"{prefix}slot:{fire}")
    assert real is not None
    redis_client.set(f"{prefix}slot:0{fire}", real)
    redis_client.zadd(prefix + store_keys.OPEN, {f"0{fire}": fire})
    views = s.read_slots([("a", fire), ("b", fire)])
    assert [(v.job, v.fire_ms, v.state) for v in views] == [
        ("a", fire, SlotState.COMMITTED),
        ("b", fire, SlotState.COMMITTED),
    ]
    assert [v.fire_ms for v in s.slots("a", fire - 1, fire + 1)] == [fire]
    assert seen == [f"slot of a: fire time '0{fire}' has a leading zero"]


def test_live_entries_of_strangers_past_the_read_bound_never_hide_a_member(
    store: tuple[RedisStore, list[str]], redis_client: redis.Redis
) -> None:
    """``members()`` decodes at most ``MAX_MEMBERS`` entries of the list, which came in hash
    order: 20,000 well-formed live entries of node ids no record names (anyone may write them)
    cut the members' own heartbeats, and status, the dashboard and every agent's ``quorum_lost``
    alert said the cluster down while it ran. The record's members come first now."""
    s, _ = store
    s.init_membership(Configuration(("n1", "n2", "n3"), 3, 2), "n1")
    for node in ("n1", "n2", "n3"):
        assert s.heartbeat(node, f"inc-{node}", 30_000, {"voting": "yes"}, epoch=1).ok
    now = s.time_ms()
    stranger = json.dumps(["x", str(now), str(now + 3_600_000), "{}", "1"])
    members_key = store_keys.members_key(NS)
    for i in range(0, 20_000, 2_000):
        redis_client.hset(members_key, mapping={f"s{j:05d}": stranger for j in range(i, i + 2_000)})
    listed = {m.node for m in s.members()}
    assert {"n1", "n2", "n3"} <= listed
    assert len(listed) == MAX_MEMBERS


def test_the_list_orders_by_the_record_and_still_lists_without_one(
    store: tuple[RedisStore, list[str]], redis_client: redis.Redis
) -> None:
    """The list reads the record to put its members first; a membership key of the wrong type
    (or none) orders nothing and the live entries are still listed."""
    s, _ = store
    assert s.heartbeat("n1", "inc-n1", 30_000, {"voting": "yes"}).ok
    assert [m.node for m in s.members()] == ["n1"]
    redis_client.set(store_keys.membership_key(NS), "not a hash")
    assert [m.node for m in s.members()] == ["n1"]


def test_a_lone_surrogate_escape_is_a_bad_value_and_a_pair_is_text() -> None:
    """``json`` decodes ``"\\udc00"`` to a str that no UTF-8 output can carry."""
    assert bounded_json('["\\ud83d\\ude00", "\\u00e9"]', "x", 100) == ["\U0001f600", "\u00e9"]
    assert bounded_json('["\\\\udc00"]', "x", 100) == ["\\udc00"]  # (an escaped backslash: text)
    for doc in ('["\\udc00h"]', '{"host": "\\uD800"}', '["\\ude00\\ud83d"]'):
        with pytest.raises(BadValue, match="lone surrogate"):
            bounded_json(doc, "x", 100)


def test_a_member_or_ledger_entry_with_a_lone_surrogate_costs_only_itself(
    store: tuple[RedisStore, list[str]],
    redis_client: redis.Redis,
    redis_server: EmbeddedRedis,
    tmp_path: Path,
) -> None:
    """One heartbeat entry whose info held ``\\udc00`` (valid JSON) made ``status`` end in a
    UnicodeEncodeError traceback and the dashboard's Cluster page answer 500; a ledger entry's
    voters did the same to its job's page. Each is now a bad value: reported, left out."""
    s, seen = store
    s.init_membership(Configuration(("n1",), 1, 1), "n1")
    assert s.heartbeat("n1", "inc-n1", 30_000, {"voting": "yes"}, epoch=1).ok
    now = s.time_ms()
    info = '{"host": "\\udc00h", "voting": "no"}'
    redis_client.hset(
        store_keys.members_key(NS), "sur", json.dumps(["x", str(now), str(now + 60_000), info, "1"])
    )
    ledger = store_keys.job_prefix(NS, "a") + store_keys.LEDGER
    redis_client.xadd(ledger, {"fire": "1", "state": "succeeded", "finished": "2", "voters": '["n1"]'})
    redis_client.xadd(ledger, {"fire": "3", "state": "succeeded", "finished": "4", "voters": '["\\ud800"]'})
    assert [m.node for m in s.members()] == ["n1"]
    assert [e.fire_ms for e in s.ledger("a", 10)] == [1]
    assert len(seen) == 2 and all("lone surrogate" in said for said in seen), seen
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'[cluster]\nname = "{NS}"\nmembers = ["n1"]\nredis_url = "{redis_server.url}"\n')
    res = CliRunner().invoke(status, ["--config", str(cfg)], env={"COLUMNS": "250"})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 0, res.output
