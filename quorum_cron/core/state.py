"""The node core's state: per-job records and the attributes every part of ``NodeCore`` shares.

:class:`CoreState` holds one node's protocol state: per job a
:class:`_JobState` (its cursor over fire times, and one
:class:`~quorum_cron.core.slots.Slot` record per slot it holds anything of),
plus the node-wide trust, store reachability, retries and sweep. A slot's
phase is moved only by :func:`quorum_cron.core.slots.settle`, which the core
calls once per input (:meth:`CoreState._settle`) with the records the input
touched. The logic is split by
concern over :mod:`quorum_cron.core.vote` (getting slots voted, or
accounted for when they cannot be), :mod:`quorum_cron.core.run` (starting,
running and fencing the slots this node executes) and
:mod:`quorum_cron.core.node` (the inputs, the tick and the timers).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from quorum_cron.core.actions import (
    Action,
    CoreJob,
    Failure,
    NodeSettings,
    Now,
    RecordMissed,
    handlers,
)
from quorum_cron.core.model import (
    MembershipRecord,
    SlotView,
    SweepParams,
    VoteRequest,
)
from quorum_cron.core.retries import MAX_RETRY_DOUBLINGS, RetryQueue
from quorum_cron.core.slots import HELD, Pending, Slot, StepHook, settle
from quorum_cron.core.sweeps import SweepPlan
from quorum_cron.core.timers import NEVER, JobTimers, min_sweep_gap

__all__ = [
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
"""Bound on finished-job results held for a resend after a failed ``Finish`` (the store unreachable).

A result on its way (its ``Finish`` sent, no answer yet) is never dropped: at 100,000 jobs one
node's executions of a minute's burst have tens of thousands of results in the store worker's
queue at once, and a bound on those dropped two in five of them (the slots then ended ``lost``
although they ran; docs/benchmarks.md, "A bound that dropped results")."""

_NEVER = NEVER

# -- state -------------------------------------------------------------------


@dataclass(slots=True)
class _JobState:
    job: CoreJob
    cursor_ms: int = 0
    """Every fire time ≤ cursor has been taken in (a slot record with a vote part, or accounted)."""
    boot_ms: int = 0
    """The cursor at the first tick: older slots are the catch-up's to account for."""
    next_fire_ms: int = -1
    """Cached ``schedule.next_after(cursor_ms)`` (schedules are costly to walk)."""
    next_fire_for: int = -1
    """The cursor ``next_fire_ms`` was computed for."""
    slots: dict[int, Slot] = field(default_factory=dict)
    """Every slot of the job the node holds something of: fire_ms → its record (:mod:`.slots`)."""
    index: int = 0
    """Position in the job list: ticks handle jobs in this order."""
    caught_up: bool = False
    """The high-water read was answered: votes wait for it (a vote can raise the mark past
    slots the catch-up must still account for; sim/scenarios/bugs/outage-run-once-unaccounted)."""
    before: tuple[tuple[int, CoreJob], ...] = ()
    """Definitions replaced by a reload (:mod:`quorum_cron.core.jobswap`), oldest first:
    ``(boundary, job)`` — slots at or before the boundary are voted under that definition.
    A tuple, replaced on change: nearly every job has none, and an empty list each was 56
    bytes a job (issue 27)."""
    removed: bool = False
    """Removed by a reload: no new slots; what was voted, committed or running finishes."""
    parked_out_ms: int = -1
    """The latest slot this node voted for and then forgot, parked, with no notice (-1: none):
    voted again when a newer membership record comes, inside its deadline (:meth:`CoreState._adopt`).
    One per job, not per slot: a whole burst's forgotten slots kept to their deadlines would cost
    the memory issue 27 took out, and the slot a change strands is its job's latest."""


class CoreState:
    """State shared by the parts of :class:`~quorum_cron.core.node.NodeCore` (see the module docstring)."""

    def __init__(
        self,
        settings: NodeSettings,
        jobs: Sequence[CoreJob],
        membership: MembershipRecord | None = None,
        *,
        report_illegal_step: Callable[[str], None] | None = None,
    ) -> None:
        """``report_illegal_step``: where a phase step the lifecycle table does not list is
        reported (the step is then taken); None, the default, raises instead (:func:`.slots.settle`)."""
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate job names in {names!r}: expected each job once")
        self.settings = settings
        self._lead_ms = settings.vote_lead_ms
        self._drop_after_ms = settings.max_skew_ms + 1
        self._min_sweep_gap = min_sweep_gap(settings)
        """:func:`~quorum_cron.core.timers.min_sweep_gap` of the settings (read for every vote reply)."""
        """A slot nobody got voted is dropped (recorded) this long after its deadline."""
        self._jobs: dict[str, _JobState] = {j.name: _JobState(job=j, index=i) for i, j in enumerate(jobs)}
        self._by_index: list[_JobState] = list(self._jobs.values())
        self._touched: list[tuple[_JobState, Slot]] = []
        """Records the input being handled changed (each change appends its record: a record may
        come more than once), settled when the input is handled (:meth:`_settle`)."""
        self._report_illegal_step = report_illegal_step
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
        self._notices_live = False
        """Whether assignment notices are subscribed (:meth:`NodeCore.notices_subscribed`)."""
        self._ran_local: OrderedDict[tuple[str, int], None] = OrderedDict()
        """Slots run locally on this node (at most once each)."""
        self._local_runs: dict[str, dict[int, int]] = {}
        """Per job, slots run locally here whose record may not have gone yet (pruned lazily):
        fire time → the monotonic time after which its run, if no end came, is taken as stale."""
        self._owed_local: dict[str, set[int]] = {}
        """Per job, slots run locally here whose record, with the run's outcome, has not landed
        (and run-once catch-up slots whose record has not: ``_widened``)."""
        self._widened: dict[str, set[int]] = {}
        """Per job, the run-once catch-up slot whose deadline was widened to now, until its vote
        or its missed record has landed (pruned lazily): later slots' records wait behind it,
        as behind a slot run locally (explorer seed 62201)."""
        self._floor_moved: set[str] = set()
        """Jobs a slot run locally here may have stopped holding back (a vote of it landed, ...)."""
        self._parked_check_mono = 0
        """When every job's held records (and stale local runs) are looked at again."""
        self._parked: dict[str, list[RecordMissed]] = {}
        """Per job, missed records of slots later than one run locally here that is still owed
        (:meth:`VotingSide._record_missed`): sent once that slot's own record has landed."""
        self._started = False
        self._next_sweep_mono = 0
        self._sweeping = False
        self._held_finishes = 0
        """Slots whose result waits for a resend (``Slot.finish`` set, not ``finishing``): the bound."""
        self._retries = RetryQueue(settings.retry_ms)
        """Failed missed records and high-water reads (:mod:`quorum_cron.core.retries`)."""
        self._sweeps = SweepPlan(self._sweep_params())
        """Which jobs the next sweep covers (:mod:`quorum_cron.core.sweeps`)."""
        self.dropped_finishes = 0
        """Results dropped because the resend buffer was full (the runtime logs each drop)."""
        cls = type(self)
        self._replied = handlers(cls, "_reply_")
        """Store action type → the core's handler of its reply (``_reply_<type>``, in ``core.node``)."""
        self._failed = handlers(cls, "_failed_")
        """Store action type → the core's handler of its failure (``_failed_<type>``)."""

    # -- the slot records ------------------------------------------------------

    def _slot(self, js: _JobState, fire_ms: int) -> Slot:
        """The job's record of slot ``fire_ms`` (a new one if the node held nothing of it), marked
        touched: the caller is about to change it."""
        s = js.slots.get(fire_ms)
        if s is None:
            s = js.slots[fire_ms] = Slot(fire_ms)
            self._sweeps.heard.add(js.index)
        self._touched.append((js, s))
        return s

    def _settle(self) -> None:
        """Settle the records the input touched (:func:`quorum_cron.core.slots.settle`, the one
        writer of a phase). Called once per input, at its end."""
        touched = self._touched
        if touched:
            self._touched = []
            settle(touched, self._may_vote, self._report_illegal_step, self._step_hook)

    _step_hook: StepHook | None = None
    """Told of every phase step (:data:`quorum_cron.core.slots.StepHook`; tests collect them)."""

    def _touch_votes(self) -> None:
        """Whether the node may vote changed: every slot with a vote part may change phase
        (``abstained`` is a due slot the node may not vote for)."""
        for js in self._by_index:
            for s in js.slots.values():
                if s.vote is not None:
                    self._touched.append((js, s))

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
            for s in js.slots.values():
                if s.poll_at == HELD:
                    s.poll_at = 0
                p = s.vote
                if p is not None and p.held:
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
            self.settings.lease_ms if self.settings.incarnation else 0,
            self.settings.incarnation,
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
            for s in js.slots.values():
                if s.vote is not None:
                    s.vote.request = None
                    self._touched.append((js, s))  # (membership decides whether it abstains)
            if revote:
                # Slots this node voted for, still undecided: vote again under the new record. A
                # job takes a newer record only from a vote of one of its own members (one
                # epoch, one record: docs/protocol.md), so the nodes a change added are refused
                # by a job still behind until a member brings it -- and a member that already
                # voted for a slot (an operator's trigger, a slot that came due just before the
                # change) would otherwise never vote for it again: the slot would miss.
                for s in list(js.slots.values()):
                    if s.poll_at is not None and s.vote is None and not js.removed:
                        s.vote = Pending(fire_ms=s.fire_ms, deadline_ms=js.job.deadline_ms, revote=True)
                        self._touched.append((js, s))
                # And the latest slot it voted for and forgot, parked (subscribed, no notice came
                # within the poll gap): a trigger voted with one node up, the others joining
                # later, has no vote but this node's to bring the record that seats them. Past
                # its deadline the vote is dropped unsent; decided meanwhile, the reply says so.
                forgot = js.parked_out_ms
                if forgot >= 0 and forgot not in js.slots and not js.removed:
                    s = self._slot(js, forgot)
                    s.vote = Pending(fire_ms=forgot, deadline_ms=js.job.deadline_ms, revote=True)
            js.parked_out_ms = -1
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
        changed = self._adopt(record)
        self._settle()
        return changed

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

    def _take_in_due(self, js: _JobState, now: Now) -> None:
        """Take in the job's fire times due by ``now`` that no tick took in yet (``core.vote``)."""
        raise NotImplementedError

    def _on_view(
        self,
        view: SlotView,
        now: Now,
        poll_again: bool = False,
        store_ms: int = 0,
        started: int | None = None,
    ) -> list[Action]:
        """React to a slot's state, whichever call revealed it (``core.run.RunningSide``)."""
        raise NotImplementedError
