"""What a day-2 operator met on the dashboard, against a real redis-server (the session's).

Each test is one defect found by using the pages on a live cluster, with the
request that showed it: the app is driven through Starlette's TestClient.
"""

from __future__ import annotations

from collections.abc import Iterator

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
