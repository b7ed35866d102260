"""The JSON API as a monitoring script meets it, against a real redis-server (the session's).

Each test is a defect found by polling a live dashboard in front of three
real agents and comparing the answers with docs/web.md, "JSON API": errors
are ``{"error": "one line"}`` with the documented status, a bad parameter is
a 400 (not a 503 "store unavailable"), and a field named ``*_ms`` is a
number. The app runs through Starlette's TestClient, the store on an
injected clock.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store import keys as store_keys
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens

T0 = 1_800_000_000_000
TOKEN = "alice:correct-horse-battery-staple"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _face(client: redis.Redis, tmp_path: Path) -> tuple[RedisStore, TestClient]:
    (tmp_path / "tokens").write_text(f"{TOKEN}\n")
    store = RedisStore(client, "api", clock=lambda: T0)
    job = JobSpec.create("tick", "@every 10s", command=("true",))
    config = Config(ClusterConfig(namespace="api", size=3), (job,))
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens(file=tmp_path / "tokens")))
    return store, TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/nothing", 404),
        ("GET", "/api/jobs/tick/slots/1/more", 404),
        ("GET", "/api/jobs/tick/trigger", 405),  # an action is a POST
        ("POST", "/api/cluster", 405),
        ("DELETE", "/api/jobs/tick", 405),
    ],
)
def test_an_unrouted_api_request_is_a_json_error(
    redis_client: redis.Redis, tmp_path: Path, method: str, path: str, status: int
) -> None:
    """``GET /api/nothing`` was a text/plain "Not Found" and ``GET /api/jobs/tick/trigger`` a
    text/plain "Method Not Allowed": a script reading ``.error`` of every non-2xx answer failed
    to parse them. Starlette's own 404 and 405 now take the API's form."""
    _, client = _face(redis_client, tmp_path)
    with client:
        answer = client.request(method, path, headers=AUTH)
    assert answer.status_code == status
    assert answer.headers["content-type"].startswith("application/json"), answer.text
    assert set(answer.json()) == {"error"} and path in answer.json()["error"]
    if status == 405:
        assert answer.headers["allow"]  # still says which methods the path takes


def test_an_unrouted_page_is_a_page(redis_client: redis.Redis, tmp_path: Path) -> None:
    _, client = _face(redis_client, tmp_path)
    with client:
        answer = client.get("/nothing")
    assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize(
    "reason", ["\ud800", "\x00", "bell\x07", "esc\x1b[31m", "tab\there", "line\u2028break"]
)
def test_a_pause_reason_that_is_not_printable_is_a_400_and_nothing_is_paused(
    redis_client: redis.Redis, tmp_path: Path, reason: str
) -> None:
    """``{"reason": "\\ud800"}`` (valid JSON: a lone surrogate) answered 503 "cannot pause ...
    through the store" — a store outage, for a bad parameter, after the token was accepted; a NUL
    or an ESC was stored as given, which ``quorum-cron pause --reason`` refuses."""
    store, client = _face(redis_client, tmp_path)
    body = json.dumps({"reason": reason})  # ASCII, the surrogate as \\ud800
    with client:
        answer = client.post("/api/jobs/tick/pause", headers=AUTH, content=body)
        assert answer.status_code == 400, answer.text
        assert "printable" in answer.json()["error"], answer.json()
        fine = client.post("/api/jobs/tick/pause", headers=AUTH, content=json.dumps({"reason": "disk full"}))
    assert fine.status_code == 200, fine.text
    assert store.control("tick").reason == "disk full"
    assert [a.detail for a in store.audit("tick", 10)] == ["disk full"]


def test_a_members_clock_offset_is_a_number_or_null(redis_client: redis.Redis, tmp_path: Path) -> None:
    """``clock_offset_ms`` came back as the heartbeat's string (``"-1.5"``): every other ``*_ms``
    field is a number, and ``quorum-cron status --format json`` gives this one as a number."""
    _, client = _face(redis_client, tmp_path)
    for node, offset in (("n1", "-1.5"), ("n2", "nan"), ("n3", "not a number")):
        info = {"host": "h", "clock_offset_ms": offset, "voting": "yes", "clock": "trusted"}
        entry = ["inc-" + node, str(T0), str(T0 + 60_000), json.dumps(info), 1]
        redis_client.hset(store_keys.members_key("api"), node, json.dumps(entry))
    with client:
        members = client.get("/api/cluster").json()["members"]
        page = client.get("/cluster")
    offsets = {m["node"]: m["clock_offset_ms"] for m in members}
    assert {m["role"] for m in members} == {"-"}  # no membership record in this store
    assert offsets == {"n1": -1.5, "n2": None, "n3": None}
    assert page.status_code == 200 and "None" not in page.text and "<td>-1.5</td>" in page.text


@pytest.mark.parametrize(
    "path",
    [
        "/api/jobs/tick?to=" + "9" * 5000,
        "/api/jobs/tick?page=" + "9" * 5000,
        "/api/jobs/tick?window=" + "9" * 5000 + "m",
        "/api/jobs/tick?window=" + "1m" * 5000,
        "/api/jobs?state=" + "x" * 20_000,
        "/api/jobs/" + "x" * 20_000,
        "/jobs/tick?to=" + "9" * 5000,
    ],
)
def test_a_huge_query_value_is_a_short_400_not_a_500(
    redis_client: redis.Redis, tmp_path: Path, path: str
) -> None:
    """``?to=`` or ``?window=`` with 5 000 digits was a 500 "internal error (ValueError)": int()
    refuses more than 4 300 digits. A long ``state`` or job name came back whole in the error,
    a 20 kB "one line"."""
    _, client = _face(redis_client, tmp_path)
    with client:
        answer = client.get(path)
    assert answer.status_code in (400, 404), answer.text[:200]
    if path.startswith("/api/"):  # (a page's log-in link carries the address it was asked for)
        assert set(answer.json()) == {"error"} and len(answer.text) < 1000, len(answer.text)


def test_every_member_field_from_a_heartbeat_is_bounded(redis_client: redis.Redis, tmp_path: Path) -> None:
    """A heartbeat whose ``voting`` or ``clock`` was 1 MB came back whole in /api/cluster (and on
    the page): ``host`` and the offset were cut at 4 000 characters, these two were not."""
    _, client = _face(redis_client, tmp_path)
    info = {"host": "h", "voting": "v" * 1_000_000, "clock": "c" * 1_000_000}
    entry = ["inc1", str(T0), str(T0 + 60_000), json.dumps(info), 1]
    redis_client.hset(store_keys.members_key("api"), "n1", json.dumps(entry))
    with client:
        answer = client.get("/api/cluster")
        page = client.get("/cluster")
    [member] = answer.json()["members"]
    assert len(member["voting"]) <= 4002 and len(member["clock"]) <= 4002
    assert len(answer.text) < 50_000 and page.status_code == 200 and len(page.text) < 50_000


@pytest.mark.parametrize(
    ("window", "why"),
    [
        ("600", "has no unit"),
        ("5 parsecs", "is not a duration"),
        ("1.5h", "is not a duration"),
        ("30s", "is out of range"),
        ("32d", "is out of range"),
        ("9" * 40, "is too long"),
    ],
)
def test_a_bad_window_says_what_a_url_may_carry(
    redis_client: redis.Redis, tmp_path: Path, window: str, why: str
) -> None:
    """``?window=5%20parsecs`` answered "expected e.g. '30s', ... or an integer number of seconds"
    (the config file's rule, where a TOML integer is seconds), and ``?window=600`` — that integer —
    was then refused for "a unit is required in strings". Every refusal now says what is accepted."""
    _, client = _face(redis_client, tmp_path)
    with client:
        answer = client.get("/api/jobs/tick", params={"window": window})
    error = answer.json()["error"]
    assert answer.status_code == 400 and why in error, error
    assert error.endswith("(expected a duration with its unit from 1m to 31d, e.g. 10m, 1h, 1d, 7d or 1h30m)")
    assert "integer number of seconds" not in error and "in strings" not in error
