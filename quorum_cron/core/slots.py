"""One record per slot a node tracks, and the one function that moves its phase.

Everything a node holds about a slot ``(job, fire_ms)`` is one :class:`Slot`
in its job's ``slots``: the vote it owes (:class:`Pending`), the poll that
waits for the slot to be assigned, the start in flight and the lease it
hopes for, a deferred start, the run and its lease (:class:`Running`), the
result on its way to the store, and the missed records waiting to be sent
again. The record's ``phase`` (:class:`~quorum_cron.core.lifecycle.Phase`)
says in one word what the node is doing about the slot; it is written in
one place only, :func:`settle`, which moves a record to the phase its parts
give (:func:`phase_of`) through the lifecycle table
(:func:`~quorum_cron.core.lifecycle.step` raises on a step the table does
not list).

Why the phase is settled once per input, not at each assignment: one input
may take a slot through several parts (a vote reply that commits the slot
to this node drops the vote and sends the start), and the table lists what
*one input* may do (``voting → starting``). The core collects the records
an input touched and settles each when the input is handled
(:meth:`quorum_cron.core.state.CoreState._settle`). Why the phase is read
from the record's parts rather than set by hand at each branch: a slot can
hold two parts at once (a retry assigned to this node while the previous
attempt's result is still on its way: ``finishing`` and ``deferred``), and
:func:`phase_of` says which one names the slot, in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from quorum_cron.core.actions import Finish
from quorum_cron.core.lifecycle import TRANSITIONS, IllegalTransition, Phase, step
from quorum_cron.core.model import VoteRequest

__all__ = [
    "HELD",
    "IN_FLIGHT",
    "LOCAL_ENDED",
    "LOCAL_NO",
    "LOCAL_OWED",
    "LOCAL_RUNNING",
    "LOCAL_TOO_LATE",
    "MAX_DEFERRED_AHEAD",
    "TOKEN_UNKNOWN",
    "Holder",
    "Pending",
    "Running",
    "Slot",
    "StepHook",
    "deferred_ahead",
    "phase_of",
    "settle",
]

LOCAL_NO = 0
"""``Pending.local``: not run locally (yet)."""
LOCAL_RUNNING = 1
"""``Pending.local``: running here alone (``RunLocal`` sent, its end not reported yet)."""
LOCAL_ENDED = 2
"""``Pending.local``: the local run ended (``local_detail`` says how)."""
LOCAL_TOO_LATE = 3
"""``Pending.local``: past its deadline before it could run locally."""

LOCAL_OWED = (LOCAL_RUNNING, LOCAL_ENDED)
"""``Pending.local`` values of a slot run locally whose record, with the run's outcome, is still
owed: the node's records of the job's later slots wait for it (``VotingSide._record_missed``)."""

TOKEN_UNKNOWN = 0
"""``Slot.start_first``'s token when a vote that asked for the start failed: it may have started
the slot here under a token the node never heard (tokens start at 1); a view under this process's
tag names it (docs/protocol.md, "A start folded into the commit")."""

MAX_DEFERRED_AHEAD = 8
"""Starts a job's records may hold deferred to a fire time ahead of the node's clock before a
notice naming another such fire time is ignored.

An assignment notice is a hint that anyone who may publish in the namespace can send, and each
one naming a fire time ahead of the clock makes a record that waits for it: unbounded, notices
naming fire times years ahead would fill the node's memory. The store commits a slot no earlier
than ``max_skew`` before its fire time, so a node whose clock it trusts holds one or two such
starts of a job; one whose clock runs far behind, more, but its starts of them come after the
store has handed the slots to another voter anyway. A notice ignored loses nothing the store
gave: the node's own vote's reply, or a read, defers the start again, and neither is capped."""


IN_FLIGHT = -1
"""``Slot.poll_at`` of a slot whose poll was sent (its reply or failure sets the next)."""
HELD = -2
"""``Slot.poll_at`` of a slot whose poll waits for the store to answer again (it was unreachable)."""


@dataclass(slots=True)
class Pending:
    """The vote part of a slot: due, and no definite vote reply yet."""

    fire_ms: int
    deadline_ms: int
    retry_at_mono: int = 0
    in_flight: bool = False
    abstained: bool = False
    abstain_why: str = ""
    """Why this node abstained, as said at the time (a missed record written after trust came
    back says that, not the clock's verdict at its writing)."""
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
    sent_mono: int = 0
    """Monotonic time the vote in flight was sent: a start folded into its commit holds a lease
    counted from there (:class:`~quorum_cron.core.wire.WireTimes` moves it to the wire)."""


@dataclass(slots=True)
class Running:
    """The run part of a slot: the job runs here under ``token`` and its lease."""

    token: int
    renew_at_mono: int
    lease_until_mono: int
    renewing: bool = False
    renew_sent_mono: int = 0
    runs: int = 0
    """The slot's run count when this run started (its attempt; 0: unknown), for its retry's backoff."""


@dataclass(slots=True, eq=False)
class Slot:
    """Everything one node holds about one slot; ``None`` (or 0) where a part is not held."""

    fire_ms: int
    phase: Phase = Phase.NONE
    """Written only by :func:`settle`."""
    vote: Pending | None = None
    """Due, voting, abstaining or running locally: the vote this node owes the slot."""
    poll_at: int | None = None
    """Voted, not assigned to us yet: monotonic time of the next poll (or ``IN_FLIGHT``, ``HELD``)."""
    parked: bool = False
    """The ``poll_at`` timer forgets the slot rather than reading it: notices are subscribed
    (:mod:`quorum_cron.core.polls`)."""
    start_token: int | None = None
    """Start sent (or its confirming renew, see ``confirming``) under this token."""
    start_sent: int | None = None
    """Monotonic time the start in flight was sent (the lease began after it)."""
    confirming: int | None = None
    """An accepted start whose reply came half a lease late, confirmed by a renew before the
    job runs: monotonic time that renew was sent (the extended lease began after it)."""
    start_first: tuple[int, int] | None = None
    """(token, monotonic time a start for that token was first sent), until its outcome is known."""
    deferred: tuple[int, int] | None = None
    """A start (or a retry) assigned to us before its time: (token, not-before wall ms)."""
    run: Running | None = None
    finish: Finish | None = None
    """The run's result, until the store has it (sent again after a failure)."""
    finish_retry: int = 0
    """Monotonic time a failed finish goes again (0: none failed)."""
    finishing: bool = False
    """The finish is in flight."""
    missed: int = 0
    """Missed records of the slot waiting to be sent (again): in the retry queue, or held back
    behind the record of an earlier slot run locally here (``VotingSide._record_missed``)."""

    def empty(self) -> bool:
        """Whether the node holds nothing of the slot any more (the record can go)."""
        return (
            self.vote is None
            and self.poll_at is None
            and self.start_token is None
            and self.start_sent is None
            and self.confirming is None
            and self.start_first is None
            and self.deferred is None
            and self.run is None
            and self.finish is None
            and not self.missed
        )


def phase_of(slot: Slot, may_vote: bool) -> Phase:
    """The phase the record's parts put the slot in (the first part held, in this order).

    ``may_vote``: the node's clock is trusted and it is a member (a due slot it may not vote
    for is ``abstained`` once it said so).
    """
    if slot.run is not None:
        return Phase.RUNNING
    if slot.start_token is not None:
        return Phase.STARTING
    if slot.finish is not None:
        return Phase.FINISHING
    if slot.deferred is not None:
        return Phase.DEFERRED
    p = slot.vote
    if p is not None:
        if p.revote:
            return Phase.AWAITING  # (a vote sent again under a newer record: the slot still awaits)
        if p.in_flight:
            return Phase.VOTING
        if p.local == LOCAL_RUNNING:
            return Phase.LOCAL
        if p.abstained and not may_vote:
            return Phase.ABSTAINED
        return Phase.DUE
    if slot.poll_at is not None:
        return Phase.AWAITING
    if slot.missed:
        return Phase.MISSED
    return Phase.NONE


def deferred_ahead(slots: dict[int, Slot], now_wall_ms: int) -> int:
    """How many starts the job's records hold deferred to a fire time ahead of the clock."""
    return sum(1 for s in slots.values() if s.deferred is not None and s.fire_ms > now_wall_ms)


class Holder(Protocol):
    """What holds slot records: a job's state (``CoreState._JobState``), by fire time."""

    @property
    def slots(self) -> dict[int, Slot]: ...


StepHook = Callable[[Holder, Slot, Phase, Phase], None]
"""Told (holder, record, before, after) of every phase step (the tests collect them)."""


def settle(
    touched: Iterable[tuple[Holder, Slot]],
    may_vote: bool,
    report: Callable[[str], None] | None = None,
    hook: StepHook | None = None,
) -> None:
    """Move each touched record to the phase its parts give, through the lifecycle table, and
    drop from its holder a record that holds nothing any more.

    The only writer of ``Slot.phase``. The core calls it once per input with the records the
    input changed (a record may come more than once: settling it again changes nothing). A
    step the table does not list is a bug in the core: without ``report`` it raises
    :class:`~quorum_cron.core.lifecycle.IllegalTransition` (the core tests) and leaves that
    record's phase as it was; with it, the message, naming the slot's fire time, goes to
    ``report`` and the step is taken (the agent logs it: a wrong one-word summary of a slot must
    not stop a node whose store calls are each fenced by the store's script; the simulator
    traces it and its checker fails the run, which goes on, so an exploration names the seed).
    ``may_vote``: see :func:`phase_of`.
    """
    none = Phase.NONE
    last = None
    for holder, slot in touched:
        if slot is last:
            continue  # (touched twice in a row: most changes are)
        last = slot
        before = slot.phase
        after = phase_of(slot, may_vote)
        if after is not before:  # (most inputs leave most phases as they were)
            if after not in TRANSITIONS[before]:  # (lifecycle.step's test, without its call)
                try:
                    step(before, after)
                except IllegalTransition as exc:
                    if report is None:
                        raise
                    report(f"{exc} (slot {slot.fire_ms})")
            slot.phase = after
            if hook is not None:
                hook(holder, slot, before, after)
        if after is none and slot.empty():
            slots = holder.slots
            if slots.get(slot.fire_ms) is slot:
                del slots[slot.fire_ms]
