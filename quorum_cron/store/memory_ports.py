"""The model's notices and alerts journal: the twins of Redis pub/sub and the alerts stream.

Deterministic like the rest of the model: no thread, no real time. A
subscription (:class:`MemoryListening`) is a callback list: a notice is
delivered inside the store call that publishes it (Redis: the script's
``PUBLISH`` in the same atomic step), on the caller's thread, in order. A
subscriber hears assignments to its node (of any job, like the standalone
server's one channel per node) and every trigger. The journal is a list
bounded exactly like the stream (:data:`~quorum_cron.store.ports.ALERTS_MAXLEN`),
ids ``<store ms>-<seq>``. The simulator subscribes to nothing: its notices
are its own events, and with no subscriber a publish does nothing.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from quorum_cron.store.ports import ALERTS_MAXLEN, AlertPage, DeliverNotice, Notice, StoredAlert, Trigger

__all__ = ["MemoryAlerts", "MemoryListening", "MemoryNotices"]


class MemoryListening:
    """One subscription of :class:`MemoryNotices` (see :meth:`Store.listen_notices`)."""

    def __init__(
        self,
        hub: MemoryNotices,
        node: str,
        deliver: DeliverNotice,
        on_subscribed: Callable[[], None] | None,
    ) -> None:
        self._hub = hub
        self.node = node
        self.deliver = deliver
        self._on_subscribed = on_subscribed
        self.subscribed = threading.Event()
        """Set from :meth:`start` to :meth:`stop` (an Event for the protocol; no thread waits on it)."""

    def start(self) -> None:
        self._hub.listening.append(self)
        self.subscribed.set()
        if self._on_subscribed is not None:
            self._on_subscribed()

    def stop(self) -> None:
        self.subscribed.clear()
        if self in self._hub.listening:
            self._hub.listening.remove(self)

    def join(self, timeout: float | None = None) -> None:
        """Nothing to wait for: no thread."""


class MemoryNotices:
    """Who listens, and the two publishes the model's operations make."""

    def __init__(self) -> None:
        self.listening: list[MemoryListening] = []

    def listen(
        self,
        node: str,
        jobs: Sequence[str],
        deliver: DeliverNotice,
        on_subscribed: Callable[[], None] | None = None,
    ) -> MemoryListening:
        return MemoryListening(self, node, deliver, on_subscribed)

    def assigned(self, job: str, fire_ms: int, token: int, executor: str) -> None:
        for sub in list(self.listening):
            if sub.node == executor:
                sub.deliver(Notice(job, fire_ms, token))

    def triggered(self, job: str, fire_ms: int) -> None:
        for sub in list(self.listening):
            sub.deliver(Trigger(job, fire_ms))


class MemoryAlerts:
    """The alerts journal: the newest :data:`ALERTS_MAXLEN` alerts, oldest first."""

    def __init__(self, maxlen: int = ALERTS_MAXLEN) -> None:
        self._kept: deque[StoredAlert] = deque(maxlen=maxlen)
        self._seq = 0

    def add(self, alert: StoredAlert, now: int) -> None:
        self._seq += 1
        self._kept.append(replace(alert, fields=dict(alert.fields), id=f"{now}-{self._seq}"))

    def newest(self, limit: int) -> AlertPage:
        return AlertPage(tuple(reversed(self._kept))[: max(limit, 0)])
