"""Which ledger entries are of a slot an operator triggered: what the job's audit stream tells.

``quorum-cron trigger JOB`` (and the dashboard's trigger action) makes the
store pick the slot: the job at store time in ms. Neither the slot record
nor its ledger entry says it was triggered, but the same script appends a
``trigger`` entry to the job's audit stream: who (``by``), when (``at``),
and the slot's fire time in ms as its ``detail`` (docs/store.md). A ledger
entry whose fire time an audit ``trigger`` entry names is marked triggered,
by whom. The audit keeps the newest ``DEFAULT_AUDIT_MAXLEN`` operator
actions per job: once that many are read, an entry older than the oldest
of them cannot be told (``None``), as its trigger's audit entry may be gone.

Values read from Redis are untrusted: a ``detail`` is only compared, as
text, with the fire time's decimal form (what an agent compares before it
runs a trigger, :mod:`quorum_cron.agent.triggers`); a forged one can mark
only the entry of the fire time it names. ``by`` is bounded by the store's
parser; the faces escape it when shown. Here, below the faces, because
``history`` and the web dashboard both show it and must show it alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.base import AuditAction, AuditEntry, LedgerEntry, ObservedStore
from quorum_cron.store.keys import DEFAULT_AUDIT_MAXLEN

__all__ = ["AUDIT_READ", "TriggerMark", "mark", "read_marks"]

AUDIT_READ = DEFAULT_AUDIT_MAXLEN
"""Audit entries read per job (newest first): all the store keeps."""

_MAX_BY = 10
"""At most this many names are kept per slot (two triggers in one millisecond name one slot)."""


@dataclass(frozen=True, slots=True)
class TriggerMark:
    """Whether a ledger entry's slot was triggered by an operator, and by whom.

    ``told``: False when the store cannot tell (the audit unreadable, or
    trimmed past the slot); ``by``: who triggered it, in audit order (empty
    for a scheduled slot; ``("",)`` for a trigger audited with no name).
    """

    told: bool = False
    by: tuple[str, ...] = ()

    @property
    def triggered(self) -> bool | None:
        return bool(self.by) if self.told else None

    def text(self) -> str:
        """The ``triggered`` cell: ``by alice``, ``yes`` (no name recorded), ``-`` or ``?`` (cannot tell)."""
        if not self.told:
            return "?"
        names = [b for b in self.by if b]
        if names:
            return "by " + ", ".join(names)
        return "yes" if self.by else "-"

    def doc(self) -> dict[str, object]:
        """The ``--json`` / API fields (docs/cli-output.md): ``triggered`` and ``triggered_by``."""
        return {
            "triggered": self.triggered,
            "triggered_by": [b for b in self.by if b] if self.told else None,
        }


def mark(entries: Sequence[LedgerEntry], audit: Sequence[AuditEntry], full: bool) -> list[TriggerMark]:
    """Each entry's mark from its job's ``audit`` (newest first, as read); ``full``: the read got
    as many as it asked, so entries older than its oldest may have lost their trigger's entry."""
    by: dict[str, list[str]] = {}
    for a in audit:
        if a.action == AuditAction.TRIGGER:
            names = by.setdefault(a.detail, [])
            if len(names) < _MAX_BY and a.by not in names:
                names.insert(0, a.by)  # (oldest first)
    horizon = audit[-1].at_ms if full and audit else None  # (a trimmed trigger may share its ms)
    out = []
    for e in entries:
        found = by.get(str(e.fire_ms))
        if found is None and horizon is not None and e.fire_ms <= horizon:
            out.append(TriggerMark())
        else:
            out.append(TriggerMark(True, tuple(found or ())))
    return out


def read_marks(
    store: ObservedStore, entries: Sequence[LedgerEntry], unreadable: dict[str, StoreError] | None = None
) -> list[TriggerMark]:
    """:func:`mark` of each entry: one audit read per job the entries name. A job whose audit
    cannot be read (a corrupt key) is put in ``unreadable`` with the error, its entries not told;
    :class:`~quorum_cron.errors.StoreUnavailable` is raised."""
    marks: dict[tuple[str, int], TriggerMark] = {}
    jobs: dict[str, list[LedgerEntry]] = {}
    for e in entries:
        jobs.setdefault(e.job, []).append(e)
    for job, mine in jobs.items():
        try:
            audit = store.audit(job, AUDIT_READ)
        except StoreUnavailable:
            raise
        except StoreError as exc:
            if unreadable is not None:
                unreadable[job] = exc
            continue
        for e, m in zip(mine, mark(mine, audit, len(audit) >= AUDIT_READ), strict=True):
            marks[(e.job, e.fire_ms)] = m
    return [marks.get((e.job, e.fire_ms), TriggerMark()) for e in entries]
