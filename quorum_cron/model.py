"""The protocol's value types, shared by the core, the config, the stores and the simulator.

Slots, votes, replies, ledger entries, membership and operator control, as
plain frozen dataclasses and string enums. This module imports nothing but
the standard library (and :mod:`quorum_cron.fastinit`, which builds the
hottest of them faster), so the pure parts (the core, the schedule, the config,
the memory model, the simulator) load without a network client. The
``Store`` protocol that exchanges these values lives in
:mod:`quorum_cron.store.base`.

Times are integer milliseconds since the Unix epoch (UTC); durations are
integer milliseconds.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from quorum_cron.fastinit import fast_frozen_init

__all__ = [
    "DECIDED_STATES",
    "MAX_MEMBERS",
    "MAX_NODE_ID",
    "TERMINAL_STATES",
    "AuditAction",
    "AuditEntry",
    "Configuration",
    "Delivery",
    "HeartbeatResult",
    "JobControl",
    "LedgerEntry",
    "Member",
    "Membership",
    "MembershipChange",
    "MembershipRecord",
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
    """The reply to a fenced start or renew: ``ok`` or refused with a reason."""

    ok: bool
    slot: SlotView
    now_ms: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SweepResult:
    """The reply to a sweep: the slots it changed, and when sweeping those jobs can next matter."""

    changed: list[SlotView]
    """The slots the sweep changed, by job then fire time."""
    due_in_ms: int = 0
    """Store milliseconds from this sweep until the earliest instant a sweep with the same
    parameters could change one of those jobs' open slots as they now stand (a deadline, a
    start timeout or a lease passing; always >= 1); 0 when none of them has an open slot.
    Slots created after the sweep are not counted: see ``quorum_cron.timers.sweep_gap``."""


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
    epoch: int = 0
    """The membership epoch the node sent with its last heartbeat (0: none, an older agent)."""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The reply to a heartbeat: refused when another live process holds the id."""

    ok: bool
    now_ms: int
    holder: str = ""
    """On refusal, the incarnation that holds the node id."""
    membership: Membership | None = None
    """The namespace's membership record after this heartbeat (None: the store has none)."""


# -- membership ----------------------------------------------------------------

MAX_MEMBERS = 100
"""The largest configuration (members or seats): the config's bound on ``members`` and ``size``."""
MAX_NODE_ID = 100
"""The longest node id (the config's bound on a name)."""
_NODE_ID = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
MAX_ENCODED = 2 * (MAX_MEMBERS * (MAX_NODE_ID + 1) + 16) + 24
"""The longest :meth:`MembershipRecord.encode` text: a decoder refuses anything longer before parsing."""


def _seats_text(n: int) -> str:
    return "1 open seat" if n == 1 else f"{n} open seats"


@dataclass(frozen=True, slots=True)
class Configuration:
    """One set of members and the quorum a commit needs from it.

    ``size`` exceeds ``len(members)`` only in "size = N" mode: the first ids
    to register fill the open seats (each fill is a new epoch). An open seat
    counts as a member that never votes, so the quorum stays a majority of
    ``size`` — a seat nobody holds yet cannot lower the bar.
    """

    members: tuple[str, ...]
    size: int
    quorum: int

    def __post_init__(self) -> None:
        ms = self.members
        if not isinstance(ms, tuple) or len(ms) > MAX_MEMBERS:
            raise ValueError(f"members {ms!r}: expected a tuple of at most {MAX_MEMBERS} node ids")
        for m in ms:
            if not isinstance(m, str) or len(m) > MAX_NODE_ID or not _NODE_ID.fullmatch(m):
                raise ValueError(
                    f"member {m!r}: expected a node id of 1-{MAX_NODE_ID} characters from A-Z a-z 0-9 _ . -"
                )
        if list(ms) != sorted(set(ms)):
            raise ValueError(f"members {list(ms)!r}: expected distinct node ids in sorted order")
        size, quorum = self.size, self.quorum
        if type(size) is not int or not max(1, len(ms)) <= size <= MAX_MEMBERS:
            raise ValueError(
                f"size {size!r}: expected {max(1, len(ms))}-{MAX_MEMBERS} (at least the members)"
            )
        if type(quorum) is not int or not size // 2 + 1 <= quorum <= size:
            raise ValueError(
                f"quorum {quorum!r}: expected {size // 2 + 1}-{size} (a majority of size {size})"
            )

    @classmethod
    def of(cls, members: Iterable[str], size: int | None = None, quorum: int | None = None) -> Configuration:
        """Ids in any order; ``size`` defaults to their count, ``quorum`` to a majority of ``size``."""
        ids = list(members)
        distinct = sorted(set(ids))
        if len(distinct) != len(ids):
            twice = sorted({m for m in ids if ids.count(m) > 1})
            raise ValueError(
                f"members {ids!r}: {', '.join(map(str, twice))} listed twice (expected distinct ids)"
            )
        n = len(distinct) if size is None else size
        return cls(tuple(distinct), n, n // 2 + 1 if quorum is None else quorum)

    @property
    def open_seats(self) -> int:
        return self.size - len(self.members)

    def has(self, node: str) -> bool:
        return node in self.members

    def reached(self, voters: Collection[str]) -> bool:
        """Whether ``voters`` hold this configuration's quorum (votes of non-members do not count)."""
        members = self.members
        return sum(1 for v in voters if v in members) >= self.quorum

    def describe(self) -> str:
        """For one-line messages: ``a, b, c (quorum 2 of 3)``."""
        names = ", ".join(self.members) or "nobody"
        seats = f" + {_seats_text(self.open_seats)}" if self.open_seats else ""
        return f"{names}{seats} (quorum {self.quorum} of {self.size})"

    def encode(self) -> str:
        return ",".join((str(self.size), str(self.quorum), *self.members))

    @classmethod
    def decode(cls, text: str) -> Configuration:
        parts = text.split(",")
        if len(parts) < 2 or len(parts) > MAX_MEMBERS + 2:
            raise ValueError(f"configuration {text[:60]!r}: expected size,quorum,member,...")
        size, quorum = (_decimal(p, "size" if i == 0 else "quorum") for i, p in enumerate(parts[:2]))
        return cls(tuple(parts[2:]), size, quorum)


def _decimal(text: str, what: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 15 or (len(text) > 1 and text[0] == "0"):
        raise ValueError(f"{what} {text[:20]!r}: expected a decimal number without leading zeros")
    return int(text)


@dataclass(frozen=True, slots=True)
class MembershipRecord:
    """Who may vote, and what a commit needs: the configuration, and while ``old`` is set, also it.

    ``old`` set is the *joint* configuration of a change (Raft's C_old,new):
    a slot commits only with agreeing votes from a quorum of ``old`` and a
    quorum of ``current``. Epochs only grow; the store enforces the newest
    record a job has seen.
    """

    epoch: int
    current: Configuration
    old: Configuration | None = None

    def __post_init__(self) -> None:
        if type(self.epoch) is not int or not 1 <= self.epoch < 2**53:
            raise ValueError(f"epoch {self.epoch!r}: expected a positive integer below 2^53")

    @property
    def joint(self) -> bool:
        return self.old is not None

    def is_member(self, node: str) -> bool:
        """In ``current`` or, while joint, ``old``: whose votes the store accepts."""
        return node in self.current.members or (self.old is not None and node in self.old.members)

    @property
    def members(self) -> tuple[str, ...]:
        """Every id whose vote is accepted (sorted)."""
        if self.old is None:
            return self.current.members
        return tuple(sorted(set(self.current.members) | set(self.old.members)))

    def commits(self, voters: Collection[str]) -> bool:
        """Whether agreeing ``voters`` commit a slot: a quorum of current and, while joint, of old."""
        return self.current.reached(voters) and (self.old is None or self.old.reached(voters))

    def encode(self) -> str:
        """The canonical text (what votes carry and the store keeps): ``epoch;current[;old]``,
        each configuration ``size,quorum,member,...`` (members sorted)."""
        text = f"{self.epoch};{self.current.encode()}"
        return text if self.old is None else f"{text};{self.old.encode()}"

    @classmethod
    def decode(cls, text: str) -> MembershipRecord:
        """Parse :meth:`encode`'s text with bounds (it comes from the store: never trusted).

        Raises ValueError, one line naming the value and what was expected.
        """
        if not isinstance(text, str):
            raise ValueError(f"membership record {text!r:.60}: expected text")
        if len(text) > MAX_ENCODED:
            raise ValueError(f"membership record of {len(text)} characters: expected at most {MAX_ENCODED}")
        parts = text.split(";")
        if not 2 <= len(parts) <= 3:
            raise ValueError(f"membership record {text[:60]!r}: expected epoch;size,quorum,members[;old]")
        try:
            epoch = _decimal(parts[0], "epoch")
            record = cls(
                epoch,
                Configuration.decode(parts[1]),
                Configuration.decode(parts[2]) if len(parts) == 3 else None,
            )
        except ValueError as exc:
            raise ValueError(f"membership record {text[:60]!r}: {exc}") from None
        if record.encode() != text:
            raise ValueError(f"membership record {text[:60]!r}: not in canonical form")
        return record

    def describe(self) -> str:
        """For one-line messages and ``status``."""
        if self.old is None:
            return f"epoch {self.epoch}: {self.current.describe()}"
        return f"epoch {self.epoch}: joint, old {self.old.describe()} -> new {self.current.describe()}"


def refusal_reason(node: str, epoch: int, record: MembershipRecord | None) -> str:
    """Why the store refused ``node``'s vote sent with ``epoch`` on a job enforcing ``record``.

    One wording for the memory model and the Redis store (the script sends
    only which case it was): stale when ``epoch`` is older than the job's,
    otherwise not a member.
    """
    if record is None:
        return f"{node} votes with epoch {epoch}, but the job has no membership record"
    if epoch < record.epoch:
        return f"{node} votes with membership epoch {epoch}, the job enforces epoch {record.epoch}"
    return f"{node} is not a member of {record.describe()}"


@dataclass(frozen=True, slots=True)
class Membership:
    """The namespace's membership record as the store keeps it, with who made this epoch, when and why."""

    record: MembershipRecord
    changed_ms: int
    by: str
    reason: str


@dataclass(frozen=True, slots=True)
class MembershipChange:
    """The reply to a membership change or finish: done, or refused with a one-line reason."""

    ok: bool
    membership: Membership | None
    """What the store holds afterwards (None: no record at all)."""
    reason: str = ""
