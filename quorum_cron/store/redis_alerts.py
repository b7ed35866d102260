"""The alerts journal on Redis: the capped stream ``qc:{<ns>}:alerts`` (``XADD`` / ``XREVRANGE``).

The agents keep every alert they raise here (``agent/alerts.py``,
``AlertJournal``), the web face's Cluster page reads the newest. Written
with an exact ``MAXLEN`` (:data:`~quorum_cron.store.ports.ALERTS_MAXLEN`), so
the stream holds what the model's bounded list holds. Read without trusting
it: each field decoded with the bounded decoders of :mod:`.parse`; an entry
that is not what an agent writes is skipped and counted, never shown.
Functions on a :class:`~quorum_cron.store.redis_base.RedisBase`, so its error
boundary turns redis-py's errors into the library's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from quorum_cron.store.parse import BadValue, bounded_int, bounded_json, text
from quorum_cron.store.ports import ALERTS_MAXLEN, AlertPage, StoredAlert
from quorum_cron.store.redis_base import RedisBase

__all__ = ["add_alert", "alert_entry", "read_alerts"]

_MAX_MESSAGE: Final = 4000
_MAX_FIELDS: Final = 16
_MAX_FIELD: Final = 1000
_MAX_READ: Final = 1000


def _fields(value: object, what: str) -> dict[str, str]:
    doc = bounded_json(value, what, 32 * 1024)
    if not isinstance(doc, dict) or len(doc) > _MAX_FIELDS:
        raise BadValue(what, f"expected an object of at most {_MAX_FIELDS} fields")
    out: dict[str, str] = {}
    for k, v in doc.items():
        if not isinstance(v, str) or len(k) > _MAX_FIELD or len(v) > _MAX_FIELD:
            raise BadValue(what, f"field {k[:40]!r} is not a string of at most {_MAX_FIELD} characters")
        out[k] = v
    return out


def alert_entry(entry_id: object, raw: Mapping[Any, Any]) -> StoredAlert:
    """One stream entry as a :class:`StoredAlert`; :class:`BadValue` when it is not an agent's alert."""
    what = "alert entry"
    sid = text(entry_id, what, 41)
    if len(raw) > 8:
        raise BadValue(what, f"{len(raw)} fields (expected at most 8)")
    f = {text(k, what, 16): v for k, v in raw.items()}
    kind = text(f.get("kind", ""), f"{what}: kind", 64)
    if not kind or not all(c.isalnum() or c == "_" for c in kind):
        raise BadValue(what, f"kind {kind[:64]!r} is not an alert kind")
    return StoredAlert(
        kind=kind,
        node=text(f.get("node", ""), f"{what}: node", 200),
        ts_ms=bounded_int(f.get("ts_ms"), f"{what}: ts_ms", 0),
        message=text(f.get("message", ""), f"{what}: message", _MAX_MESSAGE),
        fields=_fields(f.get("fields", "{}"), f"{what}: fields"),
        id=sid,
    )


def add_alert(store: RedisBase, key: str, alert: StoredAlert) -> None:
    """``XADD key MAXLEN ALERTS_MAXLEN`` of ``alert`` (its ``id`` is the server's)."""
    entry = {
        "kind": alert.kind,
        "node": alert.node,
        "ts_ms": str(alert.ts_ms),
        "message": alert.message,
        "fields": json.dumps(alert.fields, sort_keys=True),
    }
    with store._boundary("add_alert"):
        store.client.xadd(key, entry, maxlen=ALERTS_MAXLEN, approximate=False)  # type: ignore[arg-type]


def read_alerts(store: RedisBase, key: str, limit: int) -> AlertPage:
    """The newest ``limit`` alerts (``XREVRANGE … COUNT``), newest first; malformed entries counted."""
    if limit <= 0:
        return AlertPage(())
    with store._boundary("alerts"):
        entries = store.client.xrevrange(key, count=min(limit, _MAX_READ))
    alerts: list[StoredAlert] = []
    skipped = 0
    for item in entries if isinstance(entries, list) else []:
        try:
            entry_id, raw = item
            if not isinstance(raw, Mapping):
                raise BadValue("alert entry", "not a field map")
            alerts.append(alert_entry(entry_id, raw))
        except (BadValue, TypeError, ValueError):
            skipped += 1
    return AlertPage(tuple(alerts), skipped)
