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
                       trusted (the slot stays pending until its deadline)
vote reply             ``Start`` when the reply names this node executor
                       (deferred until the wall clock reaches ``t``);
                       otherwise the slot is awaited (``ReadSlot`` poll as a
                       fallback for a lost assignment notice)
start reply ok         ``Run`` (the runtime starts the job process)
running, every lease/3 ``Renew``; a refused renew → ``Kill``
job process ended      ``Finish`` (retried until the store answers); a
                       failed run with retries left comes back committed,
                       and is started when its backoff ends
operator trigger       ``on_trigger``: the slot is voted like any other
every sweep interval   ``Sweep`` of every job's deadlines; a slot handed to
                       this node by a takeover → ``Start``
first tick             ``ReadHighWater`` per job, then ``RecordMissed`` for
                       slots nobody voted for while the cluster was down
                       (or, under misfire ``run-once``, a vote for the
                       latest of them with a widened deadline)
store call failed      the same call again after ``retry_ms``
=====================  ===================================================

Wall time decides *when a slot is due*; monotonic time paces durations
(renewals, retries, sweeps), so a wall-clock step never shortens a lease.
Safety never depends on either: the store's script decides the window.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from quorum_cron.store.base import (
    TERMINAL_STATES,
    Delivery,
    LedgerEntry,
    Overlap,
    SlotState,
    SlotView,
    SweepParams,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
)

__all__ = [
    "Abstain",
    "Action",
    "CoreJob",
    "Finish",
    "Kill",
    "NodeCore",
    "NodeSettings",
    "Now",
    "ReadHighWater",
    "ReadSlot",
    "RecordMissed",
    "Renew",
    "Run",
    "ScheduleLike",
    "Start",
    "Sweep",
    "Vote",
]

MAX_CATCHUP_SLOTS = 1000
"""At most this many unvoted past slots per job are accounted for at start-up."""

MAX_PENDING_FINISHES = 10_000
"""Bound on finished-job results buffered while the store is unreachable."""


class ScheduleLike(Protocol):
    """What the core needs of a schedule: fire times as UTC epoch ms."""

    def next_after(self, ms: int) -> int:
        """The first fire time strictly after ``ms``."""
        ...

    def fire_times(self, start_ms: int, end_ms: int) -> Iterator[int]:
        """Fire times ``t`` with ``start_ms < t <= end_ms``, ascending."""
        ...


@dataclass(frozen=True, slots=True)
class CoreJob:
    """The part of a job definition the protocol needs."""

    name: str
    schedule: ScheduleLike
    spec_hash: str
    deadline_ms: int
    timeout_ms: int
    overlap: Overlap = Overlap.FORBID
    delivery: Delivery = Delivery.AT_MOST_ONCE
    misfire: str = "skip"
    retries: int = 0
    """Failed runs retried this many times, each under a new token (the store decides)."""
    retry_backoff_ms: int = 0


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """Cluster-wide protocol settings, as this node is configured."""

    node_id: str
    quorum: int
    max_skew_ms: int = 250
    lease_ms: int = 15_000
    start_timeout_ms: int = 5_000
    retry_ms: int = 500
    sweep_ms: int = 1_000
    assign_poll_ms: int = 1_000
    vote_lead_ms: int = 50
    """Vote this long before a slot is due, so the commit is known when it is.

    The store accepts votes from ``t - max_skew`` by its own clock, so this
    must stay below ``max_skew_ms``; the job itself still starts only when
    this node's clock says ``t`` has come (the start is deferred until then).
    """

    def __post_init__(self) -> None:
        if not 0 <= self.vote_lead_ms < max(1, self.max_skew_ms):
            raise ValueError(
                f"vote_lead_ms {self.vote_lead_ms} is outside the store's early window: "
                f"expected 0 <= vote_lead_ms < max_skew_ms ({self.max_skew_ms})"
            )


@dataclass(frozen=True, slots=True)
class Now:
    """One reading of the node's clocks: wall (epoch ms) and monotonic (ms)."""

    wall_ms: int
    mono_ms: int


# -- actions -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Vote:
    """Call ``store.vote(requests)``; reply with the list of results."""

    requests: tuple[VoteRequest, ...]


@dataclass(frozen=True, slots=True)
class Start:
    """Call ``store.start(job, fire_ms, node, token, lease_ms)``."""

    job: str
    fire_ms: int
    token: int
    lease_ms: int


@dataclass(frozen=True, slots=True)
class Renew:
    """Call ``store.renew(job, fire_ms, node, token, lease_ms)``."""

    job: str
    fire_ms: int
    token: int
    lease_ms: int


@dataclass(frozen=True, slots=True)
class Finish:
    """Call ``store.finish(job, fire_ms, node, token, succeeded, detail, retries, retry_backoff_ms)``."""

    job: str
    fire_ms: int
    token: int
    succeeded: bool
    detail: str
    retries: int = 0
    retry_backoff_ms: int = 0


@dataclass(frozen=True, slots=True)
class Sweep:
    """Call ``store.sweep(params)``; reply with the changed slots."""

    params: tuple[SweepParams, ...]


@dataclass(frozen=True, slots=True)
class ReadSlot:
    """Call ``store.slot(job, fire_ms)``; reply with the view."""

    job: str
    fire_ms: int


@dataclass(frozen=True, slots=True)
class ReadHighWater:
    """Call ``store.high_water(job)``; reply with the int."""

    job: str


@dataclass(frozen=True, slots=True)
class RecordMissed:
    """Call ``store.record_missed(job, fire_ms, deadline_ms, reason)``; reply with the view."""

    job: str
    fire_ms: int
    deadline_ms: int
    reason: str


@dataclass(frozen=True, slots=True)
class Run:
    """Start the job process now (no store call); report its end with ``on_run_finished``."""

    job: str
    fire_ms: int
    token: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Kill:
    """Stop the job process of this slot: the store no longer lets this node run it."""

    job: str
    fire_ms: int
    token: int
    reason: str


@dataclass(frozen=True, slots=True)
class Abstain:
    """Not voting for a due slot, and why (no store call; for logs and metrics)."""

    job: str
    fire_ms: int
    reason: str


StoreAction = Vote | Start | Renew | Finish | Sweep | ReadSlot | ReadHighWater | RecordMissed
"""Actions the runtime carries out as a store call, answering with ``on_reply``/``on_failure``."""
Action = StoreAction | Run | Kill | Abstain


# -- state -------------------------------------------------------------------


@dataclass
class _Pending:
    """A due slot this node has not yet had a definite vote reply for."""

    fire_ms: int
    deadline_ms: int
    retry_at_mono: int = 0
    in_flight: bool = False
    abstained: bool = False


@dataclass
class _Running:
    token: int
    renew_at_mono: int
    lease_until_mono: int
    renewing: bool = False
    renew_sent_mono: int = 0


@dataclass
class _JobState:
    job: CoreJob
    cursor_ms: int = 0
    """Every fire time ≤ cursor has been taken into ``pending`` (or accounted)."""
    boot_ms: int = 0
    """The cursor at the first tick: older slots are the catch-up's to account for."""
    next_fire_ms: int = -1
    """Cached ``schedule.next_after(cursor_ms)`` (schedules are costly to walk)."""
    next_fire_for: int = -1
    """The cursor ``next_fire_ms`` was computed for."""
    pending: dict[int, _Pending] = field(default_factory=dict)
    awaiting: dict[int, int] = field(default_factory=dict)
    """Voted, not assigned to us yet: fire_ms → monotonic time of the next poll."""
    starting: dict[int, int] = field(default_factory=dict)
    """Start sent: fire_ms → token."""
    start_sent: dict[int, int] = field(default_factory=dict)
    """Start sent: fire_ms → monotonic time it was sent (the lease began after it)."""
    deferred: dict[int, tuple[int, int]] = field(default_factory=dict)
    """A retry assigned to us before its backoff ended: fire_ms → (token, not-before wall ms)."""
    running: dict[int, _Running] = field(default_factory=dict)


class NodeCore:
    """One node's protocol state. Drive it with :meth:`tick` and the ``on_*`` methods.

    Every method returns the actions to carry out now, in order. Each store
    action must eventually be answered with :meth:`on_reply` or
    :meth:`on_failure` (a lost reply is a failure: the core retries, and
    every store call is idempotent).
    """

    def __init__(self, settings: NodeSettings, jobs: Sequence[CoreJob]) -> None:
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate job names in {names!r}: expected each job once")
        self.settings = settings
        self._jobs: dict[str, _JobState] = {j.name: _JobState(job=j) for j in jobs}
        self._trusted = False
        self._trust_reason = "clock not checked yet"
        self._started = False
        self._next_sweep_mono = 0
        self._sweeping = False
        self._finishes: dict[tuple[str, int], Finish] = {}
        self._finish_retry_mono: dict[tuple[str, int], int] = {}
        self._finishing: set[tuple[str, int]] = set()
        self._retries: list[tuple[int, ReadHighWater | RecordMissed]] = []
        self._sweep = Sweep(tuple(self._sweep_params()))
        self._stopping = False
        self.dropped_finishes = 0
        """Results dropped because the buffer was full (reported by the runtime)."""

    # -- inputs --------------------------------------------------------------

    def set_trust(self, trusted: bool, reason: str = "") -> None:
        """Tell the core whether this node's clock may be used to vote."""
        self._trusted = trusted
        self._trust_reason = reason or ("clock trusted" if trusted else "clock not trusted")

    @property
    def trusted(self) -> bool:
        return self._trusted

    def stop_voting(self) -> None:
        """Graceful shutdown: vote no more; running jobs still renew and finish."""
        self._stopping = True
        for js in self._jobs.values():
            js.pending.clear()
            js.awaiting.clear()

    def tick(self, now: Now) -> list[Action]:
        """Advance to ``now``: vote for what came due, renew, retry, sweep."""
        out: list[Action] = []
        if not self._started:
            self._started = True
            for js in self._jobs.values():
                # Slots still inside their deadline are voted normally; older
                # ones are accounted for once the high-water mark is known.
                js.cursor_ms = js.boot_ms = now.wall_ms - js.job.deadline_ms
                out.append(ReadHighWater(js.job.name))
        requests: list[VoteRequest] = []
        for js in self._jobs.values():
            if not self._stopping:
                self._collect_due(js, now, out)
                requests.extend(self._votes_due(js, now, out))
            self._polls_due(js, now, out)
            self._deferred_due(js, now, out)
            self._renewals_due(js, now, out)
        if requests:
            out.append(Vote(tuple(requests)))
        for key in sorted(self._finishes):
            if key not in self._finishing and self._finish_retry_mono.get(key, 0) <= now.mono_ms:
                self._finishing.add(key)
                out.append(self._finishes[key])
        due = [a for at, a in self._retries if at <= now.mono_ms]
        self._retries = [(at, a) for at, a in self._retries if at > now.mono_ms]
        out.extend(due)
        if not self._sweeping and now.mono_ms >= self._next_sweep_mono:
            self._sweeping = True
            out.append(self._sweep)
        return out

    def next_wakeup(self, now: Now) -> int:
        """Milliseconds until :meth:`tick` has something to do (0 = now)."""
        waits = [max(0, self._next_sweep_mono - now.mono_ms)] if not self._sweeping else []
        for js in self._jobs.values():
            if not self._stopping:
                waits.append(max(0, self._next_fire(js) - self.settings.vote_lead_ms - now.wall_ms))
                waits.extend(self._pending_wait(p, now) for p in js.pending.values() if not p.in_flight)
            waits.extend(max(0, at - now.mono_ms) for at in js.awaiting.values() if at >= 0)
            waits.extend(max(0, at - now.wall_ms) for _, at in js.deferred.values())
            waits.extend(max(0, r.renew_at_mono - now.mono_ms) for r in js.running.values() if not r.renewing)
        waits.extend(
            max(0, self._finish_retry_mono.get(k, 0) - now.mono_ms)
            for k in self._finishes
            if k not in self._finishing
        )
        waits.extend(max(0, at - now.mono_ms) for at, _ in self._retries)
        return min(waits) if waits else self.settings.sweep_ms

    def _pending_wait(self, p: _Pending, now: Now) -> int:
        """How long a pending slot can wait: its retry while trusted, its drop time while not."""
        if self._trusted:
            return max(0, p.retry_at_mono - now.mono_ms)
        # Abstaining: nothing to do until the slot is too late (then it is
        # recorded missed) — or until the runtime reports trust again.
        return max(0, p.fire_ms + p.deadline_ms + self.settings.max_skew_ms + 1 - now.wall_ms)

    def on_assigned(self, job: str, fire_ms: int, token: int, now: Now) -> list[Action]:
        """An assignment notice (pub/sub or simulated): start if it is new to us."""
        js = self._jobs.get(job)
        if js is None:
            return []
        return self._maybe_start(js, fire_ms, token, self.settings.node_id, now)

    def on_trigger(self, job: str, fire_ms: int, now: Now) -> list[Action]:
        """An operator's trigger (pub/sub notice or catch-up read): vote for slot (job, fire_ms).

        The store chose ``fire_ms`` (its time of the request); the slot is
        voted like any scheduled one, so a trigger still needs a quorum.
        """
        js = self._jobs.get(job)
        if js is None or self._stopping or now.wall_ms > fire_ms + js.job.deadline_ms:
            return []
        js.pending.setdefault(fire_ms, _Pending(fire_ms=fire_ms, deadline_ms=js.job.deadline_ms))
        return []

    def on_run_finished(
        self, job: str, fire_ms: int, token: int, succeeded: bool, detail: str, now: Now
    ) -> list[Action]:
        """The job process ended: record the result in the store (retried until it lands)."""
        js = self._jobs.get(job)
        if js is not None:
            js.running.pop(fire_ms, None)
        key = (job, fire_ms)
        if key not in self._finishes and len(self._finishes) >= MAX_PENDING_FINISHES:
            self.dropped_finishes += 1
            return []
        retries, backoff = (js.job.retries, js.job.retry_backoff_ms) if js is not None else (0, 0)
        action = Finish(job, fire_ms, token, succeeded, detail, retries, backoff)
        self._finishes[key] = action
        self._finishing.add(key)
        return [action]

    def on_reply(self, action: StoreAction, reply: object, now: Now) -> list[Action]:
        """The store answered ``action`` with ``reply`` (the store method's return value)."""
        match action:
            case Vote():
                assert isinstance(reply, list)
                return self._on_votes(action, reply, now)
            case Start():
                assert isinstance(reply, TransitionResult)
                return self._on_start(action, reply, now)
            case Renew():
                assert isinstance(reply, TransitionResult)
                return self._on_renew(action, reply, now)
            case Finish():
                assert isinstance(reply, TransitionResult)
                key = (action.job, action.fire_ms)
                self._finishing.discard(key)
                self._finishes.pop(key, None)
                self._finish_retry_mono.pop(key, None)
                # A failed run with retries left comes back committed (maybe to us).
                return self._on_view(reply.slot, now) if reply.ok else []
            case Sweep():
                assert isinstance(reply, list)
                self._sweeping = False
                self._next_sweep_mono = now.mono_ms + self.settings.sweep_ms
                out: list[Action] = []
                for view in reply:
                    out.extend(self._on_view(view, now))
                return out
            case ReadSlot():
                assert isinstance(reply, SlotView)
                js = self._jobs[action.job]
                js.awaiting.pop(action.fire_ms, None)
                return self._on_view(reply, now, poll_again=True)
            case ReadHighWater():
                assert isinstance(reply, int)
                return self._catch_up(self._jobs[action.job], reply, now)
            case RecordMissed():
                assert isinstance(reply, SlotView)
                if reply.state in (SlotState.ABSENT, SlotState.PROPOSED):
                    # Store time has not passed the deadline yet: ask again.
                    self._retries.append((now.mono_ms + self.settings.retry_ms, action))
                return []
        raise TypeError(f"not a store action: {action!r}")

    def on_failure(self, action: StoreAction, now: Now) -> list[Action]:
        """The store call failed or its reply was lost: retry after ``retry_ms``."""
        retry_at = now.mono_ms + self.settings.retry_ms
        match action:
            case Vote():
                for req in action.requests:
                    p = self._jobs[req.job].pending.get(req.fire_ms)
                    if p is not None:
                        p.in_flight = False
                        p.retry_at_mono = retry_at
            case Start():
                # Not known whether it landed: a read tells, and a repeated
                # start is refused harmlessly if it had.
                js = self._jobs[action.job]
                js.starting.pop(action.fire_ms, None)
                js.awaiting[action.fire_ms] = retry_at
            case Renew():
                r = self._jobs[action.job].running.get(action.fire_ms)
                if r is not None:
                    r.renewing = False
                    r.renew_at_mono = retry_at
                    return self._lease_check(self._jobs[action.job], action.fire_ms, now)
            case Finish():
                key = (action.job, action.fire_ms)
                self._finishing.discard(key)
                self._finish_retry_mono[key] = retry_at
            case Sweep():
                self._sweeping = False
                self._next_sweep_mono = retry_at
            case ReadSlot():
                js = self._jobs[action.job]
                if action.fire_ms in js.awaiting:
                    js.awaiting[action.fire_ms] = retry_at
            case ReadHighWater() | RecordMissed():
                self._retries.append((retry_at, action))
        return []

    # -- internals -----------------------------------------------------------

    def _vote_request(self, job: CoreJob, fire_ms: int, deadline_ms: int) -> VoteRequest:
        return VoteRequest(
            job=job.name,
            fire_ms=fire_ms,
            node=self.settings.node_id,
            spec_hash=job.spec_hash,
            quorum=self.settings.quorum,
            max_skew_ms=self.settings.max_skew_ms,
            deadline_ms=deadline_ms,
            overlap=job.overlap,
        )

    @staticmethod
    def _next_fire(js: _JobState) -> int:
        if js.next_fire_for != js.cursor_ms:
            js.next_fire_ms = js.job.schedule.next_after(js.cursor_ms)
            js.next_fire_for = js.cursor_ms
        return js.next_fire_ms

    def _collect_due(self, js: _JobState, now: Now, out: list[Action]) -> None:
        floor = now.wall_ms - js.job.deadline_ms
        if js.cursor_ms < floor:
            # This node slept through slots (a pause, a wall-clock jump): too
            # late to vote for them, but not too late to account for them.
            late = itertools.islice(js.job.schedule.fire_times(js.cursor_ms, floor), MAX_CATCHUP_SLOTS)
            reason = f"{self.settings.node_id} was not running when the slot was due"
            out.extend(RecordMissed(js.job.name, t, js.job.deadline_ms, reason) for t in late)
            js.cursor_ms = floor
        horizon = now.wall_ms + self.settings.vote_lead_ms
        while (t := self._next_fire(js)) <= horizon:
            js.pending.setdefault(t, _Pending(fire_ms=t, deadline_ms=js.job.deadline_ms))
            js.cursor_ms = t

    def _votes_due(self, js: _JobState, now: Now, out: list[Action]) -> Iterator[VoteRequest]:
        for fire_ms in sorted(js.pending):
            p = js.pending[fire_ms]
            if now.wall_ms > fire_ms + p.deadline_ms + self.settings.max_skew_ms:
                # Too late to vote. If nobody voted either, only this record
                # keeps the slot from ending unaccounted (the store checks the
                # deadline by its own clock and ignores decided slots).
                del js.pending[fire_ms]
                if not p.in_flight:
                    me = self.settings.node_id
                    why = f"{me} abstained: {self._trust_reason}" if p.abstained else f"{me} could not vote"
                    reason = f"no quorum before the deadline ({why})"
                    out.append(RecordMissed(js.job.name, fire_ms, p.deadline_ms, reason))
                continue
            if p.in_flight or p.retry_at_mono > now.mono_ms:
                continue
            if not self._trusted:
                if not p.abstained:
                    p.abstained = True
                    out.append(Abstain(js.job.name, fire_ms, self._trust_reason))
                continue
            p.in_flight = True
            yield self._vote_request(js.job, fire_ms, p.deadline_ms)

    def _polls_due(self, js: _JobState, now: Now, out: list[Action]) -> None:
        for fire_ms in sorted(js.awaiting):
            at = js.awaiting[fire_ms]
            if 0 <= at <= now.mono_ms:
                js.awaiting[fire_ms] = -1  # a read is in flight
                out.append(ReadSlot(js.job.name, fire_ms))

    def _renewals_due(self, js: _JobState, now: Now, out: list[Action]) -> None:
        for fire_ms in sorted(js.running):
            r = js.running[fire_ms]
            if not r.renewing and r.renew_at_mono <= now.mono_ms:
                r.renewing = True
                r.renew_sent_mono = now.mono_ms
                out.append(Renew(js.job.name, fire_ms, r.token, self.settings.lease_ms))

    def _lease_check(self, js: _JobState, fire_ms: int, now: Now) -> list[Action]:
        """Unrenewable lease under at-least-once: another node may re-run, so stop ours."""
        r = js.running.get(fire_ms)
        if r is None or now.mono_ms < r.lease_until_mono or js.job.delivery != Delivery.AT_LEAST_ONCE:
            return []
        del js.running[fire_ms]
        return [Kill(js.job.name, fire_ms, r.token, "lease expired while the store was unreachable")]

    def _sweep_params(self) -> Iterator[SweepParams]:
        for js in self._jobs.values():
            yield SweepParams(
                job=js.job.name,
                deadline_ms=js.job.deadline_ms,
                start_timeout_ms=self.settings.start_timeout_ms,
                delivery=js.job.delivery,
            )

    def _on_votes(self, action: Vote, results: list[object], now: Now) -> list[Action]:
        out: list[Action] = []
        for req, res in zip(action.requests, results, strict=True):
            assert isinstance(res, VoteResult)
            js = self._jobs[req.job]
            p = js.pending.get(req.fire_ms)
            if res.status == VoteStatus.EARLY:
                # Our clock runs ahead of the store's: try again shortly.
                if p is not None:
                    p.in_flight = False
                    p.retry_at_mono = now.mono_ms + max(1, self.settings.max_skew_ms // 2)
                continue
            js.pending.pop(req.fire_ms, None)
            out.extend(self._on_view(res.slot, now, poll_again=True))
        return out

    def _on_view(self, view: SlotView, now: Now, poll_again: bool = False) -> list[Action]:
        """React to a slot's state, whichever call revealed it."""
        js = self._jobs.get(view.job)
        if js is None:
            return []
        me = self.settings.node_id
        if view.state == SlotState.COMMITTED:
            js.awaiting.pop(view.fire_ms, None)
            if view.executor == me and view.not_before_ms > now.wall_ms:
                self._defer(js, view.fire_ms, view.token, view.not_before_ms)
                return []
            return self._maybe_start(js, view.fire_ms, view.token, view.executor, now)
        if view.state == SlotState.RUNNING and view.executor != me:
            js.awaiting.pop(view.fire_ms, None)
            self._drop_stale_run(js, view)
            return []
        if view.state == SlotState.PROPOSED and poll_again and not self._stopping:
            if now.wall_ms <= view.fire_ms + js.job.deadline_ms + self.settings.start_timeout_ms:
                # A fallback for a lost assignment notice: poll well inside the deadline.
                poll = max(10, min(self.settings.assign_poll_ms, js.job.deadline_ms // 2))
                js.awaiting[view.fire_ms] = now.mono_ms + poll
            return []
        js.awaiting.pop(view.fire_ms, None)
        if view.state in TERMINAL_STATES:
            return self._drop_stale_run(js, view)
        return []

    def _drop_stale_run(self, js: _JobState, view: SlotView) -> list[Action]:
        r = js.running.get(view.fire_ms)
        if r is None or (r.token == view.token and view.executor == self.settings.node_id):
            return []
        del js.running[view.fire_ms]
        return [Kill(js.job.name, view.fire_ms, r.token, f"slot is {view.state}: {view.reason}")]

    def _maybe_start(self, js: _JobState, fire_ms: int, token: int, executor: str, now: Now) -> list[Action]:
        # While stopping, leave new work to the start timeout's takeover.
        if executor != self.settings.node_id or self._stopping:
            return []
        if now.wall_ms < fire_ms:
            # Committed ahead of time (votes lead the fire time): start when due.
            self._defer(js, fire_ms, token, fire_ms)
            return []
        if js.starting.get(fire_ms, -1) >= token:
            return []
        running = js.running.get(fire_ms)
        if running is not None and running.token >= token:
            return []
        js.starting[fire_ms] = token
        js.start_sent[fire_ms] = now.mono_ms
        js.awaiting.pop(fire_ms, None)
        return [Start(js.job.name, fire_ms, token, self.settings.lease_ms)]

    def _defer(self, js: _JobState, fire_ms: int, token: int, not_before_ms: int) -> None:
        if js.deferred.get(fire_ms, (-1, 0))[0] <= token:
            js.deferred[fire_ms] = (token, not_before_ms)

    def _deferred_due(self, js: _JobState, now: Now, out: list[Action]) -> None:
        for fire_ms in sorted(js.deferred):
            token, at = js.deferred[fire_ms]
            if at <= now.wall_ms:
                del js.deferred[fire_ms]
                out.extend(self._maybe_start(js, fire_ms, token, self.settings.node_id, now))

    def _on_start(self, action: Start, reply: TransitionResult, now: Now) -> list[Action]:
        js = self._jobs[action.job]
        sent = js.start_sent.pop(action.fire_ms, now.mono_ms)
        if js.starting.get(action.fire_ms) == action.token:
            del js.starting[action.fire_ms]
        if not reply.ok:
            view = reply.slot
            if view.state == SlotState.COMMITTED and view.token == action.token and view.not_before_ms:
                # A retry our clock thought due, the store's not yet: try again then.
                at = max(view.not_before_ms, now.wall_ms) + max(1, self.settings.max_skew_ms // 2)
                self._defer(js, action.fire_ms, action.token, at)
            return []
        lease = self.settings.lease_ms
        if now.mono_ms - sent >= lease // 2:
            # The reply was held (a pause, a slow link) for half the lease:
            # the lease, which began after we sent the start, may be gone and
            # the slot taken over. Running now could run it twice.
            return []
        js.running[action.fire_ms] = _Running(
            token=action.token,
            renew_at_mono=sent + max(1, lease // 3),
            lease_until_mono=sent + lease,
        )
        return [Run(action.job, action.fire_ms, action.token, js.job.timeout_ms)]

    def _on_renew(self, action: Renew, reply: TransitionResult, now: Now) -> list[Action]:
        js = self._jobs[action.job]
        r = js.running.get(action.fire_ms)
        if r is None or r.token != action.token:
            return []
        r.renewing = False
        if reply.ok:
            # The lease was extended after the renew was sent, not when we heard.
            lease = self.settings.lease_ms
            r.renew_at_mono = r.renew_sent_mono + max(1, lease // 3)
            r.lease_until_mono = r.renew_sent_mono + lease
            return self._lease_check(js, action.fire_ms, now)
        del js.running[action.fire_ms]
        return [Kill(action.job, action.fire_ms, action.token, f"renew refused: {reply.reason}")]

    def _catch_up(self, js: _JobState, hwm: int, now: Now) -> list[Action]:
        """Account for slots between the high-water mark and the first one we vote for."""
        if hwm <= 0:
            return []  # a job the store never saw: nothing was due before us
        job = js.job
        missed = list(itertools.islice(job.schedule.fire_times(hwm, js.boot_ms), MAX_CATCHUP_SLOTS))
        if not missed:
            return []
        out: list[Action] = []
        run_once = job.misfire == "run-once" and not self._stopping
        to_record = missed[:-1] if run_once else missed
        out.extend(
            RecordMissed(job.name, t, job.deadline_ms, "no node alive to vote before its deadline")
            for t in to_record
        )
        if run_once:
            latest = missed[-1]
            widened = now.wall_ms - latest + job.deadline_ms
            js.pending[latest] = _Pending(fire_ms=latest, deadline_ms=widened)
        return out


def ledger_line(entry: LedgerEntry) -> str:
    """A one-line human summary of a ledger entry (for logs and the simulator trace)."""
    return (
        f"{entry.job}@{entry.fire_ms} {entry.state} token={entry.token} "
        f"executor={entry.executor or '-'} voters={','.join(entry.voters) or '-'}: {entry.reason}"
    )
