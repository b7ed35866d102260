"""The agent: an asyncio shell around the sans-I/O :class:`~quorum_cron.core.NodeCore`.

The core decides everything about the protocol; the agent only does what
the core cannot: read the real clocks, wait, talk to the store, run
processes. One loop, no fixed polling interval::

    tick(now) → actions → carry them out → sleep next_wakeup(now) ms,
                                            or until an event arrives

Events are store replies (answered with ``on_reply`` / ``on_failure`` as
soon as they arrive, on the loop thread), notices from the pub/sub listener
(assignments → ``on_assigned``, operator triggers → ``on_trigger``), job
processes ending (``on_run_finished``) and signals. Store calls run on one
worker thread in emission order (:mod:`.storeio`), so the loop wakes on time
even while a call is on the wire; at a slot's fire time the node wakes,
votes in one batch and — when the reply or a notice names it executor —
starts the process after one more round trip.

This module owns the loop, start and stop, the dispatch of the core's
actions and triggers. The rest lives in
modules that each own one thing:

* :mod:`.health` — store up/down, clock trust, membership and quorum health;
* :mod:`.executions` — the job processes (and ``run-local`` runs);
* :mod:`.observe` — logs, metrics and alerts from store replies.

**Triggers.** ``quorum-cron trigger JOB`` makes the store publish the slot
on the trigger channel, which the listener hears on the same connection as
assignments. Since a notice can be lost while the subscription or the store
is down, the node also reads the job's recent triggers
(``store.triggers(job, now - deadline)``) when its subscription comes up —
at start and after every reconnect — and whenever the store answers again
after an outage.

**Slot outcomes are the core's.** A slot this node could not vote for
(clock untrusted, store unreachable or refusing) is recorded ``missed`` by
the core, with the reason, once its deadline passed; a ``run-local`` job is
run here alone by the core's ``RunLocal`` while the store is unreachable.
The agent only reports how a store call failed (``Failure.UNREACHABLE`` for
:class:`StoreUnavailable`, ``Failure.REFUSED`` for any other error) and
whether the store answers its health probes.

**Graceful stop** (SIGTERM): vote no more, let running jobs finish within
the grace period, record their results, leave the membership, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import OrderedDict
from collections.abc import Coroutine, Sequence
from functools import partial

import redis
from redis.cluster import RedisCluster

from quorum_cron.agent.alerts import AlertHook
from quorum_cron.agent.executions import Runs
from quorum_cron.agent.health import NodeHealth
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.membership import NodeIdTaken
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.notify import Notice, NoticeListener, Trigger
from quorum_cron.agent.observe import Observer
from quorum_cron.agent.spec import AgentJob, AgentSettings
from quorum_cron.agent.storeio import StoreWorker
from quorum_cron.agent.triggers import MAX_VERIFYING, stored_triggers
from quorum_cron.clock import Clock, SystemClock
from quorum_cron.core import (
    Abstain,
    Action,
    Failure,
    Finish,
    Kill,
    NodeCore,
    Now,
    RecordMissed,
    Run,
    RunLocal,
    Start,
    StoreAction,
)
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.model import SlotState, SlotView, TransitionResult
from quorum_cron.store import keys as store_keys
from quorum_cron.store.base import Store

__all__ = ["EXIT_ID_TAKEN", "EXIT_OK", "Agent", "AgentJob", "AgentSettings"]

log = logging.getLogger(EVENT_LOGGER)

EXIT_OK = 0
EXIT_ID_TAKEN = 3

MAX_SEEN_TRIGGERS = 1_000
"""Bound on triggers remembered as already handed to the core (catch-up reads repeat them)."""
LISTENER_READY_S = 2.0
"""How long the start waits for the notice subscription (it works without, only slower)."""
FLUSH_TIMEOUT_MS = 10_000
"""After the last job ended at shutdown, how long results may take to reach the store."""


class Agent:
    """One node. ``await agent.run()`` returns the process exit code."""

    def __init__(
        self,
        settings: AgentSettings,
        jobs: Sequence[AgentJob],
        store: Store,
        *,
        clock: Clock | None = None,
        notices: redis.Redis | RedisCluster | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """``notices``: the redis-py client for pub/sub notices (None: rely on polls and catch-up reads)."""
        self.settings = settings
        self.node = settings.node_id
        self.jobs = {j.name: j for j in jobs}
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        self.core = NodeCore(settings.node, [j.core for j in jobs])
        self.metrics = metrics if metrics is not None else Metrics()
        self.alerts = AlertHook(self.node, command=settings.alert_command, url=settings.alert_url)
        self.observer = Observer(self.node, self.jobs, self.metrics, self.alerts)
        self._worker = StoreWorker(store, self.node)
        self.health = NodeHealth(
            settings,
            self.jobs,
            store,
            self._worker,
            clock=self.clock,
            metrics=self.metrics,
            alerts=self.alerts,
            observer=self.observer,
            set_trust=self.core.set_trust,
            poke=self._poke,
        )
        self.health.on_store_back = self._store_back
        self.health.on_store_down = partial(self.core.set_store_reachable, False)
        self.runs = Runs(
            self.node,
            self.jobs,
            clock=self.clock,
            metrics=self.metrics,
            tail_bytes=settings.tail_bytes,
            report=self._run_ended,
            poke=self._poke,
        )
        self._notices_client = notices
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: NoticeListener | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._bg: set[asyncio.Task[None]] = set()
        self._finishing: set[tuple[str, int]] = set()
        self._seen_triggers: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._verifying: set[tuple[str, int]] = set()
        self._catching_up = False
        self._catch_up_again = False
        self._stopping = False
        self._stop_deadline_mono = 0
        self._grace_expired = False
        self._exit_code = EXIT_OK
        self.ready = asyncio.Event()
        """Set once the node has joined and started its loop (tests, App)."""

    def __repr__(self) -> str:
        return f"Agent(node={self.node!r}, jobs={sorted(self.jobs)!r}, store={self.store!r})"

    # -- public --------------------------------------------------------------

    def now(self) -> Now:
        return Now(wall_ms=self.clock.wall_ms(), mono_ms=self.clock.monotonic_ms())

    def request_stop(self, why: str = "stop requested") -> None:
        """Graceful stop: vote no more, let running jobs finish within the grace period."""
        if self._stopping:
            return
        self._stopping = True
        self.health.voting_stopped = True
        self._stop_deadline_mono = self.clock.monotonic_ms() + self.settings.grace_ms
        self.core.stop_voting()
        event(
            log,
            logging.INFO,
            "stopping",
            f"{why}: no more votes; waiting for {len(self.runs)} running job(s)",
            grace_ms=self.settings.grace_ms,
            running=len(self.runs),
        )
        self._poke()

    def end_grace(self, why: str = "grace ended") -> None:
        """Stop now: running jobs are stopped (and recorded as failed) without waiting out the grace."""
        self.request_stop(why)
        self._stop_deadline_mono = self.clock.monotonic_ms()
        self._poke()

    async def run(self) -> int:
        """Join, run until stopped, leave. Raises :class:`NodeIdTaken` if the id is held."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        try:
            await self._join()
            await self._start_listener()
            self._tasks.append(asyncio.ensure_future(self.health.loop(self._on_id_taken)))
            self.ready.set()
            await self._main_loop()
        finally:
            await self._leave()
        return self._exit_code

    # -- start and stop ------------------------------------------------------

    async def _join(self) -> None:
        """First heartbeat (refused if the id is held) and first clock check, before any vote."""
        if not await self.health.first_contact(lambda: self._stopping):
            return
        if not self.settings.ntp_servers and self.health.trust.guard.policy.ntp_unreachable == "abstain":
            event(
                log,
                logging.ERROR,
                "trust",
                "no NTP servers configured and ntp_unreachable is 'abstain': this node can never trust its "
                "clock, so it will never vote; set cluster.ntp_servers, or ntp_unreachable = 'store-time'",
            )
        jobs = ", ".join(f"{j.name}={j.core.spec_hash[:12]}" for j in self.jobs.values())
        event(
            log,
            logging.INFO,
            "joined",
            f"node {self.node} joined {self.settings.namespace!r} (N={self.settings.size}, "
            f"Q={self.settings.node.quorum}); jobs: {jobs or 'none'}",
            incarnation=self.health.membership.incarnation,
            jobs=len(self.jobs),
            pid=os.getpid(),
        )

    async def _start_listener(self) -> None:
        """Subscribe to assignments and triggers before the first vote (else first slots fall to polling)."""
        client = self._notices_client
        if client is None:
            # e.g. a MemoryStore: the core's polls find assignments, reads find triggers.
            self._catch_up_triggers("start")
            return
        loop = self._loop
        assert loop is not None
        ns = self.settings.namespace
        assignments, triggers = [store_keys.assign_channel(ns, self.node)], [store_keys.trigger_channel(ns)]
        per_job = getattr(self.store, "notice_channels", None)
        if per_job is not None:
            # RedisStore: per job on a cluster (sharded pub/sub), else the two above.
            assignments, triggers = per_job(self.node, sorted(self.jobs))

        def deliver(item: Notice | Trigger) -> None:
            loop.call_soon_threadsafe(self._on_notice, item)

        def subscribed() -> None:
            loop.call_soon_threadsafe(self._catch_up_triggers, "subscribed")

        self._listener = NoticeListener(client, assignments, triggers, deliver, subscribed)
        self._listener.start()
        if not await asyncio.to_thread(self._listener.subscribed.wait, LISTENER_READY_S):
            event(log, logging.WARNING, "notices", "notice channels not subscribed yet: polling meanwhile")

    async def _leave(self) -> None:
        tasks = [*self._tasks, *self._bg]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._listener is not None:
            self._listener.stop()
            await asyncio.to_thread(self._listener.join, 2.0)
        await self.health.leave()
        await self.alerts.aclose()
        self._worker.shutdown()
        event(log, logging.INFO, "left", f"node {self.node} left", exit_code=self._exit_code)

    def _on_id_taken(self, exc: NodeIdTaken) -> None:
        event(log, logging.ERROR, "membership", f"{exc}; stopping")
        self._exit_code = EXIT_ID_TAKEN
        self.request_stop("node id taken over")

    # -- the loop ------------------------------------------------------------

    async def _main_loop(self) -> None:
        assert self._wake is not None and self._loop is not None
        wake = self._wake
        while True:
            wake.clear()
            self.health.update_trust()
            if self._stopping and self._stop_done():
                return
            self._dispatch(self.core.tick(self.now()))
            if wake.is_set():
                continue
            wait_ms = self.core.next_wakeup(self.now())
            if self._stopping:
                wait_ms = min(wait_ms, 100)
            handle = self._loop.call_later(wait_ms / 1000, wake.set)
            await wake.wait()
            handle.cancel()

    def _store_back(self) -> None:
        self.core.set_store_reachable(True)
        self._catch_up_triggers("store reachable again")

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _stop_done(self) -> bool:
        """True once every job ended and its result reached the store (or we gave up)."""
        mono = self.clock.monotonic_ms()
        if len(self.runs):
            if mono >= self._stop_deadline_mono and not self._grace_expired:
                self._grace_expired = True
                self.runs.stop_all("shutdown grace period expired")
                event(
                    log, logging.WARNING, "stopping", f"grace period over: stopping {len(self.runs)} job(s)"
                )
            return False
        if not self._finishing:
            return True
        if mono >= self._stop_deadline_mono + FLUSH_TIMEOUT_MS:
            event(
                log,
                logging.ERROR,
                "stopping",
                f"{len(self._finishing)} result(s) not recorded: store unreachable at shutdown",
                unrecorded=len(self._finishing),
            )
            return True
        return False

    # -- actions -------------------------------------------------------------

    def _dispatch(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case Run():
                    self.runs.start(action)
                case RunLocal():
                    self.runs.run_local(action, self.health.down_reason or "no answer")
                case Kill():
                    self.runs.kill(action)
                case Abstain():
                    self._on_abstain(action)
                case _:
                    self._call_store(action)

    def _call_store(self, action: StoreAction) -> None:
        if isinstance(action, Finish):
            self._finishing.add((action.job, action.fire_ms))
        fut = self._worker.submit(action)
        fut.add_done_callback(partial(self._on_store_done, action))

    def _on_store_done(self, action: StoreAction, fut: asyncio.Future[object]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            reply = fut.result()
            self.health.store_ok()
            if isinstance(action, Start) and isinstance(reply, TransitionResult) and reply.ok:
                self.runs.note_start(reply.slot)
            elif isinstance(action, Finish):
                self._finishing.discard((action.job, action.fire_ms))
            elif isinstance(action, RecordMissed) and isinstance(reply, SlotView):
                self._local_recorded(action, reply)
            self.observer.reply(action, reply)
            self._dispatch(self.core.on_reply(action, reply, self.now()))
        else:
            op = type(action).__name__.lower()
            self.metrics.store_errors.labels(op).inc()
            if isinstance(exc, StoreUnavailable):
                self.health.store_down(str(exc))
            elif isinstance(exc, StoreError):
                event(log, logging.ERROR, "store", f"{op} failed: {exc}", op=op)
            else:
                log.error("store call %s raised unexpectedly", op, exc_info=exc)
            failure = Failure.UNREACHABLE if isinstance(exc, StoreUnavailable) else Failure.REFUSED
            self._dispatch(self.core.on_failure(action, self.now(), failure, str(exc)))
        self._poke()

    def _local_recorded(self, action: RecordMissed, view: SlotView) -> None:
        """Log (and count) a local run that went into the ledger as its slot's missed record."""
        if view.state != SlotState.MISSED or view.reason != action.reason or "ran locally" not in view.reason:
            return
        self.metrics.slots.labels(action.job, "local").inc()
        event(
            log,
            logging.INFO,
            "local_recorded",
            f"{action.job}@{action.fire_ms} recorded: {view.reason}",
            job=action.job,
            slot=action.fire_ms,
        )

    def _run_ended(self, job: str, fire_ms: int, token: int, succeeded: bool, detail: str) -> None:
        self._dispatch(self.core.on_run_finished(job, fire_ms, token, succeeded, detail, self.now()))

    def _background(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    # -- notices and triggers ------------------------------------------------

    def _on_notice(self, item: Notice | Trigger) -> None:
        if isinstance(item, Trigger):
            # A notice is a hint (issue 11): act only on a trigger stored with its audit entry.
            key = (item.job, item.fire_ms)
            fresh = key not in self._seen_triggers and key not in self._verifying
            if item.job in self.jobs and fresh and len(self._verifying) < MAX_VERIFYING:
                self._verifying.add(key)
                self._background(self._verify_trigger(item.job, item.fire_ms))
            return
        event(
            log,
            logging.DEBUG,
            "notice",
            f"assigned {item.job}@{item.fire_ms} token {item.token}",
            job=item.job,
            slot=item.fire_ms,
            token=item.token,
        )
        self._dispatch(self.core.on_assigned(item.job, item.fire_ms, item.token, self.now()))
        self._poke()

    def _on_trigger(self, job: str, fire_ms: int, how: str) -> None:
        key = (job, fire_ms)
        if job not in self.jobs or key in self._seen_triggers:
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
        self._dispatch(self.core.on_trigger(job, fire_ms, self.now()))
        self._poke()

    async def _verify_trigger(self, job: str, fire_ms: int) -> None:
        try:
            found = await self._worker.background(partial(stored_triggers, self.store, job, fire_ms - 1))
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

    def _catch_up_triggers(self, why: str) -> None:
        """Read each job's triggers still inside their deadline (one read at a time, coalesced)."""
        if self._stopping or not self.jobs:
            return
        if self._catching_up:
            self._catch_up_again = True
            return
        self._catching_up = True
        self._background(self._read_triggers(why))

    async def _read_triggers(self, why: str) -> None:
        try:
            while True:
                self._catch_up_again = False
                wall = self.clock.wall_ms()
                found: list[tuple[str, int]] = []
                for job in self.jobs.values():
                    since = wall - job.core.deadline_ms
                    read = partial(stored_triggers, self.store, job.name, since)
                    fires = await self._worker.background(read)
                    found.extend((job.name, t) for t in fires)
                for name, fire_ms in found:
                    self._on_trigger(name, fire_ms, f"catch-up: {why}")
                if not self._catch_up_again:
                    return
        except StoreError as exc:
            # Retried when the store is back (``on_store_back``).
            event(log, logging.WARNING, "trigger", f"cannot read triggers ({why}): {exc}")
            if isinstance(exc, StoreUnavailable):
                self.health.store_down(str(exc))
        finally:
            self._catching_up = False

    # -- abstentions -----------------------------------------------------------

    def _on_abstain(self, action: Abstain) -> None:
        self.observer.abstain(action, "store" if not self.health.store_up else "clock")
