"""A resume of a job that is not paused says so, on the web (JSON and page) and in the CLI.

Found by an operator: resuming a job someone had already resumed answered
``{"paused": false}`` and the page said "resumed by alice" — as if it had
ended a pause — while nothing changed and nothing was audited; ``quorum-cron
resume`` printed "resumed tick: active (resumed by bob ...)" to alice. The
store's contract is kept (a resume of a job not paused changes nothing and
writes no audit entry: a retry after a lost reply must not record a second
resume); the answer now tells the two cases apart and names who resumed it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from starlette.testclient import TestClient

from quorum_cron.commands.control import resume
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.base import AuditAction, JobControl, ObservedStore
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.actions import perform, said
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens

T0 = 1_800_000_000_000
TOKEN = "alice:correct-horse-battery-staple"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
CONFIG = Config(
    ClusterConfig(namespace="res", size=3), (JobSpec.create("tick", "@every 10s", command=("true",)),)
)


@pytest.fixture(params=["redis", "memory"])
def store(request: pytest.FixtureRequest) -> Iterator[ObservedStore]:
    """The same answers from Redis and from the memory model (the web face runs on either)."""
    now = [T0]
    if request.param == "memory":
        yield MemoryStore(lambda: now[0])
        return
    client: redis.Redis = request.getfixturevalue("redis_client")
    yield RedisStore(client, "res", clock=lambda: now[0])


def _web(store: ObservedStore) -> TestClient:
    return TestClient(create_app(WebContext(CONFIG, store, "redis://x/0", AdminTokens(env_value=TOKEN))))


def test_the_api_says_whether_a_resume_ended_a_pause(store: ObservedStore) -> None:
    with _web(store) as web:
        never = web.post("/api/jobs/tick/resume", headers=BEARER).json()
        store.pause("tick", "bob", "disk swap")
        ended = web.post("/api/jobs/tick/resume", headers=BEARER).json()
        again = web.post("/api/jobs/tick/resume", headers=BEARER)
    assert never == {
        "job": "tick",
        "action": "resume",
        "by": "alice",
        "paused": False,
        "was_paused": False,
        "control": {"paused": False, "by": "", "at_ms": 0, "reason": ""},
    }
    assert ended["was_paused"] is True and ended["control"]["by"] == "alice"
    assert again.status_code == 200  # (nothing to do is not an error: a script may resume twice)
    assert again.json()["was_paused"] is False
    assert again.json()["control"] == {"paused": False, "by": "alice", "at_ms": T0, "reason": ""}
    # Only the resume that ended the pause is in the audit: it is the job's pause history.
    assert [(a.action, a.by) for a in store.audit("tick", 10)] == [
        (AuditAction.RESUME, "alice"),
        (AuditAction.PAUSE, "bob"),
    ]


def test_the_page_says_the_job_was_not_paused(store: ObservedStore) -> None:
    origin = {"Origin": "http://testserver"}
    with _web(store) as web:
        assert web.post("/login", data={"token": TOKEN}, headers=origin).status_code == 200
        page = web.get("/jobs/tick").text
        marker = 'name="csrf" value="'
        csrf = page[page.index(marker) + len(marker) :].split('"', 1)[0]
        store.pause("tick", "bob", "disk swap")
        first = web.post("/jobs/tick/resume", data={"csrf": csrf}, headers=origin)
        second = web.post("/jobs/tick/resume", data={"csrf": csrf}, headers=origin)
    assert first.status_code == second.status_code == 200
    assert '<span id="done" class="message">resumed by alice</span>' in first.text
    assert (
        '<span id="done" class="message">not paused (resumed by alice at 2027-01-15 08:00:00.000Z): '
        "nothing to resume, nothing changed</span>"
    ) in second.text, second.text


class _ResumedMeanwhile(MemoryStore):
    """Bob resumes the job between the web's read of its pause state and its own resume."""

    def resume(self, job: str, by: str) -> JobControl:
        super().resume(job, "bob")
        return super().resume(job, by)


def test_a_resume_that_lost_the_race_names_who_resumed_it() -> None:
    store = _ResumedMeanwhile(lambda: T0)
    store.pause("tick", "carol", "migration")
    done = perform(store, "tick", "resume", "alice", "")
    assert done["was_paused"] is False and done["control"]["by"] == "bob"
    assert [(a.action, a.by) for a in store.audit("tick", 10)] == [
        (AuditAction.RESUME, "bob"),
        (AuditAction.PAUSE, "carol"),
    ]


class _SameByMeanwhile(RedisStore):
    """Another session of the *same* operator resumes the job just before this one's resume lands
    (two terminals, or a script retried), on real Redis."""

    def resume(self, job: str, by: str) -> JobControl:
        RedisStore.resume(self, job, by)
        return super().resume(job, by)


def test_two_sessions_resuming_as_the_same_operator_are_not_both_told_they_resumed(
    redis_client: redis.Redis,
) -> None:
    # (Told from a read before and the state after, both were: the state changed, and it named
    # alice. The store's answer now says whether this call ended the pause.)
    store = _SameByMeanwhile(redis_client, f"race-{uuid.uuid4().hex[:8]}", clock=lambda: T0)
    store.pause("tick", "carol", "migration")
    done = perform(store, "tick", "resume", "alice", "")
    assert done["was_paused"] is False and done["control"]["by"] == "alice", done
    assert [(a.action, a.by) for a in store.audit("tick", 10)] == [
        (AuditAction.RESUME, "alice"),
        (AuditAction.PAUSE, "carol"),
    ]
    # The pause answers the same way: the same pause again changed nothing.
    assert store.pause("tick", "carol", "again").changed and not store.pause("tick", "carol", "again").changed


def test_cli_resume_says_the_job_was_not_paused(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    namespace = f"res-{uuid.uuid4().hex[:8]}"
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[cluster]\nname = "{namespace}"\nsize = 1\nredis_url = "{redis_server.url}"\n\n'
        '[[jobs]]\nname = "tick"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )

    def run(by: str) -> str:
        res = CliRunner().invoke(resume, ["tick", "--config", str(cfg), "--by", by])
        assert res.exit_code == 0, res.output
        return res.stdout

    never = run("alice")
    store = RedisStore.from_url(redis_server.url, namespace)
    try:
        store.pause("tick", "bob", "disk swap")
        ended = run("alice")
        again = run("carol")
        audit = store.audit("tick", 10)
    finally:
        store.close()
    assert never == "tick is not paused: active (unchanged: nothing to resume)\n"
    assert ended.startswith("resumed tick: active (resumed by alice at ")
    assert again.startswith("tick is not paused: active (resumed by alice at "), again
    assert again.endswith(" (unchanged: nothing to resume)\n")
    assert [(a.action, a.by) for a in audit] == [(AuditAction.RESUME, "alice"), (AuditAction.PAUSE, "bob")]


def test_a_resume_or_pause_sent_again_after_a_lost_reply_still_says_it_changed_the_state(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # redis-py sends a call again when its reply is lost on the connection: the second run of the
    # same call (the same arguments, its id among them) finds nothing left to change. Told only
    # "did this run change it", the operator who ended the pause was told "not paused (unchanged)".
    import quorum_cron.store.redis_control as redis_control

    store = RedisStore(redis_client, f"lost-{uuid.uuid4().hex[:8]}", clock=lambda: T0)
    ids = iter(["call-0", "call-1", "call-1", "call-2", "call-3", "call-3", "call-4"])
    monkeypatch.setattr(redis_control, "_call_id", lambda: next(ids), raising=False)
    store.pause("tick", "carol", "migration")  # call-0
    first = store.resume("tick", "alice")  # call-1, whose reply is lost ...
    again = store.resume("tick", "alice")  # ... so redis-py runs call-1 again
    other = store.resume("tick", "alice")  # call-2: another session, after it
    assert (first.changed, again.changed, other.changed) == (True, True, False)
    paused, paused_again = store.pause("tick", "bob", "x"), store.pause("tick", "bob", "x")  # call-3 twice
    assert paused.changed and paused_again.changed and not store.pause("tick", "bob", "x").changed
    assert [(a.action, a.by) for a in store.audit("tick", 10)] == [
        (AuditAction.PAUSE, "bob"),
        (AuditAction.RESUME, "alice"),
        (AuditAction.PAUSE, "carol"),
    ]


def test_the_api_says_whether_a_pause_changed_anything(store: ObservedStore) -> None:
    # (It said "paused by alice" for the same pause again, which changed and audited nothing.)
    with _web(store) as web:
        first = web.post("/api/jobs/tick/pause", headers=BEARER, json={"reason": "disk swap"}).json()
        again = web.post("/api/jobs/tick/pause", headers=BEARER, json={"reason": "disk swap"}).json()
    assert (first["paused"], first["changed"], again["paused"], again["changed"]) == (True, True, True, False)
    assert said(again) == "already paused by alice: nothing changed" and said(first) == "paused by alice"
    assert [(a.action, a.by) for a in store.audit("tick", 10)] == [(AuditAction.PAUSE, "alice")]
