"""A ledger entry as JSON-ready data: the one field list ``history --json`` and the web face share.

Each face adds its own extras (``history``: the slot as text; the web: the
delay and run time) and may cut the free text (``cut``); the names and
types of the shared fields are documented once, in docs/cli-output.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quorum_cron.core.model import LedgerEntry

__all__ = ["ledger_doc"]


def _whole(text: str) -> str:
    return text


def ledger_doc(e: LedgerEntry, cut: Callable[[str], str] = _whole) -> dict[str, Any]:
    """``e``'s fields by their JSON names; ``cut`` bounds the free text (reason, detail) for display."""
    return {
        "job": e.job,
        "slot_ms": e.fire_ms,
        "state": str(e.state),
        "reason": cut(e.reason),
        "executor": e.executor,
        "token": e.token,
        "voters": list(e.voters),
        "committed_ms": e.committed_ms,
        "epoch": e.epoch,
        "started_ms": e.started_ms,
        "finished_ms": e.finished_ms,
        "detail": cut(e.detail),
    }
