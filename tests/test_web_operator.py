"""What a day-2 operator met on the dashboard, against a real redis-server (the session's).

Each test is one defect found by using the pages on a live cluster, with the
request that showed it: the app is driven through Starlette's TestClient.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens

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
