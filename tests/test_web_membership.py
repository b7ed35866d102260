"""The web Cluster page and its API show the membership the store enforces (real redis-server).

The same facts as ``status``: the epoch, the members and the quorum of the
store's record (never the config's), a change in progress, live nodes the
store refuses, and a config that disagrees.
"""

from __future__ import annotations

import redis
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Configuration
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens


def test_cluster_page_and_api_show_the_record_a_change_in_progress_and_refused_nodes(
    redis_client: redis.Redis,
) -> None:
    store = RedisStore(redis_client, "wm")
    stored = store.init_membership(Configuration.of("abc"), "a")
    change = store.change_membership(
        stored.record.epoch, Configuration.of("abcde"), "alice", "grow <b>now</b>"
    )
    assert change.ok
    for node in ("a", "b", "c", "intruder"):
        assert store.heartbeat(node, f"i-{node}", 30_000, {"voting": "yes"}, epoch=2).ok
    job = JobSpec.create("tick", "@every 10s", command=("true",))
    # This config proposes another membership: the page says so; the quorum shown is the store's.
    config = Config(ClusterConfig(namespace="wm", size=1), (job,), source="web.toml")
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        doc = client.get("/api/cluster").json()
        page = client.get("/cluster").text

    record = doc["membership"]
    assert (record["epoch"], record["joint"]) == (2, True)
    assert record["current"]["members"] == ["a", "b", "c", "d", "e"] and record["old"]["members"] == [
        "a",
        "b",
        "c",
    ]
    assert (record["by"], record["reason"]) == ("alice", "grow <b>now</b>")
    # While joint the tighter configuration is shown: 3 of the 5 new members alive, need 3.
    assert (doc["alive"], doc["size"], doc["quorum"], doc["quorum_ok"]) == (3, 5, 3, True)
    assert [r["node"] for r in doc["refused"]] == ["intruder"]
    assert doc["config_agrees"] is False and "web.toml proposes members size = 1" in doc["config_problem"]
    kinds = {p["kind"] for p in doc["problems"]}
    assert {"not_a_member", "membership_mismatch"} <= kinds
    roles = {m["node"]: m["role"] for m in doc["members"]}
    assert roles == {"a": "member", "b": "member", "c": "member", "intruder": "refused"}

    assert 'id="membership" data-epoch="2" data-joint="yes"' in page
    assert 'id="membership-joint"' in page and "a, b, c, d, e (quorum 3 of 5)" in page
    assert 'id="refused"' in page and "intruder (epoch 2)" in page
    assert 'id="config-disagrees"' in page
    assert "grow &lt;b&gt;now&lt;/b&gt;" in page and "<b>now</b>" not in page

    # The change is in the audit, as pauses and triggers are, with who and why.
    with TestClient(app) as client:
        audit = client.get("/api/audit").json()["entries"]
        audit_page = client.get("/audit").text
    assert [(a["action"], a["by"]) for a in audit] == [("membership", "alice"), ("membership", "a")]
    assert (
        audit[0]["detail"].startswith("epoch 2: joint, old a, b, c")
        and "grow <b>now</b>" in audit[0]["detail"]
    )
    assert 'data-action="membership"' in audit_page and "(cluster)" in audit_page


def test_cluster_page_without_a_record_says_so(redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "wm0")
    config = Config(ClusterConfig(namespace="wm0", size=3), ())
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        doc = client.get("/api/cluster").json()
        page = client.get("/cluster").text
    assert doc["membership"] is None and doc["config_agrees"] is True
    assert 'id="membership-none"' in page
