"""Which of a slot's voters counted: what the ledger, the membership log and the slot record tell.

The ledger lists every node whose vote a slot stored. What can be told of
which counted is shown apart from the other voters (:func:`account`): a
voter whose vote was for another definition of the job (from the slot
record, while the store keeps it) did not count. Since 2026-12-07 the slot
record and its ledger entry keep the epoch of the membership record whose
quorum decided the slot: a voter not a member of that record did not count,
and that is exact. Entries written before (or by an older agent in a rolling
upgrade) lack it; for them a voter not a member of the cluster's records in
force when the slot was committed (from the membership log) was outside the
membership of that time. That is not proof it did not count: a job takes a
new record only from a member's vote, so votes sent before their nodes heard
of a change (within about a heartbeat) decided under the older one.
docs/operations.md, "Reading history after a membership change".

Pure but for :func:`read_accounts`, which reads what :func:`account` needs.
Here, below the faces, because ``history`` and the web dashboard both show
it and must show it alike (the web imports no command).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from quorum_cron.core.membership import Membership, MembershipRecord
from quorum_cron.store.base import LedgerEntry, ObservedStore, SlotState, SlotView

__all__ = ["MEMBERSHIP_LOG_READ", "VoterAccount", "account", "in_force", "of_doc", "read_accounts"]

MEMBERSHIP_LOG_READ = 1_000
"""How many membership records (newest first) are read to find the one of a commit."""


@dataclass(frozen=True, slots=True)
class VoterAccount:
    """What the store can tell of whether a slot's voters counted (nothing, by default).

    ``epochs``: the cluster's membership records that may have decided the
    slot (:func:`account`), ``None`` when that cannot be told; ``outside``:
    the voters a member of none of them (current nor, while joint, old).
    ``other_definition``: the voters whose vote was for another definition
    than the one agreed, ``None`` once the slot record is gone. ``decided``:
    the epoch the store recorded as deciding the slot (0: not recorded);
    ``epochs`` is then that one alone and ``outside`` exact.
    """

    epochs: tuple[int, ...] | None = None
    outside: tuple[str, ...] = ()
    other_definition: tuple[str, ...] | None = None
    decided: int = 0

    def apart(self) -> dict[str, str]:
        """The voters shown apart, by node id (sorted), each with why: ``voted another
        definition``, ``not a member of epoch 3 at commit``, or both."""
        why: dict[str, list[str]] = {}
        for v in self.other_definition or ():
            why.setdefault(v, []).append("voted another definition")
        if self.outside and self.decided:
            for v in self.outside:
                why.setdefault(v, []).append(f"not a member of epoch {self.decided}, which decided it")
        elif self.outside and self.epochs:
            said = ", ".join(str(n) for n in self.epochs)
            for v in self.outside:
                why.setdefault(v, []).append(
                    f"not a member of epoch{'s' * (len(self.epochs) > 1)} {said} at commit"
                )
        return {v: ", ".join(why[v]) for v in sorted(why)}

    def text(self, voters: Sequence[str]) -> str:
        """The voters cell: ``a,b [c: not a member of epoch 3 at commit]`` (the others first)."""
        apart = self.apart()
        rest = ",".join(v for v in voters if v not in apart)
        said = "; ".join(f"{v}: {why}" for v, why in apart.items())
        return " ".join(part for part in (rest, f"[{said}]" if said else "") if part) or "-"

    def doc(self) -> dict[str, object]:
        """The ``--json`` fields (docs/cli-output.md)."""
        other = None if self.other_definition is None else list(self.other_definition)
        if self.epochs is None:
            return {"epochs_at_commit": None, "not_members_at_commit": None, "other_definition": other}
        return {
            "epochs_at_commit": list(self.epochs),
            "not_members_at_commit": list(self.outside),
            "other_definition": other,
        }


def of_doc(doc: Mapping[str, object]) -> VoterAccount:
    """The account whose :meth:`VoterAccount.doc` fields ``doc`` holds (the web renders its JSON)."""

    def names(key: str) -> tuple[str, ...] | None:
        got = doc.get(key)
        return None if not isinstance(got, list) else tuple(str(v) for v in got)

    epochs = doc.get("epochs_at_commit")
    told = None if not isinstance(epochs, list) else tuple(int(n) for n in epochs)
    epoch = doc.get("epoch")  # (the ledger entry's: the record that decided it, when recorded)
    decided = epoch if isinstance(epoch, int) and epoch > 0 and told == (epoch,) else 0
    return VoterAccount(told, names("not_members_at_commit") or (), names("other_definition"), decided)


def in_force(log: Sequence[Membership], start_ms: int, end_ms: int) -> list[MembershipRecord] | None:
    """The cluster's records in force at some instant from ``start_ms`` to ``end_ms`` (store time),
    oldest first, from ``log`` (newest first); ``None`` when it does not reach back to ``start_ms``
    (trimmed, or no record yet then)."""
    out: list[MembershipRecord] = []
    for m in log:
        if m.changed_ms <= end_ms:  # (one made after the commit decided nothing of it)
            out.append(m.record)
        if m.changed_ms <= start_ms:
            return out[::-1]
    return None


def account(
    e: LedgerEntry, log: Sequence[Membership], view: SlotView | None, max_skew_ms: int
) -> VoterAccount:
    """What the ledger entry ``e``, the membership ``log`` (newest first) and the slot's record
    ``view`` (``None`` or absent: gone) tell of whether ``e``'s voters counted (see the module).

    The slot record is used only while it is the same slot (its voters are the entry's). The
    votes decided the slot at ``committed_ms`` if it was never reassigned (a takeover or a retry
    moves that time on: the record's attempt says), else at some instant since the slot's
    first vote could come (``max_skew_ms`` before its time). The records in force then under
    which its agreeing voters hold a quorum may have decided it; a voter a member of none of
    them was not counted by the cluster's membership of that time. An entry that records the
    deciding epoch (``e.epoch``) needs none of that: that record, from the log, is the one.
    """
    other: tuple[str, ...] | None = None
    agreeing = set(e.voters)
    same = view is not None and view.state != SlotState.ABSENT and view.voters == e.voters
    if view is not None and same and view.spec_hash:
        other = tuple(n for n, h in view.votes if h != view.spec_hash)
        agreeing -= set(other)
    if not e.committed_ms:
        return VoterAccount(other_definition=other)
    if e.epoch:  # (the store recorded the deciding record: no inference)
        deciding = next((m.record for m in log if m.record.epoch == e.epoch), None)
        if deciding is None:  # (the log no longer reaches back to it)
            return VoterAccount(other_definition=other)
        outside = tuple(v for v in e.voters if not deciding.is_member(v))
        return VoterAccount((e.epoch,), outside, other, e.epoch)
    once = view is not None and same and view.attempt == 1
    start = e.committed_ms if once else min(e.fire_ms - max_skew_ms, e.committed_ms)
    recs = in_force(log, start, e.committed_ms) or []
    could = [r for r in recs if r.commits({v for v in agreeing if r.is_member(v)})]
    if not could:
        return VoterAccount(other_definition=other)
    outside = tuple(v for v in e.voters if not any(r.is_member(v) for r in could))
    return VoterAccount(tuple(r.epoch for r in could), outside, other)


def read_accounts(
    store: ObservedStore, entries: Sequence[LedgerEntry], max_skew_ms: int
) -> list[VoterAccount]:
    """:func:`account` of each entry: one read of the membership log, one pipelined read of the
    slot records of the committed entries. Raises the reads' :class:`~quorum_cron.errors.StoreError`
    (each face says it its own way: the ledger is still shown, without what this could tell)."""
    committed = [e for e in entries if e.committed_ms]
    if not committed:
        return [VoterAccount() for _ in entries]
    log = store.membership_log(MEMBERSHIP_LOG_READ)
    read = store.read_slots([(e.job, e.fire_ms) for e in committed])
    views = {(v.job, v.fire_ms): v for v in read if v.state != SlotState.ABSENT}
    return [account(e, log, views.get((e.job, e.fire_ms)), max_skew_ms) for e in entries]
