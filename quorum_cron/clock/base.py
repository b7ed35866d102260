"""Clocks: the one place real time enters quorum-cron.

Everything else takes a :class:`Clock`. Two readings are kept apart on
purpose: *wall* time (epoch ms — what a slot's fire time is measured in, and
what NTP corrects) and *monotonic* time (for durations: timeouts, leases,
check intervals — it never jumps). A node whose two readings disagree about
how much time passed has had its wall clock stepped, which the skew guard
treats as a reason to stop trusting it.

:class:`ManualClock` is the test and simulator clock: it moves only when told,
and its wall reading can be offset, drifted or jumped independently of its
monotonic one, which is how the simulator models a bad clock on one node.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of wall and monotonic time in integer milliseconds."""

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch, as this machine believes."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds from an arbitrary origin; never goes back."""
        ...


class SystemClock:
    """The machine's clocks (``time.time_ns`` and ``time.monotonic_ns``)."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to.

    ``advance`` moves both readings together; ``jump`` moves only the wall
    reading (an NTP step or an operator's ``date -s``), which is what a
    monotonic-vs-wall check should catch.
    """

    def __init__(self, wall_ms: int = 0, monotonic_ms: int = 0) -> None:
        self._wall = wall_ms
        self._mono = monotonic_ms

    def wall_ms(self) -> int:
        return self._wall

    def monotonic_ms(self) -> int:
        return self._mono

    def advance(self, ms: int) -> None:
        """Let ``ms`` milliseconds pass (``ms`` must not be negative)."""
        if ms < 0:
            raise ValueError(f"cannot advance a clock by {ms} ms: expected >= 0")
        self._wall += ms
        self._mono += ms

    def jump(self, ms: int) -> None:
        """Step the wall reading by ``ms`` (either sign); monotonic time is untouched."""
        self._wall += ms

    def set_wall(self, wall_ms: int) -> None:
        """Set the wall reading outright (monotonic time is untouched)."""
        self._wall = wall_ms

    def __repr__(self) -> str:
        return f"ManualClock(wall_ms={self._wall}, monotonic_ms={self._mono})"
