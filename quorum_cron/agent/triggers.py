"""Which operator triggers are real: stored in the job's trigger set *and* in its audit.

``quorum-cron trigger`` runs one script that adds the slot to the job's
trigger set, appends a ``trigger`` audit entry (who, when) and publishes a
notice. The notice alone proves nothing — anyone who can ``PUBLISH`` on the
channel can send one — so a node treats it as a hint: it acts on a trigger
only when :func:`stored_triggers` finds it stored with its audit entry.
The catch-up read (after a reconnect) applies the same rule.
"""

from __future__ import annotations

from typing import Final

from quorum_cron.store.base import AuditAction, Store

__all__ = ["AUDIT_SCAN", "MAX_VERIFYING", "stored_triggers"]

AUDIT_SCAN: Final = 200
"""Audit entries read to find a trigger's entry (newest first; triggers are recent)."""
MAX_VERIFYING: Final = 16
"""Trigger notices checked against the store at once; more are dropped (a flood of fake notices)."""


def stored_triggers(store: Store, job: str, since_ms: int) -> list[int]:
    """The job's triggers after ``since_ms`` that have their audit entry (blocking: the worker thread)."""
    fires = store.triggers(job, since_ms)
    if not fires:
        return []
    audited = {e.detail for e in store.audit(job, AUDIT_SCAN) if e.action == AuditAction.TRIGGER}
    return [t for t in fires if str(t) in audited]
