"""Live updates: one watcher per server fans store changes out to every open page (server-sent events).

The watcher runs only while at least one page listens. It waits on the
store with one blocking read over every job's ledger and audit streams
(:meth:`ObservedStore.follow`), so a new ledger entry or operator action
reaches the pages within milliseconds, and the browser never polls a job.
Membership has no stream: the watcher compares the member list once per
``members_every_s`` (one read for the whole cluster) and announces changes;
at the same pace it reads the id of the newest stored alert
(``Store.alerts(1)``) and announces a new one.

Events (``event:`` name, JSON ``data:``):

* ``ledger`` — ``{"job", "slot_ms", "state"}`` for each new ledger entry;
* ``audit`` — ``{"job", "action", "by", "at_ms"}`` for each operator action;
* ``members`` — ``{"alive", "voting"}`` when a node joined, left, changed its vote, or the store's
  membership record changed: ``alive`` counts the live *members* of the record (a live node the
  record refuses is not one; without a record, every live node), ``voting`` those of them voting;
* ``alerts`` — ``{"id"}`` (the newest alert's stream id) when an agent stored a new alert;
* ``store`` — ``{"ok": false, "error"}`` while the store cannot be read, ``{"ok": true}`` when back;
* ``resync`` — this page fell behind (its queue was full): reload everything;
* ``corrupt`` — ``{"job", "error"}`` once when a job's ledger or audit key cannot be read (the wrong
  type): that job is no longer followed, the others are.

Each page has a bounded queue; a slow page loses events, never the server's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence

from quorum_cron.core import model
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.base import AuditEntry, LedgerEntry, Member, ObservedStore
from quorum_cron.store.connect import store_failure
from quorum_cron.web.alerts import newest_alert_id

__all__ = ["Broadcaster", "sse"]

log = logging.getLogger(__name__)

QUEUE_LEN = 200
BLOCK_MS = 1000
BACKOFF_MAX_S = 5.0


def sse(event: str, data: object) -> str:
    """One server-sent event (``data`` as one line of JSON)."""
    return f"event: {event}\ndata: {json.dumps(data, sort_keys=True)}\n\n"


def _member_sig(members: list[Member], stored: model.Membership | None) -> tuple[object, ...]:
    epoch = stored.record.epoch if stored is not None else 0
    return (epoch, *((m.node, m.incarnation, m.info.get("voting", "")) for m in members))


def live_members(members: list[Member], stored: model.Membership | None) -> list[Member]:
    """The live nodes the store's record counts (all of them while there is no record)."""
    if stored is None:
        return list(members)
    return [m for m in members if stored.record.is_member(m.node)]


class Broadcaster:
    """Fans out store changes to subscribed pages; watches the store only while anyone listens."""

    def __init__(
        self,
        store: ObservedStore,
        jobs: Sequence[str],
        *,
        members_every_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        namespace: str = "",
    ) -> None:
        """``namespace``: whose alert stream to watch (empty: none)."""
        self._store = store
        self._namespace = namespace
        self._jobs = list(jobs)
        self._members_every_s = members_every_s
        self._monotonic = monotonic
        self._queues: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._members: tuple[object, ...] | None = None
        self._alert: str | None = None
        self.watching = asyncio.Event()
        """Set once the watcher has its starting point: every store change after it is reported."""

    def subscribe(self) -> asyncio.Queue[str]:
        queue: asyncio.Queue[str] = asyncio.Queue(QUEUE_LEN)
        self._queues.add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch())
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str]) -> None:
        self._queues.discard(queue)

    @property
    def subscribers(self) -> int:
        """How many pages listen now."""
        return len(self._queues)

    def publish(self, text: str) -> None:
        for queue in list(self._queues):
            try:
                queue.put_nowait(text)
            except asyncio.QueueFull:
                # This page is behind: drop what it has and tell it to reload.
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(sse("resync", {}))

    async def close(self) -> None:
        self._queues.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        cursor: dict[str, str] = {}
        start = ""
        self._members = None
        self._alert = None
        next_members = 0.0
        backoff = 0.2
        down = False
        while self._queues:
            try:
                if not start:
                    # The starting points (stream cursor, members, newest alert) are all read
                    # before `watching` is set: every change after it is reported.
                    start = await asyncio.to_thread(self._store.follow_cursor)
                    await self._compare_members()
                    next_members = self._monotonic() + self._members_every_s
                    self.watching.set()
                began = self._monotonic()
                entries = await asyncio.to_thread(self._store.follow, self._jobs, cursor, start, BLOCK_MS)
                if not entries:
                    # Nothing new and the read did not wait (every job corrupt, or a store that never
                    # blocks: the memory model): wait out the rest of the block as a blocking read would.
                    rest = BLOCK_MS / 1000 - (self._monotonic() - began)
                    if rest > 0:
                        await asyncio.sleep(rest)
                for e in entries:
                    self.publish(self._event(e))
                if self._monotonic() >= next_members:
                    await self._compare_members()
                    next_members = self._monotonic() + self._members_every_s
                if down:
                    down = False
                    self.publish(sse("store", {"ok": True}))
                backoff = 0.2
            except StoreUnavailable as exc:
                if not down:
                    down = True
                    self.publish(sse("store", {"ok": False, "error": store_failure(exc)}))
                await asyncio.sleep(backoff)
                backoff = min(BACKOFF_MAX_S, backoff * 2)
            except StoreError as exc:
                # A job whose ledger or audit key is not a stream fails the one read of
                # every job: stop watching that job (said once), keep watching the others.
                if await asyncio.to_thread(self._drop_corrupt):
                    continue
                if not down:
                    down = True
                    self.publish(sse("store", {"ok": False, "error": store_failure(exc)}))
                await asyncio.sleep(backoff)
                backoff = min(BACKOFF_MAX_S, backoff * 2)

    def _drop_corrupt(self) -> bool:
        """Find the jobs whose streams cannot be read, stop following them; True if any was found."""
        corrupt = []
        for job in self._jobs:
            try:
                self._store.ledger(job, 1)
                self._store.audit(job, 1)
            except StoreUnavailable:
                return False
            except StoreError as exc:
                corrupt.append((job, store_failure(exc)))  # (the answer once: not the URL again)
        for job, why in corrupt:
            self._jobs.remove(job)
            self.publish(sse("corrupt", {"job": job, "error": why}))
        return bool(corrupt)

    async def _compare_members(self) -> None:
        """Read the members (and the newest alert's id); announce what changed since the last read."""
        now_members = await asyncio.to_thread(self._store.members)
        stored = await asyncio.to_thread(self._store.membership)
        sig = _member_sig(now_members, stored)
        if self._members is not None and sig != self._members:
            alive = live_members(now_members, stored)
            voting = sum(1 for m in alive if m.info.get("voting") == "yes")
            self.publish(sse("members", {"alive": len(alive), "voting": voting}))
        self._members = sig
        if self._namespace:
            newest = await asyncio.to_thread(newest_alert_id, self._store)
            if self._alert is not None and newest and newest != self._alert:
                self.publish(sse("alerts", {"id": newest}))
            self._alert = newest

    @staticmethod
    def _event(e: LedgerEntry | AuditEntry) -> str:
        if isinstance(e, LedgerEntry):
            return sse("ledger", {"job": e.job, "slot_ms": e.fire_ms, "state": str(e.state)})
        return sse("audit", {"job": e.job, "action": str(e.action), "by": e.by, "at_ms": e.at_ms})
