"""The node core's state: per-job records and the attributes every part of ``NodeCore`` shares.

:class:`CoreState` holds one node's protocol state: per job a
:class:`_JobState` (its cursor over fire times, the slots it is voting for,
awaiting, starting, deferring, running), plus the node-wide trust, store
reachability, pending results, retries and sweep. The logic is split by
concern over :mod:`quorum_cron.core.vote` (getting slots voted, or
accounted for when they cannot be), :mod:`quorum_cron.core.run` (starting,
running and fencing the slots this node executes) and
:mod:`quorum_cron.core.node` (the inputs, the tick and the timers).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from quorum_cron.core.actions import (
    Action,
    CoreJob,
    Failure,
    Finish,
    NodeSettings,
    Now,
    Sweep,
    handlers,
)
from quorum_cron.core.model import (
    MembershipRecord,
    SlotView,
    SweepParams,
    VoteRequest,
)
from quorum_cron.core.retries import MAX_RETRY_DOUBLINGS, RetryQueue
from quorum_cron.core.timers import NEVER, JobTimers

__all__ = [
    "HELD",
    "IN_FLIGHT",
    "LOCAL_ENDED",
    "LOCAL_NO",
    "LOCAL_RUNNING",
    "LOCAL_TOO_LATE",
    "MAX_CATCHUP_SLOTS",
    "MAX_PENDING_FINISHES",
    "MAX_RAN_LOCAL",
    "MAX_RETRY_DOUBLINGS",
    "CoreState",
]

MAX_CATCHUP_SLOTS = 1000
"""At most this many unvoted past slots per job are accounted for at start-up."""

MAX_RAN_LOCAL = 10_000
"""Bound on slots remembered as run locally here (each runs locally at most once)."""

MAX_PENDING_FINISHES = 10_000
"""Bound on finished-job results buffered while the store is unreachable."""

_NEVER = NEVER

LOCAL_NO = 0
"""``_Pending.local``: not run locally (yet)."""
LOCAL_RUNNING = 1
"""``_Pending.local``: running here alone (``RunLocal`` sent, its end not reported yet)."""
LOCAL_ENDED = 2
"""``_Pending.local``: the local run ended (``local_detail`` says how)."""
LOCAL_TOO_LATE = 3
"""``_Pending.local``: past its deadline before it could run locally."""

IN_FLIGHT = -1
"""``awaiting`` value of a slot whose poll was sent (its reply or failure sets the next)."""
HELD = -2
"""``awaiting`` value of a slot whose poll waits for the store to answer again (it was unreachable)."""


# -- state -------------------------------------------------------------------


@dataclass(slots=True)
class _Pending:
    """A due slot this node has not yet had a definite vote reply for."""

    fire_ms: int
    deadline_ms: int
    retry_at_mono: int = 0
    in_flight: bool = False
    abstained: bool = False
    request: VoteRequest | None = None
    """The vote request, once built (a retry sends the same one)."""
    why: str = ""
    """Why the last vote for it failed (the missed record's reason says so)."""
    local: int = 0
    """Run locally: ``LOCAL_NO``, ``LOCAL_RUNNING``, ``LOCAL_ENDED`` or ``LOCAL_TOO_LATE`` (plain
    ints, not an enum: the timers read it for every pending slot)."""
    local_detail: str = ""
    held: bool = False
    """Its vote failed with the store unreachable: sent again once the store answers."""
    revote: bool = False
    """A vote this node already had recorded, sent again to bring a newer membership record
    (:meth:`CoreState._adopt`): past its deadline or abstained it is dropped, not recorded
    missed (the slot's poll accounts for it)."""


@dataclass(slots=True)
class _Running:
    token: int
    renew_at_mono: int
    lease_until_mono: int
    renewing: bool = False
    renew_sent_mono: int = 0
    runs: int = 0
    """The slot's run count when this run started (its attempt; 0: unknown), for its retry's backoff."""


@dataclass(slots=True)
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
    """Start sent (or its confirming renew, see ``confirming``): fire_ms → token."""
    confirming: dict[int, int] = field(default_factory=dict)
    """An accepted start whose reply came half a lease late, confirmed by a renew before the
    job runs: fire_ms → monotonic time that renew was sent (the extended lease began after it)."""
    start_sent: dict[int, int] = field(default_factory=dict)
    """Start sent: fire_ms → monotonic time it was sent (the lease began after it)."""
    start_first: dict[int, tuple[int, int]] = field(default_factory=dict)
    """fire_ms → (token, monotonic time a start for that token was first sent), until its outcome is known."""
    deferred: dict[int, tuple[int, int]] = field(default_factory=dict)
    """A retry assigned to us before its backoff ended: fire_ms → (token, not-before wall ms)."""
    running: dict[int, _Running] = field(default_factory=dict)
    index: int = 0
    """Position in the job list: ticks handle jobs in this order."""
    caught_up: bool = False
    """The high-water read was answered: votes wait for it (a vote can raise the mark past
    slots the catch-up must still account for; sim/scenarios/bugs/outage-run-once-unaccounted)."""
    before: list[tuple[int, CoreJob]] = field(default_factory=list)
    """Definitions replaced by a reload (:mod:`quorum_cron.core.jobswap`), oldest first:
    ``(boundary, job)`` — slots at or before the boundary are voted under that definition."""
    removed: bool = False
    """Removed by a reload: no new slots; what was voted, committed or running finishes."""


class CoreState:
    """State shared by the parts of :class:`~quorum_cron.core.node.NodeCore` (see the module docstring)."""

    def __init__(
        self, settings: NodeSettings, jobs: Sequence[CoreJob], membership: MembershipRecord | None = None
    ) -> None:
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate job names in {names!r}: expected each job once")
        self.settings = settings
        self._lead_ms = settings.vote_lead_ms
        self._drop_after_ms = settings.max_skew_ms + 1
        """A slot nobody got voted is dropped (recorded) this long after its deadline."""
        self._jobs: dict[str, _JobState] = {j.name: _JobState(job=j, index=i) for i, j in enumerate(jobs)}
        self._by_index: list[_JobState] = list(self._jobs.values())
        self._local_jobs = [js.index for js in self._by_index if js.job.run_local]
        self._dirty: set[int] = set(range(len(jobs)))
        """Jobs whose state changed since their timers were last computed."""
        self._stopping = False
        self._timers = JobTimers(len(jobs))
        """Each job's earliest timers (:mod:`quorum_cron.core.timers`), set by :meth:`_refresh`."""
        self._finish_heap: list[tuple[int, tuple[str, int]]] = []
        """(retry time, key) of failed finishes; stale unless the key still waits for that time."""
        self._trusted = False
        self._trust_reason = "clock not checked yet"
        self._record: MembershipRecord | None = None
        """The membership record this node holds (None: legacy, epoch-0 votes; see set_membership)."""
        self._record_text = ""
        self._member = True
        self._member_reason = ""
        self._may_vote = False
        """Clock trusted and a member: what lets a due slot be voted (else it is abstained)."""
        self._refused_reported = -1
        """The highest own epoch a ``Refused`` was emitted for (at most one per epoch)."""
        if membership is not None:
            self._adopt(membership)
        self._reachable = True
        self._unreachable_reason = ""
        self._held: set[int] = set()
        """Jobs with votes or polls held until the unreachable store answers again."""
        self._ran_local: OrderedDict[tuple[str, int], None] = OrderedDict()
        """Slots run locally on this node (at most once each)."""
        self._started = False
        self._next_sweep_mono = 0
        self._sweeping = False
        self._finishes: dict[tuple[str, int], Finish] = {}
        self._finish_retry_mono: dict[tuple[str, int], int] = {}
        self._finishing: set[tuple[str, int]] = set()
        self._retries = RetryQueue(settings.retry_ms)
        """Failed missed records and high-water reads (:mod:`quorum_cron.core.retries`)."""
        self._sweep = Sweep(tuple(self._sweep_params()))
        self.dropped_finishes = 0
        """Results dropped because the buffer was full (reported by the runtime)."""
        cls = type(self)
        self._replied = handlers(cls, "_reply_")
        """Store action type → the core's handler of its reply (``_reply_<type>``, in ``core.node``)."""
        self._failed = handlers(cls, "_failed_")
        """Store action type → the core's handler of its failure (``_failed_<type>``)."""

    # -- inputs --------------------------------------------------------------

    # -- internals -----------------------------------------------------------

    def _hold_until_answered(self, failure: Failure, retry_at: int) -> bool:
        """Whether a failed vote or poll waits for the store to answer again instead of its retry.

        While the store is unreachable, votes and polls sent again every
        ``retry_ms`` reach nobody (in the agent each costs a connect timeout;
        with a hundred jobs, a hundred slots each time). They are held, and
        the sweep, brought forward to ``retry_at``, probes the store; any
        reply releases them (:meth:`_release_held`), so they go one round
        trip after the store is back. A store that answers with an error is
        reachable: there each call keeps its own retry.
        """
        if failure != Failure.UNREACHABLE or self._reachable:
            return False
        if not self._sweeping and self._next_sweep_mono > retry_at:
            self._next_sweep_mono = retry_at
        return True

    def _release_held(self) -> None:
        """The store answers again: the votes and polls held while it was unreachable are due now."""
        by_index = self._by_index
        for i in self._held:
            js = by_index[i]
            awaiting = js.awaiting
            for fire_ms, at in awaiting.items():
                if at == HELD:
                    awaiting[fire_ms] = 0
            for p in js.pending.values():
                if p.held:
                    p.held = False
                    p.retry_at_mono = 0
            self._dirty.add(i)
        self._held.clear()

    def _vote_request(self, job: CoreJob, fire_ms: int, deadline_ms: int) -> VoteRequest:
        js = self._jobs.get(job.name)
        if js is not None and js.before:
            job = self._definition(js, fire_ms)  # a slot from before a reload keeps its definition
        record = self._record
        return VoteRequest(
            job.name,
            fire_ms,
            self.settings.node_id,
            job.spec_hash,
            self.settings.quorum,
            self.settings.max_skew_ms,
            deadline_ms,
            job.overlap,
            record.epoch if record is not None else 0,
            self._record_text,
        )

    def _adopt(self, record: MembershipRecord) -> bool:
        """Hold ``record`` if it is newer than the one held (epochs only grow); True when it changed.

        Pending slots' requests are rebuilt (they carry the epoch), and every
        job is visited: a node that stopped or started being a member
        abstains or votes from the next tick.
        """
        held = self._record
        if held is not None and record.epoch <= held.epoch:
            return False
        self._record, self._record_text = record, record.encode()
        me = self.settings.node_id
        self._member = record.is_member(me)
        self._member_reason = "" if self._member else f"{me} is not a member of {record.describe()}"
        self._may_vote = self._trusted and self._member
        revote = self._member and not self._stopping
        for js in self._by_index:
            for p in js.pending.values():
                p.request = None
            if revote and js.awaiting:
                # Slots this node voted for, still undecided: vote again under the new record. A
                # job takes a newer record only from a vote of one of its own members (one
                # epoch, one record: docs/protocol.md), so the nodes a change added are refused
                # by a job still behind until a member brings it -- and a member that already
                # voted for a slot (an operator's trigger, a slot that came due just before the
                # change) would otherwise never vote for it again: the slot would miss.
                for fire_ms in js.awaiting:
                    if fire_ms not in js.pending and not js.removed:
                        js.pending[fire_ms] = _Pending(
                            fire_ms=fire_ms, deadline_ms=js.job.deadline_ms, revote=True
                        )
        self._dirty.update(range(len(self._by_index)))
        return True

    def set_membership(self, record: MembershipRecord) -> bool:
        """Hold the namespace's membership ``record`` if it is newer than the one held.

        Feed it every record the runtime learns (a heartbeat's reply, the
        record read at start); a vote refused by a newer record updates it
        too. Returns True when the held record changed. A node that is not a
        member of it abstains (``Abstain`` once per slot, the reason naming
        the members) instead of voting.
        """
        return self._adopt(record)

    @property
    def membership(self) -> MembershipRecord | None:
        """The record this node holds (None: legacy mode, epoch-0 votes)."""
        return self._record

    @property
    def is_member(self) -> bool:
        """Whether this node may vote under the record it holds (True in legacy mode)."""
        return self._member

    def _abstain_reason(self) -> str:
        """Why a due slot is not voted: the clock first (it is what a member would fix), then membership."""
        return self._trust_reason if not self._trusted else self._member_reason

    @staticmethod
    def _definition(js: _JobState, fire_ms: int) -> CoreJob:
        """The definition slot ``fire_ms`` of the job belongs to (the current one unless a reload
        replaced the job after the slot was taken in)."""
        for boundary, old in js.before:
            if fire_ms <= boundary:
                return old
        return js.job

    @staticmethod
    def _next_fire(js: _JobState) -> int:
        if js.next_fire_for != js.cursor_ms:
            js.next_fire_ms = js.job.schedule.next_after(js.cursor_ms)
            js.next_fire_for = js.cursor_ms
        return js.next_fire_ms

    def _sweep_params(self) -> Iterator[SweepParams]:
        for js in self._jobs.values():
            yield SweepParams(
                job=js.job.name,
                deadline_ms=js.job.deadline_ms,
                start_timeout_ms=self.settings.start_timeout_ms,
                delivery=js.job.delivery,
            )

    def _on_view(self, view: SlotView, now: Now, poll_again: bool = False) -> list[Action]:
        """React to a slot's state, whichever call revealed it (``core.run.RunningSide``)."""
        raise NotImplementedError
