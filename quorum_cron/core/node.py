"""The node core: quorum-cron's protocol logic, with no I/O.

Inputs go in (the time, the clock's trust, store replies, "the job process
ended"), actions come out (vote, start, renew, finish, sweep, run, kill,
abstain). The core never reads a clock, sleeps, touches Redis, spawns
processes or draws random numbers, so the asyncio agent and the
deterministic simulator drive the very same logic — the h11 pattern.

The rules, in the order :meth:`NodeCore.tick` applies them:

=====================  ===================================================
when                   the core emits
=====================  ===================================================
slot ``t`` comes due   ``Vote`` (wall clock ≥ ``t - vote_lead``; batched;
(clock trusted)        or ``Abstain`` once per slot while the clock is not
                       trusted (the slot stays pending until its deadline,
                       then is recorded missed — once the outcome of a vote
                       still in flight is known)
vote reply             ``Start`` when the reply names this node executor
                       (deferred until the wall clock reaches ``t``);
                       otherwise the slot is awaited: a ``ReadSlots`` poll
                       (one per tick for every slot due) as a fallback for a
                       lost assignment notice, or, subscribed to notices,
                       parked and forgotten unread (:mod:`.polls`)
start reply ok         ``Run`` (the runtime starts the job process); also
                       when a read shows the slot running under a start
                       whose reply was lost (within half a lease of it)
running, every lease/3 ``Renew``; a refused renew → ``Kill``
job process ended      ``Finish`` (retried until the store answers); a
                       failed run with retries left comes back committed,
                       and is started when its backoff ends
operator trigger       ``on_trigger``: the slot is voted like any other
sweep timer            ``Sweep`` of every job's deadlines; a slot handed to
                       this node by a takeover → ``Start``; the next sweep
                       when the reply says a slot can next be due (at least
                       :func:`~quorum_cron.core.timers.min_sweep_gap`, at most
                       :func:`~quorum_cron.core.timers.sweep_gap`'s cap)
first tick             one ``ReadHighWater`` for every job, then ``RecordMissed``
                       for slots nobody voted for while the cluster was down
                       (or, under misfire ``run-once``, a vote for the
                       latest of them with a widened deadline)
config reload          ``replace_jobs`` (:mod:`~quorum_cron.core.jobswap`): a changed
                       job from its next slot; slots already taken in keep theirs
store call failed      the same call again after ``retry_ms``; with the store
                       unreachable, votes and polls wait for it to answer
                       (the sweep probes) and missed records go one at a time
=====================  ===================================================

Wall time decides *when a slot is due*; monotonic time paces durations
(renewals, retries, sweeps), so a wall-clock step never shortens a lease.
Safety never depends on either: the store's script decides the window.
"""

from __future__ import annotations

from heapq import heappop

from quorum_cron.core.actions import (
    Abstain,
    Action,
    CoreJob,
    Failure,
    Finish,
    Kill,
    NodeSettings,
    Now,
    ReadHighWater,
    ReadSlots,
    RecordMissed,
    Refused,
    Renew,
    Run,
    RunLocal,
    ScheduleLike,
    Start,
    StoreAction,
    Sweep,
    Vote,
)
from quorum_cron.core.finish import FinishingSide
from quorum_cron.core.inspection import Inspection
from quorum_cron.core.jobswap import JobChanges, JobSwap
from quorum_cron.core.model import (
    SweepResult,
    VoteRequest,
)
from quorum_cron.core.retries import jobs_of
from quorum_cron.core.slots import LOCAL_ENDED, LOCAL_NO, LOCAL_OWED, LOCAL_RUNNING, Pending
from quorum_cron.core.state import _JobState
from quorum_cron.core.timers import NEVER, max_sweep_gap, sweep_gap
from quorum_cron.core.vote import VotingSide
from quorum_cron.core.wire import WireTimes

__all__ = [
    "Abstain",
    "Action",
    "CoreJob",
    "Failure",
    "Finish",
    "JobChanges",
    "Kill",
    "NodeCore",
    "NodeSettings",
    "Now",
    "ReadHighWater",
    "ReadSlots",
    "RecordMissed",
    "Refused",
    "Renew",
    "Run",
    "RunLocal",
    "ScheduleLike",
    "Start",
    "StoreAction",
    "Sweep",
    "Vote",
]

_NEVER = NEVER


class NodeCore(VotingSide, Inspection, FinishingSide, WireTimes, JobSwap):
    """One node's protocol state. Drive it with :meth:`tick` and the ``on_*`` methods.

    Every method returns the actions to carry out now, in order. Each store
    action must eventually be answered with :meth:`on_reply` or
    :meth:`on_failure` (a lost reply is a failure: the core retries, and
    every store call is idempotent).

    Both :meth:`tick` and :meth:`next_wakeup` cost O(log jobs) per job that
    changed or fell due, not O(jobs): each job caches its earliest timers,
    kept in heaps (stale entries are dropped when they surface), and every
    input that touches a job marks it dirty so its timers are recomputed.
    Timers are kept as absolute readings of the clock they wait on — wall
    (fire times, deferred starts, the drop time of a slot) or monotonic
    (retries, polls, renewals) — so a wall-clock step needs no invalidation;
    a change of trust (which decides what a pending slot waits for) and
    :meth:`stop_voting` mark every job dirty.
    """

    def set_trust(self, trusted: bool, reason: str = "") -> None:
        """Tell the core whether this node's clock may be used to vote."""
        if trusted != self._trusted:
            self._dirty.update(range(len(self._by_index)))
            if not trusted:
                # Votes held for the store to answer become abstentions, which need no store.
                self._release_held()
        self._trusted = trusted
        self._trust_reason = reason or ("clock trusted" if trusted else "clock not trusted")
        may_vote = trusted and self._member
        if may_vote != self._may_vote:
            self._may_vote = may_vote
            self._touch_votes()
            self._settle()

    @property
    def trusted(self) -> bool:
        return self._trusted

    def set_store_reachable(self, reachable: bool, reason: str = "") -> None:
        """Tell the core whether the store answers (the runtime's own probes; the core also
        learns it from its calls: a reply means reachable, an ``UNREACHABLE`` failure not)."""
        if reachable != self._reachable:
            self._dirty.update(self._local_jobs)  # (only run-local jobs' timers depend on it)
            if reachable:
                # Back: what backed off or was held while it was away goes at the next tick.
                self._retries.release()
                self._release_held()
        self._reachable = reachable
        if not reachable:
            self._unreachable_reason = reason or "store unreachable"

    @property
    def store_reachable(self) -> bool:
        return self._reachable

    def notices_subscribed(self) -> None:
        """The node's assignment notices are subscribed (again); those sent before may be lost.

        Every slot awaiting its assignment is polled at the next tick, and
        from now on a slot still proposed is parked, not polled
        (:mod:`quorum_cron.core.polls`). The agent calls this each time the
        store confirms its subscription; the simulator at boot and once a
        dropped notice's link is back.
        """
        self._notices_live = True
        self._poll_awaiting_now()

    def stop_voting(self) -> None:
        """Graceful shutdown: vote no more; running jobs still renew and finish."""
        self._stopping = True
        for js in self._jobs.values():
            for slot in js.slots.values():
                # (A vote in flight: its reply may start the slot here. A slot run locally, or a
                # run-once slot whose deadline a catch-up widened: records of later slots wait for
                # its own, which a restart's catch-up then makes.)
                p = slot.vote
                keep = p is not None and (
                    p.in_flight or p.local in LOCAL_OWED or slot.fire_ms in self._widened.get(js.job.name, ())
                )
                if (slot.vote is not None and not keep) or slot.poll_at is not None:
                    slot.vote, slot.poll_at = slot.vote if keep else None, None
                    self._touched.append((js, slot))
        self._dirty.update(range(len(self._by_index)))
        self._settle()

    def tick(self, now: Now) -> list[Action]:
        """Advance to ``now``: vote for what came due, renew, retry, sweep."""
        out: list[Action] = []
        if not self._started:
            self._started = True
            for js in self._jobs.values():
                # Slots still inside their deadline are voted normally; older
                # ones are accounted for once the high-water mark is known.
                js.cursor_ms = js.boot_ms = now.wall_ms - js.job.deadline_ms
            if self._jobs:
                out.append(ReadHighWater(tuple(self._jobs)))
            self._dirty.update(range(len(self._by_index)))
        # Only jobs that changed or have a timer due can have anything to do.
        visit = self._dirty
        self._dirty = set()
        by_index = self._by_index
        mono = now.mono_ms
        self._timers.pop_due(now.wall_ms, mono, visit)
        if visit:
            requests: list[VoteRequest] = []
            reads: list[tuple[str, int]] = []
            voting = not self._stopping
            horizon = now.wall_ms + self._lead_ms
            for i in sorted(visit):
                js = by_index[i]
                if voting:
                    nf = js.next_fire_ms if js.next_fire_for == js.cursor_ms else self._next_fire(js)
                    if nf <= horizon and not js.removed:  # (most visits: nothing new is due)
                        self._collect_due(js, now, out)
                slots = js.slots
                if slots:
                    # Each pass takes the job's slots in fire-time order; a pass only if a slot
                    # holds its part (most visits: one slot, one part).
                    order = list(slots) if len(slots) == 1 else sorted(slots)
                    if len(order) == 1:
                        s = slots[order[0]]
                        votes, polls = s.vote is not None, s.poll_at is not None
                        deferred, runs = s.deferred is not None, s.run is not None
                    else:
                        votes = polls = deferred = runs = False
                        for s in slots.values():
                            votes = votes or s.vote is not None
                            polls = polls or s.poll_at is not None
                            deferred = deferred or s.deferred is not None
                            runs = runs or s.run is not None
                    if voting and votes:
                        self._votes_due(js, order, now, out, requests)
                    if polls:
                        self._polls_due(js, order, now, reads)
                    if deferred:
                        self._deferred_due(js, order, now, out)
                    if runs:
                        self._renewals_due(js, order, now, out)
            if requests:
                out.append(Vote(tuple(requests)))
            if reads:
                out.append(ReadSlots(tuple(reads)))
            if self._dirty:
                visit |= self._dirty
                self._dirty = set()
            for i in visit:
                self._refresh(by_index[i])
        if self._finish_heap and self._finish_heap[0][0] <= mono:
            self._finishes_due(now, out)
        if (self._parked or self._local_runs) and (self._floor_moved or mono >= self._parked_check_mono):
            self._release_due(now, out)  # (no timer of its own: a tick comes at least every sweep gap)
        if self._retries:  # (after the release: a record it holds while the store is away is due now)
            for retried in self._retries.due(mono, self._reachable):
                if isinstance(retried, RecordMissed):
                    self._missed_waits(retried, -1)  # (sent: no longer waiting)
                out.append(retried)
        if not self._sweeping and mono >= self._next_sweep_mono:
            sweep = self._sweeps.next(mono, probe=not self._reachable)
            if sweep is None:  # (nothing due, nothing heard of: look again at the cap, or sooner)
                gap = max_sweep_gap(self.settings.sweep_ms, self.settings.start_timeout_ms)
                due_in = self._sweeps.due_in_ms(mono)
                if due_in:
                    gap = min(gap, due_in)
                self._next_sweep_mono = min(mono + gap, self._sweeps.next_full())
            else:
                self._sweeping = True
                out.append(sweep)
        self._settle()
        return out

    def next_wakeup(self, now: Now) -> int:
        """Milliseconds until :meth:`tick` has something to do (0 = now)."""
        dirty = self._dirty
        if dirty:
            by_index = self._by_index
            for i in dirty:
                self._refresh(by_index[i])
            dirty.clear()
        wait = self._timers.earliest_wait(now.wall_ms, now.mono_ms)
        if not self._sweeping and self._next_sweep_mono - now.mono_ms < wait:
            wait = self._next_sweep_mono - now.mono_ms
        heap_f = self._finish_heap
        while heap_f and not self._finish_waits(heap_f[0][1], heap_f[0][0]):
            heappop(heap_f)
        if heap_f and heap_f[0][0] - now.mono_ms < wait:
            wait = heap_f[0][0] - now.mono_ms
        if self._retries:
            at = self._retries.next_at(self._reachable)
            if at != _NEVER and at - now.mono_ms < wait:
                wait = at - now.mono_ms
        if wait == _NEVER:
            return self.settings.sweep_ms
        return max(0, wait)

    def _refresh(self, js: _JobState) -> None:
        """Recompute the job's earliest timers; push the ones that changed.

        ``WAKE`` timers are what :meth:`next_wakeup` waits for. ``VISIT``
        timers are the other instants at which :meth:`tick` would act on the
        job without having been woken for it (a slot whose vote failed passing
        its deadline before its retry, say): a full scan of every job would
        act on them at whatever tick came next, so the tick visits the job
        then too.
        """
        wake_wall = wake_mono = visit_wall = visit_mono = _NEVER
        stopping = self._stopping
        if not stopping and not js.removed:
            wake_wall = (
                js.next_fire_ms if js.next_fire_for == js.cursor_ms else self._next_fire(js)
            ) - self._lead_ms
        slots = js.slots
        if slots:
            # (Each timer is the least of its kind over the job's slots: the order they are met in
            # does not matter.)
            trusted = self._may_vote
            skew = self._drop_after_ms
            local = js.job.run_local and not self._reachable
            for s in slots.values():
                p = s.vote
                if p is not None and not stopping and not p.in_flight:  # (in flight: its reply marks the job)
                    if local and p.local == LOCAL_NO and p.fire_ms < wake_wall:
                        wake_wall = p.fire_ms  # run it locally when due
                    # (A local run still going holds the slot past its deadline: its end marks the job.)
                    # (Nor is a slot recorded before the high-water read is answered: that marks the job.)
                    held = p.local == LOCAL_RUNNING or not js.caught_up
                    drop = _NEVER if held else p.fire_ms + p.deadline_ms + skew
                    if trusted:
                        if p.retry_at_mono < wake_mono and js.caught_up:
                            wake_mono = p.retry_at_mono
                        if drop < visit_wall:
                            visit_wall = drop
                    else:
                        # Abstaining: woken for the drop time; the abstain
                        # itself is due once the retry time has passed.
                        if drop < wake_wall:
                            wake_wall = drop
                        if not p.abstained and p.retry_at_mono < visit_mono:
                            visit_mono = p.retry_at_mono
                at = s.poll_at
                if at is not None and 0 <= at < wake_mono:
                    wake_mono = at
                deferred = s.deferred
                if deferred is not None and deferred[1] < wake_wall:
                    wake_wall = deferred[1]
                r = s.run
                if r is not None:
                    if not r.renewing and r.renew_at_mono < wake_mono:
                        wake_mono = r.renew_at_mono
                    if r.lease_until_mono < wake_mono and self._killed_at_lease_end(js):
                        wake_mono = r.lease_until_mono  # killed at its lease end
        self._timers.update(js.index, wake_wall, wake_mono, visit_wall, visit_mono)

    def on_assigned(self, job: str, fire_ms: int, token: int, now: Now) -> list[Action]:
        """An assignment notice (pub/sub or simulated): start if it is new to us."""
        js = self._jobs.get(job)
        if js is None:
            return []
        out = self._on_notice(js, fire_ms, token, now)
        self._settle()
        return out

    def on_trigger(self, job: str, fire_ms: int, now: Now) -> list[Action]:
        """An operator's trigger (pub/sub notice or catch-up read): vote for slot (job, fire_ms).

        The store chose ``fire_ms`` (its time of the request); the slot is
        voted like any scheduled one, so a trigger still needs a quorum.
        """
        js = self._jobs.get(job)
        if js is None or js.removed or self._stopping or now.wall_ms > fire_ms + js.job.deadline_ms:
            return []
        s = self._slot(js, fire_ms)
        if s.vote is None:
            s.vote = Pending(fire_ms=fire_ms, deadline_ms=js.job.deadline_ms)
        self._dirty.add(js.index)
        self._settle()
        return []

    def on_run_finished(
        self, job: str, fire_ms: int, token: int, succeeded: bool, detail: str, now: Now
    ) -> list[Action]:
        """The job process ended: record the result in the store (retried until it lands).

        ``token`` 0: a local run (:class:`RunLocal`) ended; its outcome goes into the slot's missed
        record if the slot is not decided by its deadline.
        """
        js = self._jobs.get(job)
        if js is None:
            return []  # (no job of that name here: nothing of it ran on this node)
        s = self._slot(js, fire_ms)
        self._dirty.add(js.index)
        out: list[Action] = []
        p = s.vote
        if token and p is not None and not p.in_flight:
            # The slot was committed here: a vote still owed (its reply lost, or a local run the
            # agent adopted) is moot, and records it held back may go.
            s.vote = None
            self._floor_moved.add(job)
        elif p is not None and p.local == LOCAL_RUNNING:  # (a vote in flight: its reply ends it)
            p.local = LOCAL_ENDED
            p.local_detail = detail.split("\n", 1)[0]
        if token:
            self._record_finish(js, s, token, succeeded, detail, out)
        self._settle()
        return out

    def on_reply(self, action: StoreAction, reply: object, now: Now) -> list[Action]:
        """The store answered ``action`` with ``reply`` (the store method's return value)."""
        if not self._reachable:
            self.set_store_reachable(True)
        if self._retries.refused:  # (a refusal of these jobs ended: what backed off after it goes now)
            self._retries.release_jobs(jobs_of(action))
        handler = self._replied.get(type(action))
        if handler is None:
            raise TypeError(f"not a store action: {action!r}")
        out: list[Action] = handler(self, action, reply, now)
        self._settle()
        return out

    def on_failure(
        self, action: StoreAction, now: Now, failure: Failure = Failure.UNREACHABLE, reason: str = ""
    ) -> list[Action]:
        """The store call failed or its reply was lost: retry after ``retry_ms``.

        ``failure`` says how: an unreachable store is what lets a ``run_local`` job run
        here alone; a store that answers with an error (``REFUSED``) is reachable.
        """
        retry_at = now.mono_ms + self.settings.retry_ms
        if failure == Failure.UNREACHABLE:
            self.set_store_reachable(False, reason or "a store call got no answer")
        elif not self._reachable:
            self.set_store_reachable(True)
        handler = self._failed.get(type(action))
        if handler is None:
            raise TypeError(f"not a store action: {action!r}")
        out: list[Action] = handler(self, action, now, failure, reason, retry_at)
        self._settle()
        return out

    # -- replies, one handler per store action type (core.actions.handlers) ----
    # (The vote's are in core.vote; start, renew and read_slots in core.run.)

    def _reply_sweep(self, action: Sweep, reply: object, now: Now) -> list[Action]:
        assert isinstance(reply, SweepResult)
        self._sweeping = False
        self._sweeps.replied(reply, now.mono_ms)
        self._next_sweep_mono = now.mono_ms + sweep_gap(self.settings, self._sweeps.due_in_ms(now.mono_ms))
        out: list[Action] = []
        for view in reply.changed:
            out.extend(self._on_view(view, now))
        return out

    def _reply_read_high_water(self, action: ReadHighWater, reply: object, now: Now) -> list[Action]:
        assert isinstance(reply, list)
        self._retries.answered(action)
        out: list[Action] = []
        for job, hwm in zip(action.jobs, reply, strict=True):
            assert isinstance(hwm, int)
            js = self._jobs[job]
            js.caught_up = True
            self._dirty.add(js.index)
            out.extend(self._catch_up(js, hwm, now))
        return out

    # -- failures, one handler per store action type ---------------------------

    def _failed_sweep(
        self, action: Sweep, now: Now, failure: Failure, reason: str, retry_at: int
    ) -> list[Action]:
        self._sweeping = False
        self._sweeps.failed()
        self._next_sweep_mono = retry_at
        return []

    def _failed_read_high_water(
        self, action: ReadHighWater, now: Now, failure: Failure, reason: str, retry_at: int
    ) -> list[Action]:
        # Backing off (one probe at a time while the store is unreachable): quorum_cron.core.retries.
        self._retries.failed(action, now.mono_ms, self._reachable)
        return []
