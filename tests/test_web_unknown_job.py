"""An unknown job's 404 names it and the jobs this server knows, as ``trigger`` and ``history`` do.

``quorum-cron trigger nope`` says ``unknown job 'nope': expected one of tick, tock``; the
dashboard's ``/api/jobs/nope`` and ``/jobs/nope`` said only that the config defines 2 job(s),
leaving the reader to open the jobs page to find the name they meant. The names are bounded (a
config of thousands of jobs stays one line) and the name asked for, from the URL, is escaped.
Real redis-server.
"""

from __future__ import annotations

import redis
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.inputs import KNOWN_SHOWN
from quorum_cron.web.tokens import AdminTokens


def _client(redis_client: redis.Redis, names: list[str]) -> TestClient:
    jobs = tuple(JobSpec.create(name, "@hourly", command=("true",)) for name in names)
    config = Config(ClusterConfig(namespace="wunknown", size=1), jobs)
    store = RedisStore(redis_client, "wunknown")
    return TestClient(create_app(WebContext(config, store, "redis://x/0", AdminTokens())))


def test_the_404_names_the_job_asked_for_and_the_jobs_known(redis_client: redis.Redis) -> None:
    with _client(redis_client, ["tick", "tock"]) as client:
        api = client.get("/api/jobs/nope")
        page = client.get("/jobs/nope")
        slot = client.get("/api/jobs/nope/slots/1800000000000")
    said = "unknown job 'nope': expected one of tick, tock"
    assert (api.status_code, api.json()) == (404, {"error": said})
    assert page.status_code == 404 and "unknown job &#39;nope&#39;: expected one of tick, tock" in page.text
    assert (slot.status_code, slot.json()["error"]) == (404, said)


def test_many_jobs_make_one_bounded_line_and_the_name_asked_for_is_escaped(
    redis_client: redis.Redis,
) -> None:
    names = [f"job{i:02}" for i in range(KNOWN_SHOWN + 5)]
    with _client(redis_client, names) as client:
        error = client.get("/api/jobs/" + "%1B%5B2J" + "x" * 1000).json()["error"]
    assert "\x1b" not in error and error.startswith("unknown job '\\x1b[2Jxxx"), error[:80]
    assert error.endswith(f": expected one of {', '.join(names[:KNOWN_SHOWN])} and 5 more"), error
    assert len(error) < 500, len(error)
