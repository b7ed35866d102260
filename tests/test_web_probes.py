"""The web face during a store outage: its probes, and how fast a read answers 503.

Found by a monitoring integrator: ``/healthz`` answered ``ok`` while Redis
was down (there was no readiness answer at all), and every API call took
about 4 s to answer 503 while the store did not answer — redis-py retried a
timed-out command once more (and a connect inside it), so a stopped server
cost two read timeouts. Each test runs a real redis-server it kills or
stops (SIGSTOP: a server that holds connections and answers nothing).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from starlette.testclient import TestClient

from quorum_cron.agent.startup import open_node_store
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.connect import SOCKET_TIMEOUT_S
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.probes import READY_TIMEOUT_S
from quorum_cron.web.tokens import AdminTokens
from tests.agent_cluster import OwnedRedis, free_port

CLUSTER = ClusterConfig(namespace="probes", size=3)
CONFIG = Config(CLUSTER, (JobSpec.create("tick", "@every 10s", command=("true",)),))
TOKEN = "alice:correct-horse-battery-staple"


@pytest.fixture
def owned(tmp_path: Path) -> Iterator[OwnedRedis]:
    server = OwnedRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None:
            os.kill(server.proc.pid, signal.SIGCONT)  # (a stopped server is killed all the same)
        server.kill()


def _app(store: RedisStore, shown: str, tokens: AdminTokens | None = None) -> TestClient:
    return TestClient(create_app(WebContext(CONFIG, store, shown, tokens or AdminTokens())))


def test_healthz_is_liveness_and_readyz_says_whether_the_store_answers(owned: OwnedRedis) -> None:
    store, shown = open_node_store(owned.url, CLUSTER)  # as `quorum-cron web` opens it
    try:
        with _app(store, shown) as web:
            ready = web.get("/readyz")
            assert (ready.status_code, ready.text) == (200, f"ready: the store at {shown} answers")
            owned.kill()
            down = web.get("/readyz")
            live = web.get("/healthz")
            owned.start()  # the same port, empty
            back = web.get("/readyz")
    finally:
        store.close()
    # Liveness stays up through the outage: restarting the dashboard would not bring Redis back.
    assert (live.status_code, live.text) == (200, "ok")
    assert down.status_code == 503 and down.headers["cache-control"] == "no-store"
    assert down.text.startswith(f"not ready: cannot read the store at {shown}: unavailable: "), down.text
    assert "Connection refused" in down.text and "\n" not in down.text, down.text
    assert back.status_code == 200, back.text


def test_readyz_names_the_store_without_its_password(owned: OwnedRedis) -> None:
    owned.kill()  # its port is closed now
    url = f"redis://:s3cret-pw@127.0.0.1:{owned.port}/0"
    store, shown = open_node_store(url, CLUSTER)
    try:
        with _app(store, shown) as web:
            down = web.get("/readyz")
    finally:
        store.close()
    assert down.status_code == 503 and "s3cret-pw" not in down.text
    assert f"127.0.0.1:{owned.port}" in down.text and "***" in shown


def test_readyz_is_bounded_by_its_own_timeout_not_the_clients(owned: OwnedRedis) -> None:
    """A stopped server answers nothing. The client here waits 30 s for a reply (as redis-py's
    default would wait forever): the probe still answers at its own bound, with that bound as the
    reason — no timing is asserted, only which of the two bounds answered."""
    store = RedisStore.from_url(
        owned.url, "probes", socket_timeout=30, socket_connect_timeout=30, retry=Retry(NoBackoff(), 0)
    )
    assert owned.proc is not None
    try:
        with _app(store, owned.url) as web:
            assert web.get("/readyz").status_code == 200
            os.kill(owned.proc.pid, signal.SIGSTOP)
            hung = [web.get("/readyz") for _ in range(3)]  # the later ones share the first's question
            live = web.get("/healthz")
            owned.kill()  # (the question still in flight then fails at once: the socket closes)
    finally:
        store.close()
    for answer in hung:
        assert answer.status_code == 503
        assert answer.text == (
            f"not ready: the store at {owned.url} did not answer within {READY_TIMEOUT_S:g} s"
        ), answer.text
    assert live.status_code == 200


def test_a_closed_port_is_a_503_at_once(tmp_path: Path) -> None:
    """A refused connect on loopback returns at once (the kernel answers with a reset): with no
    backoff between tries, nothing in the path waits on a timeout, so the three calls below take
    milliseconds. The 2 s bound is there for a backoff or a timed wait coming back, which would
    cost at least a second per call; it is over a hundred times what the calls take."""
    port = free_port()
    store, shown = open_node_store(f"redis://127.0.0.1:{port}/0", CLUSTER)
    tokens = AdminTokens(env_value=TOKEN)
    try:
        with _app(store, shown, tokens) as web:
            began = time.monotonic()
            answers = [
                web.get("/api/jobs"),
                web.get("/api/jobs/tick"),
                web.post("/api/jobs/tick/resume", headers={"Authorization": f"Bearer {TOKEN}"}),
            ]
            took = time.monotonic() - began
    finally:
        store.close()
    assert [a.status_code for a in answers] == [503, 503, 503], [a.text for a in answers]
    assert took < 2.0, took


def test_the_web_store_client_retries_a_closed_connection_never_a_timeout(owned: OwnedRedis) -> None:
    """The 4 s: a command that timed out was sent once more (and its reconnect retried too), so a
    stopped server cost two read timeouts per call. Asserted on the client the web command opens:
    its retry policy, then a Redis restart (a pooled connection closed under it: retried, so the
    first read after the restart is a 200, not a 503)."""
    store, shown = open_node_store(owned.url, CLUSTER)
    try:
        client = store.client
        assert isinstance(client, redis.Redis)
        policy = client.connection_pool.connection_kwargs["retry"]
        tries = {"timeout": 0, "closed": 0}

        def fails(kind: str, error: Exception) -> None:
            tries[kind] += 1
            raise error

        with pytest.raises(redis.TimeoutError):
            policy.call_with_retry(lambda: fails("timeout", redis.TimeoutError("slow")), lambda _e: None)
        with pytest.raises(redis.ConnectionError):
            policy.call_with_retry(lambda: fails("closed", redis.ConnectionError("closed")), lambda _e: None)
        assert tries == {"timeout": 1, "closed": 2}
        assert client.connection_pool.connection_kwargs["socket_timeout"] == SOCKET_TIMEOUT_S

        with _app(store, shown) as web:
            assert web.get("/api/jobs").status_code == 200
            owned.kill()
            owned.start()
            after = web.get("/api/jobs")
    finally:
        store.close()
    assert after.status_code == 200, after.text


def test_a_stopped_store_still_gets_the_whole_read_timeout(owned: OwnedRedis) -> None:
    """What a merely slow store is given: a stopped server (its connections held, nothing answered)
    is a 503 only once the client's read timeout has passed, not before. (That it is not retried
    into a second timeout is asserted on the policy above: no upper bound on time here.)"""
    store, shown = open_node_store(owned.url, CLUSTER)
    assert owned.proc is not None
    try:
        with _app(store, shown) as web:
            assert web.get("/api/jobs").status_code == 200  # a pooled connection, as in service
            os.kill(owned.proc.pid, signal.SIGSTOP)
            began = time.monotonic()
            answer = web.get("/api/jobs")
            took = time.monotonic() - began
            owned.kill()
    finally:
        store.close()
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"].endswith(": unavailable: no reply within the socket timeout"), answer.text
    assert took >= SOCKET_TIMEOUT_S, took
