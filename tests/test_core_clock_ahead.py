"""A node whose wall clock runs far ahead of the store's asks for its missed records ever less often.

Ten minutes ahead, a node owes a missed record for every slot of its lead, and the store answers
each "too early" until its own clock gets there. Asked again every ``retry_ms``, one 10-second
job made 120 record calls a second into the store every node shares (a simulator audit; 100 such
jobs, 100 times that). The answers now back off as failures do, doubling to 16x ``retry_ms``.
"""

from __future__ import annotations

from collections import Counter

import pytest

from quorum_cron.core.model import SlotState
from quorum_cron.core.node import Action, RecordMissed
from quorum_cron.core.perform import perform
from quorum_cron.core.retries import MAX_RETRY_DOUBLINGS, RetryQueue
from quorum_cron.store.memory import MemoryStore
from tests import core_driver
from tests.core_driver import Driver
from tests.test_core import T0, job

AHEAD_MS = 10 * 60_000


def test_not_yet_answers_back_off_like_failures() -> None:
    q = RetryQueue(retry_ms=500)
    action = RecordMissed("a", T0, 500, "why")
    at = 0
    gaps = []
    for _ in range(7):
        q.not_yet(action, at)
        nxt = q.next_at(reachable=True)
        gaps.append(nxt - at)
        assert q.due(nxt, reachable=True) == [action]
        at = nxt
    assert gaps == [500 << min(i, MAX_RETRY_DOUBLINGS) for i in range(7)]
    q.answered(action)  # an answer that is not "too early" starts the count again
    q.not_yet(action, at)
    assert q.next_at(reachable=True) == at + 500


def test_a_node_ten_minutes_ahead_asks_for_its_missed_records_sparingly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: Counter[str] = Counter()

    def counting(store: MemoryStore, node: str, action: Action) -> object:
        if isinstance(action, RecordMissed):
            asked[node] += 1
        return perform(store, node, action)

    monkeypatch.setattr(core_driver, "perform", counting)
    d = Driver([job("c", 10_000, deadline_ms=2_000)], n=3, start_ms=T0)
    d.nodes["n1"].offset_ms = AHEAD_MS
    d.run_until(T0 + 5 * 60_000)
    # n1 owes a record for each of the ~60 slots of its lead all along, each too early until the
    # store's clock reaches it: backed off, about one ask per slot per 8 s (it was one per 500 ms).
    assert 0 < asked["n1"] < 60 * (5 * 60_000 // (500 << MAX_RETRY_DOUBLINGS)) * 3 // 2, asked
    # The other two still run every slot, exactly once.
    ran = Counter((job_, fire) for _, job_, fire, _ in d.executions)
    assert ran and set(ran.values()) == {1}
    assert all(d.store.slot("c", f).state == SlotState.SUCCEEDED for _, f in ran)
