"""The records of the memory model: what one Redis key (or hash tag) of the store holds.

:class:`_Slot` is a slot hash, :class:`_Job` everything under one job's hash
tag (slots, open set, token counter, ledger and audit streams, control and
triggers), :class:`_Member` one field of the members hash. They live apart
from :class:`quorum_cron.store.memory.MemoryStore` so that its parts (the
protocol in ``memory.py``, operator control and membership in
``memory_control.py``) and the simulator's planted bugs (``sim/mutants.py``)
share one definition.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from quorum_cron.core.model import (
    AuditEntry,
    JobControl,
    LedgerEntry,
    MembershipRecord,
    SlotState,
    VoteRequest,
)
from quorum_cron.store.rendezvous import pick_executor

__all__ = ["NOT_PAUSED", "_Job", "_Member", "_Slot", "adopt_record", "choose_executor", "log_entry"]

NOT_PAUSED = JobControl(paused=False, by="", at_ms=0, reason="")


@dataclass
class _Slot:
    """A slot record: the fields the Redis slot hash holds."""

    fire_ms: int
    state: SlotState = SlotState.PROPOSED
    votes: dict[str, str] = field(default_factory=dict)
    spec_hash: str = ""
    executor: str = ""
    assigned: list[str] = field(default_factory=list)
    token: int = 0
    reason: str = ""
    deadline_ms: int = 0
    """The largest ``deadline_ms`` any vote carried (the start deadline once committed)."""
    committed_ms: int = 0
    started_ms: int = 0
    lease_until_ms: int = 0
    finished_ms: int = 0
    runs: int = 0
    detail: str = ""
    not_before_ms: int = 0
    expires_ms: int = 0
    starter: str = ""
    epoch: int = 0
    """The epoch of the membership record whose quorum decided the slot (Redis: ``ep``; 0: none)."""


@dataclass
class _Job:
    """Everything of one job: the Redis keys under one hash tag."""

    name: str = ""
    slots: dict[int, _Slot] = field(default_factory=dict)
    open: set[int] = field(default_factory=set)
    """Fire times of the slots not yet ended (changed by ``MemoryStore._open_slot``/``_close_slot``)."""
    token: int = 0
    quorum: int = 0
    """The legacy floor (``q``): the highest quorum an epoch-0 vote sent; dropped when a record is adopted."""
    record: MembershipRecord | None = None
    """The membership record the job enforces (Redis: meta ``mr``); only ever replaced by a newer one."""
    hwm: int = 0
    failures: int = 0
    """The failure streak (Redis: meta ``fs``): slots ended failed or lost in a row; see ``ended``."""
    ledger: deque[LedgerEntry] = field(default_factory=deque)
    control: JobControl = field(default_factory=lambda: NOT_PAUSED)
    triggers: list[int] = field(default_factory=list)
    """Sorted ascending, no duplicates."""
    audit: deque[AuditEntry] = field(default_factory=deque)
    ledger_seq: int = 0
    audit_seq: int = 0
    """Entries ever appended to ``ledger`` / ``audit``: the newest one's id (``ObservationModel``)."""

    def ended(self, state: SlotState) -> int:
        """A slot of the job ended in ``state``: count a failure or loss into the streak, or
        return it and start over on a success (``TransitionResult.failures_before``; 0 else)."""
        if state in (SlotState.FAILED, SlotState.LOST):
            self.failures += 1
        elif state == SlotState.SUCCEEDED:
            before, self.failures = self.failures, 0
            return before
        return 0


@dataclass
class _Member:
    incarnation: str
    seen_ms: int
    expires_ms: int
    info: dict[str, str]
    epoch: int = 0


def choose_executor(name: str, job: _Job, rec: _Slot) -> tuple[str, str]:
    """The next executor of a committed slot, or ``("", why nobody may take it)`` (_job.lua's choose).

    Only agreeing voters that are members (current or, while joint, old) of
    the record the job enforces may execute: a node removed since it voted
    must not be handed the slot (any agreeing voter on a job without a
    record: legacy). Among them: at a commit the rendezvous winner; at a
    takeover or a retry the rendezvous winner among those not assigned yet,
    and once every one has been, the one whose last assignment is the
    oldest, so the slot goes round its voters instead of waiting on one
    that stays down. A commit always finds one (its quorum is of members); a
    takeover or a retry after a membership change may not.
    """
    record = job.record
    agreeing = [
        n for n, h in rec.votes.items() if h == rec.spec_hash and (record is None or record.is_member(n))
    ]
    last = {n: i for i, n in enumerate(rec.assigned)}
    fresh = [n for n in agreeing if n not in last]
    if agreeing and not fresh:  # (every one assigned before: a takeover or a retry)
        return min(agreeing, key=last.__getitem__), ""
    chosen = pick_executor(name, rec.fire_ms, fresh or agreeing)
    if chosen:
        return chosen, ""
    if record is None:
        return "", "no agreeing voter"
    return "", f"no agreeing voter is a member of epoch {record.epoch}"


def adopt_record(req: VoteRequest) -> MembershipRecord:
    """The record a vote carries (vote.lua refuses the same texts: code X, this vote only)."""
    record = MembershipRecord.decode(req.membership)
    if record.epoch != req.epoch:
        raise ValueError(f"vote of epoch {req.epoch} carries a record of epoch {record.epoch}")
    return record


def log_entry(name: str, job: _Job, rec: _Slot, state: SlotState, reason: str, now: int) -> None:
    """Append the slot's ledger entry (terminal states, and ``retrying``)."""
    job.ledger_seq += 1
    job.ledger.append(
        LedgerEntry(
            job=name,
            fire_ms=rec.fire_ms,
            state=state,
            reason=reason,
            voters=tuple(sorted(rec.votes)),
            executor=rec.executor,
            token=rec.token,
            committed_ms=rec.committed_ms,
            started_ms=rec.started_ms,
            finished_ms=now,
            detail=rec.detail,
            epoch=rec.epoch,
        )
    )
