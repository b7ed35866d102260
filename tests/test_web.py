"""The web face in process: timeline rules, JSON API, escaping, tokens, sessions and CSRF, live events.

The app is driven through Starlette's TestClient against a real
redis-server (the session's), with a store on an injected clock so that
slot outcomes are exact; the real-browser test with real agents is
``test_web_browser.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from quorum_cron.agent.alerts import Alert, AlertHook, AlertJournal, AlertKind
from quorum_cron.agent.build import agent_settings
from quorum_cron.agent.runtime import Agent
from quorum_cron.config.schedule import Schedule
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.base import ALERTS_MAXLEN, SlotState, SlotView, SweepParams, VoteRequest
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.keys import alerts_key
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.rendezvous import pick_executor
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.live import Broadcaster
from quorum_cron.web.timeline import MAX_ROWS, dst_mark, timeline
from quorum_cron.web.tokens import AdminTokens

T0 = 1_800_000_000_000  # a multiple of 10 s
XSS = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'
TOKEN = "alice:correct-horse-battery-staple"


# --------------------------------------------------------------------------- timeline (pure)


@settings(max_examples=60, deadline=None)
@given(
    period_s=st.integers(1, 3600),
    span=st.integers(1, 3000),
    known=st.lists(st.integers(0, 3000), max_size=20),
    manual=st.lists(st.integers(1, 10**6), max_size=5),
)
def test_timeline_has_every_expected_slot_once_and_every_known_slot(
    period_s: int, span: int, known: list[int], manual: list[int]
) -> None:
    schedule = Schedule.parse(f"@every {period_s}s", job="j")
    period = period_s * 1000
    end = T0 + 1234
    start = end - span * period
    expected = list(schedule.fire_times(start, end))
    slots = [SlotView("j", expected[i], SlotState.SUCCEEDED) for i in known if i < len(expected)]
    manual_slots = [
        SlotView("j", start + m, SlotState.FAILED)
        for m in manual
        if start + m <= end and (start + m) % period
    ]
    rows, cut = timeline(schedule, [*slots, *manual_slots], start, end, end, 1000)
    fires = [r.fire_ms for r in rows if r.expected]
    if len(expected) <= MAX_ROWS:
        assert not cut
        assert fires == expected
    else:
        assert cut and fires == expected[-MAX_ROWS:]
    assert len(set(fires)) == len(fires)
    kept = set(fires)
    assert {r.fire_ms for r in rows if r.status == "succeeded"} == {s.fire_ms for s in slots} & kept
    assert {r.fire_ms for r in rows if not r.expected} == {
        s.fire_ms for s in manual_slots if not fires or s.fire_ms >= fires[0] or not cut
    }
    assert [r.fire_ms for r in rows] == sorted(r.fire_ms for r in rows)


def test_timeline_says_what_an_unknown_slot_is() -> None:
    schedule = Schedule.parse("@every 10s", job="j")
    rows, _ = timeline(schedule, [], T0 - 30_000, T0 + 10_000, now_ms=T0 + 2_000, deadline_ms=5_000)
    status = {r.fire_ms - T0: r.status for r in rows}
    assert status == {-20_000: "no record", -10_000: "no record", 0: "pending", 10_000: "upcoming"}


def test_dst_marks_the_gap_and_the_repeated_hour() -> None:
    spring = Schedule.parse("30 2 * * *", "Europe/Berlin", job="j")
    fires = list(spring.fire_times(1774742400000 - 86_400_000, 1774742400000 + 86_400_000))  # 2026-03-29
    marks = [dst_mark(t, "Europe/Berlin") for t in fires]
    assert marks.count("gap") == 1 and marks.count("") == len(fires) - 1
    autumn = Schedule.parse("30 2 * * *", "Europe/Berlin", job="j", dst="every")
    fires = list(autumn.fire_times(1792886400000 - 86_400_000, 1792886400000 + 86_400_000))  # 2026-10-25
    marks = [dst_mark(t, "Europe/Berlin") for t in fires]
    assert "repeat first" in marks and "repeat second" in marks
    assert dst_mark(T0, "UTC") == ""


# --------------------------------------------------------------------------- the app on real Redis


class World:
    """A store on an injected clock with one job's slots in known states, and the app over it."""

    def __init__(self, client: redis.Redis, tmp: Path, tokens: AdminTokens) -> None:
        self.now = T0
        self.store = RedisStore(client, "w", clock=lambda: self.now)
        cluster = ClusterConfig(namespace="w", size=3)
        self.tick = JobSpec.create("tick", "@every 10s", command=("true",), overlap="allow")
        self.other = JobSpec.create("other", "@every 1h", command=("true",))
        self.config = Config(cluster, (self.tick, self.other))
        self.token_file = tmp / "tokens"
        self.app = create_app(WebContext(self.config, self.store, "redis://x/0", tokens))

    def vote(self, fire: int, nodes: list[str]) -> None:
        reqs = [
            VoteRequest("tick", fire, n, self.tick.spec_hash, 2, 250, self.tick.starting_deadline_ms)
            for n in nodes
        ]
        self.store.vote(reqs)

    def run(self, fire: int, ok: bool, detail: str) -> SlotView:
        self.now = fire + 10
        self.vote(fire, ["n1", "n2", "n3"])
        slot = self.store.slot("tick", fire)
        assert slot.state == SlotState.COMMITTED
        self.now = fire + 40
        assert self.store.start("tick", fire, slot.executor, slot.token, 5000).ok
        self.now = fire + 900
        assert self.store.finish("tick", fire, slot.executor, slot.token, ok, detail).ok
        return self.store.slot("tick", fire)

    def seed(self) -> None:
        """T0-40s succeeded, T0-30s failed with XSS output, T0-20s missed (one vote), T0-10s no record."""
        self.run(T0 - 40_000, True, "exit 0")
        self.run(T0 - 30_000, False, f"exit 3; stdout: {XSS}")
        self.now = T0 - 20_000 + 10
        self.vote(T0 - 20_000, ["n1"])
        self.now = T0
        self.store.sweep([SweepParams("tick", self.tick.starting_deadline_ms, 1000)])


@pytest.fixture
def world(redis_client: redis.Redis, tmp_path: Path) -> Iterator[World]:
    (tmp_path / "tokens").write_text(f"# operators\n{TOKEN}\n")
    w = World(redis_client, tmp_path, AdminTokens(file=tmp_path / "tokens"))
    w.seed()
    yield w


def test_job_api_shows_expected_against_actual(world: World) -> None:
    with TestClient(world.app) as client:
        doc = client.get("/api/jobs/tick", params={"window": "1m"}).json()
    status = {r["fire_ms"] - T0: r["status"] for r in doc["timeline"]}
    assert status[-40_000] == "succeeded"
    assert status[-30_000] == "failed"
    assert status[-20_000] == "missed"
    assert status[-10_000] == "no record"
    assert status[0] == "pending"
    missed = next(r for r in doc["timeline"] if r["fire_ms"] == T0 - 20_000)
    assert "1 of 2" in missed["reason"] or "quorum" in missed["reason"], missed
    ran = next(r for r in doc["timeline"] if r["fire_ms"] == T0 - 40_000)
    assert ran["delay_ms"] == 40 and ran["runs"] == 1
    assert [e["state"] for e in doc["history"]["entries"]] == ["missed", "failed", "succeeded"]


def test_slot_api_names_voters_hashes_executor_and_token(world: World) -> None:
    fire = T0 - 40_000
    slot = world.store.slot("tick", fire)
    with TestClient(world.app) as client:
        doc = client.get(f"/api/jobs/tick/slots/{fire}").json()
    assert [v["node"] for v in doc["votes"]] == ["n1", "n2"]  # the third vote came after the commit
    assert all(v["agrees"] and v["spec_hash"] == world.tick.spec_hash for v in doc["votes"])
    assert doc["executor"] == slot.executor == pick_executor("tick", fire, ["n1", "n2"])
    assert doc["ranking"][0]["node"] == doc["executor"]
    assert doc["token"] == slot.token > 0
    assert doc["quorum"] == 2 and doc["state"] == "succeeded"


def test_everything_from_redis_is_escaped(world: World) -> None:
    fire = T0 - 30_000
    with TestClient(world.app) as client:
        pages = [client.get("/jobs/tick"), client.get(f"/jobs/tick/slots/{fire}"), client.get("/cluster")]
    for page in pages:
        assert page.status_code == 200
        assert "<script>document" not in page.text and "<img src=x" not in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;" in pages[1].text
    assert "slot_failed" in pages[2].text  # the failure is a recent problem on the cluster page


def test_jobs_filter_by_state(world: World) -> None:
    world.store.pause("other", "bob", "maintenance")
    with TestClient(world.app) as client:
        everything = client.get("/api/jobs").json()
        paused = client.get("/api/jobs", params={"state": "paused"}).json()
        missed = client.get("/api/jobs", params={"state": "missed"}).json()
        bad = client.get("/api/jobs", params={"state": "nope"})
    assert [j["job"] for j in everything["jobs"]] == ["tick", "other"]
    assert [j["job"] for j in paused["jobs"]] == ["other"]
    assert paused["jobs"][0]["control"] == {"paused": True, "by": "bob", "at_ms": T0, "reason": "maintenance"}
    assert [j["job"] for j in missed["jobs"]] == ["tick"]
    assert everything["jobs"][0]["recent"] == ["succeeded", "failed", "missed"]
    assert bad.status_code == 400 and "nope" in bad.json()["error"]


def test_bad_requests_get_one_line_errors(world: World) -> None:
    with TestClient(world.app) as client:
        assert client.get("/api/jobs/nope").status_code == 404
        assert client.get("/jobs/nope").status_code == 404
        # '²'.isdigit() is true and int('²') raised: a 500, not a one-line 400.
        bad = ({"window": "1s"}, {"window": "soon"}, {"page": "-1"}, {"to": "x"}, {"page": "²"}, {"to": "¹²"})
        for params in bad:
            r = client.get("/api/jobs/tick", params=params)
            assert r.status_code == 400 and "\n" not in r.json()["error"], params
        assert client.get("/api/jobs/tick/slots/abc").status_code == 400
        assert client.get("/api/jobs/tick/slots/²").status_code == 400


def test_read_only_server_refuses_every_action(redis_client: redis.Redis, tmp_path: Path) -> None:
    w = World(redis_client, tmp_path, AdminTokens())
    with TestClient(w.app) as client:
        api = client.post("/api/jobs/tick/trigger", headers={"Authorization": f"Bearer {TOKEN}"})
        page = client.post("/jobs/tick/pause", data={"reason": "x", "csrf": ""})
        login = client.post("/login", data={"token": TOKEN})
    assert api.status_code == page.status_code == login.status_code == 403
    assert "read-only" in api.json()["error"]
    assert w.store.audit("tick", 10) == [] and not w.store.control("tick").paused


def test_api_actions_need_a_current_token_and_are_audited_with_its_name(world: World) -> None:
    with TestClient(world.app) as client:
        for auth in (
            "",
            "Bearer alice:wrong-secret-xxxxxxxx",
            f"Basic {TOKEN}",
            "Bearer bob:correct-horse-battery-staple",
        ):
            r = client.post("/api/jobs/tick/trigger", headers={"Authorization": auth} if auth else {})
            assert r.status_code == 403, auth
        assert world.store.audit("tick", 10) == []
        ok = client.post("/api/jobs/tick/trigger", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
        assert ok.json()["by"] == "alice" and world.store.triggers("tick", 0) == [ok.json()["slot_ms"]]
        paused = client.post(
            "/api/jobs/tick/pause", headers={"Authorization": f"Bearer {TOKEN}"}, json={"reason": "disk full"}
        )
        assert paused.json()["paused"] is True
        world.token_file.write_text("# alice left\n")
        revoked = client.post("/api/jobs/tick/resume", headers={"Authorization": f"Bearer {TOKEN}"})
        assert revoked.status_code == 403
    audit = world.store.audit("tick", 10)
    assert [(a.action, a.by) for a in audit] == [("pause", "alice"), ("trigger", "alice")]
    assert world.store.control("tick").reason == "disk full"


def _csrf(html: str) -> str:
    marker = 'name="csrf" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


def test_page_actions_need_a_session_a_csrf_token_and_this_origin(world: World) -> None:
    origin = {"Origin": "http://testserver"}
    with TestClient(world.app) as client:
        refused = client.post("/jobs/tick/trigger", data={"csrf": "x"}, headers=origin)
        assert refused.status_code == 403
        # Its page logs in back to the job's page the form was on (it linked to the jobs list).
        assert 'href="/login?next=/jobs/tick"' in refused.text, refused.text
        bad = client.post("/login", data={"token": "alice:not-the-secret-at-all"}, headers=origin)
        assert bad.status_code == 403 and "not a current admin token" in bad.text
        foreign = client.post("/login", data={"token": TOKEN}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
        login = client.post("/login", data={"token": TOKEN}, headers=origin, follow_redirects=False)
        assert login.status_code == 303
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        csrf = _csrf(client.get("/jobs/tick").text)
        assert client.post("/jobs/tick/trigger", data={}, headers=origin).status_code == 403
        assert client.post("/jobs/tick/trigger", data={"csrf": csrf + "x"}, headers=origin).status_code == 403
        evil = client.post(
            "/jobs/tick/trigger", data={"csrf": csrf}, headers={"Origin": "http://evil.example"}
        )
        assert evil.status_code == 403
        assert world.store.audit("tick", 10) == []
        done = client.post("/jobs/tick/pause", data={"csrf": csrf, "reason": "deploy"}, headers=origin)
        assert done.status_code == 200 and done.url.path == "/jobs/tick"
        assert client.post("/jobs/tick/pause", data={"csrf": csrf, "reason": "a\nb"}).status_code == 400
    control = world.store.control("tick")
    assert control.paused and control.by == "alice" and control.reason == "deploy"


def test_live_events_report_ledger_and_audit_entries(world: World) -> None:
    async def scenario() -> list[str]:
        b = Broadcaster(world.store, ["tick", "other"], members_every_s=0.1)
        queue = b.subscribe()
        try:
            await asyncio.wait_for(b.watching.wait(), 10)
            await asyncio.to_thread(world.store.trigger, "other", "carol")
            await asyncio.to_thread(world.run, T0 + 10_000, True, "ok")
            got = [await asyncio.wait_for(queue.get(), 10) for _ in range(2)]
            return got
        finally:
            await b.close()

    # (One read covers every job's streams, and Redis answers a read's streams in the order it
    # named them, not the order they were written: two entries of one read may come either way.)
    events = sorted(asyncio.run(scenario()))
    kinds = [e.split("\n")[0] for e in events]
    assert kinds == ["event: audit", "event: ledger"]
    audit = json.loads(events[0].split("\n")[1].removeprefix("data: "))
    ledger = json.loads(events[1].split("\n")[1].removeprefix("data: "))
    assert audit["job"] == "other" and audit["action"] == "trigger" and audit["by"] == "carol"
    assert ledger == {"job": "tick", "slot_ms": T0 + 10_000, "state": "succeeded"}


async def _await_event(queue: asyncio.Queue[str], name: str, timeout: float = 10) -> dict[str, object]:
    """The data of the next ``event: name`` on ``queue`` (other events skipped), within ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise AssertionError(f"no 'event: {name}' within {timeout} s")
        try:
            text = await asyncio.wait_for(queue.get(), left)
        except TimeoutError:
            raise AssertionError(f"no 'event: {name}' within {timeout} s") from None
        head, data = text.split("\n")[:2]
        if head == f"event: {name}":
            doc: dict[str, object] = json.loads(data.removeprefix("data: "))
            return doc


def test_live_events_report_a_member_joining_and_its_heartbeat_expiring(world: World) -> None:
    async def scenario() -> list[dict[str, object]]:
        b = Broadcaster(world.store, ["tick", "other"], members_every_s=0.1)
        queue = b.subscribe()
        try:
            await asyncio.wait_for(b.watching.wait(), 10)
            # The watcher has read the (empty) member list once: what follows is a change.
            assert world.store.members() == []
            await asyncio.to_thread(world.store.heartbeat, "n9", "i-9", 5_000, {"voting": "yes"})
            joined = await _await_event(queue, "members")
            world.now += 6_000  # past the heartbeat's expiry on the store's (injected) clock
            expired = await _await_event(queue, "members")
            return [joined, expired]
        finally:
            await b.close()

    joined, expired = asyncio.run(scenario())
    assert joined == {"alive": 1, "voting": 1}
    assert expired == {"alive": 0, "voting": 0}


# --------------------------------------------------------------------------- stored alerts


def _raise_alerts(
    client: redis.Redis, namespace: str, *alerts: tuple[str, str, dict[str, object]]
) -> AlertHook:
    """Raise ``alerts`` through an agent's alert hook keeping them in the store, and flush."""
    hook = AlertHook("n1", journal=AlertJournal(RedisStore(client, namespace)))

    async def scenario() -> None:
        for kind, message, fields in alerts:
            hook.raise_(kind, message, **fields)
        await hook.aclose(flush_s=10)

    asyncio.run(scenario())
    return hook


def test_alerts_raised_by_the_agent_hook_appear_on_the_cluster_api_and_page(
    world: World, redis_client: redis.Redis
) -> None:
    secret_url = "redis://ops:s3cret-pw@db.internal:6379/0"
    hook = _raise_alerts(
        redis_client,
        "w",
        (AlertKind.STORE_UNAVAILABLE, f"store unreachable: Error 111 connecting to {secret_url}", {}),
        (AlertKind.BAD_VALUE, f"bad value in the store, ignored: slot: {XSS}", {"what": f"slot {XSS}"}),
        (AlertKind.QUORUM_LOST, "quorum lost: 1 of 3 alive, need 2", {"alive": 1, "url": secret_url}),
    )
    assert hook.journal is not None and hook.journal.written == 3 and hook.journal.failed == 0
    # Entries that no agent wrote: skipped and counted, never shown, never a failed page.
    key = alerts_key("w")
    redis_client.xadd(key, {"kind": "<b>x</b>", "node": "n2", "ts_ms": "1", "message": "m", "fields": "{}"})
    redis_client.xadd(key, {"kind": "quorum_lost", "node": "n2", "ts_ms": "1e300", "fields": "{}"})
    redis_client.xadd(key, {"kind": "quorum_lost", "node": "n2", "ts_ms": "1", "fields": "[" * 10_000})
    with TestClient(world.app) as client:
        api = client.get("/api/cluster")
        page = client.get("/cluster")
    assert api.status_code == page.status_code == 200
    doc = api.json()
    kinds = [a["kind"] for a in doc["alerts"]]
    assert kinds == [AlertKind.QUORUM_LOST, AlertKind.BAD_VALUE, AlertKind.STORE_UNAVAILABLE]  # newest first
    assert doc["alerts_skipped"] == 3 and doc["alerts_error"] == ""
    quorum_lost = doc["alerts"][0]
    assert quorum_lost["node"] == "n1" and quorum_lost["message"] == "quorum lost: 1 of 3 alive, need 2"
    assert quorum_lost["fields"] == {"alive": "1", "url": "redis://ops:***@db.internal:6379/0"}
    assert quorum_lost["at_ms"] == hook.sent[-1].ts_ms
    # No secret in the store, the API or the page; markup from an alert is text.
    stored = json.dumps([[str(v) for v in f.values()] for _, f in redis_client.xrange(key)])
    assert "s3cret-pw" not in stored and "s3cret-pw" not in api.text and "s3cret-pw" not in page.text
    assert XSS not in page.text and "&lt;script&gt;" in page.text
    assert page.text.count('<tr class="alert" ') == 3 and 'data-kind="quorum_lost"' in page.text


def test_an_alert_raised_by_a_real_agent_appears_on_the_cluster_api(redis_client: redis.Redis) -> None:
    """One agent of a 3-node cluster alone: it raises quorum_lost; the dashboard shows it."""
    cluster = ClusterConfig(namespace="ra", size=3, heartbeat_ms=100, lease_ms=1_000)
    config = Config(cluster, (JobSpec.create("tick", "@every 1h", command=("true",)),))
    store = RedisStore(redis_client, "ra")
    agent = Agent(agent_settings(cluster, "n1"), [], store)
    assert agent.alerts.journal is not None  # every agent on a RedisStore keeps its alerts there
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))

    async def scenario() -> dict[str, Any]:
        watcher = Broadcaster(store, ["tick"], members_every_s=0.1, namespace="ra")
        queue = watcher.subscribe()
        running = asyncio.create_task(agent.run())
        try:
            await asyncio.wait_for(watcher.watching.wait(), 10)
            for _ in range(len(vars(AlertKind))):  # each new alert is announced; quorum_lost among the first
                await _await_event(queue, "alerts", 15)
                doc: dict[str, Any] = await asyncio.to_thread(
                    lambda: TestClient(app).get("/api/cluster").json()
                )
                if any(a["kind"] == AlertKind.QUORUM_LOST for a in doc["alerts"]):
                    return doc
            raise AssertionError(f"no quorum_lost among the alerts stored: {agent.alerts.sent}")
        finally:
            agent.request_stop("test over")
            await asyncio.wait_for(running, 15)
            await watcher.close()

    doc = asyncio.run(scenario())
    [lost] = [a for a in doc["alerts"] if a["kind"] == AlertKind.QUORUM_LOST]
    assert lost["node"] == "n1" and lost["message"] == "quorum lost: 1 of 3 alive, need 2", lost
    assert lost["fields"] == {"alive": "1"}
    assert [a.kind for a in agent.alerts.sent if a.kind == AlertKind.QUORUM_LOST] == [AlertKind.QUORUM_LOST]


def test_the_alert_stream_stays_bounded(redis_client: redis.Redis) -> None:
    journal = AlertJournal(RedisStore(redis_client, "cap"))
    for i in range(3 * ALERTS_MAXLEN):
        assert journal.write(Alert(AlertKind.SLOT_MISSED, "n1", f"slot {i} missed", {"job": "j"}, i + 1))
    length = redis_client.xlen(alerts_key("cap"))
    # An exact MAXLEN: the stream keeps what the memory model's journal keeps.
    assert length == ALERTS_MAXLEN, length
    [(_, newest)] = redis_client.xrevrange(alerts_key("cap"), count=1)
    assert newest[b"message"] == f"slot {3 * ALERTS_MAXLEN - 1} missed".encode()


def test_an_unreachable_store_costs_the_alert_hook_one_log_line_and_no_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = redis.Redis.from_url(
        "redis://ops:s3cret@127.0.0.1:1/0", socket_connect_timeout=0.5, socket_timeout=0.5
    )
    hook = AlertHook("n1", journal=AlertJournal(RedisStore(dead, "w")))

    async def scenario() -> None:
        for i in range(5):
            hook.raise_(AlertKind.STORE_UNAVAILABLE, f"store unreachable ({i})")
        await asyncio.wait_for(hook.aclose(flush_s=10), 15)

    with caplog.at_level("WARNING"):
        asyncio.run(scenario())
    assert hook.journal is not None and hook.journal.failed == 5 and hook.journal.written == 0
    assert len(hook.sent) == 5  # raised (and logged) all the same
    kept = [r for r in caplog.records if "could not keep alert" in r.getMessage()]
    assert len(kept) == 1, [r.getMessage() for r in kept]
    assert "s3cret" not in caplog.text
    dead.close()


def test_the_cluster_page_hears_a_new_alert_live(world: World, redis_client: redis.Redis) -> None:
    async def scenario() -> dict[str, object]:
        b = Broadcaster(world.store, ["tick", "other"], members_every_s=0.1, namespace="w")
        queue = b.subscribe()
        try:
            await asyncio.wait_for(b.watching.wait(), 10)
            hook = AlertHook("n2", journal=AlertJournal(RedisStore(redis_client, "w")))
            hook.raise_(AlertKind.CLOCK_ABSTAIN, "clock offset 900 ms > max_skew 250 ms")
            await hook.aclose(flush_s=10)
            return await _await_event(queue, "alerts")
        finally:
            await b.close()

    event = asyncio.run(scenario())
    [(newest, _)] = redis_client.xrevrange(alerts_key("w"), count=1)
    assert event == {"id": newest.decode()}


def test_tokens_are_validated_where_they_enter(tmp_path: Path) -> None:
    from quorum_cron.errors import ConfigError

    for line in ("alice", "al ice:0123456789abcdef", "alice:short", ":0123456789abcdef"):
        (tmp_path / "t").write_text(line + "\n")
        with pytest.raises(ConfigError, match="admin token"):
            AdminTokens(file=tmp_path / "t").current()
    with pytest.raises(ConfigError, match="cannot read admin token file"):
        AdminTokens(file=tmp_path / "missing").current()


# --------------------------------------------------------------------------- the command


def _cli(*args: str, pre: str = "pass") -> subprocess.CompletedProcess[str]:
    code = f"import sys; {pre}; from quorum_cron.cli import main; sys.argv[0] = 'quorum-cron'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_web_command_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "w"\nsize = 1\nredis_url = "redis://127.0.0.1:1/0"\n')
    result = _cli("web", "--config", str(cfg), pre="sys.modules['starlette'] = None")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: the web dashboard needs starlette (not installed): "
        "expected the web extra, pip install 'quorum-cron[web]'"
    ]


def test_web_command_refuses_bad_values_in_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "w"\nsize = 1\nredis_url = "redis://127.0.0.1:1/0"\n')
    (tmp_path / "tok").write_text("alice:short\n")
    cases = [
        (["--bind", "nowhere"], "--bind 'nowhere' is not HOST:PORT"),
        (["--bind", "127.0.0.1:²"], "--bind '127.0.0.1:²' is not HOST:PORT"),
        (["--admin-token-file", str(tmp_path / "tok")], "secret has 5 characters"),
        (["--root-path", "cron"], "--root-path 'cron' is not a URL path"),
    ]
    for extra, words in cases:
        result = _cli("web", "--config", str(cfg), "--bind", "127.0.0.1:0", *extra)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1 and words in lines[0], (extra, result.stderr)


def test_ledger_tails_read_what_ledger_and_control_read_and_then_only_what_is_new(world: World) -> None:
    world.store.pause("other", "bob", "why")
    jobs = ["tick", "other", "never-configured"]
    for limit in (0, 1, 2, 50):
        got = world.store.ledger_tails(jobs, limit, {})
        want = [(world.store.ledger(j, limit), world.store.control(j)) for j in jobs]
        assert [(entries, control) for _, entries, control in got] == want, limit
    first = world.store.ledger_tails(jobs, 50, {})
    after = {j: newest for j, (newest, _, _) in zip(jobs, first, strict=True) if newest}
    assert world.store.ledger_tails(jobs, 50, after) == [(newest, [], c) for newest, _, c in first]
    world.run(T0 + 10_000, True, "ok")
    newest, new, _ = world.store.ledger_tails(["tick"], 50, after)[0]
    assert new == world.store.ledger("tick", 1) and newest != after["tick"]


def test_recent_ledger_cache_matches_a_fresh_read(world: World) -> None:
    from quorum_cron.web.views import SPARK, RecentLedger

    cache = RecentLedger()
    jobs = ["tick", "other"]
    for step in range(SPARK + 3):
        got = cache.read(world.store, jobs)
        fresh = RecentLedger().read(world.store, jobs)
        assert got == fresh, step
        assert [s for s in got[0][1]] == [str(e.state) for e in world.store.ledger("tick", SPARK)]
        world.run(T0 + 10_000 * (step + 1), step % 3 != 0, "x")


def test_cluster_api_names_the_store_without_its_password(world: World) -> None:
    with TestClient(world.app) as client:
        doc = client.get("/api/cluster").json()
    assert doc["store"]["url"] == "redis://x/0"
    assert doc["store"]["role"] == "master" and doc["store"]["redis_version"]
    assert doc["alive"] == 0 and doc["quorum_ok"] is False
    assert doc["problems"][0]["kind"] == "quorum_lost"
    assert {p["kind"] for p in doc["problems"]} >= {"slot_failed", "slot_missed"}


def test_an_unreachable_store_is_a_one_line_503(tmp_path: Path) -> None:
    store = RedisStore.from_url("redis://127.0.0.1:1/0", "w", socket_connect_timeout=0.5, socket_timeout=0.5)
    config = Config(
        ClusterConfig(namespace="w", size=3), (JobSpec.create("tick", "@every 10s", command=("true",)),)
    )
    app = create_app(WebContext(config, store, "redis://127.0.0.1:1/0", AdminTokens()))
    with TestClient(app) as client:
        api = client.get("/api/jobs")
        page = client.get("/jobs/tick")
    assert api.status_code == page.status_code == 503
    error = api.json()["error"]
    assert error.startswith("cannot read the store at redis://127.0.0.1:1/0") and "\n" not in error
    assert "cannot read the store" in page.text


def test_large_or_odd_bodies_are_refused_before_reading_them(world: World) -> None:
    with TestClient(world.app) as client:
        big = client.post(
            "/login",
            content=b"token=" + b"x" * 20_000,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        many = client.post("/login", content="&".join(f"f{i}=1" for i in range(30)))
        api = client.post(
            "/api/jobs/tick/pause", headers={"Authorization": f"Bearer {TOKEN}"}, content=b"{nope"
        )
    assert big.status_code == 413 and many.status_code == 400 and api.status_code == 400
    assert world.store.audit("tick", 10) == []


def test_job_timeline_marks_dst_and_manual_slots(redis_client: redis.Redis, tmp_path: Path) -> None:
    spring = 1774746000000  # 2026-03-29 01:00 UTC: Berlin jumps from 02:00 to 03:00
    job = JobSpec.create("berlin", "30 2 * * *", timezone="Europe/Berlin", command=("true",))
    config = Config(ClusterConfig(namespace="w", size=3), (job,))
    now = [spring + 86_400_000]
    store = RedisStore(redis_client, "w", clock=lambda: now[0])
    now[0] = spring + 5_000
    fire = store.trigger("berlin", "op")
    now[0] = spring + 86_400_000
    app = create_app(WebContext(config, store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        doc = client.get("/api/jobs/berlin", params={"window": "3d"}).json()
        html = client.get("/jobs/berlin", params={"window": "3d"}).text
    rows = {r["fire_ms"]: r for r in doc["timeline"]}
    assert rows[spring]["dst"] == "gap" and rows[spring]["expected"]  # 02:30 did not exist: fired at 03:00
    assert rows[fire]["expected"] is False and rows[fire]["status"] == "no record"
    assert "DST gap" in html and "manual" in html


def test_behind_a_proxy_prefix_every_link_and_the_cookie_carry_it(world: World) -> None:
    with TestClient(world.app, root_path="/cron") as client:
        page = client.get("/cron/jobs/tick")
        login = client.post(
            "/cron/login",
            data={"token": TOKEN},
            headers={"Origin": "http://testserver"},
            follow_redirects=False,
        )
    assert page.status_code == 200
    assert 'href="/cron/static/style.css"' in page.text and 'action="/cron/jobs/tick/trigger"' in page.text
    assert login.headers["location"] == "/cron/"
    assert "path=/cron" in login.headers["set-cookie"].lower()


def test_web_command_serves_warns_of_a_readable_token_file_and_stops_on_sigterm(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    url = redis_server.url
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[cluster]\nname = "w"\nsize = 1\nredis_url = "{url}"\n')
    tokens = tmp_path / "tok"
    tokens.write_text(f"{TOKEN}\n")
    tokens.chmod(0o644)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quorum_cron",
            "web",
            "--config",
            str(cfg),
            "--bind",
            "127.0.0.1:0",
            "--admin-token-file",
            str(tokens),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert proc.stderr is not None
        warning = proc.stderr.readline()
        serving = proc.stderr.readline()
        assert warning.startswith(f"warning: admin token file '{tokens}' can be read by other users")
        assert "serving http://127.0.0.1:" in serving and "(admin tokens: alice)" in serving
        assert url.replace("redis://", "") in serving
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_slot_page_finds_an_expired_slot_in_the_ledger(world: World, redis_client: redis.Redis) -> None:
    old = T0 - 40_000  # succeeded in seed(); then 200 newer runs
    for k in range(1, 201):
        world.run(T0 + 10_000 * k, True, "exit 0")
    redis_client.delete(f"qc:{{w:tick}}:slot:{old}")  # the slot record expired (retention)
    with TestClient(world.app) as client:
        doc = client.get(f"/api/jobs/tick/slots/{old}").json()
        made_up = client.get(f"/api/jobs/tick/slots/{old + 1}").json()
    assert doc["in_store"] is False and doc["state"] == "succeeded"
    assert [v["node"] for v in doc["votes"]] == ["n1", "n2"] and doc["token"] > 0
    assert made_up["state"] == "absent" and made_up["ledger"] == []
