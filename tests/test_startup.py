"""One start-up path for ``quorum-cron agent`` and the Python API (issue 25 item 5).

In-process, against real servers: the API refuses what the agent refuses
(a server below the support matrix, an evicting ``maxmemory-policy``) with
the agent's own line, runs on an evicting server only when allowed (and
says so), and both faces stop gracefully on a stop signal delivered to the
process — the agent's from a job that signals it, the API's from a job
that signals itself — recording the run that was in progress. The API's
job options follow the config file's (the retry backoff, issue 26 item 8).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.preflight import PreflightError, eviction_problem
from quorum_cron.app import App, JobContext
from quorum_cron.commands.agent import agent
from quorum_cron.commands.demo import _config_text
from quorum_cron.errors import ConfigError
from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from tests.test_check_store import _redis_62


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """The agent and ``App.run`` configure the ``quorum_cron`` logger: put it back for the next test."""
    root = logging.getLogger("quorum_cron")
    saved = (list(root.handlers), root.level, root.propagate)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    root.propagate = saved[2]


class Kept(logging.Handler):
    """Keeps every record it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def cli_error(tmp_path: Path, url: str, namespace: str) -> str:
    """The one ``error:`` line of ``quorum-cron agent`` run in-process on ``url``."""
    config = tmp_path / f"{namespace}.toml"
    config.write_text(_config_text(namespace, 1, url, tmp_path / "ran.log"))
    result = CliRunner().invoke(agent, ["--config", str(config), "--node-id", "n1"])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def api_error(url: str, namespace: str) -> str:
    """What ``App.serve()`` raises on ``url`` (and ``App.ready()`` with it), as the agent would print it."""
    app = App(namespace=namespace, size=1, redis_url=url, node_id="n1")

    async def main() -> BaseException:
        node = asyncio.ensure_future(app.serve())
        try:
            await asyncio.wait_for(app.ready(), 30)
        except PreflightError as refused:
            with pytest.raises(PreflightError) as raised:
                await node
            assert raised.value is refused
            return refused
        app.stop()
        await node
        pytest.fail(f"App started on {url} instead of refusing it")

    return f"error: {asyncio.run(main())}"


def test_the_api_refuses_a_server_below_the_matrix_with_the_agents_line(tmp_path: Path) -> None:
    with EmbeddedRedis(_redis_62()) as server:
        line = cli_error(tmp_path, server.url, "old")
        assert f"redis at {server.url} is Redis 6.2.14 (standalone): quorum-cron needs" in line
        assert api_error(server.url, "old") == line


def test_the_api_refuses_an_evicting_server_like_the_agent_and_runs_only_when_allowed(
    tmp_path: Path,
) -> None:
    with EmbeddedRedis() as server:
        admin = server.client()
        try:
            admin.config_set("maxmemory-policy", "allkeys-lru")
            problem = eviction_problem("allkeys-lru", server.url)
            assert problem is not None
            # The same line; each names its own way to allow it.
            assert cli_error(tmp_path, server.url, "evict") == (
                f"error: {problem}, or pass --allow-evicting-redis to run anyway"
            )
            assert api_error(server.url, "evict") == (
                f"error: {problem}, or pass allow_evicting_redis=True to run anyway"
            )

            handler = Kept()
            said = handler.records
            events = logging.getLogger(EVENT_LOGGER)
            events.addHandler(handler)
            app = App(
                namespace="evict", size=1, redis_url=server.url, node_id="n1", allow_evicting_redis=True
            )

            async def main() -> None:
                node = asyncio.create_task(app.serve())
                await asyncio.wait_for(app.ready(), 30)
                app.stop()
                await asyncio.wait_for(node, 30)

            try:
                asyncio.run(main())
            finally:
                events.removeHandler(handler)
            unsafe = [r for r in said if getattr(r, "qc_event", None) == "eviction"]
            assert len(unsafe) == 1 and unsafe[0].levelno == logging.ERROR, said
            assert unsafe[0].getMessage() == f"UNSAFE (allow_evicting_redis=True): {problem}"
        finally:
            admin.config_set("maxmemory-policy", "noeviction")
            admin.close()


def finished_runs(url: str, namespace: str, job: str) -> list[SlotState]:
    store = RedisStore.from_url(url, namespace, socket_timeout=5.0)
    try:
        return [e.state for e in store.ledger(job, 10)]
    finally:
        store.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_app_run_stops_gracefully_on_a_stop_signal(
    redis_server: EmbeddedRedis, signum: signal.Signals
) -> None:
    """SIGHUP too: the API has no file to reload (docs/python-api.md), so it stops like SIGTERM."""
    namespace = f"api-{signum.name.lower()}"
    app = App(namespace=namespace, size=1, redis_url=redis_server.url, node_id="n1", grace="20s")
    sent: list[int] = []
    watchdog: list[threading.Timer] = []
    fired: list[bool] = []

    def give_up(loop: asyncio.AbstractEventLoop) -> None:
        fired.append(True)
        loop.call_soon_threadsafe(app.stop)

    @app.cron("@every 1s", name="stopper")
    async def stopper(ctx: JobContext) -> None:
        if not sent:
            sent.append(ctx.slot_ms)
            # A signal that stops nothing must fail the test, not hang it.
            watchdog.append(threading.Timer(30, give_up, (asyncio.get_running_loop(),)))
            watchdog[0].start()
            os.kill(os.getpid(), signum)
            await asyncio.sleep(0.2)  # still running when the stop begins: the grace lets it finish

    try:
        app.run()  # returns only after a graceful stop; an unhandled signal would end the test run
    finally:
        for timer in watchdog:
            timer.cancel()
    assert len(sent) == 1 and not fired, f"{signum.name} did not stop App.run()"
    assert SlotState.SUCCEEDED in finished_runs(redis_server.url, namespace, "stopper")


def test_the_agent_stops_gracefully_on_sigterm_in_process(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    config = tmp_path / "term.toml"
    config.write_text(
        '[cluster]\nname = "cli-term"\nsize = 1\n'
        f'redis_url = "{redis_server.url}"\nntp_unreachable = "store-time"\nheartbeat = "500ms"\n\n'
        '[[jobs]]\nname = "stopper"\nschedule = "@every 1s"\n'
        f'command = ["sh", "-c", "kill -TERM {os.getpid()}; sleep 0.2"]\n'
    )
    result = CliRunner().invoke(agent, ["--config", str(config), "--node-id", "n1", "--grace", "20s"])
    assert result.exit_code == 0, result.output
    assert "SIGTERM received" in result.stderr, result.stderr
    assert SlotState.SUCCEEDED in finished_runs(redis_server.url, "cli-term", "stopper")


def test_the_api_reports_a_bad_value_read_from_redis_like_the_agent(redis_server: EmbeddedRedis) -> None:
    """The agent's bad-value reporter runs in the API too: a corrupt member entry is counted, once."""
    namespace = "api-junk"
    client = redis_server.client(retry=None, socket_timeout=5.0)
    try:
        client.hset(f"qc:{{{namespace}}}:members", "evil", "[" * 1000)
    finally:
        client.close()
    app = App(namespace=namespace, size=1, redis_url=redis_server.url, node_id="n1")

    def counted() -> float:
        value = app.metrics.registry.get_sample_value("quorum_cron_bad_values_total", {"kind": "member"})
        return value or 0.0

    async def main() -> None:
        node = asyncio.create_task(app.serve())
        try:
            await asyncio.wait_for(app.ready(), 30)
            deadline = asyncio.get_running_loop().time() + 20
            while counted() == 0 and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)  # heartbeats read the members; the report lands on the loop
        finally:
            app.stop()
            await asyncio.wait_for(node, 30)

    asyncio.run(main())
    assert counted() == 1


def test_the_api_takes_the_retry_backoff_of_the_config_file() -> None:
    """``retry_backoff_max`` and ``retry_jitter`` as in a ``[[jobs]]`` table, refused by the same rules."""
    app = App(namespace="retry", size=1, redis_url="redis://127.0.0.1:1/0", node_id="n1")

    @app.cron("@every 1s", retries=3, retry_backoff="1s", retry_backoff_max="8s", retry_jitter=0.25)
    def doubling(ctx: JobContext) -> None: ...

    @app.cron("@every 1s", retries=3, retry_backoff="2s")
    def fixed(ctx: JobContext) -> None: ...

    got = app.jobs
    assert (got["doubling"].retry_backoff_max_ms, got["doubling"].retry_jitter) == (8_000, 0.25)
    assert (got["fixed"].retry_backoff_max_ms, got["fixed"].retry_jitter) == (2_000, 0.0)
    with pytest.raises(ConfigError, match=r"^job 'a': field 'retry_jitter': 1.5 is outside 0-1"):
        app.cron("@every 1s", name="a", retry_jitter=1.5)(lambda ctx: None)
    with pytest.raises(ConfigError, match=r"'5s' is shorter than retry_backoff '10s'"):
        app.cron("@every 1s", name="b", retry_backoff="10s", retry_backoff_max="5s")(lambda ctx: None)
