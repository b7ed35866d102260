"""The alert hook: tell a person when the cluster cannot do its job.

Alerts are for conditions someone must act on: the quorum is lost (or back),
this node abstains because of its clock, a slot was missed or lost, nodes
disagree on a job's definition. Each alert is a small JSON document::

    {"kind": "slot_missed", "node": "n1", "ts_ms": ..., "message": "...", "fields": {...}}

delivered to a command (the document on stdin, ``QUORUM_CRON_ALERT`` = the
kind in its environment) or POSTed to a URL, from a background task with a
bounded queue: a slow or failing hook can delay alerts, never the node.
Repeated conditions (``quorum_lost`` on every heartbeat) are sent once per
change by the caller; the hook itself only bounds and delivers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field

from quorum_cron.agent.jobenv import base_environment
from quorum_cron.agent.logs import EVENT_LOGGER, event, scrub

__all__ = ["Alert", "AlertHook", "AlertKind"]

log = logging.getLogger(EVENT_LOGGER)

MAX_QUEUED = 100
HOOK_TIMEOUT_S = 10.0


class AlertKind:
    """Alert kinds (strings, so hooks can match on them)."""

    QUORUM_LOST = "quorum_lost"
    QUORUM_RESTORED = "quorum_restored"
    CLOCK_ABSTAIN = "clock_abstain"
    CLOCK_TRUSTED = "clock_trusted"
    SLOT_MISSED = "slot_missed"
    SLOT_LOST = "slot_lost"
    SPEC_MISMATCH = "spec_mismatch"
    STORE_UNAVAILABLE = "store_unavailable"
    BAD_VALUE = "bad_value"
    """A value read from Redis was corrupt (or not written by quorum-cron) and was ignored."""
    STORE_OOM = "store_oom"
    """Redis refuses writes: out of memory under ``maxmemory-policy noeviction``."""


@dataclass(frozen=True, slots=True)
class Alert:
    kind: str
    node: str
    message: str
    fields: dict[str, str] = field(default_factory=dict)
    ts_ms: int = 0

    def document(self) -> bytes:
        doc = {
            "kind": self.kind,
            "node": self.node,
            "ts_ms": self.ts_ms,
            "message": self.message,
            "fields": self.fields,
        }
        return json.dumps(doc, sort_keys=True).encode()


class AlertHook:
    """Delivers alerts to a command and/or a URL; logs every alert regardless."""

    def __init__(
        self, node: str, *, command: Sequence[str] | str | None = None, url: str | None = None
    ) -> None:
        self.node = node
        if isinstance(command, str):
            self.command: tuple[str, ...] = ("/bin/sh", "-c", command)
        else:
            self.command = tuple(command or ())
        self.url = url or None
        self._queue: asyncio.Queue[Alert] | None = None
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.sent: list[Alert] = []
        """The last alerts raised (bounded), for tests and status."""

    @property
    def enabled(self) -> bool:
        return bool(self.command or self.url)

    def raise_(self, kind: str, message: str, **fields: object) -> None:
        """Record and (when a hook is configured) deliver an alert; never blocks."""
        alert = Alert(
            kind, self.node, message, {k: str(v) for k, v in fields.items()}, time.time_ns() // 1_000_000
        )
        event(log, logging.WARNING, "alert", f"{kind}: {message}", kind=kind, **fields)
        self.sent.append(alert)
        del self.sent[:-MAX_QUEUED]
        if not self.enabled:
            return
        if self._queue is None:
            self._queue = asyncio.Queue(MAX_QUEUED)
            self._task = asyncio.ensure_future(self._deliver_loop())
        try:
            self._queue.put_nowait(alert)
        except asyncio.QueueFull:
            self.dropped += 1

    async def _deliver_loop(self) -> None:
        assert self._queue is not None
        while True:
            alert = await self._queue.get()
            try:
                await self._deliver(alert)
            except Exception as exc:
                event(log, logging.ERROR, "alert", f"alert hook failed for {alert.kind}: {scrub(str(exc))}")
            finally:
                self._queue.task_done()

    async def _deliver(self, alert: Alert) -> None:
        body = alert.document()
        if self.command:
            env = dict(base_environment(os.environ), QUORUM_CRON_ALERT=alert.kind)
            proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
            try:
                await asyncio.wait_for(proc.communicate(body), HOOK_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the hook's children too (its own session)
                raise RuntimeError(f"alert command did not finish within {HOOK_TIMEOUT_S:.0f} s") from None
            if proc.returncode != 0:
                raise RuntimeError(f"alert command exited {proc.returncode}")
        if self.url:
            url = self.url
            await asyncio.to_thread(_post, url, body)

    async def aclose(self, flush_s: float = 2.0) -> None:
        """Give queued alerts ``flush_s`` to go out, then stop."""
        if self._task is None or self._queue is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), flush_s)
        self._task.cancel()


def _post(url: str, body: bytes) -> None:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=HOOK_TIMEOUT_S) as resp:
        if resp.status >= 300:
            raise RuntimeError(f"alert URL answered HTTP {resp.status}")
