"""``status`` names the jobs of its config that too few voting members run to reach a quorum.

A job added to one node's config only, or a reload that reached too few nodes, never gets a
quorum: each of its slots ends missed, while the cluster itself looks healthy (a quorum votes,
no drift, since drift compares only the jobs both sides have). Real redis-server; heartbeats
sent with the store's own call, each carrying its job table as an agent's did inline (what
``status`` reads, from the published table, for current agents).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from starlette.testclient import TestClient

from quorum_cron.commands.status import SHORT_SHOWN, status
from quorum_cron.config.file import load_config
from quorum_cron.config.membership import short_jobs
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Configuration, Member
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens

NS = "shortjobs"


@pytest.fixture
def store(redis_client: redis.Redis, redis_server: EmbeddedRedis) -> Iterator[RedisStore]:
    s = RedisStore.from_url(redis_server.url, NS, socket_timeout=5.0)
    try:
        yield s
    finally:
        s.close()


def config(tmp_path: Path, url: str, jobs: list[str]) -> Path:
    path = tmp_path / "cluster.toml"
    text = f'[cluster]\nname = "{NS}"\nmembers = ["a", "b", "c"]\nredis_url = "{url}"\n'
    for name in jobs:
        text += f'\n[[jobs]]\nname = "{name}"\nschedule = "@hourly"\ncommand = ["true"]\n'
    path.write_text(text)
    return path


def tables(cfg: Path) -> dict[str, str]:
    return {spec.name: spec.spec_hash for spec in load_config(cfg).jobs}


def beat(store: RedisStore, node: str, table: dict[str, str]) -> None:
    jobs = ",".join(f"{name}={digest}" for name, digest in sorted(table.items()))
    assert store.heartbeat(node, f"inc-{node}", 30_000, {"voting": "yes", "jobs": jobs}, epoch=1).ok


def test_a_job_fewer_than_a_quorum_run_is_named_and_one_a_quorum_runs_is_not(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    cfg = config(tmp_path, redis_server.url, ["everywhere", "new-report"])
    table = tables(cfg)
    store.init_membership(Configuration.of(["a", "b", "c"]), "a")
    beat(store, "a", table)  # (a runs both; b and c were not given new-report yet)
    beat(store, "b", {"everywhere": table["everywhere"]})
    beat(store, "c", {"everywhere": table["everywhere"]})

    res = CliRunner().invoke(status, ["--config", str(cfg), "--format", "json"])
    assert res.exit_code == 0, res.output  # (the cluster can run slots: a per-job problem)
    doc = json.loads(res.output)
    assert doc["no_quorum"] == [{"job": "new-report", "run_by": ["a"]}]
    assert doc["drift"] == []
    line = "NO QUORUM FOR new-report: fewer than 2 of the 3 voting members run it as this config defines"
    assert any(p.startswith(line) for p in doc["problems"]), doc["problems"]

    beat(store, "b", table)  # (the reload reaches b: two of three run it)
    doc = json.loads(CliRunner().invoke(status, ["--config", str(cfg), "--format", "json"]).output)
    assert doc["no_quorum"] == [] and not any("NO QUORUM" in p for p in doc["problems"])


def member(node: str, jobs: str | None) -> Member:
    return Member(node, f"inc-{node}", 0, 1, {"voting": "yes"} | ({"jobs": jobs} if jobs is not None else {}))


def test_another_definition_does_not_count_and_an_unread_table_says_nothing(tmp_path: Path) -> None:
    cfg = config(tmp_path, "redis://127.0.0.1:1/0", ["j"])
    specs = [(spec.name, spec.spec_hash) for spec in load_config(cfg).jobs]
    mine = f"j={specs[0][1]}"
    assert short_jobs([member("a", mine), member("b", "j=0000"), member("c", "")], specs, 2) == {"j": ["a"]}
    assert short_jobs([member("a", mine), member("b", mine), member("c", "")], specs, 2) == {}
    assert short_jobs([member("a", ""), member("b", None)], specs, 2) == {}


def test_many_jobs_without_a_quorum_make_one_line(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    names = [f"job{i:02}" for i in range(SHORT_SHOWN + 5)]
    cfg = config(tmp_path, redis_server.url, names)
    store.init_membership(Configuration.of(["a", "b", "c"]), "a")
    for node in "abc":
        beat(store, node, {})
    doc = json.loads(CliRunner().invoke(status, ["--config", str(cfg), "--format", "json"]).output)
    assert len(doc["no_quorum"]) == len(names)
    said = [p for p in doc["problems"] if p.startswith("NO QUORUM FOR ")]
    assert len(said) == 1 and said[0].startswith(
        f"NO QUORUM FOR {', '.join(names[:SHORT_SHOWN])} and 5 more:"
    )


def test_the_dashboard_names_the_same_jobs(redis_client: redis.Redis) -> None:
    """One fact, both faces: ``/api/cluster`` has a ``no_quorum`` problem per such job."""
    store = RedisStore(redis_client, "wq")
    store.init_membership(Configuration.of("abc"), "a")
    jobs = (
        JobSpec.create("everywhere", "@hourly", command=("true",)),
        JobSpec.create("new", "@hourly", command=("true",)),
    )
    config = Config(ClusterConfig(namespace="wq", size=3, members=("a", "b", "c")), jobs, source="web.toml")
    both = {spec.name: spec.spec_hash for spec in jobs}
    beat(store, "a", both)
    beat(store, "b", {"everywhere": both["everywhere"]})
    beat(store, "c", {"everywhere": both["everywhere"]})
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        doc = client.get("/api/cluster").json()
    short = [p for p in doc["problems"] if p["kind"] == "no_quorum"]
    assert [(p["job"], p["message"]) for p in short] == [
        ("new", "new: run as this config defines by 1 of the 3 voting members, need 2: each slot ends missed")
    ]
