"""The dashboard names the members of the store's record with no live heartbeat, as ``status`` does.

``status`` says ``2 of 3 alive, need 2 (down: n2)`` and ``--json`` has ``down``
(``membership.down_members``); the Cluster page said only ``2 of 3 alive, need 2`` and
``/api/cluster`` had no ``down``: the operator had to work out from the nodes table who was
missing. Real redis-server; a node is alive while its heartbeat lasts, a stopped one sends none.
"""

from __future__ import annotations

import re
from typing import Any

import redis
from starlette.testclient import TestClient

from quorum_cron.config.membership import DOWN_SHOWN
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Configuration
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens


def _beat(store: RedisStore, node: str) -> None:
    assert store.heartbeat(node, f"inc-{node}", 30_000, {"voting": "yes"}, epoch=1).ok


def _read(store: RedisStore, ns: str, members: list[str]) -> tuple[dict[str, Any], str]:
    job = JobSpec.create("a", "@hourly", command=("true",))
    config = Config(ClusterConfig(namespace=ns, size=len(members), members=tuple(members)), (job,))
    with TestClient(create_app(WebContext(config, store, "redis://x/0", AdminTokens()))) as client:
        doc: dict[str, Any] = client.get("/api/cluster").json()
        page = client.get("/cluster").text
    health = re.search(r'<p id="health"[^>]*>(.*?)</p>', page, re.S)
    assert health is not None, page
    return doc, " ".join(health.group(1).split())


def test_the_members_without_a_heartbeat_are_named_and_a_stranger_is_not(redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "wdown1")
    store.init_membership(Configuration.of(["n1", "n2", "n3"]), "n1")
    for node in ("n1", "n3", "stranger"):  # (the stranger: live, not a member: refused, not down)
        _beat(store, node)
    doc, health = _read(store, "wdown1", ["n1", "n2", "n3"])
    assert doc["down"] == ["n2"]
    assert health == "2 of 3 alive, need 2 (down: n2)", health


def test_quorum_lost_names_who_is_down_and_many_make_one_line(redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "wdown2")
    store.init_membership(Configuration.of(["n1", "n2", "n3"]), "n1")
    _beat(store, "n1")
    doc, _ = _read(store, "wdown2", ["n1", "n2", "n3"])
    lost = [p["message"] for p in doc["problems"] if p["kind"] == "quorum_lost"]
    assert lost == ["quorum lost: 1 of 3 alive, need 2 (down: n2, n3)"]

    many = [f"m{i:02}" for i in range(DOWN_SHOWN + 3)]
    store = RedisStore(redis_client, "wdown3")
    store.init_membership(Configuration.of(many), "m00")
    _beat(store, "m00")
    doc, health = _read(store, "wdown3", many)
    assert doc["down"] == many[1:]  # (the JSON lists them all)
    named = ", ".join(many[1 : DOWN_SHOWN + 1])
    assert health.startswith(f"1 of 13 alive, need 7 (down: {named} and 2 more)"), health
