"""The dashboard's no-quorum line bounds and escapes the job names it reads from Redis, as ``status`` does.

Since the dashboard judges the jobs only other nodes define (``membership.judged_jobs``), the
names on its ``no_quorum`` line come from a node's published job table in Redis, not only from
this config (whose names are at most 100 safe characters). A table is read up to 8 MiB
(``MAX_JOB_TABLE_CHARS``): ``status`` prints such a name escaped and cut at 100 characters
(``membership.not_in_config_text``, which both faces call); the dashboard's line must not carry
it whole. Real redis-server.
"""

from __future__ import annotations

import json
from pathlib import Path

import redis
from click.testing import CliRunner
from starlette.testclient import TestClient

from quorum_cron.commands.status import status
from quorum_cron.config.file import load_config
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Configuration
from quorum_cron.store.embedded.single import EmbeddedRedis
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


def test_a_job_only_other_nodes_define_is_marked_as_status_marks_it(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    """``status`` says ``NO QUORUM FOR c-only (not in this config; run by c only)``; the dashboard's
    line named ``c-only`` like one of this config's jobs, sending the operator to a config that lacks
    it. Both faces are given the same config file and the same store."""
    path = tmp_path / "w.toml"
    path.write_text(
        f'[cluster]\nname = "wqelse"\nmembers = ["a", "b", "c"]\nredis_url = "{redis_server.url}"\n'
        + "".join(
            f'\n[[jobs]]\nname = "{name}"\nschedule = "@hourly"\ncommand = ["true"]\n'
            for name in ("everywhere", "new")
        )
    )
    config = load_config(path)
    digest = {spec.name: spec.spec_hash for spec in config.jobs}
    store = RedisStore(redis_client, "wqelse")
    store.init_membership(Configuration.of("abc"), "a")
    _beat(store, "a", f"everywhere={digest['everywhere']},new={digest['new']}")
    _beat(store, "b", f"everywhere={digest['everywhere']}")
    _beat(store, "c", f"c-only=h-c,everywhere={digest['everywhere']}")
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        doc = client.get("/api/cluster").json()
    short = [p for p in doc["problems"] if p["kind"] == "no_quorum"]
    assert short[0]["message"] == (
        "no quorum for new, c-only (not in this config; run by c only): no one definition is run "
        "by a quorum of the 3 voting members: each slot ends missed"
    )
    assert [(p["jobs"], p["not_in_config"]) for p in short] == [(["new", "c-only"], ["c-only"])]
    said = json.loads(CliRunner().invoke(status, ["--config", str(path), "--json"]).output)["problems"]
    assert "NO QUORUM FOR c-only (not in this config; run by c only): " in "\n".join(said)
