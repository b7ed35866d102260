"""The clock skew guard: may this node's wall clock be used to vote? Pure logic.

Nothing here reads the time, touches the network or draws random numbers:
NTP samples, store ``TIME`` probes and clock readings come in as values
(:mod:`quorum_cron.clock.ntp` does the I/O), verdicts come out. The agent feeds it
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

This module owns the guard (:class:`ClockGuard`, how the evidence is
weighed). The evidence and the answers are values in their own modules —
:mod:`quorum_cron.clock.ntp_evidence` (NTP), :mod:`quorum_cron.clock.evidence`
(readings, jumps, the store TIME probe), :mod:`quorum_cron.clock.policy`
(policy and verdicts) — and are re-exported here, so ``quorum_cron.clock.skew``
stays the one import for the guard's users.
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum_cron.clock.evidence import (
    ClockError,
    ClockReading,
    Reading,
    StoreTimeCheck,
    detect_jump,
    wall_step_ms,
)
from quorum_cron.clock.ntp_evidence import (
    DEFAULT_MAX_ROOT_DISTANCE_MS,
    NtpCheck,
    NtpOutcome,
    NtpSample,
    Rejection,
    ServerReport,
    ServerSummary,
    agree,
    assess_ntp,
    best_sample,
    error_bound_ms,
    fmt_ms,
    fmt_signed_ms,
    rejection_reason,
    root_distance_ms,
    uncertainty_ms,
)
from quorum_cron.clock.policy import (
    DEFAULT_CHECK_INTERVAL_MS,
    DEFAULT_MAX_SKEW_MS,
    Trust,
    TrustPolicy,
    UnreachablePolicy,
    Verdict,
    default_unreachable_policy,
)

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


DEFAULT_NTP_RETRY_MS = 10_000


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
            f"wall clock jumped {fmt_signed_ms(step)} ms (more than max skew {self.policy.max_skew_ms} ms) "
            f"{_age(reading, at)}; waiting for the next good check"
        )

    def _stale(self, what: str, at: ClockReading, reading: Reading) -> str:
        interval = fmt_ms(self.policy.check_interval_ms / 1000)
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
            step = wall_step_ms(at, reading)
            low, high = check.low_ms - step, check.high_ms - step
            bound = max(abs(low), abs(high))
            stepped = f", wall clock stepped {fmt_signed_ms(step)} ms since" if step else ""
            figures = f"({check.evidence()}{stepped})"
            ok = bound <= p.max_skew_ms
            cmp = "<=" if ok else ">"
            return _Component(
                Trust.TRUSTED if ok else Trust.NOT_TRUSTED,
                f"NTP bound {fmt_ms(bound)} ms {cmp} max skew {p.max_skew_ms} ms {figures}",
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
        step = wall_step_ms(at, reading)
        offset = check.offset_ms - step
        bound = abs(offset) + check.rtt_ms / 2
        stepped = f", wall clock stepped {fmt_signed_ms(step)} ms since" if step else ""
        figures = f"({StoreTimeCheck(offset, check.rtt_ms).evidence()}{stepped})"
        ok = bound <= p.max_skew_ms
        cmp = "<=" if ok else ">"
        return _Component(
            Trust.TRUSTED if ok else Trust.NOT_TRUSTED,
            f"store TIME bound {fmt_ms(bound)} ms {cmp} max skew {p.max_skew_ms} ms {figures}",
            bound,
            offset,
        )


def _age(now: Reading, then: Reading) -> str:
    seconds = (now.mono_ms - then.mono_ms) / 1000
    return f"{seconds:.1f} s ago"
