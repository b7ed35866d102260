"""What a day-2 operator met on the dashboard, against a real redis-server (the session's).

Each test is one defect found by using the pages on a live cluster, with the
request that showed it: the app is driven through Starlette's TestClient.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store import keys as store_keys
from quorum_cron.store.base import SlotState, VoteRequest
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.recent import RecentLedger
from quorum_cron.web.tokens import AdminTokens
from quorum_cron.web.views import jobs_view
from tests.agent_cluster import OwnedRedis

T0 = 1_800_000_000_000


class Face:
    """A store on an injected clock, a config of one zoned cron job and one @every job, the app."""

    def __init__(self, client: redis.Redis, tokens: AdminTokens | None = None) -> None:
        self.now = T0
        self.store = RedisStore(client, "op", clock=lambda: self.now)
        self.berlin = JobSpec.create("berlin", "*/1 * * * *", timezone="Europe/Berlin", command=("true",))
        self.tick = JobSpec.create("tick", "@every 10s", command=("true",))
        self.config = Config(ClusterConfig(namespace="op", size=3), (self.berlin, self.tick))
        self.app = create_app(WebContext(self.config, self.store, "redis://x/0", tokens or AdminTokens()))


@pytest.fixture
def face(redis_client: redis.Redis) -> Iterator[Face]:
    yield Face(redis_client)


# --------------------------------------------------------------------------- far times


def test_a_time_past_what_a_calendar_holds_is_a_400_not_a_500(face: Face) -> None:
    """``/jobs/berlin?to=999999999999999`` and its slot page were bare "Internal Server Error" 500s:
    the zoned schedule's fire times were computed past year 9999 (ValueError)."""
    far = "999999999999999"
    with TestClient(face.app, raise_server_exceptions=False) as client:
        for path in (
            f"/api/jobs/berlin?to={far}",
            f"/api/jobs/berlin?to={far}&window=31d",
            "/api/jobs/berlin?to=253402300799999&window=1m",
            f"/api/jobs/berlin/slots/{far}",
        ):
            r = client.get(path)
            assert r.status_code == 400, (path, r.status_code, r.text[:200])
            assert "\n" not in r.json()["error"], path
        page = client.get(f"/jobs/berlin?to={far}")
        assert page.status_code == 400 and 'id="message"' in page.text
        # Every time up to the bound still works, for either kind of schedule.
        for job in ("berlin", "tick"):
            assert client.get(f"/api/jobs/{job}?to=100000000000000&window=1h").status_code == 200
            assert client.get(f"/api/jobs/{job}/slots/100000000000000").status_code == 200


def test_an_unexpected_error_is_one_line_in_the_pages_own_form(face: Face) -> None:
    """A bug must not show as Starlette's bare text 500: JSON under /api/, the message page elsewhere."""

    def broken() -> int:
        raise RuntimeError("boom with a secret redis://:hunter2@host")

    face.store.time_ms = broken  # type: ignore[method-assign]
    with TestClient(face.app, raise_server_exceptions=False) as client:
        api = client.get("/api/jobs")
        page = client.get("/cluster")
    assert api.status_code == 500 and api.json() == {
        "error": "internal error (RuntimeError): see the server's log"
    }
    assert page.status_code == 500 and "internal error (RuntimeError)" in page.text
    assert "hunter2" not in api.text + page.text


# --------------------------------------------------------------------------- the token file at runtime

TOKEN = "alice:correct-horse-battery-staple"


def test_a_token_file_broken_while_serving_is_said_not_taken_for_a_wrong_token(
    redis_client: redis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator appends ``bob:short`` to the token file: every login and API call was refused
    as "not a current admin token", and nothing anywhere said the file no longer parsed."""
    file = tmp_path / "tokens"
    file.write_text(f"{TOKEN}\n")
    face = Face(redis_client, AdminTokens(file=file))
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    origin = {"Origin": "http://testserver"}
    with TestClient(face.app) as client:
        assert client.post("/login", data={"token": TOKEN}, headers=origin).status_code == 200
        file.write_text(f"{TOKEN}\nbob:short\n")
        with caplog.at_level(logging.WARNING, logger="quorum_cron.web.tokens"):
            api = client.post("/api/jobs/tick/trigger", headers=bearer)
            login = client.post("/login", data={"token": TOKEN}, headers=origin)
            page = client.post("/jobs/tick/trigger", data={"csrf": "x"}, headers=origin)
        for refused in (api.json()["error"], login.text, page.text):
            assert "cannot read its admin tokens" in refused, refused[:300]
            assert "not a current admin token" not in refused
            assert str(file) not in refused  # the file and line are for the server's log
        assert api.status_code == login.status_code == page.status_code == 403
        logged = [r.getMessage() for r in caplog.records if r.name == "quorum_cron.web.tokens"]
        assert len(logged) == 1, logged  # once per problem, not once per request
        assert f"{file}:2" in logged[0] and "bob:short" not in logged[0]
        assert face.store.audit("tick", 10) == []
        # Fixed: accepted again at once, and the log says so.
        file.write_text(f"{TOKEN}\n")
        with caplog.at_level(logging.WARNING, logger="quorum_cron.web.tokens"):
            assert client.post("/api/jobs/tick/trigger", headers=bearer).status_code == 200
        assert any("read again: alice" in r.getMessage() for r in caplog.records)
        wrong = client.post("/login", data={"token": "alice:not-the-secret-at-all"}, headers=origin)
        assert wrong.status_code == 403 and "not a current admin token" in wrong.text


# --------------------------------------------------------------------------- a ledger that went away


def _ran(store: RedisStore, spec: JobSpec, fire: int, ok: bool, clock: list[int]) -> None:
    """One slot voted by three nodes, started and finished through the store, as a cluster does."""
    clock[0] = fire + 10
    store.vote(
        [VoteRequest(spec.name, fire, n, spec.spec_hash, 2, 250, spec.starting_deadline_ms) for n in NODES]
    )
    slot = store.slot(spec.name, fire)
    clock[0] = fire + 40
    assert store.start(spec.name, fire, slot.executor, slot.token, 5000).ok
    clock[0] = fire + 900
    assert store.finish(spec.name, fire, slot.executor, slot.token, ok, "exit 0" if ok else "exit 3").ok


NODES = ("n1", "n2", "n3")


def test_outcomes_the_store_lost_in_a_restart_are_not_shown_after_it(tmp_path: Path) -> None:
    """Redis restarted without persistence: the jobs page kept showing the old ledger's outcomes
    (and the cluster page its failures as recent problems) for as long as the server ran, while
    ``quorum-cron history`` showed the new, short ledger."""
    owned = OwnedRedis(tmp_path)
    owned.start()
    clock = [T0]
    client = redis.Redis(port=owned.port, socket_timeout=2)
    try:
        store = RedisStore(client, "op", clock=lambda: clock[0])
        tick = JobSpec.create("tick", "@every 10s", command=("true",))
        config = Config(ClusterConfig(namespace="op", size=3), (tick,))
        app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
        for k in range(3):
            _ran(store, tick, T0 - 60_000 + 10_000 * k, False, clock)
        with TestClient(app, raise_server_exceptions=False) as web:
            before = web.get("/api/jobs").json()["jobs"][0]
            assert before["recent"] == ["failed"] * 3
            owned.kill()
            assert web.get("/api/jobs").status_code == 503
            owned.start()  # empty: nothing was persisted
            _ran(store, tick, T0, True, clock)
            after = web.get("/api/jobs").json()["jobs"][0]
            problems = web.get("/api/cluster").json()["problems"]
        assert [e.state for e in store.ledger("tick", 10)] == [SlotState.SUCCEEDED]  # what history shows
        assert after["recent"] == ["succeeded"], after["recent"]
        assert after["last"]["slot_ms"] == T0
        assert not [p for p in problems if p["kind"] == "slot_failed"], problems
    finally:
        client.close()
        owned.kill()


def test_a_deleted_ledger_stops_being_shown_within_the_kept_entries_max_age(
    face: Face, redis_client: redis.Redis
) -> None:
    """A ledger deleted while the store kept answering (no outage to notice): what was kept of it
    is read afresh at least every ``RecentLedger.MAX_AGE_S``."""
    clock = [T0]
    store = RedisStore(redis_client, "op", clock=lambda: clock[0])
    for k in range(2):
        _ran(store, face.tick, T0 - 60_000 + 10_000 * k, False, clock)
    now = [100.0]
    recent = RecentLedger(monotonic=lambda: now[0])
    assert jobs_view(store, face.config, "all", recent)["jobs"][1]["recent"] == ["failed", "failed"]
    redis_client.delete(store_keys.job_prefix("op", "tick") + store_keys.LEDGER)
    _ran(store, face.tick, T0, True, clock)
    now[0] += RecentLedger.MAX_AGE_S - 1  # still within: the cache may still hold the old entries
    jobs_view(store, face.config, "all", recent)
    now[0] += 1
    shown = jobs_view(store, face.config, "all", recent)["jobs"][1]
    assert shown["recent"] == ["succeeded"] and shown["last"]["slot_ms"] == T0
    assert shown == jobs_view(store, face.config, "all", RecentLedger())["jobs"][1]


# --------------------------------------------------------------------------- values from Redis


def test_a_huge_member_value_is_cut_like_every_free_text(face: Face, redis_client: redis.Redis) -> None:
    """A heartbeat with a 1 MB ``host`` made a 1.2 MB cluster page: the docs say free text from
    Redis is cut at 4 000 characters, but the host and clock offset were shown whole."""
    now = face.store.time_ms()
    info = {"host": "H" * 1_000_000, "clock_offset_ms": "9" * 200_000, "voting": "yes", "clock": "trusted"}
    entry = ["inc1", str(now), str(now + 60_000), json.dumps(info), 1]
    redis_client.hset(store_keys.members_key("op"), "n1", json.dumps(entry))
    with TestClient(face.app) as client:
        page = client.get("/cluster")
        [member] = client.get("/api/cluster").json()["members"]
    assert page.status_code == 200 and len(page.text) < 50_000, len(page.text)
    assert len(member["host"]) <= 4002 and member["clock_offset_ms"] is None  # not a sane number


def test_a_url_password_in_job_output_is_masked_as_in_the_alerts(face: Face) -> None:
    """A failed job printed ``redis://:topsecret@db``: the Cluster page's alert of that failure masked
    it, the job page, the slot page and their JSON (readable by anyone reaching the dashboard)
    showed it."""
    store = face.store
    face.now = T0 + 10
    store.vote([VoteRequest("tick", T0, n, face.tick.spec_hash, 2, 250, 10_000) for n in NODES])
    slot = store.slot("tick", T0)
    face.now = T0 + 40
    assert store.start("tick", T0, slot.executor, slot.token, 5000).ok
    face.now = T0 + 900
    output = "exit 3\n--- stdout ---\nconnecting to redis://:topsecret@db:6379/0?password=alsosecret"
    assert store.finish("tick", T0, slot.executor, slot.token, False, output).ok
    with TestClient(face.app) as client:
        shown = [
            client.get("/jobs/tick").text,
            client.get(f"/jobs/tick/slots/{T0}").text,
            client.get("/api/jobs/tick").text,
            client.get(f"/api/jobs/tick/slots/{T0}").text,
        ]
    for text in shown:
        assert "topsecret" not in text and "alsosecret" not in text
        assert "redis://:***@db:6379/0" in text
