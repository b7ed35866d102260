"""The alert hook: tell a person when the cluster cannot do its job.

Alerts are for conditions someone must act on: the quorum is lost (or back),
this node abstains because of its clock, a slot was missed or lost, a job
failed (or recovered after failures), nodes disagree on a job's definition.
Each alert is a small JSON document::

    {"kind": "slot_missed", "node": "n1", "ts_ms": ..., "message": "...", "fields": {...}}

delivered to a command (the document on stdin, ``QUORUM_CRON_ALERT`` = the
kind in its environment) or POSTed to a URL, from a background task with a
bounded queue: a slow or failing hook can delay alerts, never the node.
Repeated conditions (``quorum_lost`` on every heartbeat) are sent once per
change by the caller; the hook itself only bounds and delivers.

With an :class:`AlertJournal` every alert is also kept in the store's alerts
journal (``Store.add_alert``; on Redis the capped stream ``qc:{<ns>}:alerts``,
``XADD MAXLEN`` :data:`ALERTS_MAXLEN`), which the web dashboard's Cluster
page shows. That write is best-effort and off the loop (its own bounded
queue, a worker thread): a store that cannot take it costs one log line per
outage, never an exception, a blocked loop, or another alert. The entry
holds the kind, node, time, message and fields, with URL passwords masked
and every text cut to a bound — nothing of the hook's command or URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from quorum_cron.agent.jobenv import base_environment
from quorum_cron.agent.logs import EVENT_LOGGER, event, scrub
from quorum_cron.config.values import _redact_alert_url
from quorum_cron.store.base import ALERTS_MAXLEN, Store, StoredAlert

__all__ = ["ALERTS_MAXLEN", "Alert", "AlertHook", "AlertJournal", "AlertKind"]

log = logging.getLogger(EVENT_LOGGER)

MAX_QUEUED = 100
HOOK_TIMEOUT_S = 10.0
MAX_PER_KIND: Final = 50
"""Alerts of one kind sent one by one per :data:`KIND_WINDOW_S` at most; the rest are counted and
told in one ``alerts_suppressed`` alert. Why: a whole minute missed at 100,000 jobs (agents
starting or running on an overloaded machine) raised 100,000 ``slot_missed`` alerts on every
node: a log line, a store write and a hook call each, which nobody reads one by one and which
cost the node the CPU it needed to catch up (docs/benchmarks.md, "Scale")."""
KIND_WINDOW_S: Final = 60.0
MAX_MESSAGE_CHARS: Final = 1000
"""A stored alert's message is cut to this many characters."""
MAX_STORED_FIELDS: Final = 16
MAX_FIELD_CHARS: Final = 200
"""A stored alert keeps at most this many fields, each name and value cut to this many characters."""


class AlertKind:
    """Alert kinds (strings, so hooks can match on them)."""

    QUORUM_LOST = "quorum_lost"
    QUORUM_RESTORED = "quorum_restored"
    CLOCK_ABSTAIN = "clock_abstain"
    CLOCK_TRUSTED = "clock_trusted"
    SLOT_MISSED = "slot_missed"
    SLOT_LOST = "slot_lost"
    JOB_FAILED = "job_failed"
    """A slot's last attempt failed; sent by its executor.

    Fields: job, slot, token, exit_code (``-`` for a timeout or a signal), attempt, output (its end)."""
    JOB_RECOVERED = "job_recovered"
    """A job succeeded after failed runs (fields: job, slot, token, failures, attempt)."""
    SPEC_MISMATCH = "spec_mismatch"
    STORE_UNAVAILABLE = "store_unavailable"
    BAD_VALUE = "bad_value"
    """A value read from Redis was corrupt (or not written by quorum-cron) and was ignored."""
    STORE_OOM = "store_oom"
    """Redis refuses writes: out of memory under ``maxmemory-policy noeviction``."""
    NOT_A_MEMBER = "not_a_member"
    """This node is not a member of the store's membership record (or votes with a stale epoch)."""
    MEMBERSHIP_MISMATCH = "membership_mismatch"
    """This node's config proposes other members than the store's record: it does not vote."""
    CONFIG_REFUSED = "config_refused"
    """SIGHUP: the config file did not validate; the node keeps the config it runs."""
    CONFIG_RELOADED = "config_reloaded"
    """SIGHUP: a new config was taken (kept in the store's stream only: nobody must act)."""
    ALERTS_SUPPRESSED = "alerts_suppressed"
    """More than :data:`MAX_PER_KIND` alerts of one kind in a window: how many more were raised
    (fields: of_kind, suppressed, window_s); each is still counted in the metrics and the ledger."""


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


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class AlertJournal:
    """Keeps alerts in the store's alerts journal (``Store.add_alert``); best-effort, never raises.

    :meth:`write` is blocking (one store call) and is called by :class:`AlertHook`
    on a worker thread. A failed write is counted in :attr:`failed` and logged
    once until a write succeeds again; it raises no alert of its own (that
    alert would go to the same store, and fail the same way).
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self.written = 0
        self.failed = 0
        self._failing = False

    def __repr__(self) -> str:
        return f"AlertJournal({self._store!r}, maxlen={ALERTS_MAXLEN})"

    @staticmethod
    def entry(alert: Alert) -> StoredAlert:
        """What is kept of ``alert``: bounded, URL passwords masked."""
        fields = {
            _cut(scrub(k), MAX_FIELD_CHARS): _cut(scrub(v), MAX_FIELD_CHARS)
            for k, v in sorted(alert.fields.items())[:MAX_STORED_FIELDS]
        }
        return StoredAlert(
            kind=_cut(alert.kind, 64),
            node=_cut(alert.node, 200),
            ts_ms=alert.ts_ms,
            message=_cut(scrub(alert.message), MAX_MESSAGE_CHARS),
            fields=dict(sorted(fields.items())),
        )

    def write(self, alert: Alert) -> bool:
        """Append ``alert``; False (logged once per outage) when the store did not take it."""
        try:
            self._store.add_alert(self.entry(alert))
        except Exception as exc:  # best-effort: an unreachable, full or refusing store, a closed pool
            self.failed += 1
            if not self._failing:
                self._failing = True
                event(
                    log,
                    logging.WARNING,
                    "alert_journal",  # not "alert": the alert itself was logged already
                    f"could not keep alert {alert.kind} in the store: {scrub(str(exc))} "
                    "(alerts are still logged and sent to the hook; next failures are only counted)",
                    alert=alert.kind,
                )
            return False
        self.written += 1
        if self._failing:
            self._failing = False
            event(log, logging.INFO, "alert", f"alerts are kept in the store again ({self.failed} not kept)")
        return True


class _Lane:
    """One bounded queue drained in order by one task; created on first use, on the running loop."""

    def __init__(self, deliver: Callable[[Alert], Awaitable[None]]) -> None:
        self._deliver = deliver
        self._queue: asyncio.Queue[Alert] | None = None
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0

    def put(self, alert: Alert) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue(MAX_QUEUED)
            self._task = asyncio.ensure_future(self._loop())
        try:
            self._queue.put_nowait(alert)
        except asyncio.QueueFull:
            self.dropped += 1

    async def _loop(self) -> None:
        assert self._queue is not None
        while True:
            alert = await self._queue.get()
            try:
                await self._deliver(alert)
            finally:
                self._queue.task_done()

    async def aclose(self, flush_s: float) -> None:
        if self._task is None or self._queue is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), flush_s)
        self._task.cancel()


class AlertHook:
    """Delivers alerts to a command and/or a URL, keeps them in the store's stream; logs every alert."""

    def __init__(
        self,
        node: str,
        *,
        command: Sequence[str] | str | None = None,
        url: str | None = None,
        journal: AlertJournal | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self._clock = clock
        self._windows: dict[str, tuple[float, int, int]] = {}
        """Per kind: when its window began, alerts sent in it, alerts suppressed in it."""
        if isinstance(command, str):
            self.command: tuple[str, ...] = ("/bin/sh", "-c", command)
        else:
            self.command = tuple(command or ())
        self.url = url or None
        self.journal = journal
        """Where alerts are kept in the store (None: nowhere); set before the first alert."""
        self._hook = _Lane(self._deliver_logged)
        self._journal = _Lane(self._keep)
        self.sent: list[Alert] = []
        """The last alerts raised (bounded), for tests and status."""

    def reconfigure(self, *, command: Sequence[str] | str | None, url: str | None) -> None:
        """A reloaded config's hook: alerts raised from now on go there (queued ones too)."""
        if isinstance(command, str):
            self.command = ("/bin/sh", "-c", command)
        else:
            self.command = tuple(command or ())
        self.url = url or None

    @property
    def dropped(self) -> int:
        """Alerts not delivered to the hook because its queue was full."""
        return self._hook.dropped

    @property
    def enabled(self) -> bool:
        return bool(self.command or self.url)

    def raise_(self, kind: str, message: str, **fields: object) -> None:
        """Record and (when a hook is configured) deliver an alert; never blocks.

        Beyond :data:`MAX_PER_KIND` of one kind in a window, the alert is only
        counted; the window's count goes out as one ``alerts_suppressed`` alert
        when it ends (:meth:`flush_suppressed`, or the next alert of the kind).
        """
        now = self._clock()
        began, sent, suppressed = self._windows.get(kind, (now, 0, 0))
        if now - began >= KIND_WINDOW_S:
            self._tell_suppressed(kind, began, now, suppressed)
            began, sent, suppressed = now, 0, 0
        if sent >= MAX_PER_KIND:
            self._windows[kind] = (began, sent, suppressed + 1)
            return
        self._windows[kind] = (began, sent + 1, suppressed)
        self._send(kind, message, fields)

    def flush_suppressed(self, *, open_too: bool = False) -> None:
        """Send the ``alerts_suppressed`` alert of every window that has ended (the agent calls
        this with its summary line, once a minute), or of every window (``open_too``: at shutdown)."""
        now = self._clock()
        for kind, (began, _, suppressed) in list(self._windows.items()):
            if open_too or now - began >= KIND_WINDOW_S:
                del self._windows[kind]
                self._tell_suppressed(kind, began, now, suppressed)

    def _tell_suppressed(self, kind: str, began: float, now: float, suppressed: int) -> None:
        if suppressed:
            window_s = round(now - began)
            self._send(
                AlertKind.ALERTS_SUPPRESSED,
                f"{suppressed} more {kind} alerts in the last {window_s} s were not sent one by one "
                f"(at most {MAX_PER_KIND} of a kind per {KIND_WINDOW_S:g} s); each is counted in the "
                "metrics and the ledger",
                {"of_kind": kind, "suppressed": suppressed, "window_s": window_s},
            )

    def _send(self, kind: str, message: str, fields: dict[str, object]) -> None:
        alert = Alert(
            kind, self.node, message, {k: str(v) for k, v in fields.items()}, time.time_ns() // 1_000_000
        )
        event(log, logging.WARNING, "alert", f"{kind}: {message}", kind=kind, **fields)
        self.sent.append(alert)
        del self.sent[:-MAX_QUEUED]
        if self.journal is not None:
            self._journal.put(alert)
        if self.enabled:
            self._hook.put(alert)

    def note(self, kind: str, message: str, **fields: object) -> None:
        """Log and keep in the store's stream (the cluster's record), without calling the hook.

        For events an operator may look up but need not act on (a config reload).
        """
        alert = Alert(
            kind, self.node, message, {k: str(v) for k, v in fields.items()}, time.time_ns() // 1_000_000
        )
        event(log, logging.INFO, kind, message, **fields)
        if self.journal is not None:
            self._journal.put(alert)

    async def _keep(self, alert: Alert) -> None:
        journal = self.journal
        if journal is not None:
            await asyncio.to_thread(journal.write, alert)

    async def _deliver_logged(self, alert: Alert) -> None:
        try:
            await self._deliver(alert)
        except Exception as exc:
            event(log, logging.ERROR, "alert", f"alert hook failed for {alert.kind}: {scrub(str(exc))}")

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
        """Give queued alerts ``flush_s`` to go out (to the hook and the store, side by side), then stop.

        The suppressed counts of windows still open go out first: a node that stops does not
        take them with it."""
        self.flush_suppressed(open_too=True)
        await asyncio.gather(self._hook.aclose(flush_s), self._journal.aclose(flush_s))


def _post(url: str, body: bytes) -> None:
    """POST the alert; a failure names the URL (its secret path hidden) and what went wrong."""
    shown = _redact_alert_url(url)
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=HOOK_TIMEOUT_S) as resp:
            status = resp.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise RuntimeError(f"alert URL {shown}: {reason}") from None
    if status >= 300:
        raise RuntimeError(f"alert URL {shown} answered HTTP {status}")
