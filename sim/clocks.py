"""Simulated clocks of one host: offset, drift (ppm), jumps and strobe.

True time ``t`` is the loop's time. A host's *wall* reading is
``t + offset + drift·(t - since) + strobe(t)``; its *monotonic* reading runs
at the same drifted rate but never jumps (an NTP step or ``date -s`` moves
only the wall reading), exactly the split :class:`quorum_cron.core.node.Now`
expects. All arithmetic is on integers, so readings are identical on every
platform.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HostClock"]

PPM = 1_000_000


@dataclass
class HostClock:
    """The clocks of one simulated host (a node or the store)."""

    since: int
    """True time at which ``offset``/``mono_at_since`` were last folded."""
    offset: int = 0
    """Wall minus true time at ``since``, jumps included."""
    ppm: int = 0
    mono_at_since: int = 0
    strobe_ms: int = 0
    strobe_period_ms: int = 0
    strobe_from: int = 0

    def wall(self, t: int) -> int:
        """The wall reading (epoch ms) at true time ``t``."""
        w = t + self.offset
        if self.ppm:
            w += (self.ppm * (t - self.since)) // PPM
        if self.strobe_ms:
            w += (
                self.strobe_ms
                if ((t - self.strobe_from) // self.strobe_period_ms) % 2 == 0
                else -self.strobe_ms
            )
        return w

    def mono(self, t: int) -> int:
        """The monotonic reading (ms) at true time ``t``: drifts, never jumps."""
        dt = t - self.since
        return self.mono_at_since + dt + (self.ppm * dt) // PPM

    def error(self, t: int) -> int:
        """How far the wall reading is from true time, strobe excluded."""
        return self.offset + ((self.ppm * (t - self.since)) // PPM if self.ppm else 0)

    def true_at_mono(self, target: int, now: int) -> int:
        """The first true time ``>= now`` at which the monotonic reading is ``>= target``.

        A function of ``target`` alone (for a given drift), so a deadline
        gives the same instant whenever it is converted.
        """
        if target <= self.mono(now):
            return now
        return self._true_at(target, now)

    def _true_at(self, target: int, now: int) -> int:
        """:meth:`true_at_mono` for a ``target`` known to be ahead of the reading at ``now``."""
        want = target - self.mono_at_since
        ppm = self.ppm
        if not ppm:
            t = self.since + want
            return t if t > now else now
        dt = -((-want * PPM) // (PPM + ppm))
        while dt > 0 and (dt - 1) + (ppm * (dt - 1)) // PPM >= want:
            dt -= 1
        while dt + (ppm * dt) // PPM < want:
            dt += 1
        t = self.since + dt
        return t if t > now else now

    def true_after(self, mono_ms: int, now: int) -> int:
        """The true time at which ``mono_ms`` of this host's monotonic time have passed since ``now``."""
        if mono_ms <= 0:
            return now
        dt = now - self.since
        return self._true_at(self.mono_at_since + dt + (self.ppm * dt) // PPM + mono_ms, now)

    def set_drift(self, t: int, ppm: int) -> None:
        """From true time ``t`` on, run ``ppm`` parts per million fast (negative: slow)."""
        if ppm <= -PPM:
            raise ValueError(f"drift of {ppm} ppm would stop the clock: expected > {-PPM}")
        self.mono_at_since = self.mono(t)
        self.offset = self.error(t)
        self.since = t
        self.ppm = ppm

    def jump(self, ms: int) -> None:
        """Step the wall reading by ``ms`` (either sign)."""
        self.offset += ms

    def set_strobe(self, t: int, amplitude_ms: int, period_ms: int) -> None:
        """Swing the wall reading ±``amplitude_ms`` every ``period_ms`` (0 stops it)."""
        self.strobe_ms = amplitude_ms
        self.strobe_period_ms = max(1, period_ms)
        self.strobe_from = t

    def crossing(self, t: int, bound_ms: int) -> int | None:
        """The next true time after ``t`` at which drift moves ``|error|`` across ``bound_ms``."""
        if not self.ppm:
            return None
        err = self.error(t)
        target: int | None
        if -bound_ms <= err <= bound_ms:
            target = bound_ms + 1 if self.ppm > 0 else -bound_ms - 1
        elif self.ppm > 0:
            target = -bound_ms if err < -bound_ms else None
        else:
            target = bound_ms if err > bound_ms else None
        if target is None:
            return None
        return t + max(1, -((-(target - err) * PPM) // self.ppm)) + 1
