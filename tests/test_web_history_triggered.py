"""The dashboard's job page and ``/api/jobs/JOB`` mark the history entries of triggered slots.

As ``history`` does (the same module, :mod:`quorum_cron.store.triggered`):
from the job's audit stream, whose ``trigger`` entry names the slot's fire
time and who asked. On a real Redis; the name shown is escaped, a garbled
audit entry marks nothing else, and an audit that is not a stream leaves the
entries untold (``null``, ``?``) while the page still answers.
"""

from __future__ import annotations

import html
import re

import redis
from starlette.testclient import TestClient

from quorum_cron.store import keys as store_keys
from tests.test_web import T0, XSS, World, world  # noqa: F401  (the fixture)


def _trigger(world: World, at: int, by: str) -> int:  # noqa: F811
    world.now = at
    fire = world.store.trigger("tick", by)
    assert fire == at
    world.run(fire, True, "exit 0")
    world.now = T0
    return fire


def _row(page: str, fire: int) -> str:
    m = re.search(rf'<tr class="entry" data-slot="{fire}".*?</tr>', page, re.S)
    assert m, page
    return m.group(0)


def _cell(row: str) -> str:
    m = re.search(r'<td class="triggered">(.*?)</td>', row, re.S)
    assert m, row
    return html.unescape(m.group(1))


def test_the_job_page_and_api_mark_a_triggered_entry_and_by_whom(
    world: World,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    manual = _trigger(world, T0 - 35_123, "alice")
    hostile = _trigger(world, T0 - 25_456, XSS)
    audit = store_keys.job_prefix("w", "tick") + store_keys.AUDIT
    redis_client.xadd(audit, {"action": "trigger", "at": "later", "by": "eve", "detail": str(T0 - 40_000)})
    with TestClient(world.app) as client:
        doc = client.get("/api/jobs/tick").json()
        page = client.get("/jobs/tick").text
    entries = {e["slot_ms"]: e for e in doc["history"]["entries"]}
    assert entries[manual]["triggered"] is True and entries[manual]["triggered_by"] == ["alice"]
    assert entries[hostile]["triggered_by"] == [XSS]
    for fire in (T0 - 40_000, T0 - 30_000):  # scheduled (the garbled entry naming one is dropped)
        assert entries[fire]["triggered"] is False and entries[fire]["triggered_by"] == [], fire
    assert "<th>triggered</th>" in page
    assert _cell(_row(page, manual)) == "by alice"
    assert _cell(_row(page, T0 - 40_000)) == "-"
    assert XSS not in page  # (escaped: shown as text)
    assert _cell(_row(page, hostile)) == f"by {XSS}"


def test_an_unreadable_audit_leaves_the_entries_untold_and_the_page_up(
    world: World,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    manual = _trigger(world, T0 - 35_123, "alice")
    audit = store_keys.job_prefix("w", "tick") + store_keys.AUDIT
    redis_client.delete(audit)
    redis_client.set(audit, "not a stream")
    with TestClient(world.app) as client:
        res = client.get("/api/jobs/tick")
        page = client.get("/jobs/tick")
    assert res.status_code == 200 and page.status_code == 200
    doc = res.json()
    assert any(audit in line for line in doc["corrupt"]), doc["corrupt"]
    entries = {e["slot_ms"]: e for e in doc["history"]["entries"]}
    assert entries[manual]["triggered"] is None and entries[manual]["triggered_by"] is None
    assert _cell(_row(page.text, manual)) == "?"
