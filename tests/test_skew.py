"""The skew guard's pure logic: bound, rejection rules, agreement, trust decision, jumps."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum_cron.clock.base import ManualClock
from quorum_cron.clock.skew import (
    ClockError,
    ClockGuard,
    ClockReading,
    NtpCheck,
    NtpOutcome,
    NtpSample,
    ServerReport,
    StoreTimeCheck,
    Trust,
    TrustPolicy,
    UnreachablePolicy,
    agree,
    assess_ntp,
    best_sample,
    detect_jump,
    error_bound_ms,
    rejection_reason,
    root_distance_ms,
    uncertainty_ms,
)

T0 = 1_800_000_000_000  # an epoch-ms wall reading


def sample(**changes: object) -> NtpSample:
    """A good sample (offset 0, delay 10 ms, root distance 2 ms), with ``changes``."""
    base = NtpSample(
        server="ntp-a",
        offset_ms=0.0,
        delay_ms=10.0,
        root_delay_ms=2.0,
        root_dispersion_ms=1.0,
        stratum=2,
        leap=0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def check_of(*samples: NtpSample) -> NtpCheck:
    """An NTP check with one report per sample's server."""
    by_server: dict[str, list[NtpSample]] = {}
    for s in samples:
        by_server.setdefault(s.server, []).append(s)
    return assess_ntp([ServerReport(name, tuple(got)) for name, got in by_server.items()])


UNAVAILABLE = assess_ntp([ServerReport("ntp-a", failures=("no reply within 1 s",))])

ms_values = st.floats(min_value=0, max_value=1e6, allow_nan=False)
offsets = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


# -- the bound -----------------------------------------------------------------


def test_error_bound_is_abs_offset_plus_half_delay_plus_root_distance() -> None:
    s = sample(offset_ms=-5003.0, delay_ms=18.0, root_delay_ms=4.0, root_dispersion_ms=1.0)
    assert root_distance_ms(s) == 3.0
    assert uncertainty_ms(s) == 12.0
    assert error_bound_ms(s) == 5015.0


@given(offset=offsets, delay=ms_values, root_delay=ms_values, dispersion=ms_values)
def test_error_bound_properties(offset: float, delay: float, root_delay: float, dispersion: float) -> None:
    s = sample(offset_ms=offset, delay_ms=delay, root_delay_ms=root_delay, root_dispersion_ms=dispersion)
    bound = error_bound_ms(s)
    assert bound >= abs(offset)
    assert bound >= uncertainty_ms(s)
    assert bound == error_bound_ms(dataclasses.replace(s, offset_ms=-offset))
    # Any true offset inside the sample's interval is within the bound.
    for true in (offset - uncertainty_ms(s), offset, offset + uncertainty_ms(s)):
        assert abs(true) <= bound * (1 + 1e-12)
    # More delay or a worse server never shrinks the bound.
    assert error_bound_ms(dataclasses.replace(s, delay_ms=delay + 1)) >= bound
    assert error_bound_ms(dataclasses.replace(s, root_dispersion_ms=dispersion + 1)) >= bound


# -- rejection rules: each one alone turns a trustworthy reply into nothing ------


def _trusted_alone(s: NtpSample) -> bool:
    guard = ClockGuard(TrustPolicy(require_store_check=False))
    return guard.observe_ntp(check_of(s), ClockReading(T0, 0)).trusted


def test_the_baseline_sample_is_trusted() -> None:
    assert rejection_reason(sample()) is None
    assert _trusted_alone(sample())


@pytest.mark.parametrize("stratum", [0, 16, 17, 255])
def test_unsynchronised_stratum_is_rejected(stratum: int) -> None:
    s = sample(stratum=stratum)
    assert rejection_reason(s) == f"stratum {stratum}: server unsynchronised"
    assert not _trusted_alone(s)


@pytest.mark.parametrize("stratum", [1, 15])
def test_stratum_1_to_15_is_accepted(stratum: int) -> None:
    assert rejection_reason(sample(stratum=stratum)) is None


def test_leap_indicator_3_is_rejected() -> None:
    s = sample(leap=3)
    assert rejection_reason(s) == "leap indicator 3: server unsynchronised"
    assert not _trusted_alone(s)


@pytest.mark.parametrize("leap", [0, 1, 2])
def test_leap_warnings_are_accepted(leap: int) -> None:
    assert rejection_reason(sample(leap=leap)) is None


def test_root_distance_over_one_second_is_rejected() -> None:
    # root distance = 1900/2 + 60 = 1010 ms; the offset itself is perfect.
    s = sample(root_delay_ms=1900.0, root_dispersion_ms=60.0)
    assert rejection_reason(s) == "root distance 1010 ms > 1000 ms"
    # Still within a generous max skew, so only the rule keeps it out.
    guard = ClockGuard(TrustPolicy(max_skew_ms=5000, require_store_check=False))
    assert not guard.observe_ntp(check_of(s), ClockReading(T0, 0)).trusted


def test_root_distance_of_exactly_one_second_is_accepted() -> None:
    assert rejection_reason(sample(root_delay_ms=1000.0, root_dispersion_ms=500.0)) is None


def test_root_distance_limit_is_configurable() -> None:
    s = sample(root_delay_ms=100.0, root_dispersion_ms=60.0)  # 110 ms
    assert rejection_reason(s, max_root_distance_ms=100) == "root distance 110 ms > 100 ms"


def test_negative_delay_is_rejected() -> None:
    s = sample(delay_ms=-5.0)
    assert rejection_reason(s) == "negative delay -5.0 ms: impossible timestamps"
    assert not _trusted_alone(s)


def test_rejected_replies_make_ntp_unavailable_with_the_reason() -> None:
    check = check_of(sample(stratum=16), sample(leap=3))
    assert check.outcome is NtpOutcome.UNAVAILABLE
    assert check.evidence() == "ntp-a: leap indicator 3: server unsynchronised"


# -- best of k ---------------------------------------------------------------------


def test_best_sample_is_the_accepted_one_with_lowest_delay() -> None:
    fast_but_unsynced = sample(delay_ms=1.0, leap=3, offset_ms=900.0)
    slow = sample(delay_ms=40.0, offset_ms=30.0)
    fast = sample(delay_ms=5.0, offset_ms=2.0)
    best, rejected = best_sample([slow, fast_but_unsynced, fast])
    assert best == fast
    assert [r.sample for r in rejected] == [fast_but_unsynced]


def test_best_sample_of_nothing() -> None:
    assert best_sample([]) == (None, ())


@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=8))
def test_best_sample_has_minimal_delay(delays: list[float]) -> None:
    best, _ = best_sample([sample(delay_ms=d, offset_ms=float(i)) for i, d in enumerate(delays)])
    assert best is not None
    assert best.delay_ms == min(delays)
    assert best.offset_ms == delays.index(min(delays))  # first on ties


# -- agreement ----------------------------------------------------------------------


def test_agree_all_intersect() -> None:
    assert agree([(-10, 10), (-5, 15), (0, 20)]) == (0, 10, 3)


def test_agree_majority_ignores_the_falseticker() -> None:
    assert agree([(-10, 10), (5000, 5020), (-5, 15)]) == (-5, 10, 2)


def test_agree_no_majority() -> None:
    assert agree([(0, 1), (5, 6)]) is None
    assert agree([(0, 1), (0, 1), (5, 6), (5, 6)]) is None  # 2 of 4 is not a majority
    assert agree([]) is None


def test_agree_touching_intervals_intersect() -> None:
    assert agree([(0, 5), (5, 10)]) == (5, 5, 2)


def test_agree_single_interval() -> None:
    assert agree([(-3, 4)]) == (-3, 4, 1)


def test_agree_refuses_an_inverted_interval() -> None:
    with pytest.raises(ValueError, match="low > high"):
        agree([(3, 1)])


@st.composite
def honest_majority(draw: st.DrawFn) -> tuple[float, list[tuple[float, float]]]:
    """A true offset, and intervals of which a majority contain it (the rest lie far away)."""
    truth = draw(st.floats(min_value=-1000, max_value=1000))
    honest = draw(st.integers(min_value=1, max_value=5))
    liars = draw(st.integers(min_value=0, max_value=honest - 1))
    intervals = []
    for _ in range(honest):
        below = draw(st.floats(min_value=0, max_value=100))
        above = draw(st.floats(min_value=0, max_value=100))
        intervals.append((truth - below, truth + above))
    for _ in range(liars):
        centre = draw(st.floats(min_value=2000, max_value=10_000)) * draw(st.sampled_from([-1, 1]))
        width = draw(st.floats(min_value=0, max_value=100))
        intervals.append((truth + centre - width, truth + centre + width))
    return truth, draw(st.permutations(intervals))


@given(honest_majority())
def test_agreement_contains_the_truth_when_honest_servers_are_a_majority(
    case: tuple[float, list[tuple[float, float]]],
) -> None:
    truth, intervals = case
    found = agree(intervals)
    assert found is not None
    low, high, count = found
    assert low <= truth <= high
    assert count * 2 > len(intervals)


@given(st.lists(st.tuples(offsets, ms_values), min_size=1, max_size=7), st.randoms(use_true_random=False))
def test_agreement_is_order_independent_and_backed_by_a_majority(
    centres: list[tuple[float, float]], rnd: object
) -> None:
    intervals = [(c - w, c + w) for c, w in centres]
    shuffled = list(intervals)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    found = agree(intervals)
    assert found == agree(shuffled)
    if found is not None:
        low, high, count = found
        assert count * 2 > len(intervals)
        for point in (low, high):
            assert sum(lo <= point <= hi for lo, hi in intervals) >= count


def test_assess_ntp_reports_agreeing_servers_and_the_agreed_interval() -> None:
    check = check_of(
        sample(server="a", offset_ms=10.0, delay_ms=10.0, root_delay_ms=0.0, root_dispersion_ms=0.0),
        sample(server="b", offset_ms=14.0, delay_ms=10.0, root_delay_ms=0.0, root_dispersion_ms=0.0),
        sample(server="liar", offset_ms=5000.0, delay_ms=10.0, root_delay_ms=0.0, root_dispersion_ms=0.0),
    )
    assert check.outcome is NtpOutcome.AGREED
    assert check.agreeing == ("a", "b")
    assert (check.low_ms, check.high_ms) == (9.0, 15.0)
    assert check.offset_ms == 12.0
    assert check.bound_ms == 15.0
    assert "liar offset +5000 ms, delay 10 ms (disagrees, ignored)" in check.evidence()


def test_assess_ntp_unusable_servers_do_not_count_towards_the_majority() -> None:
    good = sample(server="a", offset_ms=3.0)
    check = assess_ntp(
        [
            ServerReport("a", (good,)),
            ServerReport("b", failures=("no reply within 1 s",)),
            ServerReport("c", (sample(server="c", stratum=16),)),
        ]
    )
    assert check.outcome is NtpOutcome.AGREED
    assert check.agreeing == ("a",)
    assert check.bound_ms == error_bound_ms(good)


# -- store TIME --------------------------------------------------------------------------


def test_store_time_check_from_readings() -> None:
    check = StoreTimeCheck.from_readings(T0, T0 + 5010, T0 + 10)
    assert check == StoreTimeCheck(offset_ms=5005.0, rtt_ms=10.0)
    assert check.bound_ms == 5010.0


def test_store_time_check_refuses_time_going_back() -> None:
    with pytest.raises(ClockError, match="went back 5 ms"):
        StoreTimeCheck.from_readings(T0, T0, T0 - 5)


@given(
    before=st.integers(0, 10**13),
    rtt=st.integers(0, 10_000),
    where=st.floats(0, 1),
    true_offset=st.integers(-(10**6), 10**6),
)
def test_store_bound_covers_the_true_offset(before: int, rtt: int, where: float, true_offset: int) -> None:
    """Whenever in the round trip the store read its clock, the bound covers the true offset."""
    store_ms = round(before + where * rtt) + true_offset
    check = StoreTimeCheck.from_readings(before, store_ms, before + rtt)
    assert abs(true_offset) <= check.bound_ms + 0.5  # + rounding of the store's reading


# -- jumps -------------------------------------------------------------------------------------


def test_detect_jump() -> None:
    a = ClockReading(T0, 1000)
    assert detect_jump(a, ClockReading(T0 + 1000, 2000), 250) is None
    assert detect_jump(a, ClockReading(T0 + 1250, 2000), 250) is None  # exactly max skew: not a jump
    assert detect_jump(a, ClockReading(T0 + 1251, 2000), 250) == 251
    assert detect_jump(a, ClockReading(T0 - 5000, 2000), 250) == -6000


# -- the guard ------------------------------------------------------------------------------------


class Node:
    """A guard on a ManualClock whose wall clock is ``true_offset_ms`` behind/ahead of true time."""

    def __init__(self, policy: TrustPolicy | None = None, *, wall: int = T0) -> None:
        self.clock = ManualClock(wall_ms=wall, monotonic_ms=1_000)
        self.guard = ClockGuard(policy or TrustPolicy())

    @property
    def now(self) -> ClockReading:
        return ClockReading.of(self.clock)

    def ntp(self, *samples: NtpSample) -> Trust:
        return self.guard.observe_ntp(check_of(*samples), self.now).trust

    def store(self, offset_ms: float, rtt_ms: float = 2.0) -> Trust:
        return self.guard.observe_store(StoreTimeCheck(offset_ms, rtt_ms), self.now).trust

    def verdict(self) -> str:
        return str(self.guard.verdict(self.now))

    def trust(self) -> Trust:
        return self.guard.verdict(self.now).trust


def test_nothing_observed_cannot_tell() -> None:
    node = Node()
    assert node.trust() is Trust.UNKNOWN
    assert node.verdict() == "clock trust unknown: no NTP check yet; no store TIME check yet"


def test_good_ntp_and_store_is_trusted_with_the_figures() -> None:
    node = Node()
    node.ntp(sample(offset_ms=3.0))
    assert node.store(2.0, rtt_ms=4.0) is Trust.TRUSTED
    assert node.verdict() == (
        "clock trusted: NTP bound 10 ms <= max skew 250 ms (ntp-a offset +3.0 ms, delay 10 ms); "
        "store TIME bound 4.0 ms <= max skew 250 ms (offset +2.0 ms, rtt 4.0 ms)"
    )


def test_ntp_bound_over_max_skew_is_not_trusted_and_says_why() -> None:
    node = Node(TrustPolicy(require_store_check=False))
    s = sample(
        server="pool.ntp.org", offset_ms=5003.0, delay_ms=18.0, root_delay_ms=0.0, root_dispersion_ms=0.0
    )
    assert node.ntp(s) is Trust.NOT_TRUSTED
    verdict = node.guard.verdict(node.now)
    assert str(verdict) == (
        "clock not trusted: NTP bound 5012 ms > max skew 250 ms (pool.ntp.org offset +5003 ms, delay 18 ms)"
    )
    assert verdict.ntp_bound_ms == 5012.0
    assert verdict.offset_ms == 5003.0
    assert verdict.as_info()["clock"] == "not trusted"
    assert verdict.as_info()["clock_offset_ms"] == "5003.0"


@pytest.mark.parametrize(("bound", "trusted"), [(250.0, True), (250.5, False)])
def test_ntp_bound_boundary(bound: float, trusted: bool) -> None:
    node = Node(TrustPolicy(require_store_check=False))
    node.ntp(sample(offset_ms=bound - 5.0, delay_ms=10.0, root_delay_ms=0.0, root_dispersion_ms=0.0))
    assert node.guard.verdict(node.now).trusted is trusted


@pytest.mark.parametrize(("offset", "trusted"), [(248.0, True), (-249.0, False), (300.0, False)])
def test_store_bound_decides_too(offset: float, trusted: bool) -> None:
    node = Node()
    node.ntp(sample())
    node.store(offset, rtt_ms=4.0)
    assert node.guard.verdict(node.now).trusted is trusted


def test_store_check_is_required_by_default() -> None:
    node = Node()
    assert node.ntp(sample()) is Trust.UNKNOWN
    assert node.verdict() == "clock trust unknown: no store TIME check yet"


def test_store_probe_failure_is_reported_and_last_good_probe_still_counts() -> None:
    node = Node()
    node.ntp(sample())
    node.guard.observe_store_unreachable("connection refused", node.now)
    assert (
        node.verdict()
        == "clock trust unknown: no store TIME check yet (last probe failed: connection refused)"
    )
    node.store(1.0)
    node.clock.advance(10_000)
    assert node.guard.observe_store_unreachable("timeout", node.now).trusted
    node.store(1.0)  # a good probe clears the failure
    node.clock.advance(60_000)
    assert node.verdict().endswith("store TIME check 60.0 s ago, older than the check interval 60 s")


def test_a_check_older_than_the_interval_no_longer_counts() -> None:
    node = Node()
    node.ntp(sample())
    node.clock.advance(30_000)
    node.store(1.0)
    node.clock.advance(29_999)
    assert node.trust() is Trust.TRUSTED
    node.clock.advance(1)
    assert node.trust() is Trust.UNKNOWN
    assert node.verdict() == (
        "clock trust unknown: last NTP check 60.0 s ago, older than the check interval 60 s"
    )
    node.ntp(sample())
    assert node.trust() is Trust.TRUSTED
    node.clock.advance(30_000)
    assert node.verdict() == (
        "clock trust unknown: last store TIME check 60.0 s ago, older than the check interval 60 s"
    )


def test_servers_that_disagree_cannot_tell() -> None:
    node = Node(TrustPolicy(require_store_check=False))
    trust = node.ntp(sample(server="a"), sample(server="b", offset_ms=4000.0))
    assert trust is Trust.UNKNOWN
    assert node.verdict().startswith("clock trust unknown: NTP servers disagree, no majority (a offset")


def test_ntp_unreachable_under_abstain_cannot_tell() -> None:
    node = Node(TrustPolicy(ntp_unreachable=UnreachablePolicy.ABSTAIN))
    node.store(1.0)
    assert node.guard.observe_ntp(UNAVAILABLE, node.now).trust is Trust.UNKNOWN
    assert node.verdict() == (
        "clock trust unknown: NTP unavailable (ntp-a: no reply within 1 s) and policy is abstain"
    )


def test_ntp_unreachable_under_store_time_trusts_the_store_alone() -> None:
    node = Node(TrustPolicy(ntp_unreachable=UnreachablePolicy.STORE_TIME, require_store_check=False))
    node.guard.observe_ntp(UNAVAILABLE, node.now)
    assert node.trust() is Trust.UNKNOWN  # the store check becomes required
    assert node.store(3.0) is Trust.TRUSTED
    assert (
        node.verdict()
        == "clock trusted: store TIME bound 4.0 ms <= max skew 250 ms (offset +3.0 ms, rtt 2.0 ms)"
    )
    assert node.store(5000.0) is Trust.NOT_TRUSTED


def test_ntp_unreachable_keeps_the_last_good_check_while_it_is_fresh() -> None:
    node = Node(TrustPolicy(require_store_check=False))
    node.ntp(sample())
    node.clock.advance(20_000)
    assert node.guard.observe_ntp(UNAVAILABLE, node.now).trusted
    node.clock.advance(40_000)  # the good check is now 60 s old
    assert "NTP unavailable" in node.verdict()
    assert node.trust() is Trust.UNKNOWN


def test_ntp_unreachable_does_not_hide_a_bad_measurement() -> None:
    node = Node(TrustPolicy(ntp_unreachable="store-time", require_store_check=False))  # type: ignore[arg-type]
    node.ntp(sample(offset_ms=4000.0))
    node.guard.observe_ntp(UNAVAILABLE, node.now)
    assert node.trust() is Trust.NOT_TRUSTED


def test_a_jump_drops_trust_until_the_next_good_checks() -> None:
    node = Node()
    node.ntp(sample())
    node.store(0.0)
    node.clock.advance(1_000)
    node.clock.jump(300)
    verdict = node.guard.verdict(node.now)
    assert verdict.trust is Trust.NOT_TRUSTED
    assert str(verdict) == (
        "clock not trusted: wall clock jumped +300 ms (more than max skew 250 ms) 0.0 s ago; "
        "waiting for the next good check"
    )
    assert node.guard.ntp_check_due(node.now)
    node.clock.advance(1_000)
    # After the jump the clock is 300 ms ahead: NTP sees offset -300.
    assert node.ntp(sample(offset_ms=-300.0)) is Trust.NOT_TRUSTED
    node.clock.jump(-300)  # the operator fixes it: another jump
    node.clock.advance(1_000)
    assert node.trust() is Trust.NOT_TRUSTED
    node.clock.advance(1_000)
    node.ntp(sample(offset_ms=0.0))
    assert node.trust() is Trust.NOT_TRUSTED  # the store check still predates the jump
    assert node.store(0.0) is Trust.TRUSTED


def test_a_measurement_on_the_reading_that_reveals_a_jump_does_not_count() -> None:
    node = Node(TrustPolicy(require_store_check=False))
    node.ntp(sample())
    node.clock.advance(1_000)
    node.clock.jump(-1_000)
    assert node.ntp(sample(offset_ms=1_000.0 - 5)) is Trust.NOT_TRUSTED
    assert "jumped -1000 ms" in node.verdict()
    node.clock.advance(1)
    assert node.ntp(sample()) is Trust.TRUSTED


def test_small_steps_add_up_in_the_bound() -> None:
    node = Node(TrustPolicy(require_store_check=False))
    node.ntp(sample(offset_ms=0.0))  # bound 7 ms
    node.clock.advance(1_000)
    node.clock.jump(200)  # under the jump threshold
    assert node.guard.observe_reading(node.now) is None
    assert node.verdict() == (
        "clock trusted: NTP bound 207 ms <= max skew 250 ms "
        "(ntp-a offset +0.0 ms, delay 10 ms, wall clock stepped +200 ms since)"
    )
    node.clock.advance(1_000)
    node.clock.jump(200)
    assert node.trust() is Trust.NOT_TRUSTED
    assert node.verdict().startswith("clock not trusted: NTP bound 407 ms > max skew 250 ms")


def test_one_ms_of_wall_vs_monotonic_difference_is_rounding() -> None:
    node = Node(TrustPolicy(require_store_check=False))
    node.ntp(sample())
    node.clock.jump(1)
    assert (
        node.verdict()
        == "clock trusted: NTP bound 7.0 ms <= max skew 250 ms (ntp-a offset +0.0 ms, delay 10 ms)"
    )


def test_an_older_reading_is_not_taken_for_a_jump() -> None:
    node = Node(TrustPolicy(require_store_check=False))
    old = node.now
    node.clock.advance(5_000)
    node.ntp(sample())
    assert node.guard.observe_reading(old) is None
    assert node.guard.verdict(node.now).trusted


def test_ntp_check_due() -> None:
    node = Node()
    assert node.guard.ntp_check_due(node.now)
    node.ntp(sample())
    assert not node.guard.ntp_check_due(node.now)
    node.clock.advance(44_999)
    assert not node.guard.ntp_check_due(node.now)
    node.clock.advance(1)
    assert node.guard.ntp_check_due(node.now)
    assert not node.guard.ntp_check_due(node.now, margin_ms=0)


def test_ntp_check_due_soon_after_a_check_that_did_not_agree() -> None:
    node = Node()
    node.guard.observe_ntp(UNAVAILABLE, node.now)
    node.clock.advance(9_999)
    assert not node.guard.ntp_check_due(node.now)
    node.clock.advance(1)
    assert node.guard.ntp_check_due(node.now)
    node.ntp(sample(server="a"), sample(server="b", offset_ms=4000.0))  # no majority
    node.clock.advance(10_000)
    assert node.guard.ntp_check_due(node.now)


def test_policy_validation() -> None:
    with pytest.raises(ClockError, match="invalid max skew 0 ms"):
        TrustPolicy(max_skew_ms=0)
    with pytest.raises(ClockError, match="invalid clock check interval -1 ms"):
        TrustPolicy(check_interval_ms=-1)
    with pytest.raises(ClockError, match="invalid ntp_unreachable policy 'panic'"):
        TrustPolicy(ntp_unreachable="panic")  # type: ignore[arg-type]
    assert TrustPolicy(ntp_unreachable="store-time").ntp_unreachable is UnreachablePolicy.STORE_TIME  # type: ignore[arg-type]


def test_exit_codes() -> None:
    assert [t.exit_code for t in (Trust.TRUSTED, Trust.NOT_TRUSTED, Trust.UNKNOWN)] == [0, 1, 2]


# -- the trust decision as a property ------------------------------------------------------


@settings(max_examples=200)
@given(
    truth=st.floats(min_value=-2000, max_value=2000),
    max_skew=st.integers(min_value=1, max_value=1000),
    servers=st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=200),  # delay
            st.floats(min_value=0, max_value=1),  # where in the round trip the server read its clock
            st.floats(min_value=0, max_value=50),  # root distance
            st.floats(min_value=-1, max_value=1),  # server error, as a fraction of its root distance
        ),
        min_size=1,
        max_size=5,
    ),
    store=st.tuples(st.floats(min_value=0, max_value=100), st.floats(min_value=0, max_value=1)),
)
def test_trusted_implies_the_true_offset_is_within_max_skew(
    truth: float,
    max_skew: int,
    servers: list[tuple[float, float, float, float]],
    store: tuple[float, float],
) -> None:
    """Honest measurements (errors inside their stated bounds): a TRUSTED verdict is never wrong."""
    samples = []
    for i, (delay, where, distance, error) in enumerate(servers):
        # Asymmetric paths put the measured offset anywhere within delay/2 of the truth;
        # the server's own error is within its root distance.
        measured = truth + (where - 0.5) * delay + error * distance
        samples.append(
            NtpSample(
                f"s{i}", measured, delay, root_delay_ms=0.0, root_dispersion_ms=distance, stratum=2, leap=0
            )
        )
    rtt, where = store
    node = Node(TrustPolicy(max_skew_ms=max_skew))
    node.ntp(*samples)
    verdict = node.guard.observe_store(StoreTimeCheck(truth + (where - 0.5) * rtt, rtt), node.now)
    if verdict.trusted:
        assert abs(truth) <= max_skew + 1e-6
    # And the converse for a single honest server: within max skew by its bound → trusted.
    if len(samples) == 1 and error_bound_ms(samples[0]) <= max_skew and abs(truth) + rtt <= max_skew:
        assert verdict.trusted
