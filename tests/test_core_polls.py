"""How a node polls a slot still proposed (quorum_cron/core/polls.py): every ``assign_poll``
without a notice subscription; with one, parked and forgotten without a read after
``start_timeout - assign_poll``, and every awaited slot read at once when the subscription comes
back (``NodeCore.notices_subscribed``, docs/protocol.md; issue 27).

A poll is a fallback for a lost assignment notice. Pub/sub loses a notice only with its
connection, so a subscribed node need not read what it awaits: at 10,000 jobs every second slot
was read once by its first voter, only to learn it had gone to another voter.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum_cron.core.actions import ReadSlots, Start, Vote
from quorum_cron.core.lifecycle import Phase
from quorum_cron.core.model import SlotState, SlotView, VoteResult, VoteStatus
from quorum_cron.core.node import NodeCore, NodeSettings, Now
from tests.core_driver import boot
from tests.test_core import T0, job

LEAD = 50


def _voted_proposed(
    core: NodeCore, names: tuple[str, ...], fire_ms: int = T0, at: int = 0
) -> tuple[Vote, int]:
    """Boot ``core`` just before ``fire_ms``, answer its vote ``proposed`` (a first voter's reply),
    and return the vote and the monotonic time of the reply."""
    mono = at
    actions = boot(core, Now(fire_ms - LEAD, mono))
    (vote,) = [a for a in actions if isinstance(a, Vote)]
    assert sorted(r.job for r in vote.requests) == sorted(names)
    replies = [
        VoteResult(VoteStatus.RECORDED, SlotView(r.job, r.fire_ms, SlotState.PROPOSED), fire_ms)
        for r in vote.requests
    ]
    mono += 10
    assert core.on_reply(vote, replies, Now(fire_ms - LEAD + 10, mono)) == []
    for name in names:
        assert core.slot_phase(name, fire_ms) == Phase.AWAITING
    return vote, mono


def _reads(core: NodeCore, mono: int) -> list[tuple[str, int]]:
    """The slots the tick at ``mono`` (wall time moving with it) reads."""
    actions = core.tick(Now(T0 - LEAD + mono, mono))
    return [slot for a in actions if isinstance(a, ReadSlots) for slot in a.slots]


def _core(subscribed: bool, *names: str, **kw: int) -> NodeCore:
    deadline = kw.pop("deadline_ms", 30_000)
    core = NodeCore(
        NodeSettings(node_id="n1", quorum=2, **kw), [job(n, 60_000, deadline_ms=deadline) for n in names]
    )
    core.set_trust(True)
    if subscribed:
        core.notices_subscribed()
    return core


def test_a_node_without_a_subscription_polls_a_proposed_slot_every_assign_poll() -> None:
    core = _core(False, "a")
    _, replied = _voted_proposed(core, ("a",))
    assert _reads(core, replied + 999) == []
    assert _reads(core, replied + 1000) == [("a", T0)]


def test_a_subscribed_node_forgets_a_proposed_slot_without_reading_it_before_its_start_timeout() -> None:
    """Defaults: ``start_timeout`` 5 s, ``assign_poll`` 1 s → parked for 4 s, then forgotten: no
    notice came, so the slot went to another voter (whose notice this node never gets)."""
    core = _core(True, "a")
    _, replied = _voted_proposed(core, ("a",))
    for at in (1000, 2000, 3999):
        assert _reads(core, replied + at) == []
        assert core.slot_phase("a", T0) == Phase.AWAITING
    assert _reads(core, replied + 4000) == []
    assert core.slot_phase("a", T0) == Phase.NONE


def test_a_subscribed_node_still_starts_a_slot_whose_notice_comes() -> None:
    core = _core(True, "a")
    _, replied = _voted_proposed(core, ("a",))
    now = Now(T0 - LEAD + replied + 500, replied + 500)
    (start,) = core.on_assigned("a", T0, 1, now)
    assert isinstance(start, Start)
    assert core.slot_phase("a", T0) == Phase.STARTING
    assert _reads(core, replied + 4000) == []
    assert core.slot_phase("a", T0) == Phase.STARTING


def test_a_subscribed_node_reads_a_parked_slot_whose_start_got_no_answer() -> None:
    """The notice came while the slot was parked, and the start's reply was lost: whether it
    landed is for a read to tell, so the slot is read, not forgotten (sim start-reply-lost: the
    lease ran out on a start the store had taken, and the slot ended ``lost``)."""
    core = _core(True, "a")
    _, replied = _voted_proposed(core, ("a",))
    at = replied + 100
    (start,) = core.on_assigned("a", T0, 1, Now(T0 - LEAD + at, at))
    assert isinstance(start, Start)
    assert core.on_failure(start, Now(T0 - LEAD + at + 50, at + 50)) == []
    core.set_store_reachable(True)
    reads = []
    for t in range(at + 100, replied + 6000, 100):
        reads += _reads(core, t)
    assert reads[:1] == [("a", T0)]


def test_the_subscription_coming_back_polls_every_awaited_slot_at_the_next_tick() -> None:
    """Notices published while the subscription was down may be lost: every slot this node awaits
    is read at once, not at its backstop; one read in flight is not sent twice."""
    core = _core(True, "a", "b")
    _, replied = _voted_proposed(core, ("a", "b"))
    assert _reads(core, replied + 500) == []
    core.notices_subscribed()
    assert sorted(_reads(core, replied + 501)) == [("a", T0), ("b", T0)]
    core.notices_subscribed()  # (again, both reads still in flight)
    assert _reads(core, replied + 502) == []


def test_the_subscription_coming_back_does_not_poll_a_store_that_does_not_answer() -> None:
    """Polls held while the store is unreachable stay held: the store's answer releases them."""
    core = _core(False, "a")
    _, replied = _voted_proposed(core, ("a",))
    read_at = replied + 1000
    (read,) = [a for a in core.tick(Now(T0 - LEAD + read_at, read_at)) if isinstance(a, ReadSlots)]
    assert core.on_failure(read, Now(T0 - LEAD + read_at + 5, read_at + 5)) == []
    assert not core.store_reachable
    core.notices_subscribed()
    assert _reads(core, read_at + 10) == []
    core.set_store_reachable(True)
    assert _reads(core, read_at + 11) == [("a", T0)]


@settings(max_examples=60, deadline=None)
@given(
    assign_poll=st.integers(1, 20_000),
    start_timeout=st.integers(1, 60_000),
    deadline=st.integers(1_000, 50_000),  # (a longer one would take in the slot a minute before)
    subscribed=st.booleans(),
)
def test_the_first_poll_of_a_proposed_slot_stays_inside_half_its_deadline(
    assign_poll: int, start_timeout: int, deadline: int, subscribed: bool
) -> None:
    """Whatever the settings: the slot is polled, or (subscribed) forgotten, no earlier than a
    node without a subscription would poll it (``assign_poll``, within half the deadline, at least
    10 ms after the reply), and no later than half the deadline; a subscribed node forgets it no
    later than ``assign_poll`` before the start timeout either, unless that is shorter than
    ``assign_poll`` itself, and never reads it."""
    names = ("a",)
    kw = {"assign_poll_ms": assign_poll, "start_timeout_ms": start_timeout, "deadline_ms": deadline}
    core = _core(subscribed, *names, **kw)
    _, replied = _voted_proposed(core, names)
    earliest = max(10, min(assign_poll, deadline // 2))
    backstop = min(max(10, deadline // 2), max(10, assign_poll, start_timeout - assign_poll))
    assert _reads(core, replied + earliest - 1) == []
    assert core.slot_phase("a", T0) == Phase.AWAITING
    if subscribed:
        assert _reads(core, replied + backstop) == []
        assert core.slot_phase("a", T0) == Phase.NONE
    else:
        assert _reads(core, replied + earliest) == [("a", T0)]
