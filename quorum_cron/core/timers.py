"""The node core's timers: when each job next needs the core, kept in heaps.

A job's timers are four instants (see :class:`JobTimers`): when it must
wake the node, by the wall clock (a fire time less the vote lead, a
deferred start, an abstained slot's drop time) and by the monotonic clock
(a retry, a poll, a renewal, a run's lease end); and when a tick should *visit* it although
nothing woke the node for it (``VISIT_*``: a failed vote's slot passing its
deadline before its retry, say). The core computes them from a job's state
whenever the job changed; this module keeps them in one heap per kind with
lazy deletion, so a tick and ``next_wakeup`` cost O(log jobs) per job that
changed or fell due, not O(jobs).

It also answers, for the simulator, how soon any timer an input adds can
fall due (:func:`input_bounds`): the simulator skips asking the core for its
next wakeup when it already has one scheduled that soon. ``exact`` runs in
the simulator's tests keep those bounds honest.

Timers are absolute readings of the clock they wait on, so a wall-clock
step needs no invalidation. Pure: no clock is read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heapify, heappop, heappush

from quorum_cron.core.actions import Finish as FinishAction
from quorum_cron.core.actions import (
    NodeSettings,
    ReadHighWater,
    ReadSlots,
    RecordMissed,
    Renew,
    Start,
    StoreAction,
    Sweep,
    Vote,
)

__all__ = [
    "KINDS",
    "NEVER",
    "WAKE_MONO",
    "WAKE_WALL",
    "InputBounds",
    "JobTimers",
    "input_bounds",
    "max_sweep_gap",
    "min_sweep_gap",
    "sweep_gap",
]

NEVER = 1 << 62
"""A timer that never comes."""
_UNSET = -(1 << 62)
"""A cached timer that matches no heap entry: the next ``update`` pushes afresh."""

WAKE_WALL, WAKE_MONO, VISIT_WALL, VISIT_MONO = range(4)
KINDS = (WAKE_WALL, WAKE_MONO, VISIT_WALL, VISIT_MONO)
_WALL_KINDS = (True, False, True, False)


class JobTimers:
    """The four earliest timers of each job (by index), in one heap per kind."""

    __slots__ = ("_heaps", "_limit", "_wakes")

    def __init__(self, jobs: int) -> None:
        self._wakes: list[int] = [_UNSET] * (4 * jobs)
        """Job ``i``'s four timers at ``4 * i + kind``: one flat list, not a list per job (a list
        of four was 96 bytes a job; issue 27)."""
        self._heaps: tuple[list[tuple[int, int]], ...] = ([], [], [], [])
        self._limit = 64 + 4 * jobs
        """A heap longer than this holds mostly stale entries: it is rebuilt."""

    def update(self, job: int, wake_wall: int, wake_mono: int, visit_wall: int, visit_mono: int) -> None:
        """Job ``job``'s timers are now these (``NEVER``: none of that kind); push the changed ones."""
        wakes, at = self._wakes, job << 2
        if wakes[at] != wake_wall:
            self._push(job, WAKE_WALL, wake_wall)
        if wakes[at + 1] != wake_mono:
            self._push(job, WAKE_MONO, wake_mono)
        if wakes[at + 2] != visit_wall:
            self._push(job, VISIT_WALL, visit_wall)
        if wakes[at + 3] != visit_mono:
            self._push(job, VISIT_MONO, visit_mono)

    def _push(self, job: int, kind: int, at: int) -> None:
        self._wakes[(job << 2) + kind] = at
        if at != NEVER:
            heap = self._heaps[kind]
            heappush(heap, (at, job))
            if len(heap) > self._limit:
                self._compact(kind)

    def pop_due(self, wall_ms: int, mono_ms: int, into: set[int]) -> None:
        """Add to ``into`` every job with a timer due at these readings (its timers must then be updated)."""
        wakes = self._wakes
        for kind, heap in enumerate(self._heaps):
            if not heap:
                continue
            limit = wall_ms if _WALL_KINDS[kind] else mono_ms
            while heap and heap[0][0] <= limit:
                at, i = heappop(heap)
                w = (i << 2) + kind
                if wakes[w] == at:
                    wakes[w] = _UNSET  # popped: the next ``update`` pushes anew
                    into.add(i)

    def earliest_wait(self, wall_ms: int, mono_ms: int) -> int:
        """Milliseconds until the first ``WAKE`` timer (``NEVER`` if none; may be negative)."""
        wait = NEVER
        wakes = self._wakes
        heap = self._heaps[WAKE_WALL]
        while heap and wakes[heap[0][1] << 2] != heap[0][0]:  # (WAKE_WALL is 0)
            heappop(heap)
        if heap:
            wait = heap[0][0] - wall_ms
        heap = self._heaps[WAKE_MONO]
        while heap and wakes[(heap[0][1] << 2) + WAKE_MONO] != heap[0][0]:
            heappop(heap)
        if heap and heap[0][0] - mono_ms < wait:
            wait = heap[0][0] - mono_ms
        return wait

    def _compact(self, kind: int) -> None:
        """Rebuild a heap from the cached timers, dropping the stale entries."""
        heap = self._heaps[kind]
        wakes = self._wakes
        heap[:] = [(wakes[w], w >> 2) for w in range(kind, len(wakes), 4) if wakes[w] not in (NEVER, _UNSET)]
        heapify(heap)


@dataclass(frozen=True, slots=True)
class InputBounds:
    """Lower bounds (ms) on how soon a timer added by an input can fall due."""

    reply: dict[type[StoreAction], int]
    """After the reply to a store action of this type."""
    failure: dict[type[StoreAction], int]
    """After the failure of a store action of this type."""
    notice: int
    """After an assignment notice."""
    run_finished: int
    """After a job process ended (``NEVER``: it adds no timer, the finish is sent at once)."""


def input_bounds(s: NodeSettings, run_local: bool = False) -> InputBounds:
    """The bounds for a core with settings ``s`` (``run_local``: some job runs locally).

    A reply that reveals a commit can defer the start to the fire time, which
    votes lead by ``vote_lead_ms``: those inputs bound nothing (0). A failed
    vote can leave a slot past its deadline, due to be recorded missed at
    once: 0 too. With run-local jobs, any failure can make the store
    unreachable (a slot due now runs locally) and a local run's end lets its
    slot be recorded at once: those bound nothing either.
    """
    renew = max(1, s.lease_ms // 3)
    reply: dict[type[StoreAction], int] = {
        Vote: 0,
        Start: 0,
        Renew: renew,
        Sweep: 0,
        ReadSlots: 0,
        ReadHighWater: 0,
        FinishAction: 0,
        RecordMissed: 0,
    }
    failure: dict[type[StoreAction], int] = {
        Vote: 0,
        Start: s.retry_ms,
        Renew: s.retry_ms,
        Sweep: s.retry_ms,
        ReadSlots: s.retry_ms,
        ReadHighWater: s.retry_ms,
        FinishAction: s.retry_ms,
        RecordMissed: s.retry_ms,
    }
    if run_local:
        failure = dict.fromkeys(failure, 0)
    return InputBounds(reply=reply, failure=failure, notice=0, run_finished=0 if run_local else NEVER)


def max_sweep_gap(sweep_ms: int, start_timeout_ms: int) -> int:
    """The longest a node goes between two sweeps while nothing it knows of can be due.

    Half the start timeout (at least ``sweep_ms``): a slot committed right
    after a sweep, whose start timeout the next sweeps enforce, is seen by
    this node's next sweep while it still has half its timeout to go, and
    from then on the sweep replies' ``due_in_ms`` time the sweeps to it; so
    a takeover still comes within ``sweep_ms`` of the timeout, as when every
    node swept every ``sweep_ms``. Leases are longer than the start timeout
    (a running slot is seen the same way); a proposed slot past its deadline
    is also recorded ``missed`` by its voters, the sweep being the backstop.
    """
    return max(sweep_ms, start_timeout_ms // 2)


def min_sweep_gap(s: NodeSettings) -> int:
    """The shortest a node waits between sweeps it times itself: ``sweep_ms``, or the start
    timeout when that is shorter.

    ``sweep_ms`` makes a burst of timeouts be handled at the usual rate. But
    a takeover gives the next executor a fresh start timeout, and when that
    is shorter than ``sweep_ms`` a floor of ``sweep_ms`` put every further
    takeover a whole ``sweep_ms`` after the one before: a slot whose first
    two executors were both cut off from the store's replies (votes landed,
    so the store picked them) reached its deadline before the second
    takeover (the chaos harness's ``cut-inbound`` of two nodes, start
    timeout 500 ms, deadline 1.8 s; docs/testing.md). A user who sets a
    start timeout below ``sweep_ms`` asked for takeovers that quick.
    """
    return min(s.sweep_ms, s.start_timeout_ms)


def sweep_gap(s: NodeSettings, due_in_ms: int) -> int:
    """How long after a sweep's reply the next sweep goes (docs/protocol.md, "When a node sweeps").

    ``due_in_ms`` is the reply's: store time until one of the swept jobs'
    open slots can next be changed by a sweep (0: none is open). Never
    sooner than :func:`min_sweep_gap` (a burst of timeouts is handled at the
    usual rate), never later than :func:`max_sweep_gap` (slots created since
    the sweep are unknown to it).
    """
    cap = max_sweep_gap(s.sweep_ms, s.start_timeout_ms)
    if not due_in_ms:
        return cap
    return min(cap, max(min_sweep_gap(s), due_in_ms))
