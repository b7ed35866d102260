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
    "Delivery",
    "FinishResult",
    "HeartbeatResult",
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


TERMINAL_STATES: frozenset[SlotState] = frozenset(
    {SlotState.SUCCEEDED, SlotState.FAILED, SlotState.LOST, SlotState.MISSED, SlotState.SKIPPED}
)
"""States a slot never leaves; each one has a ledger entry."""

DECIDED_STATES: frozenset[SlotState] = TERMINAL_STATES | {SlotState.COMMITTED, SlotState.RUNNING}
"""States in which a vote no longer changes anything."""


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
        3. ``now > fire_ms + deadline_ms`` and no quorum yet: the slot becomes
           ``missed`` with a ledger entry (``MISSED``);
        4. the vote is stored (one per node; a repeat overwrites);
        5. when ``Q`` distinct nodes voted with this request's spec hash
           (``Q`` = the highest quorum ever sent for this job), the slot
           commits: state ``committed``, executor = the rendezvous-hash
           winner among those voters, token = next value of the job's
           counter, ``committed_ms = now`` (``COMMITTED``). With overlap
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

        Sets ``started_ms = now`` and ``lease_until_ms = now + lease_ms``.
        Refused (``ok=False``, reason says why, nothing changed) when the
        state is not ``committed``, the node is not the executor, or the
        token is not the slot's current token.
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
        self, job: str, fire_ms: int, node: str, token: int, succeeded: bool, detail: str
    ) -> TransitionResult:
        """``running → succeeded | failed`` (fenced like start) with a ledger entry.

        ``detail`` (exit code, output tail) is stored as given; callers bound it.
        """
        ...

    def sweep(self, params: Sequence[SweepParams]) -> list[SlotView]:
        """Enforce deadlines on every undecided or active slot of the given jobs.

        Per job, atomically, with ``now`` the store's time:

        * ``proposed`` with ``now > fire_ms + deadline_ms`` → ``missed``;
        * ``committed`` with ``now > committed_ms + start_timeout_ms`` →
          re-assigned to the next rendezvous winner among the voters that
          were not assigned yet (or all voters, when every one was), new
          token, ``committed_ms = now`` — the slot never started, so this
          is safe under at-most-once;
        * ``running`` with ``now > lease_until_ms`` → ``lost`` under
          at-most-once; under at-least-once re-assigned like above.

        Returns the slots it changed, by job then fire time.
        """
        ...

    def record_missed(self, job: str, fire_ms: int, deadline_ms: int, reason: str) -> SlotView:
        """Account for a slot nobody voted for (whole-cluster outage).

        Marks an ``absent`` or ``proposed`` slot ``missed`` with ``reason`` —
        only if ``now > fire_ms + deadline_ms`` by store time, so a live slot
        is never ended early. Returns the slot as it stands afterwards.
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
