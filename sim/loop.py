"""Virtual time: a heap of events ordered by (time, sequence number).

Nothing here reads a real clock. Time only moves when :meth:`Loop.run_until`
pops the next event, so an idle stretch of simulated hours costs nothing;
events due at the same instant run in the order they were scheduled.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["Loop"]


class Loop:
    """A discrete-event loop in integer milliseconds of true (simulated) time."""

    __slots__ = ("_heap", "_seq", "events", "now")

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms
        self._heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.events = 0
        """How many events ran (for profiling and the speed report)."""

    def at(self, when: int, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` at true time ``when`` (never earlier than now)."""
        self._seq += 1
        heapq.heappush(self._heap, (when if when > self.now else self.now, self._seq, fn, args))

    def run_until(self, end_ms: int) -> None:
        """Run every event due at or before ``end_ms``, then leave time at ``end_ms``."""
        heap = self._heap
        pop = heapq.heappop
        n = 0
        while heap and heap[0][0] <= end_ms:
            when, _, fn, args = pop(heap)
            self.now = when
            fn(*args)
            n += 1
        self.events += n
        self.now = max(self.now, end_ms)
