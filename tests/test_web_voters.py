"""The dashboard shows apart the voters that did not count, as ``history`` does (real redis-server).

``history`` marks a slot's voters the store can tell did not count (another
definition; not a member of the records in force at the commit). The slot
page, ``/api/jobs/{job}/slots/{fire_ms}`` and the job page's history listed
every voter unmarked. They now use the same computation
(:mod:`quorum_cron.store.voters`): the same four slots around ``members
remove c`` as tests/test_cli_history_voters.py, read by both faces.
"""

from __future__ import annotations

import json
from pathlib import Path

import redis
from click.testing import CliRunner
from starlette.testclient import TestClient

from quorum_cron.commands.history import history
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens
from tests.test_cli_history_voters import NS, Clock, _config, _now_s, _slots

FIELDS = ("voters", "epochs_at_commit", "not_members_at_commit", "other_definition")


def test_the_dashboard_marks_the_voters_history_marks(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    clock = Clock(_now_s())
    store = RedisStore(redis_client, NS, clock=clock)
    fires = _slots(store, clock)
    config = Config(ClusterConfig(namespace=NS, size=3), (JobSpec.create("j", "@hourly", command=("true",)),))
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        job = client.get("/api/jobs/j").json()
        job_page = client.get("/jobs/j").text
        slots = {name: client.get(f"/api/jobs/j/slots/{f}").json() for name, f in fires.items()}
        slot_pages = {name: client.get(f"/jobs/j/slots/{f}").text for name, f in fires.items()}

    expected = {
        "after": (["a", "b", "c"], [3], ["c"], []),
        "joint": (["a", "b", "c"], [2], [], []),
        "before": (["a", "c"], [1], [], []),
        "other": (["a", "b", "c"], [1], [], ["c"]),
    }
    # The job page's history: the fields and values of `history --json`, entry by entry.
    entries = {e["slot_ms"]: e for e in job["history"]["entries"]}
    assert {name: tuple(entries[f][k] for k in FIELDS) for name, f in fires.items()} == expected
    res = CliRunner().invoke(history, ["j", "--config", _config(tmp_path, redis_server.url), "--json"])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    for doc in map(json.loads, res.stdout.splitlines()):
        assert {k: doc[k] for k in FIELDS} == {k: entries[doc["slot_ms"]][k] for k in FIELDS}
    assert job["corrupt"] == []

    # The slot API: the same three fields, and each vote says whether (and why) it did not count.
    for name, doc in slots.items():
        assert tuple(doc[k] for k in FIELDS[1:]) == expected[name][1:], name
    not_counted = {name: {v["node"]: v["not_counted"] for v in doc["votes"]} for name, doc in slots.items()}
    assert not_counted == {
        "after": {"a": "", "b": "", "c": "not a member of epoch 3, which decided it"},
        "joint": {"a": "", "b": "", "c": ""},
        "before": {"a": "", "c": ""},
        "other": {"a": "", "b": "", "c": "voted another definition"},
    }

    # The pages show them apart, as history's voters cell does.
    assert 'a, b <span class="apart dim">[c: not a member of epoch 3, which decided it]</span>' in job_page
    assert 'a, b <span class="apart dim">[c: voted another definition]</span>' in job_page
    assert '<tr class="vote apart" data-node="c">' in slot_pages["after"]
    assert "not a member of epoch 3, which decided it" in slot_pages["after"]
    assert 'class="vote apart"' not in slot_pages["joint"]


def test_a_slot_with_no_commit_has_nothing_to_tell(redis_client: redis.Redis) -> None:
    """A slot the store never committed (one vote, then its deadline): the fields are null, as in
    ``history --json``, and no vote is marked."""
    clock = Clock(_now_s())
    store = RedisStore(redis_client, NS, clock=clock)
    fires = _slots(store, clock)
    config = Config(ClusterConfig(namespace=NS, size=3), (JobSpec.create("j", "@hourly", command=("true",)),))
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
    never = max(fires.values()) + 10_000
    with TestClient(app) as client:
        doc = client.get(f"/api/jobs/j/slots/{never}").json()
    assert (doc["epochs_at_commit"], doc["not_members_at_commit"], doc["other_definition"]) == (
        None,
        None,
        None,
    )
    assert doc["votes"] == []
