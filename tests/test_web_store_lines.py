"""The web face names a failing store once (its URL, password masked) and says what failed.

A page, an API call, an action, ``/readyz`` and the live stream's ``store`` event said the store
layer's own line: after "cannot read the store at redis://:***@h:p/0: " the address a second time
(without its user) and the internal operation ("redis at redis://h:p/0 unavailable during
ledgers: Error 111 connecting to h:p. Connection refused."), and for a refused password the
agent's "changed under a running agent?" (no agent runs in the dashboard). Each now reads as the
one-off commands do (store.connect.store_failure). Real servers: a port where nothing listens
(a bound socket that never listens: refused, and no one else can take the port), a
redis-server with a password, and a user the server denies some commands.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from quorum_cron.agent.startup import open_node_store
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.keys import alerts_key
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.live import Broadcaster
from quorum_cron.web.tokens import AdminTokens
from tests.store_lines import PASSWORD, locked_server, unlistened_port

CLUSTER = ClusterConfig(namespace="lines", size=3)
CONFIG = Config(CLUSTER, (JobSpec.create("tick", "@every 10s", command=("true",)),))
TOKEN = "alice:correct-horse-battery-staple"
REFUSED = (
    "the password or user was refused "
    "(wrong or disabled; expected the password, and user, of that server in the URL)"
)


@pytest.fixture
def refused_port() -> Iterator[int]:
    with unlistened_port() as port:
        yield port


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[EmbeddedRedis]:
    with locked_server() as server:
        yield server


def answers(url: str) -> dict[str, str]:
    """What each way of asking the dashboard says while ``url``'s store fails, and the shown URL."""
    store, shown = open_node_store(url, CLUSTER)
    try:
        with TestClient(create_app(WebContext(CONFIG, store, shown, AdminTokens(env_value=TOKEN)))) as web:
            api = web.get("/api/jobs")
            page = web.get("/jobs/tick")
            act = web.post("/api/jobs/tick/resume", headers={"Authorization": f"Bearer {TOKEN}"})
            ready = web.get("/readyz")
        event = asyncio.run(_store_event(Broadcaster(store, ["tick"], members_every_s=0.1)))
    finally:
        store.close()
    assert [a.status_code for a in (api, page, act, ready)] == [503] * 4
    return {
        "shown": shown,
        "api": api.json()["error"],
        "page": page.text,
        "act": act.json()["error"],
        "ready": ready.text,
        "event": event,
    }


async def _store_event(broadcaster: Broadcaster) -> str:
    queue = broadcaster.subscribe()
    try:
        while True:
            head, data = (await asyncio.wait_for(queue.get(), 10)).split("\n")[:2]
            if head == "event: store":
                doc = json.loads(data.removeprefix("data: "))
                assert doc["ok"] is False
                return str(doc["error"])
    finally:
        await broadcaster.close()


def check(said: dict[str, str], why: str) -> None:
    shown = said["shown"]
    assert said["api"] == f"cannot read the store at {shown}: {why}"
    assert f"cannot read the store at {shown}: {why}" in said["page"]
    assert said["act"] == f"cannot resume 'tick' through the store at {shown}: {why}"
    assert said["ready"] == f"not ready: cannot read the store at {shown}: {why}"
    assert said["event"] == why  # (the page names its store; the banner says what failed)
    assert all(PASSWORD not in text and "during" not in text for text in said.values())


def test_nothing_listening(refused_port: int) -> None:
    said = answers(f"redis://:{PASSWORD}@127.0.0.1:{refused_port}/0")
    assert said["shown"] == f"redis://:***@127.0.0.1:{refused_port}/0"
    check(said, "unavailable: Connection refused")


def test_a_refused_password(locked_redis: EmbeddedRedis) -> None:
    said = answers(f"redis://:wrong-{PASSWORD}@127.0.0.1:{locked_redis.port}/0")
    check(said, REFUSED)
    assert all("running agent" not in text for text in said.values())


def test_the_cluster_page_says_what_it_could_not_read(redis_server: EmbeddedRedis) -> None:
    """A user denied INFO, and an alerts key that is no stream: the page is shown, each part's
    failure said without the address its store row names already."""
    user, password = f"web-{uuid.uuid4().hex[:8]}", "pw-lines"
    cluster = ClusterConfig(namespace=user, size=3)
    admin = redis_server.client()
    admin.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "&*", "+@all", "-info")
    admin.set(alerts_key(user), "not a stream")
    try:
        store, shown = open_node_store(f"redis://{user}:{password}@127.0.0.1:{redis_server.port}/0", cluster)
        try:
            app = create_app(WebContext(Config(cluster, CONFIG.jobs), store, shown, AdminTokens()))
            with TestClient(app) as web:
                doc = web.get("/api/cluster").json()
        finally:
            store.close()
    finally:
        admin.delete(alerts_key(user))
        admin.execute_command("ACL", "DELUSER", user)
        admin.close()
    assert "store" in doc, doc
    assert doc["store"]["url"] == shown
    assert doc["store"]["error"].startswith("NOPERM "), doc["store"]
    assert doc["alerts_error"].startswith("error reply: WRONGTYPE "), doc["alerts_error"]
    for said in (doc["store"]["error"], doc["alerts_error"]):
        assert f"127.0.0.1:{redis_server.port}" not in said and "redis at" not in said, said
