"""The protocol's value types, shared by the core, the config, the stores and the simulator.

Slots, votes, replies, ledger entries, membership and operator control, as
plain frozen dataclasses and string enums. This module imports nothing but
the standard library (and :mod:`quorum_cron.core.fastinit`, which builds the
hottest of them faster, and :mod:`quorum_cron.core.membership`, the
membership values it re-exports), so the pure parts (the core, the schedule, the config,
the memory model, the simulator) load without a network client. The
``Store`` protocol that exchanges these values lives in
:mod:`quorum_cron.store.base`.

Times are integer milliseconds since the Unix epoch (UTC); durations are
integer milliseconds.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from quorum_cron.core.fastinit import fast_frozen_init
from quorum_cron.core.membership import (
    MAX_ENCODED,
    MAX_MEMBERS,
    MAX_NODE_ID,
    Configuration,
    Membership,
    MembershipChange,
    MembershipRecord,
    refusal_reason,
)

__all__ = [
    "DECIDED_STATES",
    "MAX_ENCODED",
    "MAX_MEMBERS",
    "MAX_NODE_ID",
    "TERMINAL_STATES",
    "AuditAction",
    "AuditEntry",
    "Configuration",
    "Delivery",
    "FencedRequest",
    "HeartbeatResult",
    "JobControl",
    "LedgerEntry",
    "Member",
    "Membership",
    "MembershipChange",
    "MembershipRecord",
    "MissedRequest",
    "Overlap",
    "SlotState",
    "SlotView",
    "SweepParams",
    "SweepResult",
    "TransitionResult",
    "VoteRequest",
    "VoteResult",
    "VoteStatus",
    "refusal_reason",
]


class SlotState(enum.StrEnum):
    """Where a slot stands. ``ABSENT`` means the store has no record of it."""

    ABSENT = "absent"
    PROPOSED = "proposed"
    COMMITTED = "committed"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"
    MISSED = "missed"
    SKIPPED = "skipped"
    RETRYING = "retrying"
    """Ledger-only: a failed run that will be retried. A slot is never *in*
    this state; it goes straight back to ``committed`` (see ``Store.finish``)."""


TERMINAL_STATES: frozenset[SlotState] = frozenset(
    {SlotState.SUCCEEDED, SlotState.FAILED, SlotState.LOST, SlotState.MISSED, SlotState.SKIPPED}
)
"""States a slot never leaves; each one has a ledger entry."""

DECIDED_STATES: frozenset[SlotState] = TERMINAL_STATES | {
    SlotState.COMMITTED,
    SlotState.RUNNING,
    SlotState.RETRYING,
}
"""States in which a vote no longer changes anything (``retrying`` is never seen on a slot)."""


class Delivery(enum.StrEnum):
    """What happens to a slot whose executor vanished mid-run."""

    AT_MOST_ONCE = "at-most-once"
    AT_LEAST_ONCE = "at-least-once"


class Overlap(enum.StrEnum):
    """What a new slot does while an earlier slot of the same job is active."""

    ALLOW = "allow"
    FORBID = "forbid"
    REPLACE = "replace"


class VoteStatus(enum.StrEnum):
    """What a single vote did."""

    RECORDED = "recorded"
    """The vote was stored; quorum not reached yet."""
    COMMITTED = "committed"
    """This vote completed the quorum: the slot is now committed (or skipped)."""
    DECIDED = "decided"
    """The slot was already decided; the vote changed nothing."""
    EARLY = "early"
    """Store time is before ``fire_ms - max_skew_ms``: refused, not stored."""
    MISSED = "missed"
    """Store time is past ``fire_ms + deadline_ms`` without quorum: slot missed."""
    SKIPPED = "skipped"
    """The job is paused: this vote ended the undecided slot ``skipped`` (no quorum needed)."""
    REFUSED = "refused"
    """The node is not a member of the record the job enforces, or votes with an older epoch
    than the job's: not stored (the result carries the job's epoch, record and a reason)."""


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class VoteRequest:
    """One node's vote for one slot, with the parameters the script checks.

    ``epoch`` and ``membership`` are the membership record the node holds
    (:meth:`MembershipRecord.encode`): the job adopts a newer one, refuses an
    older one, and counts only votes of its record's members (see
    ``docs/protocol.md``, "Membership and reconfiguration"). ``epoch = 0``
    is a node from before membership records (a rolling upgrade): on a job
    with no record the store then keeps the old rule — the highest
    ``quorum`` any node ever sent for the job is the bar — and on a job with
    a record the vote is refused as stale.
    """

    job: str
    fire_ms: int
    node: str
    spec_hash: str
    quorum: int
    max_skew_ms: int
    deadline_ms: int
    overlap: Overlap = Overlap.ALLOW
    epoch: int = 0
    membership: str = ""
    start_lease_ms: int = 0
    """When > 0 and this vote commits the slot to its own node, at or after the fire time,
    the store starts it in the same step under a lease of this length: the executor's fenced
    start folded into the commit, one call and one write fewer per slot (``Store.vote``, step 6)."""
    incarnation: str = ""
    """The voting process's incarnation: the tag of a start folded into the commit
    (``SlotView.starter``), by which that process alone adopts it should the reply be lost."""


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class SlotView:
    """A snapshot of one slot as the store holds it."""

    job: str
    fire_ms: int
    state: SlotState
    votes: tuple[tuple[str, str], ...] = ()
    """(node, spec_hash) pairs, sorted by node."""
    spec_hash: str = ""
    """The spec hash the quorum agreed on (empty before commit)."""
    executor: str = ""
    token: int = 0
    attempt: int = 0
    """How many executors were assigned so far (takeovers raise it)."""
    reason: str = ""
    committed_ms: int = 0
    started_ms: int = 0
    lease_until_ms: int = 0
    finished_ms: int = 0
    detail: str = ""
    not_before_ms: int = 0
    """A retry may not start before this store time (0: no constraint)."""
    runs: int = 0
    """How many times the slot was started (retries and at-least-once re-runs raise it)."""
    starter: str = ""
    """The incarnation of the process whose commit vote also started the slot (a start folded
    into the commit, ``Store.vote`` step 6) while it runs; empty otherwise (ended, reassigned)."""
    epoch: int = 0
    """The epoch of the membership record whose quorum decided the slot (0: undecided, decided
    without a record, or by an older release): :attr:`LedgerEntry.epoch` copies it."""

    @property
    def voters(self) -> tuple[str, ...]:
        """Nodes that voted, sorted."""
        return tuple(node for node, _ in self.votes)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class VoteResult:
    """The reply to one :class:`VoteRequest`."""

    status: VoteStatus
    slot: SlotView
    now_ms: int
    """Store time at which the vote was handled."""
    epoch: int = 0
    """``REFUSED`` only: the epoch the job enforces (0 otherwise)."""
    record: MembershipRecord | None = None
    """``REFUSED`` only: the record the job enforces (None when it has none)."""
    reason: str = ""
    """``REFUSED`` only: why, one line naming the node and both epochs or the members."""


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class TransitionResult:
    """The reply to a fenced start, renew or finish: ``ok`` or refused with a reason."""

    ok: bool
    slot: SlotView
    now_ms: int
    reason: str = ""
    failures_before: int = 0
    """A finish that ended its slot ``succeeded`` only: how many of the job's slots ended
    ``failed`` or ``lost`` in a row before it (missed and skipped slots pass over; the store
    keeps the count, so ``job_recovered`` needs no ledger read). 0 otherwise."""


@dataclass(frozen=True, slots=True)
class MissedRequest:
    """One slot to account missed, for :meth:`~quorum_cron.store.ports.MissedRecords.record_missed_many`:
    the arguments of ``record_missed``, so that many go in one call."""

    job: str
    fire_ms: int
    deadline_ms: int
    reason: str


@dataclass(frozen=True, slots=True)
class FencedRequest:
    """One fenced transition for :meth:`~quorum_cron.store.base.Store.fenced`: the arguments of
    ``start``, ``renew`` or ``finish`` (``op``), so that many go in one round trip."""

    op: str
    """``"start"``, ``"renew"`` or ``"finish"``."""
    job: str
    fire_ms: int
    node: str
    token: int
    lease_ms: int = 0
    """``start`` and ``renew`` only."""
    succeeded: bool = False
    """``finish`` only, like the three below."""
    detail: str = ""
    retries: int = 0
    retry_backoff_ms: int = 0


@dataclass(frozen=True, slots=True)
class SweepResult:
    """The reply to a sweep: the slots it changed, and when sweeping those jobs can next matter."""

    changed: list[SlotView]
    """The slots the sweep changed, by job then fire time."""
    open_due: Mapping[str, int] = field(default_factory=dict)
    """The swept jobs that still have an open slot (proposed, committed, running) after the sweep,
    each with the store milliseconds until the earliest instant a sweep with the same parameters
    could change one of *its* open slots as they now stand (a deadline, a start timeout or a
    lease passing; >= 1): a node sweeps each again when it is due, and otherwise only the jobs
    whose slots it has heard of since (docs/protocol.md, "Which jobs a node sweeps"). Slots
    created after the sweep are not counted: see ``quorum_cron.core.timers.sweep_gap``."""

    @property
    def due_in_ms(self) -> int:
        """The least of ``open_due`` (0 when no swept job has a slot open)."""
        return min(self.open_due.values(), default=0)

    @property
    def open_jobs(self) -> frozenset[str]:
        """The swept jobs with a slot still open (the keys of ``open_due``)."""
        return frozenset(self.open_due)


@dataclass(frozen=True, slots=True)
class SweepParams:
    """Per-job timing a sweep enforces (the caller's configuration)."""

    job: str
    deadline_ms: int
    start_timeout_ms: int
    delivery: Delivery = Delivery.AT_MOST_ONCE


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """A slot's final word: written once, when the slot becomes terminal."""

    job: str
    fire_ms: int
    state: SlotState
    reason: str
    voters: tuple[str, ...]
    executor: str
    token: int
    committed_ms: int
    started_ms: int
    finished_ms: int
    detail: str
    epoch: int = 0
    """The epoch of the membership record whose quorum decided the slot: its agreeing voters that
    are members of it counted, the others did not. 0 when no record decided it (a slot never
    committed, a job without one) or an older release wrote the entry."""


@dataclass(frozen=True, slots=True)
class JobControl:
    """A job's operator control: paused or not, by whom, when (store time) and why.

    A job that was never paused reads ``JobControl(False, "", 0, "")``; after a
    resume, ``by`` and ``at_ms`` name the resume and ``reason`` is empty.
    """

    paused: bool
    by: str
    at_ms: int
    reason: str
    changed: bool = field(default=False, compare=False)
    """In the answer of ``Store.pause`` / ``Store.resume``: whether *this* call changed the
    state (and wrote an audit entry). Why the store says it: told from a read before and the
    answer after, two sessions resuming as the same ``--by`` at once were both told they
    resumed it. Not part of the state (``compare=False``): a read says False."""


class AuditAction(enum.StrEnum):
    """What an operator did to a job."""

    PAUSE = "pause"
    RESUME = "resume"
    TRIGGER = "trigger"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One operator action on a job, as the store recorded it.

    ``detail``: the reason of a pause, the fire time (decimal ms) of a
    trigger, empty for a resume.
    """

    job: str
    action: AuditAction
    by: str
    at_ms: int
    detail: str


@dataclass(frozen=True, slots=True)
class Member:
    """A node's last heartbeat as the store saw it."""

    node: str
    incarnation: str
    seen_ms: int
    expires_ms: int
    info: dict[str, str] = field(default_factory=dict)
    epoch: int = 0
    """The membership epoch the node sent with its last heartbeat (0: none, an older agent)."""

    @property
    def clock_offset_ms(self) -> float | None:
        """The clock offset the node reported, as a number (None: none, or not a sane figure)."""
        try:
            value = float(self.info.get("clock_offset_ms", ""))
        except ValueError:
            return None
        return value if value == value and abs(value) < 1e15 else None  # no NaN, no absurd figure


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The reply to a heartbeat: refused when another live process holds the id."""

    ok: bool
    now_ms: int
    holder: str = ""
    """On refusal, the incarnation that holds the node id."""
    membership: Membership | None = None
    """The namespace's membership record after this heartbeat (None: the store has none)."""
