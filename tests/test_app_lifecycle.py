"""The App's life cycle against a real redis-server: ready() never waits for ever, stop() before
the start calls it off, one serve() at a time, jobs declared before it, any event loop."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from quorum_cron.agent.membership import NodeIdTaken
from quorum_cron.app import App, AppStateError, JobContext
from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore


def _app(url: str, namespace: str, node: str = "n1") -> App:
    return App(
        namespace=namespace, size=1, redis_url=url, node_id=node, heartbeat="500ms", start_timeout="1s"
    )


def test_ready_raises_what_a_failed_serve_raised_and_after_a_stop(redis_server: EmbeddedRedis) -> None:
    """serve() refused after the agent was built (its node id held by a live node) once left
    ready() waiting for ever, as did ready() after a normal stop()."""
    first, second = _app(redis_server.url, "life-ready"), _app(redis_server.url, "life-ready")

    async def main() -> None:
        node = asyncio.create_task(first.serve())
        await asyncio.wait_for(first.ready(), 20)
        refused = asyncio.create_task(second.serve())
        with pytest.raises(NodeIdTaken):
            await asyncio.wait_for(second.ready(), 20)
        with pytest.raises(NodeIdTaken):
            await asyncio.wait_for(refused, 20)
        first.stop()
        await asyncio.wait_for(node, 20)
        with pytest.raises(AppStateError, match="'n1' is not serving: it stopped"):
            await asyncio.wait_for(first.ready(), 5)

    asyncio.run(main())


def test_stop_before_the_start_calls_the_start_off(redis_server: EmbeddedRedis) -> None:
    """stop() while serve() was still starting was ignored: the node joined and ran its jobs."""
    app = _app(redis_server.url, "life-early")
    ran: list[int] = []

    @app.cron("@every 1s", name="j", starting_deadline="1s")
    def j(ctx: JobContext) -> None:
        ran.append(ctx.token)

    async def main() -> None:
        node = asyncio.create_task(app.serve())
        await asyncio.sleep(0)  # serve() is starting (its server checks)
        app.stop()
        await asyncio.wait_for(node, 10)
        with pytest.raises(AppStateError, match="not serving"):
            await asyncio.wait_for(app.ready(), 5)
        await asyncio.sleep(1.5)

    asyncio.run(main())
    assert ran == []
    store = RedisStore.from_url(redis_server.url, "life-early")
    try:
        assert store.ledger("j", 10) == []
    finally:
        store.close()


def test_one_serve_at_a_time_and_no_job_declared_after_it(redis_server: EmbeddedRedis) -> None:
    app = _app(redis_server.url, "life-twice")

    async def main() -> None:
        node = asyncio.create_task(app.serve())
        await asyncio.wait_for(app.ready(), 20)
        with pytest.raises(AppStateError, match="'n1' is already serving: expected one serve"):
            await app.serve()
        with pytest.raises(AppStateError, match=r"App.cron\(\) after serve\(\) started"):
            app.cron("@every 1s", name="late")
        with pytest.raises(AppStateError, match=r"inside a running event loop: use await app\.serve"):
            app.run()
        app.stop()
        await asyncio.wait_for(node, 20)

    asyncio.run(main())


def test_an_app_serves_on_a_second_event_loop_and_survives_a_job_that_exits(
    redis_server: EmbeddedRedis,
) -> None:
    """The App's event was made in __init__ and bound to the first loop that waited on it; a
    job's sys.exit() once ended the whole program instead of its run."""
    app = _app(redis_server.url, "life-loops")

    @app.cron("@every 1s", name="quits", starting_deadline="1s")
    def quits(ctx: JobContext) -> None:
        sys.exit(3)

    store = RedisStore.from_url(redis_server.url, "life-loops")

    async def once() -> None:
        node = asyncio.create_task(app.serve())
        await asyncio.wait_for(app.ready(), 20)
        deadline = time.monotonic() + 20
        since = time.time_ns() // 1_000_000
        while not any(e.fire_ms > since and e.state == SlotState.FAILED for e in store.ledger("quits", 5)):
            assert time.monotonic() < deadline, "no failed run recorded"
            await asyncio.sleep(0.1)
        app.stop()
        await asyncio.wait_for(node, 20)

    try:
        asyncio.run(once())
        asyncio.run(once())
        failed = [e for e in store.ledger("quits", 50) if e.state == SlotState.FAILED]
        assert failed and failed[0].detail.startswith("raised SystemExit(3)"), failed[0].detail
    finally:
        store.close()
