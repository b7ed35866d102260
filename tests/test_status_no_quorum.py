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

from quorum_cron.commands.status import status
from quorum_cron.config.file import load_config
from quorum_cron.config.membership import SHORT_SHOWN, short_jobs
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Configuration, Member, MembershipRecord
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.ports import table_digest, with_job_tables
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
    assert doc["no_quorum"] == [{"job": "new-report", "run_by": ["a"], "in_config": True}]
    assert doc["drift"] == []
    line = "NO QUORUM FOR new-report: no one definition of it is run by a quorum of the 3 voting members"
    assert any(p.startswith(line) for p in doc["problems"]), doc["problems"]

    beat(store, "b", table)  # (the reload reaches b: two of three run it)
    doc = json.loads(CliRunner().invoke(status, ["--config", str(cfg), "--format", "json"]).output)
    assert doc["no_quorum"] == [] and not any("NO QUORUM" in p for p in doc["problems"])


def test_a_job_another_node_alone_runs_is_judged_from_a_config_without_it(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    """n3 alone was given newjob: from the others' file status showed a healthy cluster. The
    voters' published tables name it, so it is judged too, and said not to be in this config."""
    cfg = config(tmp_path, redis_server.url, ["everywhere"])
    table = tables(cfg)
    store.init_membership(Configuration.of(["a", "b", "c"]), "a")
    beat(store, "a", table)
    beat(store, "b", table)
    beat(store, "c", table | {"newjob": "h-new"})

    res = CliRunner().invoke(status, ["--config", str(cfg), "--format", "plain"])
    assert res.exit_code == 0, res.output  # (unchanged: a per-job problem, the cluster runs slots)
    line = (
        "NO QUORUM FOR newjob (not in this config; run by c only): no one definition of it is run "
        "by a quorum of the 3 voting members: each slot ends missed"
    )
    assert [x for x in res.output.splitlines() if x.startswith("NO QUORUM")] == [line], res.output
    res = CliRunner().invoke(status, ["--config", str(cfg), "--format", "json"])
    assert res.exit_code == 0
    doc = json.loads(res.output)
    assert doc["no_quorum"] == [{"job": "newjob", "run_by": ["c"], "in_config": False}]
    assert doc["problems"] == [line]

    beat(store, "b", table | {"newjob": "h-new"})  # (b gets it too: two of three run it, it commits)
    doc = json.loads(CliRunner().invoke(status, ["--config", str(cfg), "--format", "json"]).output)
    assert doc["no_quorum"] == [] and doc["problems"] == []


def test_jobs_short_here_and_elsewhere_make_a_line_each_bounded(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    cfg = config(tmp_path, redis_server.url, ["mine"])
    store.init_membership(Configuration.of(["a", "b", "c"]), "a")
    theirs = {f"j{i:02}": "h" for i in range(SHORT_SHOWN + 3)}
    beat(store, "a", theirs)
    beat(store, "b", {})
    beat(store, "c", {})
    res = CliRunner().invoke(status, ["--config", str(cfg), "--format", "plain"])
    said = [x for x in res.output.splitlines() if x.startswith("NO QUORUM")]
    assert said[0].startswith("NO QUORUM FOR mine: no one definition of it"), said
    listed = ", ".join(f"j{i:02} (not in this config; run by a only)" for i in range(SHORT_SHOWN))
    assert said[1].startswith(f"NO QUORUM FOR {listed} and 3 more: no one definition of each"), said
    assert len(said) == 2
    doc = json.loads(CliRunner().invoke(status, ["--config", str(cfg), "--format", "json"]).output)
    assert [(e["job"], e["in_config"]) for e in doc["no_quorum"]][:2] == [("mine", True), ("j00", False)]
    assert len(doc["no_quorum"]) == SHORT_SHOWN + 4


def test_a_job_name_read_from_redis_is_escaped_and_cut(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    cfg = config(tmp_path, redis_server.url, [])
    store.init_membership(Configuration.of(["a", "b", "c"]), "a")
    beat(store, "a", {"zz\x1b[2J" + "x" * 300: "h"})
    beat(store, "b", {})
    beat(store, "c", {})
    res = CliRunner().invoke(status, ["--config", str(cfg), "--format", "plain"])
    [said] = [x for x in res.output.splitlines() if x.startswith("NO QUORUM")]
    assert "\x1b" not in res.output and said.startswith("NO QUORUM FOR zz\\x1b[2Jxxx"), said
    assert "…(306 chars) (not in this config; run by a only): no one definition of it" in said
    assert len(said) < 300


def member(node: str, jobs: str | None) -> Member:
    return Member(node, f"inc-{node}", 0, 1, {"voting": "yes"} | ({"jobs": jobs} if jobs is not None else {}))


def test_a_definition_a_quorum_runs_commits_and_an_unread_table_says_nothing() -> None:
    """The store counts votes for one spec hash: a job two of three run under one definition (this
    config's or another: a rolling deploy, which the drift lines name) commits; split between two
    definitions it does not."""
    three = Configuration.of(["a", "b", "c"])
    record = MembershipRecord(1, three)

    def short(*tables: str | None) -> dict[str, list[str]]:
        return short_jobs([member(n, t) for n, t in zip("abc", tables, strict=False)], ["j"], record, 2)

    assert short("j=new", "j=old", "j=old") == {}  # (b and c commit it under the old definition)
    assert short("j=new", "j=old", "") == {"j": ["a", "b"]}
    assert short("j=new", "j=new", "") == {}
    assert short("", "", "") == {"j": []}
    assert short("j=new", "", None) == {}  # (c's table was not read: nothing is said)


def test_while_joint_a_definition_needs_a_quorum_of_each_configuration() -> None:
    """Old {a, b, c} (quorum 2), new {a, b, c, d, e} (quorum 3): a commit needs both."""
    record = MembershipRecord(2, Configuration.of("abcde"), Configuration.of("abc"))
    voters = "abcde"

    def short(runners: str) -> dict[str, list[str]]:
        members = [member(n, "j=h" if n in runners else "") for n in voters]
        return short_jobs(members, ["j"], record, 2)

    assert short("ab") == {"j": ["a", "b"]}  # (2 of the new 5: short)
    assert short("de") == {"j": ["d", "e"]}  # (none of the old 3)
    assert short("abd") == {}


def test_a_published_table_the_heartbeat_does_not_name_is_not_read(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    """A reload whose table write failed still heartbeats its new digest: the table kept is the old
    one, and judged as current it would name (or hide) the wrong jobs."""
    cfg = config(tmp_path, redis_server.url, ["j"])
    table = ",".join(f"{k}={v}" for k, v in tables(cfg).items())
    store.init_membership(Configuration.of(["a", "b", "c"]), "a")
    for node in "abc":
        store.publish_jobs(node, "" if node == "c" else table)  # (c's table: an old one, without j)
        digest = table_digest(table)
        assert store.heartbeat(
            node, f"inc-{node}", 30_000, {"voting": "yes", "jobs_digest": digest}, epoch=1
        ).ok
    members = with_job_tables(store, store.members())
    assert {m.node: m.info.get("jobs") for m in members} == {"a": table, "b": table, "c": None}
    store.publish_jobs("c", table)
    members = with_job_tables(store, store.members())
    assert {m.node: m.info.get("jobs") for m in members} == {"a": table, "b": table, "c": table}


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
    assert [(p["jobs"], p["message"]) for p in short] == [
        (
            ["new"],
            "no quorum for new: no one definition is run by a quorum of the 3 voting members: "
            "each slot ends missed",
        )
    ]
    # A job c alone was given, which this config lacks, is judged too (as status does).
    beat(store, "c", {"everywhere": both["everywhere"], "c-only": "h-c"})
    with TestClient(app) as client:
        doc = client.get("/api/cluster").json()
    assert [p["jobs"] for p in doc["problems"] if p["kind"] == "no_quorum"] == [["new", "c-only"]]
