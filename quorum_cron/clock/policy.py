"""The skew guard's settings and answers: how strict it is, and its verdicts.

:class:`TrustPolicy` (max skew, check interval, what to do while NTP is
unreachable) is validated where it enters; :class:`Verdict` is what
:class:`~quorum_cron.clock.skew.ClockGuard` answers, with the figures behind it.
Separate from the guard so that the config (``default_unreachable_policy``)
and the faces that print verdicts depend on these values, not on the guard's
state machine.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from quorum_cron.clock.evidence import ClockError
from quorum_cron.clock.ntp_evidence import DEFAULT_MAX_ROOT_DISTANCE_MS

__all__ = [
    "DEFAULT_CHECK_INTERVAL_MS",
    "DEFAULT_MAX_SKEW_MS",
    "MAX_SKEW_LIMIT_MS",
    "Trust",
    "TrustPolicy",
    "UnreachablePolicy",
    "Verdict",
    "default_unreachable_policy",
]

DEFAULT_MAX_SKEW_MS = 250
MAX_SKEW_LIMIT_MS = 60_000
"""The largest max skew the config (``cluster.max_skew``) and ``check-clock --max-skew`` take: a
minute of disagreement is not a clock to vote with."""
DEFAULT_CHECK_INTERVAL_MS = 60_000


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
