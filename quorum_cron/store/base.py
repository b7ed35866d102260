"""The store contract: values exchanged with a store and the ``Store`` protocol.

A store holds votes, slot states, fencing tokens, membership and the ledger —
never job definitions. Every state-changing operation is ONE atomic step on
the store (one Lua script call on Redis, one method call on the memory model)
and reads the store's own clock, never the caller's; the caller's clock only
decides *when* to call.

Slot life cycle (the full table with reasons is in ``docs/protocol.md``)::

    absent ──vote──▶ proposed ──quorum──▶ committed ──start──▶ running
       │                │  │                 │  ▲               │  │
       │                │  └─overlap forbid─▶ skipped            │  │
       └──deadline──────┴──deadline────▶ missed │  │             │  │
                                  start timeout └──┘ (new token)  │  │
                                                  finish ─────────┘  │
                             succeeded / failed ◀─┘                  │
                 lease expired: at-most-once → lost, at-least-once → committed

    running ──finish(failed, retries left)──▶ committed (new token, not before
             now + backoff; ledger entry with the non-terminal state retrying)
    paused job: a vote for an undecided slot ends it skipped ("paused by ...")

Every operation is idempotent in effect: a vote repeated by the same node
overwrites its earlier vote; a start, renew or finish repeated with the same
token after it succeeded is refused without changing anything. That is what
lets a node retry after a lost reply.

Times are integer milliseconds since the Unix epoch (UTC); durations are
integer milliseconds.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = [
    "DECIDED_STATES",
    "TERMINAL_STATES",
    "AuditAction",
    "AuditEntry",
    "Delivery",
    "FinishResult",
    "HeartbeatResult",
    "JobControl",
    "LedgerEntry",
    "Member",
    "Overlap",
    "SlotState",
    "SlotView",
    "Store",
    "SweepParams",
    "TransitionResult",
    "VoteRequest",
    "VoteResult",
    "VoteStatus",
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


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """One node's vote for one slot, with the parameters the script checks.

    ``quorum`` is the node's configured quorum. The store keeps, per job, the
    highest quorum any node ever sent and uses that, so one node configured
    with a smaller quorum cannot lower the bar for the others.
    """

    job: str
    fire_ms: int
    node: str
    spec_hash: str
    quorum: int
    max_skew_ms: int
    deadline_ms: int
    overlap: Overlap = Overlap.ALLOW


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

    @property
    def voters(self) -> tuple[str, ...]:
        """Nodes that voted, sorted."""
        return tuple(node for node, _ in self.votes)


@dataclass(frozen=True, slots=True)
class VoteResult:
    """The reply to one :class:`VoteRequest`."""

    status: VoteStatus
    slot: SlotView
    now_ms: int
    """Store time at which the vote was handled."""


@dataclass(frozen=True, slots=True)
class TransitionResult:
    """The reply to a fenced start or renew: ``ok`` or refused with a reason."""

    ok: bool
    slot: SlotView
    now_ms: int
    reason: str = ""


FinishResult = TransitionResult


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


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The reply to a heartbeat: refused when another live process holds the id."""

    ok: bool
    now_ms: int
    holder: str = ""
    """On refusal, the incarnation that holds the node id."""


@runtime_checkable
class Store(Protocol):
    """The operations every store offers, each atomic on the store.

    Raises: every method may raise :class:`~quorum_cron.errors.StoreUnavailable`
    when the store cannot be reached (the effect of that call is then unknown;
    retrying is safe) and :class:`~quorum_cron.errors.StoreError` on a reply
    the protocol does not allow.
    """

    def vote(self, requests: Sequence[VoteRequest]) -> list[VoteResult]:
        """Record votes and commit every slot that reaches quorum.

        Per request, atomically and in order, with ``now`` the store's time:

        1. a slot in a :data:`DECIDED_STATES` state is returned unchanged
           (``DECIDED``);
        2. ``now < fire_ms - max_skew_ms``: refused (``EARLY``), not stored;
        2b. the job is paused (:meth:`pause`): the vote is stored and the
           slot becomes ``skipped``, reason ``paused by <by>: <reason>``, with
           a ledger entry (``SKIPPED``) — a paused job commits nothing;
        3. ``now > fire_ms + D`` and no quorum yet: the slot becomes
           ``missed`` with a ledger entry (``MISSED``); ``D``, the slot's
           deadline, is the largest ``deadline_ms`` of this request and of the
           votes stored for the slot before (a node catching up after an
           outage widens its own, and the slot keeps it for everybody);
        4. the vote is stored (one per node; a repeat overwrites), and ``D``
           with it;
        5. when ``Q`` distinct nodes voted with this request's spec hash
           (``Q`` = the highest quorum ever sent for this job), the slot
           commits: state ``committed``, executor = the rendezvous-hash
           winner among those voters, token = next value of the job's
           counter, ``committed_ms = now``, starting deadline ``D``
           (``COMMITTED``); the executor is
           notified (Redis: ``PUBLISH`` on its assignment channel). With overlap
           ``forbid`` and another slot of the job committed or running, it
           becomes ``skipped`` instead; with ``replace`` the other active
           slots are ended first (``skipped`` if not started, ``failed``
           if running, reason naming the new slot).

        Results are in request order. Requests for different jobs are
        independent; no order across jobs is promised.
        """
        ...

    def start(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        """Fenced ``committed → running``: only for the slot's executor with its current token.

        Sets ``started_ms = now``, ``lease_until_ms = now + lease_ms`` and
        counts the run (``runs``). Refused (``ok=False``, reason says why,
        nothing changed) when the state is not ``committed``, the token is
        not the slot's current token, the node is not the executor, the slot
        never ran and its starting deadline passed (``starting deadline
        passed``), or a retry is not due yet (``retry not due before <ms>``).
        A slot that already ran (retry, at-least-once re-run) ignores the
        starting deadline.
        """
        ...

    def renew(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        """Extend a running slot's lease to ``now + lease_ms`` (fenced like start).

        Refused when the slot is not ``running`` under this node and token —
        for instance after a takeover, or after ``replace`` ended it; the
        executor should then stop the job.
        """
        ...

    def finish(
        self,
        job: str,
        fire_ms: int,
        node: str,
        token: int,
        succeeded: bool,
        detail: str,
        retries: int = 0,
        retry_backoff_ms: int = 0,
    ) -> TransitionResult:
        """``running → succeeded | failed`` (fenced like start) with a ledger entry.

        ``detail`` (exit code, output tail) is stored as given; callers bound it.

        Retries: when the run failed, the slot has been started fewer than
        ``1 + retries`` times (``SlotView.runs``) and the job is not paused,
        the slot does not end. A ledger entry with the non-terminal state
        ``retrying`` is written (reason ``attempt <runs> of <1 + retries>
        failed; retry after <backoff> ms``) and the slot goes back to
        ``committed`` with a new, higher token, the next executor (chosen as
        in a sweep takeover), ``committed_ms = now`` and ``not_before_ms =
        now + retry_backoff_ms``; the new executor is notified like any
        assignment. A success, or the last allowed failure, ends the slot
        normally. A paused job is not retried (reason ``job failed; no retry:
        paused by <by>``).
        """
        ...

    def sweep(self, params: Sequence[SweepParams]) -> list[SlotView]:
        """Enforce deadlines on every undecided or active slot of the given jobs.

        Per job, atomically, with ``now`` the store's time:

        * ``proposed`` with ``now > fire_ms + max(deadline_ms, D)`` →
          ``missed``, ``D`` the largest deadline its votes carried (see
          :meth:`vote`);
        * ``committed`` with ``now > max(committed_ms, not_before_ms) + start_timeout_ms`` →
          re-assigned to the next rendezvous winner among the voters that
          were not assigned yet (or all voters, when every one was), new
          token, ``committed_ms = now``, executor notified — the slot never
          started (in this attempt), so this is safe under at-most-once; a
          slot that never started at all and is past its starting deadline
          becomes ``missed`` instead;
        * ``running`` with ``now > lease_until_ms`` → ``lost`` under
          at-most-once; under at-least-once re-assigned like above.

        Returns the slots it changed, by job then fire time.
        """
        ...

    def record_missed(self, job: str, fire_ms: int, deadline_ms: int, reason: str) -> SlotView:
        """Account for a slot nobody voted for (whole-cluster outage).

        Marks an ``absent`` or ``proposed`` slot ``missed`` with ``reason`` —
        only if ``now > fire_ms + deadline_ms`` by store time (for a proposed
        slot ``max(deadline_ms, D)``, ``D`` the largest deadline its votes
        carried), so a live slot is never ended early. Returns the slot as it
        stands afterwards.
        """
        ...

    def high_water(self, job: str) -> int:
        """The latest fire time of the job that reached a decided state, or 0."""
        ...

    def slot(self, job: str, fire_ms: int) -> SlotView:
        """Read one slot (``ABSENT`` when unknown). Read-only."""
        ...

    def slots(self, job: str, from_ms: int, to_ms: int) -> list[SlotView]:
        """Read the job's known slots with ``from_ms <= fire_ms <= to_ms``, by fire time."""
        ...

    def ledger(self, job: str, limit: int) -> list[LedgerEntry]:
        """The job's latest ``limit`` ledger entries, newest first."""
        ...

    def heartbeat(self, node: str, incarnation: str, ttl_ms: int, info: dict[str, str]) -> HeartbeatResult:
        """Announce that ``node`` (process ``incarnation``) is alive for ``ttl_ms``.

        Refused when a *different* incarnation of the same node id holds an
        unexpired heartbeat: a second process with the same id must not run.
        """
        ...

    def leave(self, node: str, incarnation: str) -> None:
        """Drop the node's membership if ``incarnation`` still holds it (clean shutdown)."""
        ...

    def members(self) -> list[Member]:
        """Every member with an unexpired heartbeat, by node id."""
        ...

    def time_ms(self) -> int:
        """The store's clock (Redis ``TIME``), for the node's skew cross-check."""
        ...

    def pause(self, job: str, by: str, reason: str) -> JobControl:
        """Pause the job: until resumed, a vote for any undecided slot of it ends that slot ``skipped``.

        Slots already committed or running are not touched (their runs go
        on; failed runs are not retried). Recorded in the job's audit with
        ``by`` and store time. Pausing again with the same ``by`` and
        ``reason`` changes nothing (a retry after a lost reply); otherwise
        the new pause replaces the old one. Returns the control afterwards.
        """
        ...

    def resume(self, job: str, by: str) -> JobControl:
        """End the job's pause (audited). Resuming a job that is not paused changes nothing."""
        ...

    def control(self, job: str) -> JobControl:
        """The job's pause state. Read-only."""
        ...

    def trigger(self, job: str, by: str) -> int:
        """An operator asks the cluster to run ``job`` now; returns the trigger's fire time.

        The request carries only the job name and who asked — the nodes run
        their own definition of the job, nothing comes from the store. The
        fire time is store time (ms). It is kept in the job's trigger set
        (trimmed: older than the retention, or beyond the newest
        ``trigger_maxlen``), audited, and announced to every node (Redis:
        ``PUBLISH`` on the trigger channel). Nodes then vote for the slot
        ``(job, fire_ms)`` like any other. Not idempotent: each call is a
        trigger (two calls in the same millisecond name the same slot).
        """
        ...

    def triggers(self, job: str, since_ms: int) -> list[int]:
        """Fire times of the job's kept triggers with ``fire_ms > since_ms``, ascending. Read-only.

        Triggers older than the retention are not reported.
        """
        ...

    def audit(self, job: str, limit: int) -> list[AuditEntry]:
        """The job's latest ``limit`` operator actions, newest first (bounded per job)."""
        ...
