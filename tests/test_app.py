"""The Python API: decorated jobs on three in-process nodes against a real redis-server."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest

from quorum_cron.app import App, JobContext
from quorum_cron.errors import ConfigError, ScheduleError
from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore


def test_three_apps_run_each_slot_once_and_hand_the_job_its_context(redis_server: EmbeddedRedis) -> None:
    runs: list[JobContext] = []
    lock = threading.Lock()
    apps = []
    for i in range(1, 4):
        app = App(
            namespace="app-test",
            size=3,
            redis_url=redis_server.url,
            node_id=f"a{i}",
            heartbeat="500ms",
            start_timeout="1s",
        )

        @app.cron("@every 1s", name="sync-job", starting_deadline="1s")
        def sync_job(ctx: JobContext) -> None:
            with lock:
                runs.append(ctx)

        @app.cron("@every 1s", name="async-job", starting_deadline="1s")
        async def async_job(ctx: JobContext) -> None:
            await asyncio.sleep(0)
            runs.append(ctx)

        apps.append(app)

    async def main() -> int:
        tasks = [asyncio.ensure_future(a.serve()) for a in apps]
        await asyncio.wait_for(asyncio.gather(*(a.ready() for a in apps)), 20)
        t0 = time.time_ns() // 1_000_000
        deadline = time.monotonic() + 30

        def enough() -> bool:
            return sum(1 for r in list(runs) if r.slot_ms > t0) >= 10

        while not enough():
            assert time.monotonic() < deadline, f"only {len(runs)} runs"
            await asyncio.sleep(0.1)
        for a in apps:
            a.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)
        return t0

    t0 = asyncio.run(main())
    per_slot = Counter((r.job, r.slot_ms) for r in runs)
    assert max(per_slot.values()) == 1, per_slot
    assert {r.node for r in runs} <= {"a1", "a2", "a3"}
    later = [r for r in runs if r.slot_ms > t0]
    assert {r.job for r in later} == {"sync-job", "async-job"}
    store = RedisStore.from_url(redis_server.url, "app-test")
    try:
        for job in ("sync-job", "async-job"):
            ledger = {e.fire_ms: e for e in store.ledger(job, 1000)}
            for r in (r for r in runs if r.job == job):
                entry = ledger[r.slot_ms]
                assert entry.state == SlotState.SUCCEEDED
                assert (entry.token, entry.executor) == (r.token, r.node)
                assert r.slot.timestamp() * 1000 == r.slot_ms
    finally:
        store.close()


def test_declarations_are_validated_where_they_enter() -> None:
    app = App(namespace="x", size=3, redis_url="redis://localhost:1/0", node_id="n")
    with pytest.raises(ScheduleError, match="invalid cron expression"):
        app.cron("*/0 * * * *")(lambda ctx: None)
    with pytest.raises(ConfigError, match="'twice' is not one of"):
        app.cron("* * * * *", name="a", delivery="twice")(lambda ctx: None)

    @app.cron("* * * * *", name="dup")
    def one(ctx: JobContext) -> None: ...

    with pytest.raises(ConfigError, match="declared twice"):
        app.cron("* * * * *", name="dup")(one)
    with pytest.raises(ConfigError, match="not a majority of size 3"):
        App(namespace="x", size=3, redis_url="redis://x", quorum=1)
    with pytest.raises(ConfigError, match="namespace"):
        App(size=3, redis_url="redis://x")
    with pytest.raises(ConfigError, match="unknown settings"):
        App(namespace="x", size=3, redis_url="redis://x", leese="3s")


def test_the_definition_hash_changes_with_the_definition() -> None:
    def job(ctx: JobContext) -> None: ...

    hashes = set()
    options: list[dict[str, str]] = [{}, {"timeout": "5m"}, {"delivery": "at-least-once"}]
    for kw in options:
        app = App(namespace="x", size=3, redis_url="redis://x", node_id="n")
        app.cron("* * * * *", name="j", **kw)(job)
        hashes.add(app.jobs["j"].spec_hash)
    assert len(hashes) == 3


def test_ntp_unreachable_defaults_as_in_the_config_file() -> None:
    """A node that lists NTP servers abstains while they are silent, as an agent with the same
    settings does; the App once kept voting on Redis TIME alone ("store-time" hard-coded)."""
    url = "redis://localhost:1/0"
    listed = App(namespace="x", size=1, redis_url=url, node_id="n", ntp_servers=("127.0.0.1:9",))
    assert listed.cluster.ntp_unreachable == "abstain"
    assert App(namespace="x", size=1, redis_url=url, node_id="n").cluster.ntp_unreachable == "store-time"
    chosen = App(
        namespace="x",
        size=1,
        redis_url=url,
        node_id="n",
        ntp_servers=("127.0.0.1:9",),
        ntp_unreachable="store-time",
    )
    assert chosen.cluster.ntp_unreachable == "store-time"
