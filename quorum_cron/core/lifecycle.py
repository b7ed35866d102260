"""The node side of a slot's life, as data: its phases and the transitions allowed between them.

The store's slot states (``model.SlotState``) say where a slot stands for the
cluster; these phases say what *this node* is doing about it. The table is
the one in ``docs/protocol.md`` ("The node side of a slot");
``tests/test_lifecycle.py`` checks that the two agree. :func:`step` is the
table's gate, and the core's: the one writer of a slot record's phase
(:func:`quorum_cron.core.slots.settle`) moves it only through this table,
which raises on a step the table does not list, or reports it (the agent
logs it; the simulator traces it, and its checker fails the run), so every
simulated run checks every step it takes.

In the spirit of h11's ``_state.py``: the rules are a table a reader can
check at a glance, not a property of scattered branches.
"""

from __future__ import annotations

import enum

__all__ = ["TRANSITIONS", "IllegalTransition", "Phase", "allowed", "step"]


class Phase(enum.StrEnum):
    """What a node is doing about one slot."""

    NONE = "none"
    """The node holds nothing of the slot: not due yet, or its part is over."""
    DUE = "due"
    """Due (fire time less the vote lead came), no vote in flight (a failed one waits for its
    retry, or, with the store unreachable, for the store to answer)."""
    VOTING = "voting"
    ABSTAINED = "abstained"
    LOCAL = "local"
    """Running locally (``run-local``, store unreachable)."""
    AWAITING = "awaiting"
    DEFERRED = "deferred"
    STARTING = "starting"
    RUNNING = "running"
    FINISHING = "finishing"
    MISSED = "missed"
    """A missed record failed, or was held while the store is unreachable: sent again after a
    backoff until the store answers (one probe at a time while it is unreachable). Or it waits
    for the record of an earlier slot of the job run locally here to land."""


P = Phase
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    P.NONE: frozenset(
        {P.DUE, P.VOTING, P.ABSTAINED, P.LOCAL, P.AWAITING, P.DEFERRED, P.STARTING, P.FINISHING, P.MISSED}
    ),
    P.DUE: frozenset(
        {P.VOTING, P.ABSTAINED, P.LOCAL, P.AWAITING, P.DEFERRED, P.STARTING, P.FINISHING, P.MISSED, P.NONE}
    ),
    P.VOTING: frozenset(
        {P.DUE, P.ABSTAINED, P.LOCAL, P.AWAITING, P.DEFERRED, P.STARTING, P.RUNNING, P.FINISHING, P.NONE}
    ),
    P.ABSTAINED: frozenset(
        {P.DUE, P.VOTING, P.LOCAL, P.AWAITING, P.DEFERRED, P.STARTING, P.FINISHING, P.MISSED, P.NONE}
    ),
    P.LOCAL: frozenset(
        {P.DUE, P.VOTING, P.ABSTAINED, P.AWAITING, P.DEFERRED, P.STARTING, P.FINISHING, P.NONE}
    ),
    P.AWAITING: frozenset({P.DEFERRED, P.STARTING, P.RUNNING, P.FINISHING, P.MISSED, P.NONE}),
    P.DEFERRED: frozenset({P.STARTING, P.FINISHING, P.MISSED, P.NONE}),
    P.STARTING: frozenset(
        {
            P.DUE,
            P.VOTING,
            P.ABSTAINED,
            P.LOCAL,
            P.RUNNING,
            P.AWAITING,
            P.DEFERRED,
            P.FINISHING,
            P.MISSED,
            P.NONE,
        }
    ),
    P.RUNNING: frozenset({P.FINISHING, P.STARTING, P.LOCAL, P.MISSED, P.NONE}),
    P.FINISHING: frozenset(
        {P.DUE, P.VOTING, P.ABSTAINED, P.LOCAL, P.AWAITING, P.DEFERRED, P.STARTING, P.MISSED, P.NONE}
    ),
    P.MISSED: frozenset({P.DEFERRED, P.STARTING, P.FINISHING, P.NONE}),
}
"""Phase → the phases one input may take a slot to (an input can make several steps: a vote
reply that commits the slot to this node goes from ``voting`` straight to ``starting``).
``starting`` → ``finishing``: the store handed this node the retry of a run whose ``Finish``
it is still sending (the reply was lost), and the retry's ``Start`` failed: the record is back
to the finish it holds. ``due`` or ``abstained`` → ``starting`` or ``deferred``: the node's vote
landed but its reply was lost, so the vote is owed again (or withheld, the clock untrusted),
when the store assigns the slot here (a commit's notice, a takeover, a retry). ``starting`` or
``finishing`` → ``abstained``: the record falls back to the vote it still owes, as it falls back
to ``due``, while the node may not vote (``due`` and ``abstained`` are the same part, a vote
owed, told apart by whether the node may vote: so a phase may go to one exactly when it may go
to the other, and each may go where the other may; ``abstained`` → ``awaiting`` is ``due`` →
``awaiting``, the vote dropped with the slot awaited). ``voting`` →
``abstained``: a node that had abstained (its clock untrusted) votes again, and the store refuses
the vote with a newer membership record that leaves the node out; holding it, the node may not
vote, so the vote owed is withheld again. ``missed`` → ``deferred``: a read shows the slot whose
record waits committed here after all, its retry's backoff not over (the record is then moot);
``deferred`` → ``missed``: a graceful stop drops that deferred start, and the record still waits.
Any phase → ``finishing``: a run this node killed (its lease ended, a renew was refused, a read
showed the slot gone) still reports its end, as every run does, and its result goes to the store
fenced by its token, whatever else the record holds by then."""


def allowed(before: Phase, after: Phase) -> bool:
    """Whether one step may take a slot from ``before`` to ``after`` (staying put is always allowed)."""
    return before == after or after in TRANSITIONS[before]


class IllegalTransition(ValueError):
    """A slot was to take a step the lifecycle table does not allow (a bug in the core)."""


def step(before: Phase, after: Phase) -> Phase:
    """``after``, if the table lets one input take a slot there from ``before``; else raise.

    Raises :class:`IllegalTransition` naming both phases and what ``before`` allows.
    """
    if before is not after and after not in TRANSITIONS[before]:
        allowed_next = ", ".join(sorted(p.value for p in TRANSITIONS[before])) or "nothing"
        raise IllegalTransition(
            f"slot phase {before.value} -> {after.value} is not in the lifecycle table: "
            f"expected {before.value} -> one of {allowed_next}"
        )
    return after
