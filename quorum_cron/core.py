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
                       otherwise the slot is awaited (``ReadSlot`` poll as a
                       fallback for a lost assignment notice)
start reply ok         ``Run`` (the runtime starts the job process); also
                       when a read shows the slot running under a start
                       whose reply was lost (within half a lease of it)
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
from heapq import heapify, heappop, heappush
from typing import Protocol

from quorum_cron.model import (
    TERMINAL_STATES,
    Delivery,
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
MAX_RETRY_DOUBLINGS = 4
"""A failed missed-record or high-water read is retried after ``retry_ms`` doubling up to 16x."""
"""At most this many unvoted past slots per job are accounted for at start-up."""

MAX_PENDING_FINISHES = 10_000
"""Bound on finished-job results buffered while the store is unreachable."""

_NEVER = 1 << 62
"""A wake time that never comes (no timer of that kind)."""

_UNSET = -(1 << 62)
"""A cached wake time that matches no timer: the next refresh pushes afresh."""

# Indexes into ``_JobState.wakes`` and ``NodeCore._heaps``.
_WAKE_WALL, _WAKE_MONO, _VISIT_WALL, _VISIT_MONO = range(4)


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
    request: VoteRequest | None = None
    """The vote request, once built (a retry sends the same one)."""


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
    start_first: dict[int, tuple[int, int]] = field(default_factory=dict)
    """fire_ms → (token, monotonic time a start for that token was first sent), until its outcome is known."""
    deferred: dict[int, tuple[int, int]] = field(default_factory=dict)
    """A retry assigned to us before its backoff ended: fire_ms → (token, not-before wall ms)."""
    running: dict[int, _Running] = field(default_factory=dict)
    index: int = 0
    """Position in the job list: ticks handle jobs in this order."""
    wakes: list[int] = field(default_factory=lambda: [_UNSET] * 4)
    """Cached earliest timers, by kind (see :meth:`NodeCore._refresh`)."""


class NodeCore:
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

    def __init__(self, settings: NodeSettings, jobs: Sequence[CoreJob]) -> None:
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate job names in {names!r}: expected each job once")
        self.settings = settings
        self._jobs: dict[str, _JobState] = {j.name: _JobState(job=j, index=i) for i, j in enumerate(jobs)}
        self._by_index: list[_JobState] = list(self._jobs.values())
        self._dirty: set[int] = set(range(len(jobs)))
        """Jobs whose state changed since their timers were last computed."""
        self._heaps: tuple[list[tuple[int, int]], ...] = ([], [], [], [])
        """(time, job index) by kind; an entry is stale unless it equals the job's cached wake."""
        self._finish_heap: list[tuple[int, tuple[str, int]]] = []
        """(retry time, key) of failed finishes; stale unless the key still waits for that time."""
        self._retry_seq = 0
        self._trusted = False
        self._trust_reason = "clock not checked yet"
        self._started = False
        self._next_sweep_mono = 0
        self._sweeping = False
        self._finishes: dict[tuple[str, int], Finish] = {}
        self._finish_retry_mono: dict[tuple[str, int], int] = {}
        self._finishing: set[tuple[str, int]] = set()
        self._retries: list[tuple[int, int, ReadHighWater | RecordMissed]] = []
        self._retry_failures: dict[ReadHighWater | RecordMissed, int] = {}
        """Consecutive failures of a retried record or read (its backoff doubles, up to a cap)."""
        """A heap of (retry time, sequence number, action)."""
        self._sweep = Sweep(tuple(self._sweep_params()))
        self._stopping = False
        self.dropped_finishes = 0
        """Results dropped because the buffer was full (reported by the runtime)."""

    # -- inputs --------------------------------------------------------------

    def set_trust(self, trusted: bool, reason: str = "") -> None:
        """Tell the core whether this node's clock may be used to vote."""
        if trusted != self._trusted:
            self._dirty.update(range(len(self._by_index)))
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
        self._dirty.update(range(len(self._by_index)))

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
            self._dirty.update(range(len(self._by_index)))
        # Only jobs that changed or have a timer due can have anything to do.
        visit = self._dirty
        self._dirty = set()
        by_index = self._by_index
        wall, mono = now.wall_ms, now.mono_ms
        for kind, heap in enumerate(self._heaps):
            limit = wall if kind in (_WAKE_WALL, _VISIT_WALL) else mono
            while heap and heap[0][0] <= limit:
                at, i = heappop(heap)
                wakes = by_index[i].wakes
                if wakes[kind] == at:
                    wakes[kind] = _UNSET  # popped: the refresh below pushes anew
                    visit.add(i)
        if visit:
            requests: list[VoteRequest] = []
            voting = not self._stopping
            for i in sorted(visit):
                js = by_index[i]
                if voting:
                    self._collect_due(js, now, out)
                    if js.pending:
                        requests.extend(self._votes_due(js, now, out))
                if js.awaiting:
                    self._polls_due(js, now, out)
                if js.deferred:
                    self._deferred_due(js, now, out)
                if js.running:
                    self._renewals_due(js, now, out)
            if requests:
                out.append(Vote(tuple(requests)))
            if self._dirty:
                visit |= self._dirty
                self._dirty = set()
            for i in visit:
                self._refresh(by_index[i])
        if self._finish_heap and self._finish_heap[0][0] <= mono:
            self._finishes_due(now, out)
        retries = self._retries
        if retries and retries[0][0] <= mono:
            due: list[tuple[int, ReadHighWater | RecordMissed]] = []
            while retries and retries[0][0] <= now.mono_ms:
                _, seq, action = heappop(retries)
                due.append((seq, action))
            due.sort(key=lambda e: e[0])  # in the order they failed
            out.extend(a for _, a in due)
        if not self._sweeping and mono >= self._next_sweep_mono:
            self._sweeping = True
            out.append(self._sweep)
        return out

    def _finishes_due(self, now: Now, out: list[Action]) -> None:
        heap = self._finish_heap
        keys: set[tuple[str, int]] = set()
        while heap and heap[0][0] <= now.mono_ms:
            at, key = heappop(heap)
            if self._finish_waits(key, at):
                keys.add(key)
        for key in sorted(keys):
            self._finishing.add(key)
            out.append(self._finishes[key])

    def _finish_waits(self, key: tuple[str, int], at: int) -> bool:
        """Whether the finish of ``key`` waits to be sent again at ``at`` (else the entry is stale)."""
        return (
            key in self._finishes and key not in self._finishing and self._finish_retry_mono.get(key, 0) == at
        )

    def next_wakeup(self, now: Now) -> int:
        """Milliseconds until :meth:`tick` has something to do (0 = now)."""
        dirty = self._dirty
        if dirty:
            by_index = self._by_index
            for i in dirty:
                self._refresh(by_index[i])
            dirty.clear()
        wait = _NEVER
        if not self._sweeping:
            wait = self._next_sweep_mono - now.mono_ms
        by_index = self._by_index
        for kind, reading in ((_WAKE_WALL, now.wall_ms), (_WAKE_MONO, now.mono_ms)):
            heap = self._heaps[kind]
            while heap and by_index[heap[0][1]].wakes[kind] != heap[0][0]:
                heappop(heap)
            if heap and heap[0][0] - reading < wait:
                wait = heap[0][0] - reading
        heap_f = self._finish_heap
        while heap_f and not self._finish_waits(heap_f[0][1], heap_f[0][0]):
            heappop(heap_f)
        if heap_f and heap_f[0][0] - now.mono_ms < wait:
            wait = heap_f[0][0] - now.mono_ms
        if self._retries and self._retries[0][0] - now.mono_ms < wait:
            wait = self._retries[0][0] - now.mono_ms
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
        if not self._stopping:
            wake_wall = (
                js.next_fire_ms if js.next_fire_for == js.cursor_ms else self._next_fire(js)
            ) - self.settings.vote_lead_ms
            if js.pending:
                trusted = self._trusted
                skew = self.settings.max_skew_ms + 1
                for p in js.pending.values():
                    if p.in_flight:
                        continue  # its reply or failure marks the job dirty
                    drop = p.fire_ms + p.deadline_ms + skew
                    if trusted:
                        if p.retry_at_mono < wake_mono:
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
        if js.awaiting:
            for at in js.awaiting.values():
                if 0 <= at < wake_mono:
                    wake_mono = at
        if js.deferred:
            for _, at in js.deferred.values():
                if at < wake_wall:
                    wake_wall = at
        if js.running:
            for r in js.running.values():
                if not r.renewing and r.renew_at_mono < wake_mono:
                    wake_mono = r.renew_at_mono
        wakes = js.wakes
        if (
            wake_wall == wakes[_WAKE_WALL]
            and wake_mono == wakes[_WAKE_MONO]
            and visit_wall == wakes[_VISIT_WALL]
            and visit_mono == wakes[_VISIT_MONO]
        ):
            return
        heaps = self._heaps
        i = js.index
        for kind, at in enumerate((wake_wall, wake_mono, visit_wall, visit_mono)):
            if at != wakes[kind]:
                wakes[kind] = at
                if at != _NEVER:
                    heap = heaps[kind]
                    heappush(heap, (at, i))
                    if len(heap) > 64 + 4 * len(self._by_index):
                        self._compact(kind)

    def _compact(self, kind: int) -> None:
        """Rebuild a heap of timers from the cached ones, dropping the stale entries."""
        heap = self._heaps[kind]
        heap[:] = [
            (js.wakes[kind], js.index) for js in self._by_index if js.wakes[kind] not in (_NEVER, _UNSET)
        ]
        heapify(heap)

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
        self._dirty.add(js.index)
        return []

    def on_run_finished(
        self, job: str, fire_ms: int, token: int, succeeded: bool, detail: str, now: Now
    ) -> list[Action]:
        """The job process ended: record the result in the store (retried until it lands)."""
        js = self._jobs.get(job)
        if js is not None:
            js.running.pop(fire_ms, None)
            self._dirty.add(js.index)
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
                self._stop_polling(self._jobs[action.job], action.fire_ms)
                return self._on_view(reply, now, poll_again=True)
            case ReadHighWater():
                assert isinstance(reply, int)
                self._retry_failures.pop(action, None)
                return self._catch_up(self._jobs[action.job], reply, now)
            case RecordMissed():
                assert isinstance(reply, SlotView)
                self._retry_failures.pop(action, None)
                if reply.state in (SlotState.ABSENT, SlotState.PROPOSED):
                    # Store time has not passed the deadline yet: ask again.
                    self._retry(now.mono_ms + self.settings.retry_ms, action)
                return []
        raise TypeError(f"not a store action: {action!r}")

    def on_failure(self, action: StoreAction, now: Now) -> list[Action]:
        """The store call failed or its reply was lost: retry after ``retry_ms``."""
        retry_at = now.mono_ms + self.settings.retry_ms
        match action:
            case Vote():
                for req in action.requests:
                    js = self._jobs[req.job]
                    p = js.pending.get(req.fire_ms)
                    if p is not None:
                        p.in_flight = False
                        p.retry_at_mono = retry_at
                        self._dirty.add(js.index)
            case Start():
                # Not known whether it landed: a read tells, and a repeated
                # start is refused harmlessly if it had.
                js = self._jobs[action.job]
                js.starting.pop(action.fire_ms, None)
                js.awaiting[action.fire_ms] = retry_at
                self._dirty.add(js.index)
            case Renew():
                js = self._jobs[action.job]
                r = js.running.get(action.fire_ms)
                if r is not None:
                    r.renewing = False
                    r.renew_at_mono = retry_at
                    self._dirty.add(js.index)
                    return self._lease_check(js, action.fire_ms, now)
            case Finish():
                key = (action.job, action.fire_ms)
                self._finishing.discard(key)
                self._finish_retry_mono[key] = retry_at
                heappush(self._finish_heap, (retry_at, key))
            case Sweep():
                self._sweeping = False
                self._next_sweep_mono = retry_at
            case ReadSlot():
                js = self._jobs[action.job]
                if action.fire_ms in js.awaiting:
                    js.awaiting[action.fire_ms] = retry_at
                    self._dirty.add(js.index)
            case ReadHighWater() | RecordMissed():
                # Backing off: while the store is away a node may hold one
                # record per slot it could not vote for, and each failed call
                # can cost a connect timeout in the agent.
                failures = self._retry_failures.get(action, 0)
                self._retry_failures[action] = failures + 1
                backoff = self.settings.retry_ms << min(failures, MAX_RETRY_DOUBLINGS)
                self._retry(now.mono_ms + backoff, action)
        return []

    def _retry(self, at: int, action: ReadHighWater | RecordMissed) -> None:
        self._retry_seq += 1
        heappush(self._retries, (at, self._retry_seq, action))

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
        # (A cursor behind the floor with no fire time in between is left
        # where it is: moving it would change nothing but the cached fire time.)
        if js.cursor_ms < floor and self._next_fire(js) <= floor:
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
                if p.in_flight:
                    # Too late to vote, but our vote may still land: its reply
                    # (or failure, then recorded missed below) settles it.
                    continue
                # Too late to vote. If nobody voted either, only this record
                # keeps the slot from ending unaccounted (the store checks the
                # deadline by its own clock and ignores decided slots).
                del js.pending[fire_ms]
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
            if p.request is None:
                p.request = self._vote_request(js.job, fire_ms, p.deadline_ms)
            yield p.request

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
        self._dirty.add(js.index)
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
            self._dirty.add(js.index)
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
            self._stop_polling(js, view.fire_ms)
            if view.executor == me and view.not_before_ms > now.wall_ms:
                self._defer(js, view.fire_ms, view.token, view.not_before_ms)
                return []
            return self._maybe_start(js, view.fire_ms, view.token, view.executor, now)
        if view.state == SlotState.RUNNING and view.executor != me:
            self._stop_polling(js, view.fire_ms)
            js.start_first.pop(view.fire_ms, None)
            self._drop_stale_run(js, view)
            return []
        if view.state == SlotState.RUNNING:
            self._stop_polling(js, view.fire_ms)
            return self._adopt_start(js, view, now)
        if view.state == SlotState.PROPOSED and poll_again and not self._stopping:
            if now.wall_ms <= view.fire_ms + js.job.deadline_ms + self.settings.start_timeout_ms:
                # A fallback for a lost assignment notice: poll well inside the deadline.
                poll = max(10, min(self.settings.assign_poll_ms, js.job.deadline_ms // 2))
                js.awaiting[view.fire_ms] = now.mono_ms + poll
                self._dirty.add(js.index)
            return []
        self._stop_polling(js, view.fire_ms)
        if view.state in TERMINAL_STATES:
            js.start_first.pop(view.fire_ms, None)
            return self._drop_stale_run(js, view)
        return []

    def _adopt_start(self, js: _JobState, view: SlotView, now: Now) -> list[Action]:
        """The store runs the slot under our start though we never heard it accepted: run the job.

        (The reply to the start was lost, or an earlier send of it landed
        after a later one.) As for a held start reply: only while less than
        half a lease has passed since the start was first sent, as the lease
        began after that and another node may take the slot over once it ends.
        """
        fire_ms = view.fire_ms
        first = js.start_first.get(fire_ms)
        if (
            first is None
            or first[0] != view.token
            or fire_ms in js.running
            or js.starting.get(fire_ms) == view.token  # a start in flight: its reply tells
        ):
            return []
        del js.start_first[fire_ms]
        sent = first[1]
        lease = self.settings.lease_ms
        if now.mono_ms - sent >= lease // 2:
            return []
        js.start_sent.pop(fire_ms, None)
        js.running[fire_ms] = _Running(
            token=view.token,
            renew_at_mono=sent + max(1, lease // 3),
            lease_until_mono=sent + lease,
        )
        self._dirty.add(js.index)
        return [Run(js.job.name, fire_ms, view.token, js.job.timeout_ms)]

    def _stop_polling(self, js: _JobState, fire_ms: int) -> None:
        at = js.awaiting.pop(fire_ms, None)
        if at is not None and at >= 0:  # (-1, a read in flight, is no timer)
            self._dirty.add(js.index)

    def _drop_stale_run(self, js: _JobState, view: SlotView) -> list[Action]:
        r = js.running.get(view.fire_ms)
        if r is None or (r.token == view.token and view.executor == self.settings.node_id):
            return []
        del js.running[view.fire_ms]
        self._dirty.add(js.index)
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
        if js.start_first.get(fire_ms, (-1, 0))[0] != token:
            js.start_first[fire_ms] = (token, now.mono_ms)
        js.awaiting.pop(fire_ms, None)
        self._dirty.add(js.index)
        return [Start(js.job.name, fire_ms, token, self.settings.lease_ms)]

    def _defer(self, js: _JobState, fire_ms: int, token: int, not_before_ms: int) -> None:
        if js.deferred.get(fire_ms, (-1, 0))[0] <= token:
            js.deferred[fire_ms] = (token, not_before_ms)
            self._dirty.add(js.index)

    def _deferred_due(self, js: _JobState, now: Now, out: list[Action]) -> None:
        for fire_ms in sorted(js.deferred):
            token, at = js.deferred[fire_ms]
            if at <= now.wall_ms:
                del js.deferred[fire_ms]
                out.extend(self._maybe_start(js, fire_ms, token, self.settings.node_id, now))

    def _on_start(self, action: Start, reply: TransitionResult, now: Now) -> list[Action]:
        js = self._jobs[action.job]
        self._dirty.add(js.index)
        sent = js.start_sent.pop(action.fire_ms, now.mono_ms)
        if js.starting.get(action.fire_ms) == action.token:
            del js.starting[action.fire_ms]
        if not reply.ok:
            view = reply.slot
            if view.state == SlotState.COMMITTED and view.token == action.token and view.not_before_ms:
                # A retry our clock thought due, the store's not yet: try again then.
                at = max(view.not_before_ms, now.wall_ms) + max(1, self.settings.max_skew_ms // 2)
                self._defer(js, action.fire_ms, action.token, at)
            elif view.state == SlotState.RUNNING and view.executor == self.settings.node_id:
                return self._adopt_start(js, view, now)  # an earlier send of this start landed
            elif js.start_first.get(action.fire_ms, (-1, 0))[0] == action.token:
                del js.start_first[action.fire_ms]
            return []
        if js.start_first.get(action.fire_ms, (-1, 0))[0] == action.token:
            del js.start_first[action.fire_ms]
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
        self._dirty.add(js.index)
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
            self._dirty.add(js.index)
        return out
