"""Membership values: who may vote and what a commit needs (issue 22), and their canonical text.

:class:`Configuration` (members, size, quorum), :class:`MembershipRecord`
(an epoch, the current configuration and, during a change, the old one),
the namespace record as stored (:class:`Membership`) and a change's reply
(:class:`MembershipChange`). Apart from :mod:`quorum_cron.core.model`, which
re-exports them, because the record's rules and its bounded parser are
one concern; like the model it imports only the standard library. The Lua
twin of the parser is ``quorum_cron/store/_membership.lua``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

__all__ = [
    "MAX_ENCODED",
    "MAX_EPOCH",
    "MAX_MEMBERS",
    "MAX_NODE_ID",
    "Configuration",
    "Membership",
    "MembershipChange",
    "MembershipRecord",
    "epoch_bound_refusal",
    "refusal_reason",
]

MAX_MEMBERS = 100
"""The largest configuration (members or seats): the config's bound on ``members`` and ``size``."""
MAX_NODE_ID = 100
"""The longest node id (the config's bound on a name)."""
_NODE_ID = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
MAX_EPOCH = 10**15 - 1
"""The largest epoch: its text has at most 15 digits, which every decoder (here and the store's
scripts) bounds it to. No real cluster nears it; a record a forger set there stays at it (the store
refuses to step past it, rather than write a text no decoder reads)."""
MAX_ENCODED = 2 * (MAX_MEMBERS * (MAX_NODE_ID + 1) + 16) + 24
"""The longest :meth:`MembershipRecord.encode` text: a decoder refuses anything longer before parsing."""


def epoch_bound_refusal(ms: Membership | None) -> str:
    """Why no record can follow ``ms`` ("": one can): its epoch is :data:`MAX_EPOCH`."""
    if ms is not None and ms.record.epoch >= MAX_EPOCH:
        return (
            f"the stored membership record is corrupt: epoch {ms.record.epoch} is the largest a record "
            "can have: none can follow it"
        )
    return ""


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
    if not (text.isascii() and text.isdecimal()) or len(text) > 15 or (len(text) > 1 and text[0] == "0"):
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
        if type(self.epoch) is not int or not 1 <= self.epoch <= MAX_EPOCH:
            raise ValueError(f"epoch {self.epoch!r}: expected a positive integer of at most 15 digits")

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
