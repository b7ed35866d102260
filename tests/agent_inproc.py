"""Helpers for the in-process agent tests: the memory store on a manual clock, outages on demand.

The agent's modules (:mod:`quorum_cron.agent.health`, ``observe``,
``executions``, ``intake``...) are driven here on the asyncio loop of the
test itself, on a :class:`~quorum_cron.clock.base.ManualClock` and the memory
model of the store, so each behaviour is checked without processes, wall
clock waits or a Redis server. :class:`OutageStore` is the memory store
with an outage switch (every call then raises ``StoreUnavailable``, as the
Redis store does when the connection is refused: what the agent treats as
an outage), an error switch (any other error: a refusal, or a bug) and a
gate that holds calls on the wire. Tests wait for facts with :func:`until`,
which wakes on every store call and every callback the test hands the
agent (:meth:`Signal.set`), never on a timer; its deadline only bounds a
failure.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from quorum_cron.agent.alerts import Alert, AlertHook
from quorum_cron.agent.jobprocess import CallableTarget, JobContext, Target
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.runtime import Agent
from quorum_cron.agent.spec import AgentJob, AgentSettings
from quorum_cron.clock.base import ManualClock
from quorum_cron.config.schedule import Schedule
from quorum_cron.core.actions import CoreJob, NodeSettings
from quorum_cron.errors import StoreUnavailable
from quorum_cron.store.memory import MemoryStore

__all__ = [
    "T0",
    "OutageStore",
    "Signal",
    "agent_job",
    "alerts_of",
    "events",
    "metric",
    "settings",
    "until",
]

T0 = 1_700_000_000_000
"""A whole minute, epoch ms: where the tests' clocks start."""


class Signal:
    """Wakes :func:`until`: set from the loop or (``set_threadsafe``) from a store worker thread."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def set(self, *_: object) -> None:
        self.event.set()

    def set_threadsafe(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.event.set)


async def until(signal: Signal, pred: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    """Wait until ``pred()`` holds, re-checking each time ``signal`` is set; fail naming ``what``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not pred():
        signal.event.clear()
        if pred():
            return
        left = end - loop.time()
        if left <= 0:
            raise AssertionError(f"timed out waiting for: {what}")
        try:
            await asyncio.wait_for(signal.event.wait(), left)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for: {what}") from None


class OutageStore(MemoryStore):
    """The memory store, plus an outage switch and a count of calls per method.

    While ``down`` is non-empty every store call raises ``StoreUnavailable(down)``
    before touching the model (nothing is written, as when Redis refuses the
    connection); while ``broken`` is set, every call raises it instead (a store
    that answers with an error, or a bug). Each call, failed or not, sets the
    attached :class:`Signal`.
    """

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock.wall_ms)
        self.down = ""
        self.broken: Exception | None = None
        self.gate = threading.Event()
        """Cleared: every call is counted, then held until it is set again (a call on the wire)."""
        self.gate.set()
        self.calls: dict[str, int] = {}
        self.signal: Signal | None = None
        self._lock = threading.Lock()

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name.startswith("_") or name not in _STORE_CALLS:
            return attr

        def call(*args: object, **kwargs: object) -> object:
            with self._lock:
                self.calls[name] = self.calls.get(name, 0) + 1
            if not self.gate.is_set():
                if self.signal is not None:
                    self.signal.set_threadsafe()
                self.gate.wait(10)
            try:
                if self.down:
                    raise StoreUnavailable(self.down)
                if self.broken is not None:
                    raise self.broken
                return attr(*args, **kwargs)
            finally:
                if self.signal is not None:
                    self.signal.set_threadsafe()

        return call

    def count(self, name: str) -> int:
        with self._lock:
            return self.calls.get(name, 0)


_STORE_CALLS = frozenset(
    {
        "vote",
        "start",
        "renew",
        "finish",
        "sweep",
        "record_missed",
        "high_waters",
        "slot",
        "read_slots",
        "slots",
        "ledger",
        "heartbeat",
        "leave",
        "members",
        "time_ms",
        "pause",
        "resume",
        "control",
        "trigger",
        "triggers",
        "audit",
    }
)


def settings(
    node: str = "n1", *, size: int = 3, quorum: int = 2, heartbeat_ms: int = 3_600_000
) -> AgentSettings:
    """Agent settings whose heartbeat never comes by itself (the tests wake the loop when they mean to)."""
    return AgentSettings(
        node=NodeSettings(
            node_id=node, quorum=quorum, max_skew_ms=250, lease_ms=10_000, start_timeout_ms=2_000
        ),
        namespace="inproc",
        size=size,
        heartbeat_ms=heartbeat_ms,
    )


async def _noop(ctx: JobContext) -> None:
    return None


def agent_job(
    name: str = "job",
    *,
    spec_hash: str = "hash-mine",
    target: Target | None = None,
    deadline_ms: int = 1_000,
    timeout_ms: int = 60_000,
    run_local: bool = False,
) -> AgentJob:
    """An ``@every 2s`` job running ``target`` (by default a coroutine that returns at once)."""
    core = CoreJob(
        name=name,
        schedule=Schedule.parse("@every 2s", job=name),
        spec_hash=spec_hash,
        deadline_ms=deadline_ms,
        timeout_ms=timeout_ms,
        run_local=run_local,
    )
    return AgentJob(
        core=core,
        target=target if target is not None else CallableTarget(_noop),
        on_store_unavailable="run-local" if run_local else "skip",
    )


def metric(metrics: Metrics, name: str, **labels: str) -> float:
    """A sample of the agent's private registry (0.0 when never set)."""
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def alerts_of(hook: AlertHook, kind: str) -> list[Alert]:
    return [a for a in hook.sent if a.kind == kind]


def events(records: list[logging.LogRecord], name: str) -> list[logging.LogRecord]:
    """The agent's log records of event ``name`` (their fields are in ``record.qc_fields``)."""
    return [r for r in records if r.name == EVENT_LOGGER and getattr(r, "qc_event", None) == name]


def run_agent(agent: Agent, scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``agent`` in a fresh event loop, ``scenario`` once it is ready, then stop it gracefully."""

    async def main() -> None:
        running = asyncio.create_task(agent.run())
        try:
            await asyncio.wait_for(agent.ready.wait(), 15)
            await scenario()
        finally:
            agent.request_stop("test over")
            await asyncio.wait_for(running, 15)

    asyncio.run(main())
