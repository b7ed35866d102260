"""The skew guard's evidence other than NTP: readings of both clocks, wall-clock jumps, the store TIME probe.

Values and pure arithmetic, no I/O: a reading is taken by whoever holds a
:class:`~quorum_cron.clock.base.Clock`, a store ``TIME`` probe is timed by the
agent (``agent/clocktrust.py``). Apart from :mod:`quorum_cron.clock.skew` (the
guard that weighs the evidence) and next to :mod:`quorum_cron.clock.ntp_evidence`
(the NTP side), so that each kind of evidence and its bound sit in one
short module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from quorum_cron.clock.base import Clock
from quorum_cron.clock.ntp_evidence import fmt_ms, fmt_signed_ms
from quorum_cron.errors import QuorumCronError

__all__ = ["ClockError", "ClockReading", "Reading", "StoreTimeCheck", "detect_jump", "wall_step_ms"]


class ClockError(QuorumCronError):
    """A clock measurement could not be made or makes no sense."""


# -- store TIME ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoreTimeCheck:
    """The store's clock against ours: ``offset = store - local``, bounded by the round trip."""

    offset_ms: float
    rtt_ms: float

    @classmethod
    def from_readings(cls, local_before_ms: int, store_ms: int, local_after_ms: int) -> StoreTimeCheck:
        """From the local wall clock read just before and just after asking the store.

        The store's reading was taken somewhere in between, so the offset is
        measured against the midpoint and can be off by at most half the
        round trip.
        """
        rtt = local_after_ms - local_before_ms
        if rtt < 0:
            raise ClockError(
                f"local clock went back {-rtt} ms during a store TIME probe: expected after >= before"
            )
        return cls(offset_ms=store_ms - (local_before_ms + local_after_ms) / 2, rtt_ms=float(rtt))

    @property
    def bound_ms(self) -> float:
        """How far the local clock may be from the store's: |offset| + rtt/2."""
        return abs(self.offset_ms) + self.rtt_ms / 2

    def evidence(self) -> str:
        return f"offset {fmt_signed_ms(self.offset_ms)} ms, rtt {fmt_ms(self.rtt_ms)} ms"


# -- readings and jumps ----------------------------------------------------------


class Reading(Protocol):
    """Anything holding one reading of both clocks (e.g. :class:`ClockReading`, ``core.Now``)."""

    @property
    def wall_ms(self) -> int: ...

    @property
    def mono_ms(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ClockReading:
    """One reading of the node's wall (epoch ms) and monotonic (ms) clocks."""

    wall_ms: int
    mono_ms: int

    @classmethod
    def of(cls, clock: Clock) -> ClockReading:
        """Read ``clock`` (a :class:`~quorum_cron.clock.base.Clock`) once."""
        return cls(wall_ms=clock.wall_ms(), mono_ms=clock.monotonic_ms())


def wall_step_ms(earlier: Reading, later: Reading) -> int:
    """How far the wall clock was stepped between two readings (wall delta - monotonic delta).

    Both clocks read whole milliseconds, at slightly different instants, so
    a difference of 1 ms is rounding, not a step, and counts as 0.
    """
    step = (later.wall_ms - earlier.wall_ms) - (later.mono_ms - earlier.mono_ms)
    return 0 if abs(step) <= 1 else step


def detect_jump(earlier: Reading, later: Reading, max_skew_ms: int) -> int | None:
    """The wall-clock step between two readings when it exceeds ``max_skew_ms``, else ``None``."""
    step = wall_step_ms(earlier, later)
    return step if abs(step) > max_skew_ms else None
