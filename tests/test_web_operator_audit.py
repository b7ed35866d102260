"""What an operator audit of the web face found, each over HTTP against a real redis-server.

History paging kept the timeline's window; a login goes back to the page it
was asked from (and never to another site); an action's confirmation cannot
be forged by a link; live-update streams are capped with a one-line 503;
jobs named ``.`` and ``..`` have reachable pages; the slot page says which
membership its quorum figures are; the live ``members`` event counts members
only; ``/favicon.ico`` is not a 404. The real-browser side of the dot names
and of the cap is ``test_web_browser_dots.py``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
import redis
import uvicorn
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Configuration
from quorum_cron.web import views
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.inputs import safe_next
from quorum_cron.web.live import Broadcaster
from quorum_cron.web.present import job_segment
from quorum_cron.web.server import listen
from quorum_cron.web.tokens import AdminTokens
from tests.test_web import T0, TOKEN, World, _await_event, _csrf

ORIGIN = {"Origin": "http://testserver"}


@pytest.fixture
def world(redis_client: redis.Redis, tmp_path: Path) -> World:
    """``test_web``'s world: one job's slots in known states, the app with admin tokens."""
    (tmp_path / "tokens").write_text(f"{TOKEN}\n")
    w = World(redis_client, tmp_path, AdminTokens(file=tmp_path / "tokens"))
    w.seed()
    return w


class _Links(HTMLParser):
    """Every ``<a>``'s attributes, and every ``<input>``'s, of a page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.links: list[dict[str, str]] = []
        self.inputs: list[dict[str, str]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("a", "input"):
            (self.links if tag == "a" else self.inputs).append({k: v or "" for k, v in attrs})


def _link(html: str, **attr: str) -> str:
    found = [a["href"] for a in _Links(html).links if all(a.get(k) == v for k, v in attr.items())]
    assert len(found) == 1, (attr, found)
    return found[0]


def _query(href: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query))


def _login(client: TestClient, next_: str = "") -> str:
    """Log in (with ``next``); the redirect's ``Location``."""
    r = client.post("/login", data={"token": TOKEN, "next": next_}, headers=ORIGIN, follow_redirects=False)
    assert r.status_code == 303, r.text
    return str(r.headers["location"])


class _Served:
    """The app served by uvicorn on a loopback port, on a thread (as the agent's ``--web-port``)."""

    def __init__(self, ctx: WebContext) -> None:
        self.app = create_app(ctx)
        sock = listen("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
        )
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        _until("the server to start", lambda: self.server.started)

    def stream(self) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", "/api/events")
        return conn, conn.getresponse()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _until(what: str, check: Callable[[], bool], timeout: float = 10) -> None:
    """Poll ``check`` (a fact another thread makes true); the deadline only bounds a failure."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


# --------------------------------------------------------------------------- 1. paging keeps the window


def test_history_paging_keeps_the_window_and_its_end(world: World) -> None:
    for k in range(1, 52):  # 54 entries with the seed's 3: two pages of 50
        world.run(T0 - 40_000 - k * 10_000, True, "ok")
    world.now = T0
    with TestClient(world.app) as client:
        page = client.get("/jobs/tick", params={"window": "1h", "to": str(T0 - 5_000), "page": "1"}).text
        first = client.get("/jobs/tick", params={"window": "1h"}).text
    newer, older = _query(_link(page, id="newer")), _query(_link(first, id="older"))
    assert newer == {"page": "0", "window": "1h", "to": str(T0 - 5_000)}
    assert older == {"page": "1", "window": "1h"}  # no `to` given: the window keeps ending now


def test_the_window_span_links_keep_an_earlier_end_and_follow_now_otherwise(world: World) -> None:
    world.now = T0
    with TestClient(world.app) as client:
        earlier = client.get("/jobs/tick", params={"window": "1h", "to": str(T0 - 3_600_000)}).text
        current = client.get("/jobs/tick", params={"window": "1h"}).text
    spans = [_query(a["href"]) for a in _Links(earlier).links if a.get("class") == "span"]
    assert [q["window"] for q in spans] == ["10m", "1h", "6h", "1d", "7d"]
    assert all(q["to"] == str(T0 - 3_600_000) for q in spans), spans  # (it jumped back to now)
    assert all("to" not in _query(a["href"]) for a in _Links(current).links if a.get("class") == "span")


# --------------------------------------------------------------------------- 2. login goes back


def test_login_goes_back_to_the_page_it_was_asked_from(world: World) -> None:
    with TestClient(world.app) as client:
        job_page = client.get("/jobs/tick", params={"window": "1h"}).text
        href = _link(job_page, id="login-link")
        assert _query(href) == {"next": "/jobs/tick?window=1h"}
        login_page = client.get(href).text
        [hidden] = [i for i in _Links(login_page).inputs if i.get("name") == "next"]
        assert hidden["value"] == "/jobs/tick?window=1h"
        assert _login(client, hidden["value"]) == "/jobs/tick?window=1h"
    with TestClient(world.app, root_path="/cron") as client:
        assert _login(client, "/jobs/tick?page=1") == "/cron/jobs/tick?page=1"


@pytest.mark.parametrize(
    "hostile",
    [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
        "\\\\evil.example",
        "/\\/evil.example",
        "javascript:alert(1)",
        "http:/evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        "evil.example",
        "/../../x",
        "/%2e%2e/x",
        "/login",
        "/ok#frag",
        "/jobs/t\u00e9",
        "/" + "a" * 2001,
        "",
    ],
)
def test_login_never_goes_to_another_site(world: World, hostile: str) -> None:
    assert safe_next(hostile) == "/"
    with TestClient(world.app) as client:
        assert _login(client, hostile) == "/"
        [hidden] = [
            i
            for i in _Links(client.get("/login", params={"next": hostile}).text).inputs
            if i["name"] == "next"
        ]
        assert hidden["value"] == "/"


# --------------------------------------------------------------------------- 3. unforgeable confirmation


def test_a_link_cannot_claim_an_action_was_done(world: World) -> None:
    with TestClient(world.app) as client:
        forged = client.get("/jobs/tick", params={"done": "trigger"}).text
        assert 'id="done"' not in forged and "trigger: done" not in forged
        _login(client)
        assert 'id="done"' not in client.get("/jobs/tick", params={"done": "trigger"}).text
        csrf = _csrf(client.get("/jobs/tick").text)
        acted = client.post("/jobs/tick/trigger", data={"csrf": csrf}, headers=ORIGIN)
        [fired] = world.store.triggers("tick", 0)
        assert acted.url.path == "/jobs/tick" and not acted.url.query
        assert f'id="done" class="message">triggered by alice: slot {views.fmt_ms(fired)}<' in acted.text
        assert 'id="done"' not in client.get("/jobs/tick").text  # said once
    with TestClient(world.app) as client:
        _login(client)
        csrf = _csrf(client.get("/jobs/tick").text)
        client.post(
            "/jobs/tick/pause", data={"csrf": csrf, "reason": "x"}, headers=ORIGIN, follow_redirects=False
        )
        # On that job's page only, and not taken by a page's live refresh (which replaces no header).
        assert 'id="done"' not in client.get("/jobs/other").text
        assert 'id="done"' not in client.get("/jobs/tick", params={"fragment": "1"}).text
        shown = client.get("/jobs/tick").text
        assert 'id="done" class="message">paused by alice<' in shown
        assert 'id="done"' not in client.get("/jobs/tick").text
        # A paused job's trigger is taken, and its slot will end skipped: the confirmation says so.
        acted = client.post("/jobs/tick/trigger", data={"csrf": csrf}, headers=ORIGIN)
        assert "(the job is paused: this slot will be recorded skipped)</" in acted.text


# --------------------------------------------------------------------------- 4. capped live streams


@pytest.fixture
def capped(world: World) -> Iterator[_Served]:
    served = _Served(WebContext(world.config, world.store, "redis://x/0", AdminTokens(), max_event_streams=2))
    try:
        yield served
    finally:
        served.stop()


def test_live_streams_past_the_cap_get_a_one_line_503(capped: _Served) -> None:
    opened = [capped.stream() for _ in range(2)]
    try:
        for _, resp in opened:
            assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
            assert resp.readline() == b"retry: 2000\n"
        conn, refused = capped.stream()
        body = json.loads(refused.read())
        conn.close()
        assert refused.status == 503 and refused.getheader("retry-after") == "30"
        assert list(body) == ["error"] and "\n" not in body["error"]
        assert "2 live-update streams are open, this server's limit" in body["error"]
        # A page that goes away gives its stream back.
        opened.pop()[0].close()
        broadcaster: Broadcaster = capped.app.state.broadcaster
        _until("the closed stream to be given back", lambda: broadcaster.subscribers == 1)
        opened.append(capped.stream())
        assert opened[-1][1].status == 200
    finally:
        for conn, _ in opened:
            conn.close()


# --------------------------------------------------------------------------- 5. jobs named . and ..


@pytest.fixture
def dots(redis_client: redis.Redis, tmp_path: Path) -> World:
    (tmp_path / "tokens").write_text(f"{TOKEN}\n")
    w = World(redis_client, tmp_path, AdminTokens(file=tmp_path / "tokens"))
    jobs = (
        JobSpec.create(".", "@every 1h", command=("true",)),
        JobSpec.create("..", "@every 1h", command=("true",)),
    )
    w.config = Config(ClusterConfig(namespace="w", size=3), (w.tick, *jobs))
    w.app = create_app(WebContext(w.config, w.store, "redis://x/0", AdminTokens(file=tmp_path / "tokens")))
    return w


def test_jobs_named_dot_and_dot_dot_are_linked_so_that_a_browser_keeps_the_link(dots: World) -> None:
    assert job_segment("..") == "%252E%252E" and job_segment(".") == "%252E"
    assert job_segment("a.b") == "a.b" and job_segment("...") == "..."
    with TestClient(dots.app) as client:
        jobs = client.get("/").text
        hrefs = {a["href"] for a in _Links(jobs).links}
        assert {"/jobs/%252E", "/jobs/%252E%252E"} <= hrefs
        for name, seg in ((".", "%252E"), ("..", "%252E%252E")):
            page = client.get(f"/jobs/{seg}")
            assert page.status_code == 200 and f"<h1>{name}</h1>" in page.text
            assert client.get(f"/api/jobs/{seg}").json()["job"] == name
            assert client.get(f"/jobs/{seg}/slots/{T0}").status_code == 200
            assert f'action="/jobs/{seg}/trigger"' in page.text
        _login(client)
        csrf = _csrf(client.get("/jobs/%252E%252E").text)
        acted = client.post(
            "/jobs/%252E%252E/trigger", data={"csrf": csrf}, headers=ORIGIN, follow_redirects=False
        )
        assert (
            acted.status_code == 303
            and urllib.parse.urlsplit(acted.headers["location"]).path == "/jobs/%252E%252E"
        )
    assert len(dots.store.triggers("..", 0)) == 1 and dots.store.triggers(".", 0) == []


def test_a_client_that_sends_dot_segments_as_they_are_reaches_the_job_too(dots: World) -> None:
    served = _Served(WebContext(dots.config, dots.store, "redis://x/0", AdminTokens()))
    try:
        for raw, name in (("/api/jobs/..", ".."), ("/api/jobs/%2E%2E", ".."), ("/api/jobs/.", ".")):
            conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
            conn.request("GET", raw)
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["job"] == name, raw
            conn.close()
    finally:
        served.stop()


# --------------------------------------------------------------------------- 6. the slot's membership


def test_the_slot_page_shows_the_membership_its_slot_was_decided_under(
    redis_client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = World(redis_client, tmp_path, AdminTokens())
    w.now = T0 - 60_000
    first = w.store.init_membership(Configuration.of(["n1", "n2", "n3"]), "n1")
    fire = T0 - 40_000
    w.run(fire, True, "ok")
    w.now = T0
    assert w.store.change_membership(
        first.record.epoch, Configuration.of(["n1", "n2", "n3", "n4", "n5"]), "alice", "grow"
    ).ok
    assert w.store.finish_membership(first.record.epoch + 1, "alice", "done", force=True).ok
    with TestClient(w.app) as client:
        doc = client.get(f"/api/jobs/tick/slots/{fire}").json()
        page = client.get(f"/jobs/tick/slots/{fire}").text
        assert (doc["quorum"], doc["size"], doc["membership_when"]) == (2, 3, "slot")
        assert doc["membership"] == "epoch 1: n1, n2, n3 (quorum 2 of 3)" and doc["decided_ms"] == fire + 10
        assert 'id="membership-then"' in page and "in force when the slot was decided" in page
        # The log no longer reaches back to the slot: the current record, said to be the current one.
        monkeypatch.setattr(views, "MEMBERSHIP_LOG_READ", 1)
        doc = client.get(f"/api/jobs/tick/slots/{fire}").json()
        page = client.get(f"/jobs/tick/slots/{fire}").text
    assert (doc["quorum"], doc["size"], doc["membership_when"]) == (3, 5, "now")
    assert doc["membership"].startswith("epoch 3: ") and doc["membership_changed_ms"] == T0
    assert 'id="membership-now"' in page and "<b>current</b> membership" in page


# --------------------------------------------------------------------------- 7. live members


def test_the_live_members_event_does_not_count_refused_nodes(world: World) -> None:
    world.store.init_membership(Configuration.of(["n1", "n2", "n3"]), "n1")

    async def scenario() -> list[dict[str, object]]:
        b = Broadcaster(world.store, ["tick"], members_every_s=0.1)
        queue = b.subscribe()
        try:
            await asyncio.wait_for(b.watching.wait(), 10)
            await asyncio.to_thread(world.store.heartbeat, "n1", "i-1", 30_000, {"voting": "yes"}, 1)
            joined = await _await_event(queue, "members")
            await asyncio.to_thread(world.store.heartbeat, "intruder", "i-x", 30_000, {"voting": "yes"}, 1)
            intruder = await _await_event(queue, "members")
            return [joined, intruder]
        finally:
            await b.close()

    joined, intruder = asyncio.run(scenario())
    assert joined == {"alive": 1, "voting": 1}
    assert intruder == {"alive": 1, "voting": 1}  # alive, but not a member: not counted


# --------------------------------------------------------------------------- 8. favicon


def test_favicon_is_not_a_404(world: World) -> None:
    with TestClient(world.app) as client:
        r = client.get("/favicon.ico")
        page = client.get("/").text
    assert r.status_code == 204 and not r.content and "max-age" in r.headers["cache-control"]
    assert '<link rel="icon" href="data:,">' in page
