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
``final``        ``records``: how many records came before it — the last line of every
                 trace, so that a trace cut short (or with lines missing) is told from a
                 whole one (:func:`incomplete`) and not judged as if the run had stopped there
================ ==============================================================
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["Record", "Trace", "incomplete", "read_trace"]

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


def incomplete(records: list[Record]) -> str | None:
    """Why ``records`` are not a whole trace (empty, no header, no ``final`` record or lines
    missing before it), or ``None`` for a whole one."""
    if not records:
        return "it holds no records"
    if not isinstance(records[0], dict) or records[0].get("ev") != "header":
        return "its first record is not a header"
    last = records[-1]
    if not isinstance(last, dict) or last.get("ev") != "final":
        return (
            "it has no final record: cut short (judged, the slots after the cut would be "
            "violations), or written by a version without one (run it again with --trace)"
        )
    if last.get("records") != len(records) - 1:
        counted, there = last.get("records"), len(records) - 1
        return f"its final record counts {counted!r} records before it, and {there} are there"
    return None
