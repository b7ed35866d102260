"""The job page's history entries with their trigger marks: which slots an operator triggered.

The dicts of the page and of ``/api/jobs/JOB`` (``history.entries``) get the
``triggered`` and ``triggered_by`` fields ``history --json`` has, from the
job's audit stream (:mod:`quorum_cron.store.triggered`, shared with
``history``). The job's audit is read once more for them (all the store keeps,
not the page's newest ten): when it cannot be read the entries say ``null``
(the page shows ``?``) and the page's audit part names the corrupt key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from quorum_cron.store.base import LedgerEntry, ObservedStore
from quorum_cron.store.triggered import read_marks
from quorum_cron.store.voters import VoterAccount

__all__ = ["marked_entries"]


def marked_entries(
    store: ObservedStore,
    entries: Sequence[LedgerEntry],
    told: Sequence[VoterAccount],
    entry_doc: Callable[[LedgerEntry], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Each entry's ``entry_doc``, its voters' account and its trigger mark, as one dict."""
    marks = read_marks(store, entries)
    return [entry_doc(e) | a.doc() | m.doc() for e, a, m in zip(entries, told, marks, strict=True)]
