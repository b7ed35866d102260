"""NTP replies as evidence about this node's clock: error bounds, rejections, agreement.

One sample's error bound is |offset| + delay/2 + root delay/2 + root
dispersion; unsynchronised replies and those whose root distance exceeds the
limit are rejected with a reason; several servers must agree (the largest
group of intersecting intervals a majority) — the formulas of
``docs/clock.md``. :mod:`quorum_cron.clock.skew` turns the outcome into a trust
verdict; :mod:`quorum_cron.clock.ntp` does the network queries. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_ROOT_DISTANCE_MS",
    "NtpCheck",
    "NtpOutcome",
    "NtpSample",
    "Rejection",
    "ServerReport",
    "ServerSummary",
    "agree",
    "assess_ntp",
    "best_sample",
    "error_bound_ms",
    "fmt_ms",
    "fmt_signed_ms",
    "rejection_reason",
    "root_distance_ms",
    "uncertainty_ms",
]

DEFAULT_MAX_ROOT_DISTANCE_MS = 1000.0


def fmt_ms(value: float) -> str:
    """A duration for humans: one decimal under 10 ms, whole ms above."""
    return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"


def fmt_signed_ms(value: float) -> str:
    text = fmt_ms(value)
    return text if text.startswith("-") else "+" + text


# -- NTP samples ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NtpSample:
    """One NTP reply, in milliseconds (``offset = server - local``)."""

    server: str
    offset_ms: float
    delay_ms: float
    root_delay_ms: float
    root_dispersion_ms: float
    stratum: int
    leap: int

    def __str__(self) -> str:
        return (
            f"{self.server} offset {fmt_signed_ms(self.offset_ms)} ms, delay {fmt_ms(self.delay_ms)} ms, "
            f"stratum {self.stratum}, leap {self.leap}, root delay {fmt_ms(self.root_delay_ms)} ms, "
            f"root dispersion {fmt_ms(self.root_dispersion_ms)} ms"
        )


def root_distance_ms(sample: NtpSample) -> float:
    """How far the server itself may be from true time: root_delay/2 + root_dispersion."""
    return sample.root_delay_ms / 2 + sample.root_dispersion_ms


def uncertainty_ms(sample: NtpSample) -> float:
    """Half-width of the interval holding the true offset: delay/2 + root distance."""
    return sample.delay_ms / 2 + root_distance_ms(sample)


def error_bound_ms(sample: NtpSample) -> float:
    """How far the local clock may be from true time: |offset| + delay/2 + root distance."""
    return abs(sample.offset_ms) + uncertainty_ms(sample)


def rejection_reason(
    sample: NtpSample, *, max_root_distance_ms: float = DEFAULT_MAX_ROOT_DISTANCE_MS
) -> str | None:
    """Why ``sample`` must not be used, or ``None`` when it may."""
    if sample.stratum == 0 or sample.stratum >= 16:
        return f"stratum {sample.stratum}: server unsynchronised"
    if sample.leap == 3:
        return "leap indicator 3: server unsynchronised"
    distance = root_distance_ms(sample)
    if distance > max_root_distance_ms:
        return f"root distance {fmt_ms(distance)} ms > {fmt_ms(max_root_distance_ms)} ms"
    if sample.delay_ms < 0:
        return f"negative delay {fmt_ms(sample.delay_ms)} ms: impossible timestamps"
    return None


@dataclass(frozen=True, slots=True)
class Rejection:
    """A reply that was received but not used, and why."""

    sample: NtpSample
    reason: str


def best_sample(
    samples: Iterable[NtpSample], *, max_root_distance_ms: float = DEFAULT_MAX_ROOT_DISTANCE_MS
) -> tuple[NtpSample | None, tuple[Rejection, ...]]:
    """The accepted sample with the lowest delay (first on ties), and the rejected ones."""
    best: NtpSample | None = None
    rejected: list[Rejection] = []
    for sample in samples:
        reason = rejection_reason(sample, max_root_distance_ms=max_root_distance_ms)
        if reason is not None:
            rejected.append(Rejection(sample, reason))
        elif best is None or sample.delay_ms < best.delay_ms:
            best = sample
    return best, tuple(rejected)


@dataclass(frozen=True, slots=True)
class ServerReport:
    """What one server answered during one check: every reply, and every query that got none."""

    server: str
    samples: tuple[NtpSample, ...] = ()
    failures: tuple[str, ...] = ()
    """One line per query without a usable reply (timeout, refused, bad packet)."""


@dataclass(frozen=True, slots=True)
class ServerSummary:
    """One server's contribution to a check."""

    server: str
    best: NtpSample | None
    accepted: tuple[NtpSample, ...]
    rejected: tuple[Rejection, ...]
    failures: tuple[str, ...]

    @property
    def usable(self) -> bool:
        return self.best is not None

    def why_unusable(self) -> str:
        """Why this server gave nothing usable (empty when it did)."""
        if self.best is not None:
            return ""
        if self.rejected:
            return self.rejected[-1].reason
        if self.failures:
            return self.failures[-1]
        return "not queried"


# -- agreement -----------------------------------------------------------------


def agree(intervals: Sequence[tuple[float, float]]) -> tuple[float, float, int] | None:
    """NTP's intersection algorithm over closed intervals ``(low, high)``.

    Finds the smallest ``f`` such that ``m = n - f > n / 2`` intervals share a
    point, and returns ``(low, high, m)``: the lowest and highest points
    covered by at least ``m`` intervals. ``None`` when no majority shares a
    point (or there are no intervals).
    """
    n = len(intervals)
    if n == 0:
        return None
    for lo, hi in intervals:
        if not lo <= hi:
            raise ValueError(f"interval ({lo}, {hi}) has low > high: expected low <= high")
    # Starts sort before ends at the same point: touching intervals intersect.
    edges = sorted([(lo, 0) for lo, _ in intervals] + [(hi, 1) for _, hi in intervals])
    for f in range(n):
        need = n - f
        if need * 2 <= n:
            return None
        count = 0
        low: float | None = None
        high: float | None = None
        for point, kind in edges:
            if kind == 0:
                count += 1
                if count >= need and low is None:
                    low = point
            else:
                if count >= need:
                    high = point
                count -= 1
        if low is not None and high is not None:
            return low, high, need
    return None


class NtpOutcome(enum.StrEnum):
    """What one NTP check concluded."""

    AGREED = "agreed"
    """A majority of the usable servers agree; ``offset``/``bound`` are set."""
    NO_MAJORITY = "no-majority"
    """Usable servers answered but no majority of them agrees: cannot tell."""
    UNAVAILABLE = "unavailable"
    """No server gave a usable reply (unreachable, or every reply rejected)."""


@dataclass(frozen=True, slots=True)
class NtpCheck:
    """The result of one NTP check over every configured server."""

    outcome: NtpOutcome
    servers: tuple[ServerSummary, ...]
    low_ms: float = 0.0
    """Lowest true offset the agreeing majority allows (AGREED only)."""
    high_ms: float = 0.0
    """Highest true offset the agreeing majority allows (AGREED only)."""
    agreeing: tuple[str, ...] = ()
    """Servers whose interval meets the agreed interval."""

    @property
    def offset_ms(self) -> float:
        """Best estimate of ``reference - local``: the agreed interval's midpoint."""
        return (self.low_ms + self.high_ms) / 2

    @property
    def bound_ms(self) -> float:
        """How far the local clock may be from true time (AGREED only)."""
        return max(abs(self.low_ms), abs(self.high_ms))

    @property
    def usable(self) -> tuple[ServerSummary, ...]:
        return tuple(s for s in self.servers if s.usable)

    def evidence(self) -> str:
        """The measured figures behind the outcome, for a verdict's message."""
        if self.outcome is NtpOutcome.UNAVAILABLE:
            return "; ".join(f"{s.server}: {s.why_unusable()}" for s in self.servers) or "no servers"
        parts = []
        for s in self.servers:
            if s.best is None:
                parts.append(f"{s.server} unusable: {s.why_unusable()}")
                continue
            best = s.best
            text = f"{s.server} offset {fmt_signed_ms(best.offset_ms)} ms, delay {fmt_ms(best.delay_ms)} ms"
            if self.outcome is NtpOutcome.AGREED and s.server not in self.agreeing:
                text += " (disagrees, ignored)"
            parts.append(text)
        return "; ".join(parts)


def assess_ntp(
    reports: Sequence[ServerReport], *, max_root_distance_ms: float = DEFAULT_MAX_ROOT_DISTANCE_MS
) -> NtpCheck:
    """Reduce one check's replies to an :class:`NtpCheck` (best-of-k per server, then agreement)."""
    summaries = []
    for report in reports:
        best, rejected = best_sample(report.samples, max_root_distance_ms=max_root_distance_ms)
        accepted = tuple(
            s
            for s in report.samples
            if rejection_reason(s, max_root_distance_ms=max_root_distance_ms) is None
        )
        summaries.append(ServerSummary(report.server, best, accepted, rejected, report.failures))
    servers = tuple(summaries)
    bests = [s.best for s in servers if s.best is not None]
    if not bests:
        return NtpCheck(NtpOutcome.UNAVAILABLE, servers)
    intervals = [(b.offset_ms - uncertainty_ms(b), b.offset_ms + uncertainty_ms(b)) for b in bests]
    found = agree(intervals)
    if found is None:
        return NtpCheck(NtpOutcome.NO_MAJORITY, servers)
    low, high, _ = found
    agreeing = tuple(
        b.server for b, (lo, hi) in zip(bests, intervals, strict=True) if lo <= high and hi >= low
    )
    return NtpCheck(NtpOutcome.AGREED, servers, low_ms=low, high_ms=high, agreeing=agreeing)
