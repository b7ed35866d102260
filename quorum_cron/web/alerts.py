"""The agents' recent alerts, read from the store's alerts journal (``Store.alerts``).

The agents keep every alert they raise (:class:`quorum_cron.agent.alerts.AlertJournal`);
this module reads the newest of them for the Cluster page. The store decodes
without trusting (an entry that is not an agent's alert is skipped and
counted: ``quorum_cron.store.redis_alerts``); a read error becomes one line
on the page instead of failing it.
"""

from __future__ import annotations

from typing import Any, Final

from quorum_cron.errors import StoreError
from quorum_cron.store.base import Store, StoredAlert
from quorum_cron.store.connect import store_failure

__all__ = ["SHOWN", "alert_doc", "newest_alert_id", "recent_alerts"]

SHOWN: Final = 50
"""Newest alerts shown (the agents keep about 200)."""


def alert_doc(alert: StoredAlert) -> dict[str, Any]:
    """One stored alert as the page's dict."""
    return {
        "id": alert.id,
        "kind": alert.kind,
        "node": alert.node,
        "at_ms": alert.ts_ms,
        "message": alert.message,
        "fields": dict(alert.fields),
    }


def recent_alerts(store: Store, limit: int = SHOWN) -> dict[str, Any]:
    """``{"alerts": [newest first], "skipped": n, "error": ""}``; a read error is one line, not a failure."""
    try:
        page = store.alerts(max(1, min(limit, SHOWN)))
    except StoreError as exc:
        return {"alerts": [], "skipped": 0, "error": store_failure(exc)[:300]}
    return {"alerts": [alert_doc(a) for a in page.alerts], "skipped": page.skipped, "error": ""}


def newest_alert_id(store: Store) -> str:
    """The store id of the newest alert ("" for none, or when it cannot be read)."""
    try:
        page = store.alerts(1)
    except StoreError:
        return ""
    return page.alerts[0].id if page.alerts else ""
