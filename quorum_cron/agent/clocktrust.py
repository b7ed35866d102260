"""The agent's clock trust: the one place it meets the skew guard.

The runtime asks two things — "check now" (on every heartbeat) and "may I
vote?" (before every tick) — and this module answers both through
:class:`~quorum_cron.clock.skew.ClockGuard`: the store ``TIME`` probe on every
check, NTP when the guard says a check is due and servers are configured.
With no NTP servers configured there is nothing to ask, which the guard
treats as "NTP unavailable" under the configured policy: ``store-time``
lets the store probe decide alone, ``abstain`` keeps the node from voting
(and says so).

Safety never depends on this: the store refuses early votes by its own
clock. Trust keeps a node with a bad clock from voting at the wrong time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from quorum_cron.clock.base import Clock
from quorum_cron.clock.ntp import NtpServer, aquery_servers, probe_store_time
from quorum_cron.clock.skew import (
    ClockGuard,
    ClockReading,
    NtpCheck,
    NtpOutcome,
    ServerReport,
    StoreTimeCheck,
    TrustPolicy,
    UnreachablePolicy,
    Verdict,
    assess_ntp,
    default_unreachable_policy,
)

__all__ = ["ClockTrust"]

DEFAULT_CHECK_INTERVAL_MS = 60_000

NtpQuery = Callable[[Sequence[NtpServer], Clock], Awaitable[Sequence[ServerReport]]]
"""Ask the servers, timing the exchange on the clock given (default: :func:`_query_ntp`)."""


async def _query_ntp(servers: Sequence[NtpServer], clock: Clock) -> Sequence[ServerReport]:
    return await aquery_servers(servers, clock=clock)


class ClockTrust:
    """Checks the node's clock against the store (and NTP) and keeps the verdict."""

    def __init__(
        self,
        clock: Clock,
        *,
        max_skew_ms: int,
        ntp_servers: Sequence[str] = (),
        ntp_unreachable: str = "",
        check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS,
        query_ntp: NtpQuery = _query_ntp,
    ) -> None:
        """``query_ntp``: how servers are asked; tests pass a quick one (the default samples each
        server 4 times, 2 s apart, as public servers require)."""
        self.clock = clock
        self._query_ntp = query_ntp
        self.servers = tuple(NtpServer.parse(s) for s in ntp_servers)
        self.guard = ClockGuard(
            TrustPolicy(
                max_skew_ms=max_skew_ms,
                check_interval_ms=check_interval_ms,
                ntp_unreachable=(
                    UnreachablePolicy(ntp_unreachable)
                    if ntp_unreachable
                    else default_unreachable_policy(ntp_servers)
                ),
                require_store_check=True,
            )
        )
        self._ntp_task: asyncio.Task[None] | None = None

    def reading(self) -> ClockReading:
        return ClockReading.of(self.clock)

    def verdict(self) -> Verdict:
        """May this node vote now? (Cheap: no I/O.)"""
        return self.guard.verdict(self.reading())

    async def check(
        self, read_store_ms: Callable[[], int], run: Callable[[Callable[[], object]], Awaitable[object]]
    ) -> Verdict:
        """Probe the store's clock (through ``run``, the store worker) and start an NTP check if due.

        Raises whatever ``read_store_ms`` raises (``StoreUnavailable``), after
        telling the guard.
        """
        self._maybe_check_ntp()
        try:
            probe = await run(lambda: probe_store_time(self.clock, read_store_ms))
        except Exception as exc:
            self.guard.observe_store_unreachable(str(exc), self.reading())
            raise
        assert isinstance(probe, StoreTimeCheck)
        return self.guard.observe_store(probe, self.reading())

    def _maybe_check_ntp(self) -> None:
        if self._ntp_task is not None and not self._ntp_task.done():
            return
        if not self.guard.ntp_check_due(self.reading()):
            return
        if not self.servers:
            self.guard.observe_ntp(NtpCheck(NtpOutcome.UNAVAILABLE, ()), self.reading())
            return
        self._ntp_task = asyncio.ensure_future(self._check_ntp())

    async def _check_ntp(self) -> None:
        reports = await self._query_ntp(self.servers, self.clock)
        check = assess_ntp(reports, max_root_distance_ms=self.guard.policy.max_root_distance_ms)
        self.guard.observe_ntp(check, self.reading())

    def close(self) -> None:
        if self._ntp_task is not None:
            self._ntp_task.cancel()
