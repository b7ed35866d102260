"""Carrying out the core's store actions without blocking the event loop.

Store calls are synchronous redis-py calls. They run on ONE dedicated worker
thread, in the order the core emitted them, so two actions about the same
slot (a start, then its renewals, then its finish) reach the store in order
and the loop keeps waking on time while a call is on the wire. Background
reads (heartbeats, clock probes, status) use a second thread, so a slow
membership call never delays a vote.

The worker carries each action out with :func:`quorum_cron.core.perform.perform`,
the one mapping from an action to its store call (the simulator uses it too).

A ``Finish`` carries the job's retry policy (the core's ``CoreJob``): the
store decides, in the same atomic step as the result, whether a failed run
is retried under a new token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

from quorum_cron.core.node import StoreAction
from quorum_cron.core.perform import perform
from quorum_cron.store.base import Store

__all__ = ["StoreWorker"]

T = TypeVar("T")


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
        """Stop accepting work: a call on the wire finishes, queued ones are cancelled (no waiting)."""
        self._protocol.shutdown(wait=False, cancel_futures=True)
        self._background.shutdown(wait=False, cancel_futures=True)
