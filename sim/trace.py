"""The trace: what happened in a run, one JSON object per line.

Every record has ``t`` (true time, epoch ms) and ``ev`` (the event kind);
keys are sorted and separators fixed, so the same seed and code give a
byte-identical file. The checker reads nothing but the trace, so a trace
saved from a run can be checked again later (``quorum-cron sim replay``).

Event kinds (fields besides ``t`` and ``ev``):

================ ==============================================================
``header``       ``scenario`` (the scenario as TOML), ``seed``, ``strategy``
``vote``         ``node``, ``st`` (store time), ``slots``: ``[job, fire, status, deadline, spec]``
``commit``       ``job``, ``fire``, ``token``, ``executor``, ``votes``, ``spec``, ``st``, ``by``
                 (``vote`` or ``takeover``)
``start``        ``node``, ``job``, ``fire``, ``token``, ``ok``, ``why``
``run``          ``node``, ``job``, ``fire``, ``token`` — the job's side effect happens here
``end``          ``node``, ``job``, ``fire``, ``token``, ``ok`` — the job process ended
``finish``       ``node``, ``job``, ``fire``, ``token``, ``ok``, ``why``
``renew``        ``node``, ``job``, ``fire``, ``token``, ``why`` (refusals only)
``kill``         ``node``, ``job``, ``fire``, ``token``, ``why``
``abstain``      ``node``, ``job``, ``fire``, ``why``
``decided``      ``job``, ``fire``, ``state``, ``why`` — a sweep or record-missed ended a slot
``health``       ``node`` (or ``store``), ``ok``, ``why`` — on every change
``trust``        ``node``, ``trusted``, ``why``
``fault``        ``kind``, ``phase`` (begin/end), ``nodes``, details
``reached``      ``what``: a dangerous state the run reached (the "sometimes" report)
``illegal_step`` ``node``, ``why`` — the core took a phase step its lifecycle table lacks
``ledger``       the store's final ledger, one entry per line
================ ==============================================================
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["Record", "Trace", "read_trace"]

Record = dict[str, Any]


def _line(rec: Record) -> str:
    return json.dumps(rec, sort_keys=True, separators=(",", ":"))


class Trace:
    """Records kept in memory in the order they happened."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def emit(self, t: int, ev: str, **fields: Any) -> None:
        fields["t"] = t
        fields["ev"] = ev
        self.records.append(fields)

    def lines(self) -> Iterator[str]:
        for rec in self.records:
            yield _line(rec)

    def sha256(self) -> str:
        h = hashlib.sha256()
        for line in self.lines():
            h.update(line.encode())
            h.update(b"\n")
        return h.hexdigest()

    def write(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for line in self.lines():
                f.write(line)
                f.write("\n")


def read_trace(path: str | Path) -> list[Record]:
    """Load a trace file written by :meth:`Trace.write`."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
