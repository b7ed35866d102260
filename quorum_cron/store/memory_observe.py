"""The faces' reads across jobs in the memory model (``ObservedStore``), so the web face runs on it.

Redis reads these from its streams (``store/redis_reads.py``); the model
keeps no stream ids, so an entry's id is its number in the job's stream
(``_Job.ledger_seq`` / ``audit_seq`` count every entry ever appended; the
newest kept entry has the count, the one before it one less). Ids are
decimal text compared as numbers, opaque to callers like Redis's. The model
never waits: :meth:`ObservationModel.follow` answers at once. Its
:meth:`~ObservationModel.follow_cursor` is every job's counts at that
moment, as JSON (a job not in it had no entry yet: all of its entries are
new).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TypeVar

from quorum_cron.core.model import AuditEntry, JobControl, LedgerEntry
from quorum_cron.store.memory_records import _Job

__all__ = ["ObservationModel"]

_E = TypeVar("_E", LedgerEntry, AuditEntry)


def _newer(entries: Sequence[_E], seq: int, after: str) -> list[_E]:
    """The entries (oldest first, the newest numbered ``seq``) numbered above ``after`` ("": none)."""
    if not after:
        return []
    count = max(0, min(len(entries), seq - int(after)))
    return list(entries)[len(entries) - count :]


class ObservationModel:
    """Read-only calls the web face and ``history`` make on a store, for :class:`MemoryStore`."""

    _jobs: dict[str, _Job]

    def _seen(self, name: str) -> _Job:
        """The job's record, or an empty one (a read creates nothing)."""
        return self._jobs.get(name) or _Job(name)

    def follow_cursor(self) -> str:
        return json.dumps({name: [j.ledger_seq, j.audit_seq] for name, j in sorted(self._jobs.items())})

    def follow(
        self, jobs: Sequence[str], cursor: dict[str, str], start: str, block_ms: int
    ) -> list[LedgerEntry | AuditEntry]:
        out: list[LedgerEntry | AuditEntry] = []
        counts = json.loads(start) if start else {}
        for name in jobs:
            j = self._seen(name)
            ledger_from, audit_from = counts.get(name, (0, 0))
            last = cursor.get(f"ledger:{name}", str(ledger_from))
            out.extend(_newer(j.ledger, j.ledger_seq, last))
            last = cursor.get(f"audit:{name}", str(audit_from))
            out.extend(_newer(j.audit, j.audit_seq, last))
            cursor[f"ledger:{name}"], cursor[f"audit:{name}"] = str(j.ledger_seq), str(j.audit_seq)
        return out

    def ledgers(self, jobs: Sequence[str], limit: int) -> list[list[LedgerEntry]]:
        return [list(reversed(self._seen(name).ledger))[: max(limit, 0)] for name in jobs]

    def ledger_tails(
        self, jobs: Sequence[str], limit: int, after: Mapping[str, str]
    ) -> list[tuple[str, list[LedgerEntry], JobControl]]:
        out: list[tuple[str, list[LedgerEntry], JobControl]] = []
        for name in jobs:
            j = self._seen(name)
            last = after.get(name, "")
            newer = list(j.ledger) if not last else _newer(j.ledger, j.ledger_seq, last)
            entries: list[LedgerEntry] = list(reversed(newer))[: max(1, limit)] if limit > 0 else []
            out.append((str(j.ledger_seq) if newer else last, entries, j.control))
        return out

    def server_info(self) -> dict[str, str]:
        return {"role": "memory model"}

    def close(self) -> None:
        """Nothing to release."""
