"""A write fewer replicas acknowledged than ``wait_replicas`` asks is one state, not a flapping one.

Real agent processes on a real redis-server whose one replica is killed
(``wait_replicas = 1``): every write's ``WAIT`` then falls short while reads
and heartbeats, which need no replica, still succeed. The node must say so
once ("not voting: store writes not replicated: WAIT: 0 of 1 ..."), raise
one ``store_unavailable`` alert, record the slots it could not vote for as
missed *because of that* (not "deadline passed before quorum"), and come
back with one line once the replica is attached again — never flip back on
a read that succeeded in between (quorum_cron/agent/health.py).

Before the fix each node logged "store reachable again" and "not voting"
several times a second, each with an alert, and the slots voted in the
flaps ended "deadline passed before quorum" or were skipped behind a run
whose result could not be replicated.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
import redis

from quorum_cron.agent.alerts import AlertHook
from quorum_cron.agent.health import NodeHealth
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.observe import Observer
from quorum_cron.agent.storeio import StoreWorker
from quorum_cron.clock.base import SystemClock
from quorum_cron.core.model import Configuration, Membership
from quorum_cron.store.base import SlotState
from quorum_cron.store.redis import RedisStore
from tests.agent_cluster import Cluster, OwnedRedis, job_toml
from tests.agent_inproc import Signal, events, settings, until

NODES = ["n1", "n2", "n3"]
OPTS = 'wait_replicas = 1\nwait_timeout = "50ms"'


def _replicated(master: OwnedRedis) -> None:
    """Wait (bounded) until the replica acknowledges a write: its first sync is done."""
    client = redis.Redis(port=master.port, socket_timeout=5.0)
    try:
        for _ in range(300):  # (each WAIT blocks up to 100 ms: at most 30 s)
            client.set("qc-test:probe", "1")
            if client.wait(1, 100) >= 1:
                return
        raise AssertionError("the replica never acknowledged a write")
    finally:
        client.close()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[OwnedRedis, OwnedRedis]]:
    master = OwnedRedis(tmp_path)
    replica = OwnedRedis(tmp_path)
    replica._args += ["--replicaof", "127.0.0.1", str(master.port)]
    master.start()
    replica.start()
    _replicated(master)
    try:
        yield master, replica
    finally:
        replica.kill()
        master.kill()


def _since(c: Cluster, name: str, mark: int, event: str, text: str = "") -> list[dict[str, object]]:
    return [e for e in c.nodes[name].events[mark:] if e.get("event") == event and text in str(e.get("msg"))]


def _voting(c: Cluster, name: str) -> bool:
    said = [str(e.get("msg")) for e in c.nodes[name].events if e.get("event") == "trust"]
    return bool(said) and said[-1].startswith("voting")


def test_wait_shortfall_is_one_state_until_a_write_is_replicated(
    tmp_path: Path, servers: tuple[OwnedRedis, OwnedRedis]
) -> None:
    master, replica = servers
    c = Cluster(tmp_path, master.url, len(NODES), cluster_opts=OPTS)
    try:
        cfg = c.config(job_toml("j", "@every 1s", c.out, starting_deadline='"500ms"', overlap='"allow"'))
        for name in NODES:
            c.start(name, cfg)
        c.wait_joined(NODES)
        c.running_since(["j"])
        c.wait("every node voting", lambda: all(_voting(c, name) for name in NODES), 30)
        mark = {name: len(c.nodes[name].events) for name in NODES}

        replica.kill()
        # Every node stops voting, saying why.
        down = {
            name: c.wait(
                f"{name} to stop voting",
                partial(_since, c, name, mark[name], "trust", "not voting"),
                15,
            )[0]
            for name in NODES
        }
        for e in down.values():
            assert str(e["msg"]).startswith("not voting: store writes not replicated: WAIT: 0 of 1"), e
        began = max(int(str(e["ts"])) for e in down.values())

        # Four slots after the last node stopped voting are recorded missed, with the reason:
        def missed_after() -> list[int] | None:
            led = c.ledger("j")
            late = sorted(t for t, e in led.items() if t > began + 1_000 and e.state == SlotState.MISSED)
            return late if len(late) >= 4 else None

        late = c.wait("four slots missed while writes fall short", missed_after, 20)
        ledger = c.ledger("j")
        for t in late:
            assert "store writes not replicated: WAIT: 0 of 1" in ledger[t].reason, ledger[t]

        # ... and all that while, one line, one alert, no flapping back (reads succeeded throughout).
        for name in NODES:
            assert len(_since(c, name, mark[name], "trust", "not voting")) == 1, c.describe()
            alerts = _since(c, name, mark[name], "alert", "store_unavailable")
            assert len(alerts) == 1, alerts
            assert "store writes not replicated: WAIT: 0 of 1" in str(alerts[0]["msg"])
            assert not _since(c, name, mark[name], "store", "again"), c.describe()
            assert not _since(c, name, mark[name], "trust", "voting: clock"), c.describe()

        # The replica back: one recovery line per node, and slots run again.
        replica.start()
        for name in NODES:
            c.wait(
                f"{name} to vote again",
                partial(_since, c, name, mark[name], "trust", "voting: clock"),
                30,
            )
        back = max(int(str(e["ts"])) for n in NODES for e in _since(c, n, mark[n], "trust", "voting: clock"))
        c.wait("a slot to run after", lambda: any(t > back for t in c.succeeded("j")), 20)
        for name in NODES:
            assert [str(e["msg"]) for e in _since(c, name, mark[name], "store")] == [
                "store writes replicated again (after WAIT: 0 of 1 replicas acknowledged within 50 ms)"
            ]
            assert len(_since(c, name, mark[name], "trust", "voting: clock")) == 1, c.describe()
    finally:
        c.close()


class ProbedStore(RedisStore):
    """The real Redis store, counting the writes that probe replication (``init_membership``)."""

    def __init__(self, client: redis.Redis, signal: Signal) -> None:
        super().__init__(client, "inproc", wait_replicas=1, wait_timeout_ms=20)
        self.signal = signal
        self.probes = 0

    def init_membership(self, current: Configuration, by: str) -> Membership:
        self.probes += 1
        try:
            return super().init_membership(current, by)
        finally:
            self.signal.set_threadsafe()


def test_heartbeats_on_a_server_without_replicas_do_not_end_the_shortfall(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The session's standalone redis-server has no replica: every ``WAIT 1`` falls short while
    heartbeats (no ``WAIT``) succeed. The node stays "not replicated", probing with a write."""
    cfg = replace(
        settings("n1", size=1, quorum=1, heartbeat_ms=100), membership=Configuration.of(["n1"], quorum=1)
    )
    alerts = AlertHook("n1")

    async def main() -> None:
        signal = Signal()
        store = ProbedStore(redis_client, signal)
        worker = StoreWorker(store, "n1")
        metrics = Metrics()
        trust: list[tuple[bool, str]] = []
        health = NodeHealth(
            cfg,
            {},
            store,
            worker,
            clock=SystemClock(),
            metrics=metrics,
            alerts=alerts,
            observer=Observer("n1", {}, metrics, alerts),
            set_trust=lambda ok, why: trust.append((ok, why)),
            poke=signal.set,
        )
        try:
            assert not await health.first_contact(lambda: True)  # its init_membership fell short
            loop = asyncio.ensure_future(health.loop(lambda exc: None))
            await until(signal, lambda: store.probes >= 4, "four probes by the heartbeat loop")
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
            assert not health.store_up
            assert health.unreplicated == "WAIT: 0 of 1 replicas acknowledged within 20 ms"
            assert trust[-1] == (
                False,
                "store writes not replicated: WAIT: 0 of 1 replicas acknowledged within 20 ms",
            )
        finally:
            health.trust.close()
            worker.shutdown()

    asyncio.run(main())
    assert [r.getMessage() for r in events(caplog.records, "store")] == []  # never "reachable again"
    trust_lines = [r.getMessage() for r in events(caplog.records, "trust")]
    assert trust_lines == [
        "not voting: store writes not replicated: WAIT: 0 of 1 replicas acknowledged within 20 ms"
    ]
    alerts_said = [r.getMessage() for r in events(caplog.records, "alert")]
    assert len(alerts_said) == 1 and alerts_said[0].startswith(
        "store_unavailable: store writes not replicated"
    )
