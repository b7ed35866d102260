"""The Lua scripts, the Redis store and :mod:`quorum_cron.store.keys` agree on every name.

Key and channel names live in one module; the scripts receive the prefixes
as KEYS/ARGV and append suffixes themselves. These tests read the suffixes
the scripts use, and run the store on a real Redis to see which keys and
channels it actually touches.
"""

from __future__ import annotations

import re
from importlib import resources

import redis

from quorum_cron.core.model import SweepParams, VoteRequest
from quorum_cron.store import keys
from quorum_cron.store.redis import RedisStore

T0 = 1_700_000_000_000


def _lua_sources() -> dict[str, str]:
    base = resources.files("quorum_cron.store")
    return {p.name: p.read_text() for p in base.iterdir() if p.name.endswith(".lua")}


def test_every_suffix_the_scripts_append_is_a_known_one() -> None:
    used: set[str] = set()
    for text in _lua_sources().values():
        used.update(re.findall(r"P \.\. '([a-z:]+)'", text))
    assert used, "found no 'P .. <suffix>' in the scripts: the pattern is stale"
    known = set(keys.JOB_SUFFIXES) | set(keys.JOB_CHANNEL_SUFFIXES)  # keys, and sharded channels
    assert used <= known, f"suffixes only the scripts know: {used - known}"
    # Every suffix the module names is used by a script or by the store's own reads and control calls.
    assert set(keys.JOB_SUFFIXES) - used <= {keys.TRIGGERS, keys.AUDIT}


def test_script_headers_name_the_keys_of_this_module() -> None:
    sources = _lua_sources()
    ns, job = "ns", "job"
    prefix = keys.job_prefix(ns, job).replace(ns, "ns").replace(job, "job")
    for suffix in (keys.META, keys.TRIGGERS, keys.AUDIT):
        assert f"{prefix}{suffix}" in sources["control.lua"]
    assert keys.members_key("ns") in sources["members.lua"]
    assert keys.assign_prefix("ns") in sources["_job.lua"]
    assert keys.trigger_channel("ns") in sources["control.lua"]


def test_the_store_touches_only_the_keys_and_channels_named_here(redis_client: redis.Redis) -> None:
    now = [T0]
    store = RedisStore(redis_client, "kt", clock=lambda: now[0])
    assert store.assign_channel("n1") == keys.assign_channel("kt", "n1")
    assert store.trigger_channel() == keys.trigger_channel("kt")
    pubsub = redis_client.pubsub()
    pubsub.psubscribe("qc:*")
    try:
        store.heartbeat("n1", "i-1", 5_000, {})
        votes = [VoteRequest("job", T0, n, "h1", 2, 250, 30_000) for n in ("n1", "n2")]
        [_, res] = store.vote(votes)
        slot = res.slot
        store.start("job", T0, slot.executor, slot.token, 5_000)
        store.finish("job", T0, slot.executor, slot.token, True, "")
        now[0] = T0 + 10_000
        store.vote([VoteRequest("job", T0 + 10_000, "n1", "h1", 2, 250, 1_000)])  # never completed
        now[0] += 60_000
        store.sweep([SweepParams("job", 1_000, 5_000)])
        store.pause("job", "ops", "")
        store.resume("job", "ops")
        store.trigger("job", "ops")
        prefix = keys.job_prefix("kt", "job")
        expected = {prefix + s for s in keys.JOB_SUFFIXES if s != keys.SLOT}
        expected |= {f"{prefix}{keys.SLOT}{T0}", f"{prefix}{keys.SLOT}{T0 + 10_000}", keys.members_key("kt")}
        found = {k.decode() for k in redis_client.keys("*")}
        # (the open index is empty again once the sweep ended the second slot: Redis drops it)
        assert found == expected - {prefix + keys.OPEN}
        channels = set()
        while (msg := pubsub.get_message(timeout=0.5)) is not None:
            if msg["type"] == "pmessage":
                channels.add(msg["channel"].decode())
        assert channels == {keys.assign_channel("kt", slot.executor), keys.trigger_channel("kt")}
    finally:
        pubsub.close()
