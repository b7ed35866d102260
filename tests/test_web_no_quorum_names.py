"""The dashboard's no-quorum line bounds and escapes the job names it reads from Redis, as ``status`` does.

Since the dashboard judges the jobs only other nodes define (``membership.judged_jobs``), the
names on its ``no_quorum`` line come from a node's published job table in Redis, not only from
this config (whose names are at most 100 safe characters). A table is read up to 8 MiB
(``MAX_JOB_TABLE_CHARS``): ``status`` prints such a name escaped and cut at 100 characters
(``_not_here``); the dashboard's line must not carry it whole. Real redis-server.
"""

from __future__ import annotations

import redis
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Configuration
from quorum_cron.store.ports import table_digest
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens


def _beat(store: RedisStore, node: str, table: str) -> None:
    """A current agent's heartbeat: its table published apart, the beat naming its digest."""
    store.publish_jobs(node, table)
    info = {"voting": "yes", "jobs_digest": table_digest(table)}
    assert store.heartbeat(node, f"inc-{node}", 30_000, info, epoch=1).ok


def test_a_long_name_from_another_nodes_table_is_cut_and_escaped(redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "wqlong")
    store.init_membership(Configuration.of("abc"), "a")
    spec = JobSpec.create("everywhere", "@hourly", command=("true",))
    cluster = ClusterConfig(namespace="wqlong", size=3, members=("a", "b", "c"))
    config = Config(cluster, (spec,), source="w.toml")
    mine = f"everywhere={spec.spec_hash}"
    huge = "x" * 50_000 + "\x1b[2J"  # (no config allows it; a table in Redis may hold it)
    _beat(store, "a", mine)
    _beat(store, "b", mine)
    _beat(store, "c", f"{mine},{huge}=h-c")
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        doc = client.get("/api/cluster").json()
    short = [p for p in doc["problems"] if p["kind"] == "no_quorum"]
    assert len(short) == 1 and short[0]["jobs"] == [huge]  # (judged, and listed whole for programs)
    message = short[0]["message"]
    assert len(message) < 400, len(message)
    assert "\x1b" not in message
    assert message.startswith("no quorum for " + "x" * 100 + "…(50004 chars)"), message[:200]
