"""A lease counted from when its call left for the store (``core.wire``), not from when the core
emitted it: a start queued behind a burst in the agent's store worker runs without a renew.

Each case also holds the safety side: the time only moves later, only for the call in flight
(same token), and a runtime that never says when a call left keeps the emission times.
"""

from __future__ import annotations

from quorum_cron.core.lifecycle import Phase
from quorum_cron.core.model import SlotState, SlotView, TransitionResult
from quorum_cron.core.node import CoreJob, NodeCore, NodeSettings, Now, Renew, Run, Start
from tests.core_driver import Every

T0 = 1_699_999_980_000
LEASE = 3_000


def _started() -> tuple[NodeCore, Start, TransitionResult]:
    """A core that emitted the start of slot T0 (token 1) at monotonic 0, and the store's yes."""
    job = CoreJob(name="a", schedule=Every(60_000), spec_hash="h", deadline_ms=1_000, timeout_ms=60_000)
    core = NodeCore(NodeSettings(node_id="n1", quorum=1, lease_ms=LEASE), [job])
    core.set_trust(True)
    (start,) = core.on_assigned("a", T0, 1, Now(T0, 0))
    assert isinstance(start, Start)
    view = SlotView("a", T0, SlotState.RUNNING, token=1, executor="n1")
    return core, start, TransitionResult(True, view, T0)


def _renews(core: NodeCore, at: int) -> list[Renew]:
    return [a for a in core.tick(Now(T0 + at, at)) if isinstance(a, Renew)]


def test_a_start_that_waited_in_the_queue_runs_with_its_lease_counted_from_the_wire() -> None:
    core, start, ok = _started()
    core.sent(start, 900)  # queued 900 ms, then on the wire
    # Heard 1,600 ms after the core emitted it: over half the lease from emission, 700 ms from the wire.
    assert core.on_reply(start, ok, Now(T0 + 1600, 1600)) == [Run("a", T0, 1, 60_000)]
    assert _renews(core, 1899) == []  # the first renew: lease/3 after the wire, not after emission
    assert _renews(core, 1900) == [Renew("a", T0, 1, LEASE)]


def test_without_the_wire_time_the_same_reply_is_confirmed_first() -> None:
    core, start, ok = _started()
    assert core.on_reply(start, ok, Now(T0 + 1600, 1600)) == [Renew("a", T0, 1, LEASE)]
    assert core.slot_phase("a", T0) == Phase.STARTING


def test_a_wire_time_never_moves_a_lease_earlier_nor_applies_to_another_token() -> None:
    core, start, ok = _started()
    core.sent(start, 400)
    core.sent(start, 100)  # an older word: ignored
    core.sent(Start("a", T0, 2, LEASE), 1_000)  # not the start in flight
    assert core.on_reply(start, ok, Now(T0 + 1000, 1000)) == [Run("a", T0, 1, 60_000)]
    assert _renews(core, 1399) == []
    assert _renews(core, 1400) == [Renew("a", T0, 1, LEASE)]  # from 400


def test_a_renew_that_waited_in_the_queue_extends_the_lease_from_the_wire() -> None:
    core, start, ok = _started()
    assert core.on_reply(start, ok, Now(T0 + 100, 100)) == [Run("a", T0, 1, 60_000)]
    (renew,) = _renews(core, 1000)
    core.sent(Renew("a", T0, 2, LEASE), 2_900)  # not the renew in flight: ignored
    core.sent(renew, 1_400)
    assert core.on_reply(renew, ok, Now(T0 + 1500, 1500)) == []
    assert _renews(core, 2399) == []
    assert _renews(core, 2400) == [renew]  # lease/3 after 1,400, not after 1,000


def test_a_confirming_renew_that_waited_in_the_queue_is_judged_from_the_wire() -> None:
    core, start, ok = _started()
    (confirm,) = core.on_reply(start, ok, Now(T0 + 1600, 1600))
    assert isinstance(confirm, Renew)
    core.sent(confirm, 2_000)
    # 1,600 ms after the confirming renew's emission (over half the lease), 1,200 after the wire.
    assert core.on_reply(confirm, ok, Now(T0 + 3200, 3200)) == [Run("a", T0, 1, 60_000)]
