"""The web face on the memory model: one page set (jobs, a job, the cluster, the audit), in process.

The web is typed on the store contract (``ObservedStore``), not on
``RedisStore``: these pages are served from a ``MemoryStore`` on an injected
clock, with no server at all, and show what the store holds — slots and
their outcomes, a pause and a trigger in the audit, members, the membership
record and an alert an agent kept in the journal.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from starlette.testclient import TestClient

from quorum_cron.agent.alerts import Alert, AlertJournal, AlertKind
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Configuration, VoteRequest, VoteStatus
from quorum_cron.store.memory import MemoryStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.live import Broadcaster
from quorum_cron.web.tokens import AdminTokens

T0 = 1_800_000_000_000  # a multiple of 10 s


def _world() -> tuple[MemoryStore, TestClient, list[int]]:
    now = [T0]
    store = MemoryStore(lambda: now[0])
    cluster = ClusterConfig(namespace="m", size=3)
    tick = JobSpec.create("tick", "@every 10s", command=("true",), overlap="allow")
    config = Config(cluster, (tick, JobSpec.create("other", "@every 1h", command=("true",))))
    store.init_membership(Configuration.of(("n1", "n2", "n3"), size=3, quorum=2), "n1")
    for node in ("n1", "n2"):
        store.heartbeat(node, "i-" + node, 60_000, {"voting": "yes", "clock": "trusted"}, epoch=1)
    record = store.membership()
    assert record is not None
    for fire, ok in ((T0 - 20_000, True), (T0 - 10_000, False)):
        now[0] = fire
        votes = [
            VoteRequest(
                "tick", fire, n, tick.spec_hash, 2, 250, 5_000, epoch=1, membership=record.record.encode()
            )
            for n in ("n1", "n2")
        ]
        [_, committed] = store.vote(votes)
        assert committed.status == VoteStatus.COMMITTED
        slot = committed.slot
        assert store.start("tick", fire, slot.executor, slot.token, 5_000).ok
        assert store.finish("tick", fire, slot.executor, slot.token, ok, "exit 0" if ok else "exit 3").ok
    now[0] = T0
    store.record_missed("other", T0 - 3_600_000, 60_000, "nobody voted: the cluster was down")
    store.pause("other", "alice", "maintenance <b>window</b>")
    store.trigger("tick", "bob")
    assert AlertJournal(store).write(
        Alert(AlertKind.SLOT_MISSED, "n2", "other missed a slot", {"job": "other"}, T0)
    )
    app = create_app(WebContext(config, store, "memory://", AdminTokens()))
    return store, TestClient(app), now


def test_the_pages_are_served_from_the_memory_model() -> None:
    store, client, _ = _world()
    with client:
        jobs, job, cluster, audit = (client.get(p) for p in ("/", "/jobs/tick", "/cluster", "/audit"))
        api = {p: client.get("/api" + p).json() for p in ("/jobs", "/jobs/tick", "/cluster", "/audit")}
    assert [r.status_code for r in (jobs, job, cluster, audit)] == [200, 200, 200, 200]
    # Jobs: the last outcome of each job, the pause, the filter counts.
    rows = {j["job"]: j for j in api["/jobs"]["jobs"]}
    assert rows["tick"]["last"]["state"] == "failed" and rows["tick"]["recent"] == ["succeeded", "failed"]
    assert rows["other"]["control"]["paused"] and rows["other"]["last"]["state"] == "missed"
    assert api["/jobs"]["counts"] == {"all": 2, "failed": 1, "missed": 1, "paused": 1}
    assert "maintenance &lt;b&gt;window&lt;/b&gt;" in jobs.text
    # A job: its ledger, the trigger in its timeline and audit.
    history = api["/jobs/tick"]["history"]["entries"]
    assert [(e["state"], e["delay_ms"]) for e in history] == [("failed", 0), ("succeeded", 0)]
    assert [a["action"] for a in api["/jobs/tick"]["audit"]] == ["trigger"]
    assert any(r["fire_ms"] == T0 for r in api["/jobs/tick"]["timeline"])
    # The cluster: members, the record's quorum, the stored alert, the problems seen now.
    doc = api["/cluster"]
    assert (doc["alive"], doc["quorum"], doc["quorum_ok"]) == (2, 2, True)
    assert [a["message"] for a in doc["alerts"]] == ["other missed a slot"] and doc["alerts_error"] == ""
    assert doc["alerts"][0]["id"] == store.alerts(1).alerts[0].id
    assert {p["kind"] for p in doc["problems"]} >= {"slot_failed", "slot_missed"}
    assert doc["store"]["url"] == "memory://" and 'data-kind="slot_missed"' in cluster.text
    # The audit: the operators' actions and the membership record, newest first.
    actions = [(e["action"], e["by"]) for e in api["/audit"]["entries"]]
    assert actions[:2] == [("trigger", "bob"), ("pause", "alice")] and ("membership", "n1") in actions


def test_a_slot_page_and_the_job_filter_on_the_memory_model() -> None:
    _, client, _ = _world()
    with client:
        slot = client.get(f"/api/jobs/tick/slots/{T0 - 20_000}").json()
        failed = client.get("/api/jobs?state=failed").json()
    assert slot["state"] == "succeeded" and slot["quorum"] == 2 and len(slot["votes"]) == 2
    assert [j["job"] for j in failed["jobs"]] == ["tick"]


def test_live_events_follow_the_memory_model() -> None:
    """The watcher's follow on the model: a new ledger entry and an operator action become events."""
    store, _, now = _world()
    # The model is single-threaded; the watcher reads on a worker thread: one at a time.
    lock = threading.Lock()
    follow = store.follow

    def locked_follow(*args: Any) -> Any:
        with lock:
            return follow(*args)

    store.follow = locked_follow  # type: ignore[method-assign]

    async def scenario() -> list[str]:
        watcher = Broadcaster(store, ["tick", "other"], members_every_s=60, namespace="m")
        queue = watcher.subscribe()
        try:
            await asyncio.wait_for(watcher.watching.wait(), 10)
            with lock:
                now[0] = T0 + 10_000
                store.record_missed("other", T0 - 7_200_000, 60_000, "nobody voted")
                store.resume("other", "carol")
            return [await asyncio.wait_for(queue.get(), 10) for _ in range(2)]
        finally:
            await watcher.close()

    events = asyncio.run(scenario())
    assert events[0].startswith("event: ledger\n") and '"job": "other"' in events[0]
    assert events[1].startswith("event: audit\n") and '"by": "carol"' in events[1]
