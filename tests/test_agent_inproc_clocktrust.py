"""Clock trust (quorum_cron/agent/clocktrust.py) in-process, on a manual clock.

The store probe is the memory store's ``time_ms`` (its clock is set apart
from the node's to make an offset); NTP is a real exchange with the
loopback responder of ``tests/ntp_responder.py``, one sample per check
(the injected query), so a check takes milliseconds, not the 6 s of four
samples 2 s apart that public servers require.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

import pytest

from quorum_cron.agent.clocktrust import ClockTrust
from quorum_cron.clock.base import Clock, ManualClock
from quorum_cron.clock.ntp import NtpServer, aquery_servers
from quorum_cron.clock.skew import ServerReport, Trust
from quorum_cron.errors import StoreUnavailable
from tests.agent_inproc import T0
from tests.ntp_responder import Behaviour, NtpResponder


async def _inline(fn: Callable[[], object]) -> object:
    """The store worker's ``background``, without the thread: the probe runs where it is awaited."""
    return fn()


class StoreClock:
    """The store's clock: the node's, plus an offset; or down."""

    def __init__(self, node: ManualClock, offset_ms: int = 0) -> None:
        self.node = node
        self.offset_ms = offset_ms
        self.down = ""

    def __call__(self) -> int:
        if self.down:
            raise StoreUnavailable(self.down)
        return self.node.wall_ms() + self.offset_ms


def check(trust: ClockTrust, store: StoreClock) -> Trust:
    return asyncio.run(trust.check(store, _inline)).trust


def test_no_vote_before_the_first_store_check() -> None:
    trust = ClockTrust(ManualClock(wall_ms=T0), max_skew_ms=250)
    verdict = trust.verdict()
    assert verdict.trust is Trust.UNKNOWN and "no store TIME check yet" in verdict.reason


def test_a_store_clock_within_max_skew_is_trusted_and_one_beyond_is_not() -> None:
    clock = ManualClock(wall_ms=T0)
    trust = ClockTrust(clock, max_skew_ms=250)
    assert check(trust, StoreClock(clock, offset_ms=200)) is Trust.TRUSTED
    assert trust.verdict().offset_ms == 200
    assert check(trust, StoreClock(clock, offset_ms=-300)) is Trust.NOT_TRUSTED
    assert "store TIME bound 300 ms > max skew 250 ms" in trust.verdict().reason


def test_a_failed_probe_is_raised_and_named_while_the_last_good_one_still_counts() -> None:
    clock = ManualClock(wall_ms=T0)
    trust = ClockTrust(clock, max_skew_ms=250, check_interval_ms=10_000)
    store = StoreClock(clock)
    assert check(trust, store) is Trust.TRUSTED
    store.down = "connection refused"
    clock.advance(5_000)
    with pytest.raises(StoreUnavailable):
        check(trust, store)
    assert trust.verdict().trusted  # the probe of 5 s ago is still fresh
    clock.advance(5_000)
    verdict = trust.verdict()
    assert verdict.trust is Trust.UNKNOWN
    assert "older than the check interval" in verdict.reason
    assert "last probe failed: connection refused" in verdict.reason


def test_a_wall_clock_jump_withdraws_trust_until_the_next_good_check() -> None:
    clock = ManualClock(wall_ms=T0)
    trust = ClockTrust(clock, max_skew_ms=250)
    store = StoreClock(clock)
    assert check(trust, store) is Trust.TRUSTED
    clock.jump(2_000)  # the node's wall clock steps; the store's reading follows it here, so the next
    verdict = trust.verdict()  # probe agrees again: only the jump itself must cost trust
    assert verdict.trust is Trust.NOT_TRUSTED and "wall clock jumped +2000 ms" in verdict.reason
    clock.advance(1)
    assert check(trust, store) is Trust.TRUSTED


def test_without_ntp_servers_the_abstain_policy_never_trusts() -> None:
    clock = ManualClock(wall_ms=T0)
    trust = ClockTrust(clock, max_skew_ms=250, ntp_unreachable="abstain")
    assert check(trust, StoreClock(clock)) is Trust.UNKNOWN
    assert "policy is abstain" in trust.verdict().reason


Query = Callable[[Sequence[NtpServer], Clock], Awaitable[Sequence[ServerReport]]]


class OneSample:
    """The real NTP query, one sample per server; counts the checks and signals each one's end."""

    def __init__(self) -> None:
        self.calls = 0
        self.done = asyncio.Event()

    async def __call__(self, servers: Sequence[NtpServer], clock: Clock) -> Sequence[ServerReport]:
        self.calls += 1
        try:
            return await aquery_servers(servers, samples=1, sample_interval_s=0, clock=clock, timeout_s=5)
        finally:
            self.done.set()  # the check's verdict is recorded in the same step, before anyone else runs


def test_an_ntp_check_runs_beside_the_store_probe_and_its_bound_decides() -> None:
    clock = ManualClock(wall_ms=T0)
    with NtpResponder(Behaviour()) as ntp:  # real time: years after the node's clock

        async def main() -> None:
            query = OneSample()
            trust = ClockTrust(clock, max_skew_ms=250, ntp_servers=[ntp.address], query_ntp=query)
            await trust.check(StoreClock(clock), _inline)
            await asyncio.wait_for(query.done.wait(), 10)
            verdict = trust.verdict()
            assert verdict.trust is Trust.NOT_TRUSTED
            assert "NTP bound" in verdict.reason and "> max skew 250 ms" in verdict.reason
            assert verdict.offset_ms is not None and verdict.offset_ms > 3.6e6  # NTP's estimate is shown
            trust.close()

        asyncio.run(main())


def test_an_agreeing_ntp_check_is_not_repeated_within_the_interval_and_is_after_it() -> None:
    clock = ManualClock(wall_ms=T0)
    # The responder serves the node's clock (real time shifted to T0): offset ~ the real ms since now.
    with NtpResponder(Behaviour(offset_s=T0 / 1000 - time.time())) as ntp:

        async def main() -> None:
            query = OneSample()
            trust = ClockTrust(
                clock, max_skew_ms=5_000, ntp_servers=[ntp.address], check_interval_ms=60_000, query_ntp=query
            )
            store = StoreClock(clock)
            await trust.check(store, _inline)
            await asyncio.wait_for(query.done.wait(), 10)
            assert trust.verdict().trusted and trust.verdict().ntp_bound_ms is not None
            clock.advance(30_000)
            await trust.check(store, _inline)
            assert query.calls == 1  # the check of 30 s ago is still good
            clock.advance(20_000)  # within a quarter interval of expiring: checked again
            query.done.clear()
            await trust.check(store, _inline)
            await asyncio.wait_for(query.done.wait(), 10)
            assert query.calls == 2
            trust.close()

        asyncio.run(main())


def test_one_ntp_check_at_a_time_and_close_cancels_it() -> None:
    clock = ManualClock(wall_ms=T0)
    started = 0

    async def main() -> None:
        hung, entered, was_cancelled = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def never(servers: Sequence[NtpServer], clock: Clock) -> Sequence[ServerReport]:
            nonlocal started
            started += 1
            entered.set()
            try:
                await hung.wait()
            except asyncio.CancelledError:
                was_cancelled.set()
                raise
            return ()

        trust = ClockTrust(clock, max_skew_ms=250, ntp_servers=["127.0.0.1:9"], query_ntp=never)
        await trust.check(StoreClock(clock), _inline)
        await asyncio.wait_for(entered.wait(), 10)
        clock.advance(60_000)  # due again, but one is still running
        await trust.check(StoreClock(clock), _inline)
        assert started == 1
        trust.close()
        await asyncio.wait_for(was_cancelled.wait(), 10)
        assert trust.verdict().trust is Trust.UNKNOWN  # never answered: no NTP evidence

    asyncio.run(main())
