"""What the node hears: assignment notices and operator triggers, into the core.

``quorum-cron trigger JOB`` makes the store publish the slot on the trigger
channel, which the store's notice subscription (``Store.listen_notices``:
pub/sub on Redis, a thread of its own) hears with the assignments. A
trigger notice is a hint: the node acts on it only once
:func:`~quorum_cron.agent.triggers.stored_triggers` finds it stored with its
audit entry. Since a notice can be lost while the subscription or the store
is down, the node also reads the job's recent triggers
(``store.triggers(job, now - deadline)``) when its subscription comes up —
at start and after every reconnect — and whenever the store answers again
after an outage. A read that fails is said once (until one succeeds) and
backs off (:data:`CATCH_UP_BACKOFF_MIN_MS` doubling to
:data:`CATCH_UP_BACKOFF_MAX_MS`): a catch-up asked for meanwhile waits for
the backoff, as one read. Why: during a failover the store answered and
failed in turn several times a second, and each answer started a read that
failed again — about 20 "cannot read triggers" lines per node in a second.
A job whose own keys fail its read (of the wrong type) is said once and left
out; the other jobs' triggers are still handed on.

Separate from :mod:`.runtime` (the loop and the dispatch of the core's
actions): this module owns the subscription and the bookkeeping of which
triggers were handed to the core, checked, or are being read; it hands the
core only what it heard, through the callbacks the runtime gives it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from functools import partial

from quorum_cron.agent.health import NodeHealth
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.spec import AgentJob, AgentSettings
from quorum_cron.agent.storeio import StoreWorker
from quorum_cron.agent.triggers import MAX_VERIFYING, stored_triggers
from quorum_cron.clock.base import Clock
from quorum_cron.core.node import Action, NodeCore, Now
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.base import Notice, NoticeListening, Store, Trigger

__all__ = [
    "CATCH_UP_BACKOFF_MAX_MS",
    "CATCH_UP_BACKOFF_MIN_MS",
    "LISTENER_READY_S",
    "MAX_SEEN_TRIGGERS",
    "Intake",
]

log = logging.getLogger(EVENT_LOGGER)

MAX_SEEN_TRIGGERS = 1_000
"""Bound on triggers remembered as already handed to the core (catch-up reads repeat them)."""
LISTENER_READY_S = 2.0
"""How long the start waits for the notice subscription (it works without, only slower)."""
CATCH_UP_BACKOFF_MIN_MS = 200
CATCH_UP_BACKOFF_MAX_MS = 5_000
"""After a failed catch-up read, the next waits this long (doubling from the minimum; a read that
succeeds resets it)."""


class Intake:
    """The notice subscription and the operator triggers of one node (see the module docstring).

    ``listen``: subscribe to the store's notices (False: rely on the core's
    polls and the catch-up reads alone). ``dispatch`` carries out the core's
    actions, ``now`` reads the clocks,
    ``poke`` wakes the loop, ``background`` runs a coroutine the runtime
    cancels at shutdown, ``stopping`` says whether the node is stopping
    (no more catch-up reads then).
    """

    def __init__(
        self,
        settings: AgentSettings,
        jobs: Mapping[str, AgentJob],
        store: Store,
        worker: StoreWorker,
        *,
        core: NodeCore,
        clock: Clock,
        health: NodeHealth,
        listen: bool,
        dispatch: Callable[[list[Action]], None],
        now: Callable[[], Now],
        poke: Callable[[], None],
        background: Callable[[Coroutine[object, object, None]], None],
        stopping: Callable[[], bool],
    ) -> None:
        self._settings = settings
        self._node = settings.node_id
        self._jobs = jobs
        self._store = store
        self._worker = worker
        self._core = core
        self._clock = clock
        self._health = health
        self._listen = listen
        self._dispatch = dispatch
        self._now = now
        self._poke = poke
        self._background = background
        self._stopping = stopping
        self._listener: NoticeListening | None = None
        self._seen_triggers: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._verifying: set[tuple[str, int]] = set()
        self._catching_up = False
        self._catch_up_again = False
        self._read_error: type[StoreError] | None = None
        """The kind of error of the last catch-up read while they fail (said once per kind: an outage,
        a refusal), None once one succeeded."""
        self._backoff_ms = 0
        self._retry_mono = 0
        """No catch-up read before this monotonic time (after a failed one)."""
        self._unreadable: dict[str, str] = {}
        """Jobs whose own catch-up read failed while the others' did not, with what was said."""

    async def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Subscribe to assignments and triggers before the first vote (else first slots fall to polling)."""
        if not self._listen:
            # The core's polls find assignments, reads find triggers.
            self.catch_up("start")
            return

        def deliver(item: Notice | Trigger) -> None:
            loop.call_soon_threadsafe(self._on_notice, item)

        def subscribed() -> None:
            loop.call_soon_threadsafe(self._subscribed)

        self._listener = self._store.listen_notices(self._node, sorted(self._jobs), deliver, subscribed)
        self._listener.start()
        if not await asyncio.to_thread(self._listener.subscribed.wait, LISTENER_READY_S):
            event(log, logging.WARNING, "notices", "notice channels not subscribed yet: polling meanwhile")

    async def stop(self) -> None:
        """Stop the listener thread (bounded wait for it to end)."""
        if self._listener is not None:
            self._listener.stop()
            await asyncio.to_thread(self._listener.join, 2.0)

    def _subscribed(self) -> None:
        """Live (again): the core polls what a lost notice may have assigned and parks, rather
        than polls, what it awaits from now on (issue 27); the triggers are read again."""
        self._core.notices_subscribed()
        self._poke()
        self.catch_up("subscribed")

    def _on_notice(self, item: Notice | Trigger) -> None:
        if isinstance(item, Trigger):
            # A notice is a hint (issue 11): act only on a trigger stored with its audit entry.
            key = (item.job, item.fire_ms)
            fresh = key not in self._seen_triggers and key not in self._verifying
            if item.job in self._jobs and fresh and len(self._verifying) < MAX_VERIFYING:
                self._verifying.add(key)
                self._background(self._verify_trigger(item.job, item.fire_ms))
            return
        if log.isEnabledFor(logging.DEBUG):  # one per assignment: not even formatted at INFO (issue 27)
            event(
                log,
                logging.DEBUG,
                "notice",
                f"assigned {item.job}@{item.fire_ms} token {item.token}",
                job=item.job,
                slot=item.fire_ms,
                token=item.token,
            )
        self._dispatch(self._core.on_assigned(item.job, item.fire_ms, item.token, self._now()))
        self._poke()

    def _on_trigger(self, job: str, fire_ms: int, how: str) -> None:
        key = (job, fire_ms)
        if job not in self._jobs or key in self._seen_triggers:
            return
        self._seen_triggers[key] = None
        while len(self._seen_triggers) > MAX_SEEN_TRIGGERS:
            self._seen_triggers.popitem(last=False)
        event(
            log,
            logging.INFO,
            "trigger",
            f"{job}@{fire_ms} triggered by an operator ({how}): voting for it",
            job=job,
            slot=fire_ms,
            how=how,
        )
        self._dispatch(self._core.on_trigger(job, fire_ms, self._now()))
        self._poke()

    async def _verify_trigger(self, job: str, fire_ms: int) -> None:
        try:
            found = await self._worker.background(partial(stored_triggers, self._store, job, fire_ms - 1))
        except StoreError as exc:
            event(log, logging.WARNING, "trigger", f"cannot check trigger {job}@{fire_ms}: {exc}")
            return
        finally:
            self._verifying.discard((job, fire_ms))
        if fire_ms in found:
            self._on_trigger(job, fire_ms, "notice")
        else:
            event(
                log,
                logging.WARNING,
                "trigger",
                f"{job}@{fire_ms}: trigger notice without a stored, audited trigger: ignored",
                job=job,
                slot=fire_ms,
            )

    def catch_up(self, why: str) -> None:
        """Read each job's triggers still inside their deadline (one read at a time, coalesced)."""
        if self._stopping() or not self._jobs:
            return
        if self._catching_up:
            self._catch_up_again = True
            return
        self._catching_up = True
        self._background(self._read_triggers(why))

    async def _read_triggers(self, why: str) -> None:
        try:
            while True:
                wait_ms = self._retry_mono - self._clock.monotonic_ms()
                if wait_ms > 0:  # (a read failed just now: the next waits, whoever asks for it)
                    await asyncio.sleep(wait_ms / 1000)
                    if self._stopping():
                        return
                self._catch_up_again = False
                try:
                    found = await self._read_all()
                except StoreError as exc:
                    self._read_failed(why, exc)
                    if not self._catch_up_again:
                        return  # (retried when asked again: the store back, a resubscription)
                    continue
                if self._read_error is not None:
                    self._read_error = None
                    event(log, logging.INFO, "trigger", f"triggers read again ({why})")
                self._backoff_ms = 0
                self._retry_mono = 0
                for name, fire_ms in found:
                    self._on_trigger(name, fire_ms, f"catch-up: {why}")
                if not self._catch_up_again:
                    return
        finally:
            self._catching_up = False

    async def _read_all(self) -> list[tuple[str, int]]:
        """Each job's stored triggers still inside its deadline.

        A job whose own read fails (its trigger set or audit of the wrong type: a
        :class:`StoreError` that is no outage) is said and left out, once per job and error, so
        that it cannot hide the other jobs' triggers: one such key failed the whole read, and
        every catch-up after it, for every job. When every job's read fails the read fails (a
        store-wide error, said once and backed off like an outage).
        """
        wall = self._clock.wall_ms()
        found: list[tuple[str, int]] = []
        failed: dict[str, StoreError] = {}
        jobs = list(self._jobs.values())  # (a reload may swap the table between reads)
        for job in jobs:
            since = wall - job.core.deadline_ms
            read = partial(stored_triggers, self._store, job.name, since)
            try:
                fires = await self._worker.background(read)
            except StoreUnavailable:
                raise
            except StoreError as exc:
                failed[job.name] = exc
                continue
            self._unreadable.pop(job.name, None)
            found.extend((job.name, t) for t in fires)
        if failed and len(failed) == len(jobs):
            raise next(iter(failed.values()))
        for name, err in failed.items():
            if self._unreadable.get(name) != str(err):
                self._unreadable[name] = str(err)
                event(log, logging.WARNING, "trigger", f"cannot read the triggers of {name}: {err}", job=name)
        return found

    def _read_failed(self, why: str, exc: StoreError) -> None:
        """A catch-up read failed: said once per kind of error until one succeeds; the next waits a
        backoff."""
        self._backoff_ms = min(CATCH_UP_BACKOFF_MAX_MS, max(CATCH_UP_BACKOFF_MIN_MS, 2 * self._backoff_ms))
        self._retry_mono = self._clock.monotonic_ms() + self._backoff_ms
        if type(exc) is not self._read_error:
            event(log, logging.WARNING, "trigger", f"cannot read triggers ({why}): {exc}")
        self._read_error = type(exc)
        if isinstance(exc, StoreUnavailable):
            self._health.store_down(str(exc))
