"""The finish buffer's bound (``core.finish``): it counts results held for a resend, never results
on their way.

Why a test of its own: the bound used to count every result not yet answered, and at 100,000
jobs one executor has tens of thousands of ``Finish`` calls queued in its store worker during a
minute's burst. Beyond 10,000 the core dropped them; those slots ran and then ended ``lost``
when their lease ran out (docs/benchmarks.md, "A bound that dropped results").
"""

from __future__ import annotations

import pytest

import quorum_cron.core.finish as finish_module
from quorum_cron.core.model import SlotState
from quorum_cron.core.node import Action, CoreJob, Failure, Finish, NodeSettings
from tests.core_driver import Driver, Every

T0 = 1_699_999_980_000
JOBS = 6
BOUND = 2


class HeldFinishes(Driver):
    """A driver whose store never answers a ``Finish`` by itself: the test decides."""

    def __init__(self) -> None:
        jobs = [
            CoreJob(f"j{i}", Every(60_000), "h", deadline_ms=10_000, timeout_ms=60_000) for i in range(JOBS)
        ]
        super().__init__(jobs, n=1, start_ms=T0, settings=lambda node: NodeSettings(node_id=node, quorum=1))
        self.sent: list[Finish] = []

    def _apply(self, name: str, actions: list[Action]) -> None:
        self.sent.extend(a for a in actions if isinstance(a, Finish))
        super()._apply(name, [a for a in actions if not isinstance(a, Finish)])

    def store_answers(self, action: Finish) -> None:
        """The store carries out ``action`` and the core hears its reply."""
        super()._apply("n1", [action])


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> HeldFinishes:
    monkeypatch.setattr(finish_module, "MAX_PENDING_FINISHES", BOUND)
    d = HeldFinishes()
    d.run_until(T0 + 1_000)  # (the slot at T0 ran on the one node and ended)
    return d


def test_results_on_their_way_are_never_dropped_however_many(driver: HeldFinishes) -> None:
    core = driver.nodes["n1"].core
    assert len(driver.sent) == JOBS > BOUND
    assert core.dropped_finishes == 0
    for action in driver.sent:
        driver.store_answers(action)
    assert core.dropped_finishes == 0
    fire = driver.sent[0].fire_ms
    for i in range(JOBS):
        assert driver.store.read_slots([(f"j{i}", fire)])[0].state == SlotState.SUCCEEDED


def test_after_failed_sends_at_most_the_bound_are_held_and_sent_again(driver: HeldFinishes) -> None:
    core = driver.nodes["n1"].core
    first = list(driver.sent)
    driver.sent.clear()
    now = driver._now(driver.nodes["n1"])
    for action in first:
        assert core.on_failure(action, now, Failure.UNREACHABLE, "no answer") == []
    assert core.dropped_finishes == JOBS - BOUND
    driver.run_until(driver.now_ms + 30_000)  # (the store is back: the held ones go again)
    assert sorted(a.job for a in driver.sent) == sorted(a.job for a in first[:BOUND])
    assert core.dropped_finishes == JOBS - BOUND
