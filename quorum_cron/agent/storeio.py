"""Carrying out the core's store actions without blocking the event loop.

Store calls are synchronous redis-py calls. They run on ONE dedicated worker
thread, in the order the core emitted them, so two actions about the same
slot (a start, then its renewals, then its finish) reach the store in order
and the loop keeps waking on time while a call is on the wire. Background
reads (heartbeats, clock probes, status) use a second thread, so a slow
membership call never delays a vote.

The worker translates each action into the store method of the same name;
:func:`perform` is that mapping, also used by tests.

A ``Finish`` carries the job's retry policy (the core's ``CoreJob``): the
store decides, in the same atomic step as the result, whether a failed run
is retried under a new token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

from quorum_cron.core import (
    Finish,
    ReadHighWater,
    ReadSlot,
    RecordMissed,
    Renew,
    Start,
    StoreAction,
    Sweep,
    Vote,
)
from quorum_cron.store.base import Store

__all__ = ["StoreWorker", "perform"]

T = TypeVar("T")


def perform(store: Store, node: str, action: StoreAction) -> object:
    """Call the store method ``action`` stands for, as node ``node``; return its reply."""
    match action:
        case Vote():
            return store.vote(action.requests)
        case Start():
            return store.start(action.job, action.fire_ms, node, action.token, action.lease_ms)
        case Renew():
            return store.renew(action.job, action.fire_ms, node, action.token, action.lease_ms)
        case Finish():
            return store.finish(
                action.job,
                action.fire_ms,
                node,
                action.token,
                action.succeeded,
                action.detail,
                action.retries,
                action.retry_backoff_ms,
            )
        case Sweep():
            return store.sweep(action.params)
        case ReadSlot():
            return store.slot(action.job, action.fire_ms)
        case ReadHighWater():
            return store.high_water(action.job)
        case RecordMissed():
            return store.record_missed(action.job, action.fire_ms, action.deadline_ms, action.reason)
    raise TypeError(f"not a store action: {action!r}")


class StoreWorker:
    """Two single-thread executors: ``protocol`` (core actions, in order) and ``background``."""

    def __init__(self, store: Store, node: str) -> None:
        self.store = store
        self.node = node
        self._protocol = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qc-store")
        self._background = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qc-store-bg")

    def submit(self, action: StoreAction) -> asyncio.Future[object]:
        """Queue ``action`` on the protocol thread; the future resolves on the running loop."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._protocol, perform, self.store, self.node, action)

    async def background(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (a store read or heartbeat) on the background thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._background, fn)

    def shutdown(self) -> None:
        """Stop accepting work; calls already queued still run (no waiting here)."""
        self._protocol.shutdown(wait=False, cancel_futures=True)
        self._background.shutdown(wait=False, cancel_futures=True)
