"""The agents' recent alerts, read from the store's capped stream ``qc:{<ns>}:alerts``.

The agents append every alert they raise (:class:`quorum_cron.agent.alerts.AlertJournal`);
this module reads the newest of them for the Cluster page, without trusting
what it reads: at most :data:`SHOWN` entries, each field decoded with the
store's bounded decoders (:mod:`quorum_cron.store.parse`), an entry that is
not what an agent writes skipped and counted. The stream is not part of the
``Store`` protocol (the memory model and the simulator have no alerts), so
this reads it on the store's redis-py client and turns its errors into
one line on the page instead of failing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import redis

from quorum_cron.redact import redact_text
from quorum_cron.store.keys import alerts_key
from quorum_cron.store.parse import BadValue, bounded_int, bounded_json, text
from quorum_cron.store.redis import RedisStore

__all__ = ["SHOWN", "newest_alert_id", "recent_alerts"]

SHOWN: Final = 50
"""Newest alerts shown (the agents keep about 200)."""
_MAX_MESSAGE: Final = 4000
_MAX_FIELDS: Final = 16
_MAX_FIELD: Final = 1000


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


def alert_doc(entry_id: object, raw: Mapping[Any, Any]) -> dict[str, Any]:
    """One stream entry as the page's dict; :class:`BadValue` when it is not an agent's alert."""
    what = "alert entry"
    sid = text(entry_id, what, 41)
    if len(raw) > 8:
        raise BadValue(what, f"{len(raw)} fields (expected at most 8)")
    f = {text(k, what, 16): v for k, v in raw.items()}
    kind = text(f.get("kind", ""), f"{what}: kind", 64)
    if not kind or not all(c.isalnum() or c == "_" for c in kind):
        raise BadValue(what, f"kind {kind[:64]!r} is not an alert kind")
    return {
        "id": sid,
        "kind": kind,
        "node": text(f.get("node", ""), f"{what}: node", 200),
        "at_ms": bounded_int(f.get("ts_ms"), f"{what}: ts_ms", 0),
        "message": text(f.get("message", ""), f"{what}: message", _MAX_MESSAGE),
        "fields": _fields(f.get("fields", "{}"), f"{what}: fields"),
    }


def recent_alerts(store: RedisStore, namespace: str, limit: int = SHOWN) -> dict[str, Any]:
    """``{"alerts": [newest first], "skipped": n, "error": ""}``; a read error is one line, not a failure."""
    try:
        entries = store.client.xrevrange(alerts_key(namespace), count=max(1, min(limit, SHOWN)))
    except redis.RedisError as exc:
        return {"alerts": [], "skipped": 0, "error": redact_text(str(exc))[:300]}
    alerts: list[dict[str, Any]] = []
    skipped = 0
    for item in entries if isinstance(entries, list) else []:
        try:
            entry_id, raw = item
            if not isinstance(raw, Mapping):
                raise BadValue("alert entry", "not a field map")
            alerts.append(alert_doc(entry_id, raw))
        except (BadValue, TypeError, ValueError):
            skipped += 1
    return {"alerts": alerts, "skipped": skipped, "error": ""}


def newest_alert_id(store: RedisStore, namespace: str) -> str:
    """The stream id of the newest alert ("" for none, or when it cannot be read)."""
    try:
        entries = store.client.xrevrange(alerts_key(namespace), count=1)
    except redis.RedisError:
        return ""
    if not isinstance(entries, list) or not entries:
        return ""
    try:
        return text(entries[0][0], "alert id", 41)
    except (BadValue, TypeError, IndexError):
        return ""
