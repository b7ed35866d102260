"""The dashboard isolates a corrupt job (issue 26 item 9), on a real Redis.

A job whose keys hold the wrong type (a ledger that is not a stream, an
audit stream that is a string) or whose pause field is corrupt must not
take the other jobs, the cluster or the audit pages down: they answer 200
and name the corrupt job's key; the corrupt job's own page answers too,
showing what it can read and naming what it cannot.
"""

from __future__ import annotations

import asyncio

import redis
from starlette.testclient import TestClient

from quorum_cron.core.model import VoteRequest
from quorum_cron.store import keys as store_keys
from quorum_cron.web.live import Broadcaster
from tests.test_web import T0, World, _await_event, world  # noqa: F401  (the fixture)

PAGES = ("/", "/api/jobs", "/cluster", "/api/cluster", "/audit", "/api/audit", "/jobs/tick", "/api/jobs/tick")


def _key(suffix: str) -> str:
    return store_keys.job_prefix("w", "other") + suffix


def test_a_wrong_type_ledger_leaves_every_other_page_up_and_is_named(
    world: World,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    redis_client.delete(_key(store_keys.LEDGER))
    redis_client.set(_key(store_keys.LEDGER), "not a stream")
    redis_client.delete(_key(store_keys.AUDIT))
    redis_client.set(_key(store_keys.AUDIT), "not a stream either")
    with TestClient(world.app) as client:
        for path in PAGES:
            assert client.get(path).status_code == 200, path
        jobs = {j["job"]: j for j in client.get("/api/jobs").json()["jobs"]}
        assert jobs["tick"]["corrupt"] == "" and jobs["tick"]["last"] is not None  # the other job, in full
        assert jobs["other"]["corrupt"].startswith(f"key {_key('ledger')} is corrupt"), jobs["other"]
        assert "WRONGTYPE" in jobs["other"]["corrupt"]
        failed = client.get("/api/jobs?state=failed").json()["jobs"]
        assert "other" in [j["job"] for j in failed]
        assert "corrupt" in client.get("/").text and _key("ledger") in client.get("/").text
        problems = client.get("/api/cluster").json()["problems"]
        corrupt = [p for p in problems if p["kind"] == "corrupt"]
        assert [p["job"] for p in corrupt] == ["other"] and _key("ledger") in corrupt[0]["message"]
        assert any(p["kind"] == "slot_failed" and p["job"] == "tick" for p in problems)  # the rest still read
        audit = client.get("/api/audit").json()
        assert [c["job"] for c in audit["corrupt"]] == ["other"] and _key("audit") in audit["corrupt"][0][
            "message"
        ]
        assert _key("audit") in client.get("/audit").text
        # The job's own page: what it can read is shown, each unreadable key named.
        own = client.get("/api/jobs/other")
        assert own.status_code == 200
        named = own.json()["corrupt"]
        assert any(_key("ledger") in c for c in named) and any(_key("audit") in c for c in named), named
        assert _key("ledger") in client.get("/jobs/other").text


def test_a_corrupt_pause_field_is_named_on_the_jobs_own_page_and_the_others_stay_up(
    world: World,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    redis_client.hset(_key(store_keys.META), mapping={"p": "1", "pa": "yesterday"})
    with TestClient(world.app) as client:
        for path in PAGES:
            assert client.get(path).status_code == 200, path
        own = client.get("/api/jobs/other")
        assert own.status_code == 200
        (line,) = own.json()["corrupt"]
        assert line.startswith(f"key {_key('meta')} is corrupt"), line
        assert client.get("/jobs/other").status_code == 200
        # The jobs list and the cluster page name it too (they showed it as running, not paused:
        # the cluster skips its slots), and it counts under the failed filter, as docs/web.md says.
        jobs = {j["job"]: j for j in client.get("/api/jobs").json()["jobs"]}
        assert jobs["other"]["corrupt"].startswith(f"key {_key('meta')} is corrupt"), jobs["other"]
        assert jobs["tick"]["corrupt"] == "" and jobs["tick"]["last"] is not None
        assert "other" in [j["job"] for j in client.get("/api/jobs?state=failed").json()["jobs"]]
        problems = client.get("/api/cluster").json()["problems"]
        assert [p["job"] for p in problems if p["kind"] == "corrupt"] == ["other"], problems


def test_a_wrong_type_meta_is_named_by_its_key(world: World, redis_client: redis.Redis) -> None:  # noqa: F811
    redis_client.delete(_key(store_keys.META))
    redis_client.set(_key(store_keys.META), "not a hash")
    with TestClient(world.app) as client:
        for path in PAGES:
            assert client.get(path).status_code == 200, path
        jobs = {j["job"]: j for j in client.get("/api/jobs").json()["jobs"]}
        assert jobs["other"]["corrupt"].startswith(f"key {_key('meta')} is corrupt"), jobs["other"]


def test_live_events_drop_a_corrupt_job_once_and_keep_reporting_the_others(
    world: World,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    redis_client.delete(_key(store_keys.LEDGER))
    redis_client.set(_key(store_keys.LEDGER), "not a stream")

    async def scenario() -> tuple[dict[str, object], dict[str, object], list[str]]:
        b = Broadcaster(world.store, ["tick", "other"], members_every_s=0.1)
        queue = b.subscribe()
        try:
            await asyncio.wait_for(b.watching.wait(), 10)
            corrupt = await _await_event(queue, "corrupt")
            await asyncio.to_thread(world.run, T0 + 10_000, True, "ok")
            ledger = await _await_event(queue, "ledger")
            rest = []
            while not queue.empty():
                rest.append(queue.get_nowait().split("\n")[0])
            return corrupt, ledger, rest
        finally:
            await b.close()

    corrupt, ledger, rest = asyncio.run(scenario())
    assert corrupt["job"] == "other" and str(corrupt["error"]).startswith("error reply: WRONGTYPE"), corrupt
    assert ledger == {"job": "tick", "slot_ms": T0 + 10_000, "state": "succeeded"}
    assert "event: store" not in rest and "event: corrupt" not in rest, rest


def test_a_time_no_date_holds_is_shown_in_ms_and_every_page_stays_up(
    world: World,  # noqa: F811
) -> None:
    """Times read from Redis are bounded to ±2^53 ms, far past year 9999: a slot of one job at such
    a time (written by anyone who may write the namespace) shows as ``<ms> ms``; no page fails."""
    far = 2**53 - 1
    world.now = far
    reqs = [
        VoteRequest("other", far - 1_000, n, world.other.spec_hash, 2, 250, world.other.starting_deadline_ms)
        for n in ("n1", "n2")
    ]
    world.store.vote(reqs)
    world.store.record_missed("other", far - 3_600_000, 30_000, "no quorum before the deadline")
    with TestClient(world.app) as client:
        for path in PAGES:
            assert client.get(path).status_code == 200, path
        assert f"{far - 3_600_000} ms" in client.get("/jobs/other").text


def test_a_corrupt_keys_line_says_the_key_and_the_stores_answer_once(
    world: World,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    """Every face of the dashboard says a corrupt key as ``key K is corrupt (...): <answer>``: not
    the store error's whole text, which named the store's URL and its operation ("redis at
    redis://127.0.0.1:P/0 failed ledger: WRONGTYPE ..."), nor a value read from Redis unmasked."""
    redis_client.delete(_key(store_keys.LEDGER))
    redis_client.set(_key(store_keys.LEDGER), "not a stream")
    redis_client.delete(_key(store_keys.AUDIT))
    redis_client.set(_key(store_keys.AUDIT), "not a stream either")
    wrongtype = "error reply: WRONGTYPE Operation against a key holding the wrong kind of value"
    ledger = f"key {_key('ledger')} is corrupt (not what quorum-cron writes): {wrongtype}"
    audit = f"key {_key('audit')} is corrupt (not what quorum-cron writes): {wrongtype}"
    with TestClient(world.app) as client:
        jobs = {j["job"]: j for j in client.get("/api/jobs").json()["jobs"]}
        assert jobs["other"]["corrupt"] == ledger
        problems = client.get("/api/cluster").json()["problems"]
        assert [p["message"] for p in problems if p["kind"] == "corrupt"] == [f"other: {ledger}"]
        assert client.get("/api/audit").json()["corrupt"] == [{"job": "other", "message": audit}]
        assert client.get("/api/jobs/other").json()["corrupt"] == [ledger, audit]
        page = client.get("/").text
        assert f'<div class="dim reason">{ledger}</div>' in page.replace("&#39;", "'")
        for text in (page, client.get("/jobs/other").text, client.get("/audit").text):
            assert "redis at" not in text and "failed ledger" not in text and "failed audit" not in text

    # A value read from Redis is quoted masked, as the store masks it (here a password in a URL);
    # an error without a separate answer (this one names no store) is quoted as it is.
    redis_client.delete(_key(store_keys.LEDGER), _key(store_keys.AUDIT))
    redis_client.hset(_key(store_keys.META), mapping={"p": "1", "pa": "redis://:hunter2@db:6379/0"})
    with TestClient(world.app) as client:
        (line,) = client.get("/api/jobs/other").json()["corrupt"]
        assert line == (
            f"key {_key('meta')} is corrupt (not what quorum-cron writes): "
            "pause state of other: at: 'redis://:***@db:6379/0' is not a decimal integer"
        )


def test_the_voters_line_names_a_corrupt_membership_log_and_the_stores_answer_once(
    world: World,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    """The job page says why its history's voters are unmarked (decided.accounts) with the
    membership log's key and the store's answer, not "redis at URL failed membership_log: ..."."""
    log = store_keys.membership_log_key("w")
    redis_client.delete(log)
    redis_client.set(log, "not a stream")
    with TestClient(world.app) as client:
        doc = client.get("/api/jobs/tick")
        assert doc.status_code == 200
        assert doc.json()["corrupt"] == [
            f"cannot tell which voters counted: key {log} is corrupt (not what quorum-cron writes): "
            "error reply: WRONGTYPE Operation against a key holding the wrong kind of value"
        ]
