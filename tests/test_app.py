"""The Python API: decorated jobs on three in-process nodes against a real redis-server."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from quorum_cron.app import App, JobContext
from quorum_cron.config.settings import Config
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


def test_bad_app_settings_are_refused_with_one_line_naming_them() -> None:
    """node_id="web 1" once wrote a corrupt membership record that made every correct node fail;
    members="web-1" became five one-letter members; size=-1 said "field 'size': missing" (the
    unset sentinel); with config=..., every other cluster keyword was silently ignored."""
    url = "redis://localhost:1/0"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"node_id": "web 1"}, "App node id 'web 1' is not valid: expected 1-100 characters"),
        ({"node_id": ""}, "App node id '' is not valid"),
        ({"node_id": "a:b"}, "App node id 'a:b' is not valid"),
        ({"members": "web-1", "size": None}, "App members='web-1' is a string: expected a list"),
        ({"ntp_servers": "pool.ntp.org"}, "App ntp_servers='pool.ntp.org' is a string"),
        ({"size": -1}, "App size=-1 is out of range: expected a positive integer"),
        ({"quorum": -1}, "App quorum=-1 is out of range"),
        ({"namespace": "a b"}, "App namespace: 'a b' is not a valid namespace"),
    ]
    for given, message in cases:
        kw: dict[str, Any] = {"namespace": "x", "size": 1, "redis_url": url, "node_id": "n", **given}
        with pytest.raises(ConfigError) as info:
            App(**kw)
        assert str(info.value).startswith(message), (given, str(info.value))
        assert "\n" not in str(info.value)
    config = Config(App(namespace="x", size=1, redis_url=url, node_id="n").cluster, ())
    with pytest.raises(ConfigError, match=r"config=\.\.\. and cluster settings \['namespace', 'lease'\]"):
        App(config=config, namespace="other", lease="bogus", node_id="n")
    assert App(config=config, node_id="n", redis_url=url, grace="5s").namespace == "x"


def test_a_host_name_that_is_no_node_id_is_refused_with_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("quorum_cron.app.default_node_id", lambda: "my host")
    with pytest.raises(ConfigError, match=r"node id 'my host' is not valid.*\(the host name; pass node_id"):
        App(namespace="x", size=1, redis_url="redis://localhost:1/0")


def test_what_cannot_be_a_job_is_refused_where_it_is_declared() -> None:
    """``@app.cron`` without parentheses, a non-callable, a generator function or a function that
    cannot take ``ctx`` once registered nothing, or a job that never ran its body."""
    app = App(namespace="x", size=1, redis_url="redis://localhost:1/0", node_id="n")

    def job(ctx: JobContext) -> None: ...

    def gen(ctx: JobContext) -> Iterator[int]:
        yield 1

    def no_ctx() -> None: ...

    with pytest.raises(ConfigError, match="for the schedule: expected a cron expression string"):
        app.cron(job)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="job 'x': int 42 is not callable"):
        app.cron("* * * * *", name="x")(42)  # type: ignore[type-var]
    with pytest.raises(ConfigError, match=r"job 'gen': gen\(\) is a generator function"):
        app.cron("* * * * *")(gen)
    with pytest.raises(ConfigError, match=r"job 'no_ctx': no_ctx\(\) cannot take the one argument"):
        app.cron("* * * * *")(no_ctx)
    assert app.jobs == {}
