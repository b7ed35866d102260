"""Hypothesis garbage into every key and channel a live agent reads (issue 11).

One real agent process runs two jobs every second. Each example writes
generated garbage into job ``a``'s keys (meta fields, slot values, indexes,
ledger, audit, triggers), the members hash, and publishes garbage on the
node's assignment channel and the cluster's trigger channel. Then, for the
agent:

- it is still alive, still heartbeating, and logged no unexpected exception
  and no ``Traceback`` (every loop survived);
- job ``b`` (untouched) ran its next slots as usual, and every slot of it
  that ended has its ledger entry;
- every run it started in this example — a corrupted slot of ``a``
  included — was of a slot the store committed to it, with the token the
  run was given (ground truth from the job's own output against the ledger
  / slot record); a corrupted slot with no such record never started.

The agent runs for the whole test (one process across the examples); each
example checks only the runs of slots due after it began.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, JobLine, job_toml

pytestmark = pytest.mark.slow

NS = "garb"

_TEXT = st.one_of(
    st.binary(max_size=48),
    st.text(max_size=48),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", "1e300", "9007199254740992", "[" * 4000, "{" * 4000, "nan", "-0", "proposed 1 2 x"]),
)
_NOTICE = st.one_of(
    _TEXT,
    st.builds(
        lambda job, fire, token: f"{job}\n{fire}\n{token}",
        st.sampled_from(["a", "b", "zz", ""]),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.integers(min_value=-(2**64), max_value=2**64),
    ),
    st.builds(lambda job, fire: f"{job}\n{fire}", st.sampled_from(["a", "b"]), st.integers(0, 2**62)),
)
_META = ["meta:tk", "meta:q", "meta:p", "meta:hw", "meta:pb"]
_KEY_TARGETS = st.sampled_from([*_META, "slot", "open", "slots", "ledger", "audit", "triggers"])


def _write_key(client: redis.Redis, target: str, value: bytes | str, next_fire: int) -> int | None:
    """Write ``value`` into job a's key ``target``; returns the slot fire time written, if any."""
    prefix = f"qc:{{{NS}:a}}:"
    if target.startswith("meta:"):
        if client.type(prefix + "meta") not in (b"hash", b"none"):
            client.delete(prefix + "meta")
        client.hset(prefix + "meta", target[5:], value)
    elif target == "slot":
        client.set(f"{prefix}slot:{next_fire}", value)
        return next_fire
    elif target in ("open", "slots", "triggers"):
        client.zadd(prefix + target, {value: next_fire})
    else:
        client.xadd(prefix + target, {"fire": value, "state": value, "finished": value, "action": value})
    return None


@pytest.fixture
def running(tmp_path: Path, redis_server: EmbeddedRedis) -> tuple[Cluster, redis.Redis]:
    c = Cluster(tmp_path, redis_server.url, 1, namespace=NS)
    cfg = c.config("".join(job_toml(j, "@every 1s", c.out, overlap='"allow"') for j in ("a", "b")))
    c.start("n1", cfg)
    c.wait("b to run", lambda: c.lines("start", "b"), 30)
    client = redis_server.client(retry=None, socket_timeout=5.0)
    yield c, client
    client.close()
    c.close()


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    keys=st.lists(st.tuples(_KEY_TARGETS, _TEXT), max_size=4),
    members=st.lists(st.tuples(st.sampled_from(["n1", "n2", "x\n", "evil"]), _TEXT), max_size=2),
    notices=st.lists(st.tuples(st.sampled_from(["assign", "trigger"]), _NOTICE), max_size=6),
)
def test_garbage_everywhere_never_breaks_the_agent(
    running: tuple[Cluster, redis.Redis],
    keys: list[tuple[str, bytes | str]],
    members: list[tuple[str, bytes | str]],
    notices: list[tuple[str, bytes | str]],
) -> None:
    c, client = running
    node = c.nodes["n1"]
    now = c.store.time_ms()
    # This example's runs: slots due after the previous example's repair (a
    # vote comes at most max_skew, 250 ms, before its slot).
    current = now + 500
    next_fire = (now // 1000 + 2) * 1000
    garbled: set[int] = set()
    for target, value in keys:
        fire = _write_key(client, target, value, next_fire)
        if fire is not None:
            garbled.add(fire)
    for name, value in members:
        if name != "n1":  # (n1's own entry is rewritten by its next heartbeat anyway)
            client.hset(f"qc:{{{NS}}}:members", name, value)
    for channel, payload in notices:
        client.publish(f"qc:{{{NS}}}:assign:n1" if channel == "assign" else f"qc:{{{NS}}}:trigger", payload)

    def mine(kind: str, job: str) -> list[JobLine]:
        return [x for x in c.lines(kind, job) if x.slot > current]

    # b keeps running: two more slots after the garbage, each ended and recorded.
    c.wait("b to run twice more", lambda: len(mine("end", "b")) >= 2 or None, 20)
    assert node.proc.poll() is None, c.describe()
    ended = {x.slot: x for x in mine("end", "b")}
    c.wait(
        f"a ledger entry for every slot of b that ended ({sorted(ended)})",
        lambda: set(ended) <= set(c.ledger("b")) or None,
        10,
    )
    b_ledger = c.ledger("b")
    for fire, line in ended.items():
        entry = b_ledger[fire]
        assert (entry.state, entry.executor, entry.token) == (SlotState.SUCCEEDED, "n1", line.token), (
            line,
            entry,
        )
    members_now = {m.node: m for m in c.store.members()}
    assert "n1" in members_now and members_now["n1"].seen_ms >= now, c.describe()
    errors = [e for e in node.events if e.get("level") in ("error", "critical")]
    unexpected = [e for e in errors if "exc" in e or "unexpected" in str(e)]
    assert not unexpected, json.dumps(unexpected)[:3000]
    output = "\n".join(node.text) + json.dumps(node.events)
    assert "Traceback" not in output, c.describe()
    # Every run of this example the agent started, of a corrupted slot of a or
    # any other, was of a slot the store committed to it, with that token: its
    # ledger entry or its slot record says so (a corrupted slot that was never
    # overwritten by a commit has neither, and must not have started).
    for job in ("a", "b"):
        ledger = c.ledger(job)
        for line in mine("start", job):
            entry = ledger.get(line.slot)
            if entry is not None:
                assert (entry.executor, entry.token) == ("n1", line.token), (line, entry)
                continue
            view = c.store.slot(job, line.slot)
            what = "a corrupted slot" if job == "a" and line.slot in garbled else "a slot"
            assert view.state != SlotState.ABSENT, f"{what} started with no record: {line}"
            assert (view.executor, view.token) == ("n1", line.token), (line, view)
    # Repair a (the next example starts from a clean job a).
    for key in client.scan_iter(match=f"qc:{{{NS}:a}}:*"):
        client.delete(key)
    client.delete(f"qc:{{{NS}}}:members")
