"""The clock skew guard: may this node's wall clock be used to vote? Pure logic.

Nothing here reads the time, touches the network or draws random numbers:
NTP samples, store ``TIME`` probes and clock readings come in as values
(:mod:`quorum_cron.ntp` does the I/O), verdicts come out. The agent feeds it
real measurements, the simulator feeds it virtual ones.

Offsets follow NTP's sign: ``offset = reference - local``; a clock running
5 s ahead of true time measures an offset of -5000 ms.

One NTP sample (RFC 5905 names)::

    uncertainty = delay/2 + root_delay/2 + root_dispersion
    error bound = |offset| + uncertainty          (error_bound_ms)

The true offset lies in ``[offset - uncertainty, offset + uncertainty]``
when the server is honest; ``|offset| + uncertainty`` bounds how far the
local clock can be from true time.

Rules, in the order they apply:

===================================  =========================================
input                                effect
===================================  =========================================
reply with stratum 0 or >= 16        rejected: server unsynchronised (or a
                                     kiss-o'-death)
reply with leap indicator 3          rejected: server unsynchronised
reply with root distance             rejected: the server itself does not
(root_delay/2 + root_dispersion)     know the time well enough
> 1000 ms
reply with negative delay            rejected: impossible timestamps
k replies from one server            keep the accepted one with the lowest
                                     delay (least queueing, tightest bound)
one best sample per server           NTP intersection (Marzullo-style):
                                     smallest f such that N - f > N/2 of
                                     the N usable intervals share a point;
                                     the agreed interval is the hull of the
                                     points covered by N - f of them. No
                                     such f: "no majority" (cannot tell)
no usable server at all              NTP unavailable: policy ``abstain``
                                     (cannot tell) or ``store-time`` (the
                                     store TIME check alone decides)
store TIME probe                     bound = |offset| + rtt/2
two readings whose wall delta and    jump: trust dropped until a check
monotonic delta differ by more than  taken after the jump is good
max skew
===================================  =========================================

:class:`ClockGuard` combines them. A vote is allowed only while:

* the NTP bound is within ``max_skew_ms`` and the NTP measurement is younger
  than ``check_interval_ms`` (or NTP is unavailable and the policy is
  ``store-time``);
* the store TIME bound is within ``max_skew_ms`` and younger than
  ``check_interval_ms`` (when required — always for the agent);
* no wall-clock jump happened since those measurements.

Bounds age with the clock: a measurement taken at reading ``r0`` and used at
reading ``r1`` is shifted by the wall clock's steps in between
(``(r1.wall - r0.wall) - (r1.mono - r0.mono)``), so small steps that stay
under the jump threshold still add up. Readings are whole milliseconds, so a
1 ms difference is rounding and ignored.

Verdicts are :data:`Trust.TRUSTED`, :data:`Trust.NOT_TRUSTED` (a measurement
says the clock is off, or it jumped) or :data:`Trust.UNKNOWN` (nothing
recent to go on, servers disagree, NTP unreachable under ``abstain``). Only
``TRUSTED`` allows voting. Safety never depends on this guard: the store's
script refuses early votes by its own clock. The guard keeps a node with a
bad clock from voting at the wrong time and says why.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum_cron.clock import Clock
from quorum_cron.errors import QuorumCronError

__all__ = [
    "DEFAULT_CHECK_INTERVAL_MS",
    "DEFAULT_MAX_ROOT_DISTANCE_MS",
    "DEFAULT_MAX_SKEW_MS",
    "DEFAULT_NTP_RETRY_MS",
    "ClockError",
    "ClockGuard",
    "ClockReading",
    "NtpCheck",
    "NtpOutcome",
    "NtpSample",
    "Reading",
    "Rejection",
    "ServerReport",
    "ServerSummary",
    "StoreTimeCheck",
    "Trust",
    "TrustPolicy",
    "UnreachablePolicy",
    "Verdict",
    "agree",
    "assess_ntp",
    "best_sample",
    "default_unreachable_policy",
    "detect_jump",
    "error_bound_ms",
    "rejection_reason",
    "root_distance_ms",
    "uncertainty_ms",
]

DEFAULT_MAX_SKEW_MS = 250
DEFAULT_CHECK_INTERVAL_MS = 60_000
DEFAULT_MAX_ROOT_DISTANCE_MS = 1000.0
DEFAULT_NTP_RETRY_MS = 10_000


class ClockError(QuorumCronError):
    """A clock measurement could not be made or makes no sense."""


def _ms(value: float) -> str:
    """A duration for humans: one decimal under 10 ms, whole ms above."""
    return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"


def _signed_ms(value: float) -> str:
    text = _ms(value)
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
            f"{self.server} offset {_signed_ms(self.offset_ms)} ms, delay {_ms(self.delay_ms)} ms, "
            f"stratum {self.stratum}, leap {self.leap}, root delay {_ms(self.root_delay_ms)} ms, "
            f"root dispersion {_ms(self.root_dispersion_ms)} ms"
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
        return f"root distance {_ms(distance)} ms > {_ms(max_root_distance_ms)} ms"
    if sample.delay_ms < 0:
        return f"negative delay {_ms(sample.delay_ms)} ms: impossible timestamps"
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
            text = f"{s.server} offset {_signed_ms(s.best.offset_ms)} ms, delay {_ms(s.best.delay_ms)} ms"
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
        return f"offset {_signed_ms(self.offset_ms)} ms, rtt {_ms(self.rtt_ms)} ms"


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
        """Read ``clock`` (a :class:`~quorum_cron.clock.Clock`) once."""
        return cls(wall_ms=clock.wall_ms(), mono_ms=clock.monotonic_ms())


def _step_ms(earlier: Reading, later: Reading) -> int:
    """How far the wall clock was stepped between two readings (wall delta - monotonic delta).

    Both clocks read whole milliseconds, at slightly different instants, so
    a difference of 1 ms is rounding, not a step, and counts as 0.
    """
    step = (later.wall_ms - earlier.wall_ms) - (later.mono_ms - earlier.mono_ms)
    return 0 if abs(step) <= 1 else step


def detect_jump(earlier: Reading, later: Reading, max_skew_ms: int) -> int | None:
    """The wall-clock step between two readings when it exceeds ``max_skew_ms``, else ``None``."""
    step = _step_ms(earlier, later)
    return step if abs(step) > max_skew_ms else None


# -- the guard -------------------------------------------------------------------


class UnreachablePolicy(enum.StrEnum):
    """What a node does while no NTP server gives a usable reply."""

    ABSTAIN = "abstain"
    """Do not vote (cannot tell)."""
    STORE_TIME = "store-time"
    """Trust the store TIME check alone."""


class Trust(enum.StrEnum):
    """A verdict's kind; its value doubles as the check-clock wording."""

    TRUSTED = "trusted"
    NOT_TRUSTED = "not trusted"
    UNKNOWN = "cannot tell"

    @property
    def exit_code(self) -> int:
        """``check-clock``'s exit status: 0 trusted, 1 not trusted, 2 cannot tell."""
        return {Trust.TRUSTED: 0, Trust.NOT_TRUSTED: 1, Trust.UNKNOWN: 2}[self]


def default_unreachable_policy(ntp_servers: Sequence[str]) -> UnreachablePolicy:
    """The ``ntp_unreachable`` default, the one place it is decided: ``abstain`` when NTP servers
    are listed (the operator asked for NTP evidence), else ``store-time`` (the only evidence there is:
    ``abstain`` with no servers would never vote)."""
    return UnreachablePolicy.ABSTAIN if ntp_servers else UnreachablePolicy.STORE_TIME


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    """How strict the guard is (validated on construction)."""

    max_skew_ms: int = DEFAULT_MAX_SKEW_MS
    check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS
    """A measurement older than this is no longer evidence."""
    ntp_unreachable: UnreachablePolicy = UnreachablePolicy.ABSTAIN
    require_store_check: bool = True
    """The agent always checks the store; ``check-clock`` without Redis does not."""
    max_root_distance_ms: float = DEFAULT_MAX_ROOT_DISTANCE_MS

    def __post_init__(self) -> None:
        if self.max_skew_ms <= 0:
            raise ClockError(f"invalid max skew {self.max_skew_ms} ms: expected > 0")
        if self.check_interval_ms <= 0:
            raise ClockError(f"invalid clock check interval {self.check_interval_ms} ms: expected > 0")
        if self.max_root_distance_ms <= 0:
            raise ClockError(f"invalid max root distance {self.max_root_distance_ms} ms: expected > 0")
        # Accept the plain config string too ("abstain" / "store-time").
        try:
            object.__setattr__(self, "ntp_unreachable", UnreachablePolicy(self.ntp_unreachable))
        except ValueError:
            raise ClockError(
                f"invalid ntp_unreachable policy {self.ntp_unreachable!r}: expected 'abstain' or 'store-time'"
            ) from None


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the clock may be used to vote, why, and the figures behind it."""

    trust: Trust
    reasons: tuple[str, ...]
    """Why (for TRUSTED: the evidence); each names the measured figures."""
    ntp_bound_ms: float | None = None
    store_bound_ms: float | None = None
    offset_ms: float | None = None
    """Best estimate of ``reference - local`` (NTP when known, else store)."""
    max_skew_ms: int = DEFAULT_MAX_SKEW_MS

    @property
    def trusted(self) -> bool:
        return self.trust is Trust.TRUSTED

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def __str__(self) -> str:
        head = {
            Trust.TRUSTED: "clock trusted",
            Trust.NOT_TRUSTED: "clock not trusted",
            Trust.UNKNOWN: "clock trust unknown",
        }[self.trust]
        return f"{head}: {self.reason}" if self.reasons else head

    def as_info(self) -> dict[str, str]:
        """Flat strings for a membership heartbeat's info / status output."""
        info = {"clock": self.trust.value, "clock_reason": self.reason}
        if self.offset_ms is not None:
            info["clock_offset_ms"] = f"{self.offset_ms:.1f}"
        if self.ntp_bound_ms is not None:
            info["clock_ntp_bound_ms"] = f"{self.ntp_bound_ms:.1f}"
        if self.store_bound_ms is not None:
            info["clock_store_bound_ms"] = f"{self.store_bound_ms:.1f}"
        return info


@dataclass(frozen=True, slots=True)
class _Component:
    trust: Trust
    reason: str
    bound: float | None = None
    offset: float | None = None


_WORST = {Trust.TRUSTED: 0, Trust.UNKNOWN: 1, Trust.NOT_TRUSTED: 2}


class ClockGuard:
    """The skew guard's state machine: observations in, :class:`Verdict` out.

    Every method takes the reading at which it is called (for the
    ``observe_*`` methods: a reading taken right after the measurement
    completed) and runs jump detection against the previous reading.
    Readings should come in monotonic order; an older one is accepted but
    skipped by jump detection.

    A node, on every heartbeat::

        r = ClockReading.of(clock)
        if guard.ntp_check_due(r):
            reports = await aquery_servers(servers, clock=clock)
            guard.observe_ntp(assess_ntp(reports), ClockReading.of(clock))
        guard.observe_store(probe_store_time(clock, store.time_ms), ClockReading.of(clock))

    and before each vote: ``guard.verdict(ClockReading.of(clock)).trusted``.
    """

    def __init__(self, policy: TrustPolicy | None = None) -> None:
        self.policy = policy if policy is not None else TrustPolicy()
        self._last: ClockReading | None = None
        self._jump: tuple[ClockReading, int] | None = None
        self._ntp: tuple[ClockReading, NtpCheck] | None = None
        """The latest check that measured something (AGREED or NO_MAJORITY)."""
        self._ntp_attempt: tuple[ClockReading, NtpCheck] | None = None
        """The latest check of any outcome."""
        self._store: tuple[ClockReading, StoreTimeCheck] | None = None
        self._store_failure: str | None = None

    def __repr__(self) -> str:
        return f"ClockGuard(policy={self.policy!r})"

    # -- inputs ------------------------------------------------------------

    def observe_reading(self, reading: Reading) -> int | None:
        """Run jump detection; returns the wall-clock step when this reading reveals a jump."""
        now = ClockReading(reading.wall_ms, reading.mono_ms)
        last = self._last
        if last is not None and now.mono_ms < last.mono_ms:
            return None
        self._last = now
        if last is None:
            return None
        step = detect_jump(last, now, self.policy.max_skew_ms)
        if step is not None:
            self._jump = (now, step)
        return step

    def observe_ntp(self, check: NtpCheck, reading: Reading) -> Verdict:
        """Record an NTP check that finished at ``reading``."""
        self.observe_reading(reading)
        at = ClockReading(reading.wall_ms, reading.mono_ms)
        self._ntp_attempt = (at, check)
        if check.outcome is not NtpOutcome.UNAVAILABLE:
            self._ntp = (at, check)
        return self.verdict(reading)

    def observe_store(self, check: StoreTimeCheck, reading: Reading) -> Verdict:
        """Record a store TIME probe that finished at ``reading``."""
        self.observe_reading(reading)
        self._store = (ClockReading(reading.wall_ms, reading.mono_ms), check)
        self._store_failure = None
        return self.verdict(reading)

    def observe_store_unreachable(self, reason: str, reading: Reading) -> Verdict:
        """Record a store TIME probe that got no answer; the last good probe counts while fresh."""
        self.observe_reading(reading)
        self._store_failure = reason
        return self.verdict(reading)

    # -- outputs -----------------------------------------------------------

    def ntp_check_due(
        self, reading: Reading, *, margin_ms: int | None = None, retry_ms: int = DEFAULT_NTP_RETRY_MS
    ) -> bool:
        """Should the node run an NTP check now?

        Yes when there was none, when a jump voided the last one, when the
        last one expires within ``margin_ms`` (default: a quarter of the check
        interval, so a node that re-checks when told never lets its evidence
        lapse), and ``retry_ms`` after a check that did not agree
        (unavailable or no majority).
        """
        self.observe_reading(reading)
        if margin_ms is None:
            margin_ms = self.policy.check_interval_ms // 4
        if self._ntp_attempt is None:
            return True
        at, check = self._ntp_attempt
        if self._before_jump(at):
            return True
        age = reading.mono_ms - at.mono_ms
        if check.outcome is not NtpOutcome.AGREED and age >= retry_ms:
            return True
        return age >= self.policy.check_interval_ms - margin_ms

    def verdict(self, reading: Reading) -> Verdict:
        """May the clock be used to vote at ``reading``?"""
        self.observe_reading(reading)
        parts: list[_Component] = []
        ntp = self._ntp_component(reading)
        if ntp is not None:
            parts.append(ntp)
        store: _Component | None = None
        # NTP unavailable under store-time (ntp is None): the store decides alone.
        if self.policy.require_store_check or ntp is None:
            store = self._store_component(reading)
            parts.append(store)
        worst = max((c.trust for c in parts), key=_WORST.__getitem__)
        if worst is Trust.TRUSTED:
            shown = [c.reason for c in parts]
        else:
            # One jump reason is enough even when it voided both checks.
            shown = list(dict.fromkeys(c.reason for c in parts if c.trust is not Trust.TRUSTED))
        offset = ntp.offset if ntp is not None else None
        if offset is None and store is not None:
            offset = store.offset
        return Verdict(
            trust=worst,
            reasons=tuple(shown),
            ntp_bound_ms=ntp.bound if ntp is not None else None,
            store_bound_ms=store.bound if store is not None else None,
            offset_ms=offset,
            max_skew_ms=self.policy.max_skew_ms,
        )

    # -- internals ---------------------------------------------------------

    def _before_jump(self, at: ClockReading) -> bool:
        # A measurement attached to the very reading that revealed a jump may
        # straddle it: only a later one counts.
        return self._jump is not None and at.mono_ms <= self._jump[0].mono_ms

    def _fresh(self, at: ClockReading, reading: Reading) -> bool:
        return reading.mono_ms - at.mono_ms < self.policy.check_interval_ms

    def _jump_reason(self, reading: Reading) -> str:
        assert self._jump is not None
        at, step = self._jump
        return (
            f"wall clock jumped {_signed_ms(step)} ms (more than max skew {self.policy.max_skew_ms} ms) "
            f"{_age(reading, at)}; waiting for the next good check"
        )

    def _stale(self, what: str, at: ClockReading, reading: Reading) -> str:
        interval = _ms(self.policy.check_interval_ms / 1000)
        return f"last {what} {_age(reading, at)}, older than the check interval {interval} s"

    def _ntp_component(self, reading: Reading) -> _Component | None:
        p = self.policy
        if (
            self._ntp is not None
            and self._fresh(self._ntp[0], reading)
            and not self._before_jump(self._ntp[0])
        ):
            at, check = self._ntp
            if check.outcome is NtpOutcome.NO_MAJORITY:
                return _Component(Trust.UNKNOWN, f"NTP servers disagree, no majority ({check.evidence()})")
            step = _step_ms(at, reading)
            low, high = check.low_ms - step, check.high_ms - step
            bound = max(abs(low), abs(high))
            stepped = f", wall clock stepped {_signed_ms(step)} ms since" if step else ""
            figures = f"({check.evidence()}{stepped})"
            ok = bound <= p.max_skew_ms
            cmp = "<=" if ok else ">"
            return _Component(
                Trust.TRUSTED if ok else Trust.NOT_TRUSTED,
                f"NTP bound {_ms(bound)} ms {cmp} max skew {p.max_skew_ms} ms {figures}",
                bound,
                (low + high) / 2,
            )
        attempt = self._ntp_attempt
        if (
            attempt is not None
            and attempt[1].outcome is NtpOutcome.UNAVAILABLE
            and self._fresh(attempt[0], reading)
        ):
            if p.ntp_unreachable is UnreachablePolicy.STORE_TIME:
                return None
            return _Component(
                Trust.UNKNOWN, f"NTP unavailable ({attempt[1].evidence()}) and policy is abstain"
            )
        if self._ntp is not None and self._fresh(self._ntp[0], reading):  # voided by a jump
            return _Component(Trust.NOT_TRUSTED, self._jump_reason(reading))
        if attempt is None:
            return _Component(Trust.UNKNOWN, "no NTP check yet")
        return _Component(Trust.UNKNOWN, self._stale("NTP check", attempt[0], reading))

    def _store_component(self, reading: Reading) -> _Component:
        p = self.policy
        failed = f" (last probe failed: {self._store_failure})" if self._store_failure else ""
        if self._store is None:
            return _Component(Trust.UNKNOWN, f"no store TIME check yet{failed}")
        at, check = self._store
        if not self._fresh(at, reading):
            return _Component(Trust.UNKNOWN, self._stale("store TIME check", at, reading) + failed)
        if self._before_jump(at):
            return _Component(Trust.NOT_TRUSTED, self._jump_reason(reading))
        step = _step_ms(at, reading)
        offset = check.offset_ms - step
        bound = abs(offset) + check.rtt_ms / 2
        stepped = f", wall clock stepped {_signed_ms(step)} ms since" if step else ""
        figures = f"({StoreTimeCheck(offset, check.rtt_ms).evidence()}{stepped})"
        ok = bound <= p.max_skew_ms
        cmp = "<=" if ok else ">"
        return _Component(
            Trust.TRUSTED if ok else Trust.NOT_TRUSTED,
            f"store TIME bound {_ms(bound)} ms {cmp} max skew {p.max_skew_ms} ms {figures}",
            bound,
            offset,
        )


def _age(now: Reading, then: Reading) -> str:
    seconds = (now.mono_ms - then.mono_ms) / 1000
    return f"{seconds:.1f} s ago"
