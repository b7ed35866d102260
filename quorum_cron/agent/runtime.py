"""The agent: an asyncio shell around the sans-I/O :class:`~quorum_cron.core.node.NodeCore`.

The core decides everything about the protocol; the agent only does what
the core cannot: read the real clocks, wait, talk to the store, run
processes. One loop, no fixed polling interval::

    tick(now) → actions → carry them out → sleep next_wakeup(now) ms,
                                            or until an event arrives

Events are store replies (answered with ``on_reply`` / ``on_failure`` as soon as they
arrive, on the loop thread), notices from the pub/sub listener (assignments →
``on_assigned``, operator triggers → ``on_trigger``), job processes ending
(``on_run_finished``) and signals. Store calls run on one worker thread in emission order
(:mod:`.storeio`), so the loop wakes on time even while a call is on the wire; at a slot's
fire time the node wakes, votes in one batch and — when the reply or a notice names it
executor — starts the process after one more round trip.

This module owns the loop, start and stop, and the dispatch of the core's
actions. The rest lives in modules that each own one thing:

* :mod:`.intake` — assignment notices and operator triggers (the subscription,
  catch-up reads after a reconnect or an outage);
* :mod:`.health` — store up/down, clock trust, membership and quorum health;
* :mod:`.executions` — the job processes (and ``run-local`` runs);
* :mod:`.observe` — logs, metrics and alerts from store replies.

**Slot outcomes are the core's.** A slot this node could not vote for (clock untrusted, store unreachable or
refusing) is recorded ``missed`` by the core, with the reason, once its deadline passed; a ``run-local`` job
is run here alone by the core's ``RunLocal`` while the store is unreachable. The agent only reports how a
store call failed (``Failure.UNREACHABLE`` for :class:`StoreUnavailable` but one cluster master's ``WAIT``
shortfall, see :mod:`.shortmasters`; ``Failure.REFUSED`` for any other error) and whether the store answers
its health probes.

**Graceful stop** (SIGTERM): vote no more, let running jobs finish within the grace period, record their
results, leave the membership, exit 0. A second signal (:meth:`Agent.end_grace`) stops the running jobs at
once and records that cause on their slots, not "grace period expired". A node whose id is held by a live
process never joined: it logs ``not_joined`` (exit 3), never ``left``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from functools import partial

from quorum_cron.agent import heap
from quorum_cron.agent.alerts import AlertHook, AlertJournal
from quorum_cron.agent.allocator import BurstTrim
from quorum_cron.agent.definitions import Definitions
from quorum_cron.agent.executions import Runs
from quorum_cron.agent.health import NodeHealth
from quorum_cron.agent.intake import Intake
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.membership import NodeIdTaken, new_incarnation
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.observe import SUMMARY_INTERVAL_S, Observer
from quorum_cron.agent.shortmasters import sent
from quorum_cron.agent.spec import AgentJob, AgentSettings
from quorum_cron.agent.storeio import StoreWorker, waited
from quorum_cron.clock.base import Clock, SystemClock
from quorum_cron.core.actions import Refused, Renew, handlers
from quorum_cron.core.model import MembershipRecord, SlotState, TransitionResult, VoteStatus
from quorum_cron.core.node import (
    Abstain,
    Action,
    Finish,
    JobChanges,
    Kill,
    NodeCore,
    Now,
    Run,
    RunLocal,
    Start,
    StoreAction,
    Vote,
)
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.base import Store

__all__ = ["EXIT_ID_TAKEN", "EXIT_OK", "Agent", "AgentJob", "AgentSettings"]

log = logging.getLogger(EVENT_LOGGER)

EXIT_OK = 0
EXIT_ID_TAKEN = 3

JOINED_JOBS_LISTED = 20
"""The ``joined`` line names this many jobs (with their definition hashes) and counts the rest."""

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
        notices: object = None,
        metrics: Metrics | None = None,
    ) -> None:
        """``notices``: when true (any true value, e.g. the store's redis-py client), subscribe to
        the store's notices (``Store.listen_notices``); None or False: polls and catch-up reads."""
        if not settings.node.incarnation:  # (this process's: its heartbeats, the starts its votes fold)
            settings = replace(settings, node=replace(settings.node, incarnation=new_incarnation()))
        self.settings = settings
        self.node = settings.node_id
        self.jobs = {j.name: j for j in jobs}
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        # (A phase step the lifecycle table lacks is a core bug the simulator looks for: here it is logged.)
        self.core = NodeCore(settings.node, [j.core for j in jobs], report_illegal_step=log.error)
        self.metrics = metrics if metrics is not None else Metrics()
        # Every alert is also kept in the store (its alerts journal: the web face's Cluster page reads it).
        self.alerts = AlertHook(
            self.node, command=settings.alert_command, url=settings.alert_url, journal=AlertJournal(store)
        )
        self.observer = Observer(self.node, self.jobs, self.metrics, self.alerts)
        self._worker = StoreWorker(store, self.node, sent=(self.clock.monotonic_ms, self.core.sent))
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
        self.health.on_record = self._on_record
        self.health.on_store_down = partial(self.core.set_store_reachable, False)
        self.runs = Runs(
            self.node,
            self.jobs,
            clock=self.clock,
            metrics=self.metrics,
            tail_bytes=settings.tail_bytes,
            report=self._run_ended,
            poke=self._poke,
            output_log_lines=settings.output_log_lines,
            output_log_rate=settings.output_log_rate,
            lines=self.observer.lines,
        )
        self.intake = Intake(
            settings,
            self.jobs,
            store,
            self._worker,
            core=self.core,
            clock=self.clock,
            health=self.health,
            listen=bool(notices),
            dispatch=self._dispatch,
            now=self.now,
            poke=self._poke,
            background=self._background,
            stopping=lambda: self._stopping,
        )
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._bg: set[asyncio.Task[None]] = set()
        self._finishing: set[tuple[str, int]] = set()
        self._voting = 0  # votes on their way: one may start a slot here (a stop waits for its reply)
        self._after_reply = handlers(type(self), "_replied_", fallback=type(self)._replied_other)
        """Store action type → what the runtime itself does with its reply (most: nothing)."""
        self._stopping = False
        self._stop_deadline_mono = 0
        self._grace_expired = False
        self._grace_cut: str | None = None  # why a second signal cut the grace short: the runs' cause
        self._joined = False
        self._exit_code = EXIT_OK
        self._summary_mono = self.clock.monotonic_ms()
        self._trim = BurstTrim()
        self.definitions = Definitions(self.jobs)  # each slot's definition, across reloads
        self.ready = asyncio.Event()  # set once the node has joined and started its loop (tests, App)

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
        if self._grace_cut is None:
            self._grace_cut = why
        self._stop_deadline_mono = self.clock.monotonic_ms()
        self._poke()

    def replace_jobs(self, jobs: Sequence[AgentJob]) -> JobChanges:
        """Run ``jobs`` from now on (a config reload; call it on the loop's thread).

        The core applies a changed job from its next slot (``NodeCore.replace_jobs``); here the
        command, environment and timeout follow the same boundary: a slot the node took in before the
        reload (voted, committed, retried) runs the definition it was voted under, and a run already
        going is left alone. A removed job's slots already taken in still run. The job table shared
        with the agent's parts is updated in place (and settled: :mod:`~quorum_cron.agent.heap`).
        """
        changes = self.core.replace_jobs([j.core for j in jobs], self.now())
        self.definitions.swap({j.name: j for j in jobs}, changes)
        self.health.jobs_changed()
        if changes.added and self._loop is not None and not self._stopping:
            self._background(self._resubscribe())
        self._poke()
        return changes

    async def _resubscribe(self) -> None:
        """An added job's notices (assignments, triggers) come on channels of its own: listen again
        (and read the triggers made meanwhile: the intake's catch-up once subscribed)."""
        assert self._loop is not None
        await self.intake.stop()
        await self.intake.start(self._loop)

    async def run(self) -> int:
        """Join, run until stopped, leave. Raises :class:`NodeIdTaken` if the id is held."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        try:
            await self._join()
            await self.intake.start(self._loop)
            self._tasks.append(asyncio.ensure_future(self.health.loop(self._on_id_taken)))
            self._tasks.append(asyncio.ensure_future(self._summaries()))
            heap.settle(len(self.jobs))
            self.ready.set()
            await self._main_loop()
        except NodeIdTaken:
            self._exit_code = EXIT_ID_TAKEN
            raise
        finally:
            await self._leave()
        return self._exit_code

    # -- start and stop ------------------------------------------------------

    async def _join(self) -> None:
        """First heartbeat (refused if the id is held) and first clock check, before any vote."""
        if not await self.health.first_contact(lambda: self._stopping):
            return
        self._joined = True
        if not self.settings.ntp_servers and self.health.trust.guard.policy.ntp_unreachable == "abstain":
            event(
                log,
                logging.ERROR,
                "trust",
                "no NTP servers configured and ntp_unreachable is 'abstain': this node can never trust its "
                "clock, so it will never vote; set cluster.ntp_servers, or ntp_unreachable = 'store-time'",
            )
        # The first jobs and their hashes, not all (100,000 jobs: a 2 MB line; a mismatch alerts per job).
        listed = [f"{j.name}={j.core.spec_hash[:12]}" for j in list(self.jobs.values())[:JOINED_JOBS_LISTED]]
        more = len(self.jobs) - len(listed)
        jobs = ", ".join(listed) + (f" and {more} more" if more > 0 else "")
        record = self.health.record
        held = (
            f"membership {record.describe()}"
            if record is not None
            else f"N={self.settings.size}, Q={self.settings.node.quorum}"
        )
        event(
            log,
            logging.INFO,
            "joined",
            f"node {self.node} joined {self.settings.namespace!r} ({held}); jobs: {jobs or 'none'}",
            epoch=record.epoch if record is not None else 0,
            incarnation=self.health.membership.incarnation,
            jobs=len(self.jobs),
            pid=os.getpid(),
        )

    async def _leave(self) -> None:
        tasks = [*self._tasks, *self._bg]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.intake.stop()
        await self.health.leave()
        await self.alerts.aclose()
        self._worker.shutdown()
        self._summary()  # what the last partial interval saw
        # (Refused at its first heartbeat, it never joined: "left ... exit 0" would belie "exit 3".)
        if self._joined:
            event(log, logging.INFO, "left", f"node {self.node} left", exit_code=self._exit_code)
        else:
            event(
                log, logging.INFO, "not_joined", f"node {self.node} did not join", exit_code=self._exit_code
            )

    async def _summaries(self) -> None:
        """A ``summary`` line every :data:`SUMMARY_INTERVAL_S` (observe.py's docstring says why)."""
        while True:
            await asyncio.sleep(SUMMARY_INTERVAL_S)
            self._summary()

    def _summary(self) -> None:
        mono = self.clock.monotonic_ms()
        since, self._summary_mono = mono - self._summary_mono, mono
        self.observer.summary(round(since / 1000, 1))  # (the time since the last line, or the start)

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
            handle = self._loop.call_later(wait_ms / 1000, wake.set)  # (before a trim: on time after it)
            self._trim.idle(self.clock.monotonic_ms(), wait_ms, self._voting + len(self._finishing))
            await wake.wait()
            handle.cancel()

    def _store_back(self) -> None:
        self.core.set_store_reachable(True)
        self.intake.catch_up("store reachable again")

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _stop_done(self) -> bool:
        """True once every job ended and its result reached the store (or we gave up)."""
        mono = self.clock.monotonic_ms()
        if len(self.runs):
            if mono >= self._stop_deadline_mono and not self._grace_expired:
                self._grace_expired = True
                # A second signal cut the grace short: the runs record that cause, not an expiry.
                cut = self._grace_cut
                why = (
                    "shutdown grace period expired" if cut is None else f"{cut} before the grace period ended"
                )
                self.runs.stop_all(why)
                said = "grace period over" if cut is None else why
                event(log, logging.WARNING, "stopping", f"{said}: stopping {len(self.runs)} job(s)")
            return False
        if self._voting and mono < self._stop_deadline_mono:
            return False  # (a vote's reply may start a slot here: docs/protocol.md, "A start folded ...")
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
                    self._start(action)
                case RunLocal():
                    self.runs.run_local(action, self.health.down_reason or "no answer")
                case Kill():
                    self.runs.kill(action)
                case Abstain():
                    self._on_abstain(action)
                case Refused():
                    self.health.refused(action, self.core.membership)
                case _:
                    self._call_store(action)

    def _start(self, action: Run) -> None:
        """Run the slot under its own definition (another than the current one after a reload)."""
        job = self.definitions.job_for(action.job, action.fire_ms)
        if job is None or job is self.jobs.get(action.job):
            self.runs.start(action)
        else:
            self.runs.start(replace(action, timeout_ms=job.core.timeout_ms), job)

    def _call_store(self, action: StoreAction) -> None:
        if isinstance(action, Finish):
            self._finishing.add((action.job, action.fire_ms))
        self._voting += len(action.requests) if isinstance(action, Vote) else 0
        self._worker.submit_then(action, self._on_store_done)

    def _on_store_done(self, action: StoreAction, reply: object, exc: BaseException | None) -> None:
        self._voting -= len(action.requests) if isinstance(action, Vote) else 0  # (a part, or the rest)
        if isinstance(exc, asyncio.CancelledError):  # dropped by the worker's shutdown
            return
        if exc is None:
            self.health.store_ok(replicated=waited(action))  # (only a write ends a WAIT shortfall)
            self._after_reply[type(action)](self, action, reply)
            self.observer.reply(action, reply)
            self._dispatch(self.core.on_reply(action, reply, self.now()))
        else:
            op = type(action).__name__.lower()
            if sent(exc):  # (a vote held back for its master's shortfall is no failed call: .shortmasters)
                self.metrics.store_errors.labels(op).inc()
            if isinstance(exc, StoreUnavailable):
                self.health.store_down(str(exc))
            elif isinstance(exc, StoreError):
                event(log, logging.ERROR, "store", f"{op} failed: {exc}", op=op)
            else:
                log.error("store call %s raised unexpectedly", op, exc_info=exc)
            failure = self.health.masters.failure(exc, self.core.store_reachable)  # (.shortmasters)
            dropped = self.core.dropped_finishes
            self._dispatch(self.core.on_failure(action, self.now(), failure, str(exc)))
            if self.core.dropped_finishes > dropped and isinstance(action, Finish):  # (only a Finish's)
                self._finishing.discard((action.job, action.fire_ms))
                self.observer.finish_dropped(action, str(exc))
        self._poke()

    # -- the runtime's own handling of a reply, per store action type (core.actions.handlers) --

    def _replied_start(self, action: Start | Renew, reply: object) -> None:
        if isinstance(reply, TransitionResult) and reply.ok:  # (a renew's: a start it confirmed)
            self.runs.note_start(reply.slot)

    _replied_renew = _replied_start

    def _replied_finish(self, action: Finish, reply: object) -> None:
        self._finishing.discard((action.job, action.fire_ms))

    def _replied_vote(self, action: Vote, reply: object) -> None:
        for res in reply if isinstance(reply, list) else ():
            if res.slot.state is SlotState.RUNNING and res.status is VoteStatus.COMMITTED:
                self.runs.note_start(res.slot)  # (our vote committed and started it: its run's line)

    def _replied_other(self, action: StoreAction, reply: object) -> None:
        """Sweeps, reads and missed records: the core and the observer act on them."""

    def _run_ended(self, job: str, fire_ms: int, token: int, succeeded: bool, detail: str) -> None:
        self._dispatch(self.core.on_run_finished(job, fire_ms, token, succeeded, detail, self.now()))

    def _background(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    # -- abstentions -----------------------------------------------------------

    def _on_abstain(self, action: Abstain) -> None:
        if self.health.store_up and (not self.core.is_member or self.health.membership_problem):
            # Said once per epoch (or at start) by the health; counted here, with no line per slot.
            self.observer.abstain(action, "membership")
            return
        self.observer.abstain(action, "store" if not self.health.store_up else "clock")

    # -- membership ------------------------------------------------------------

    def _on_record(self, record: MembershipRecord) -> None:
        """A newer membership record (at start, a heartbeat's reply): the core votes under it at once
        (a member's votes again for undecided slots may be what a job behind awaits: docs/protocol.md)."""
        if self.core.set_membership(record):
            self._poke()
