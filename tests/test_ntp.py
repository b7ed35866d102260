"""NTP queries against a real UDP NTP server on loopback (tests/ntp_responder.py)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from quorum_cron.clock.base import ManualClock, SystemClock
from quorum_cron.clock.ntp import (
    NtpQueryError,
    NtpServer,
    aquery_servers,
    probe_store_time,
    query_once,
    query_server,
    query_servers,
)
from quorum_cron.clock.skew import NtpOutcome, NtpSample, assess_ntp, error_bound_ms, rejection_reason
from quorum_cron.errors import ConfigError
from tests.ntp_responder import Behaviour, NtpResponder

TOLERANCE_MS = 5.0  # loopback, same machine: the served offset is the true offset


def offset_within_bound(sample: NtpSample, expected_ms: float) -> bool:
    """NTP's own error bound: the true offset lies within ``offset ± delay / 2``.

    (On a loaded machine the responder thread can answer late on one leg;
    the round-trip delay grows with it, and so does the bound.)
    """
    return abs(sample.offset_ms - expected_ms) <= TOLERANCE_MS + sample.delay_ms / 2


@pytest.fixture
def ntp() -> Iterator[NtpResponder]:
    with NtpResponder() as responder:
        yield responder


def server(responder: NtpResponder) -> NtpServer:
    return NtpServer("127.0.0.1", responder.port)


@pytest.mark.parametrize("offset_s", [0.0, 1.5, -2.5, 5.0])
@pytest.mark.parametrize("version", [3, 4])
def test_offset_matches_what_the_server_serves(ntp: NtpResponder, offset_s: float, version: int) -> None:
    ntp.configure(offset_s=offset_s)
    s = query_once(server(ntp), version=version)
    assert offset_within_bound(s, offset_s * 1000), s
    assert 0 <= s.delay_ms < 1_000  # (loopback: a responder woken late adds to it; sanity only)
    assert (s.stratum, s.leap) == (2, 0)
    assert s.root_delay_ms == pytest.approx(1.0, abs=0.1)
    assert s.root_dispersion_ms == pytest.approx(1.0, abs=0.1)
    assert s.server == f"127.0.0.1:{ntp.port}"
    assert abs(offset_s * 1000) <= error_bound_ms(s) + 1


def test_network_delay_is_measured_and_bounds_an_asymmetric_path(ntp: NtpResponder) -> None:
    ntp.configure(offset_s=0.2, delay_in_s=0.06, delay_out_s=0.0)
    s = query_once(server(ntp))
    assert 60 <= s.delay_ms < 60 + 1_000
    # The 60 ms inbound leg shifts the measured offset by 30 ms; a responder woken late shifts it
    # by up to half what it adds to the delay (not a fixed margin: that failed on a loaded machine).
    late = s.delay_ms - 60
    assert 230 - TOLERANCE_MS <= s.offset_ms <= 230 + late / 2 + TOLERANCE_MS, s
    assert s.offset_ms - s.delay_ms / 2 <= 200 <= s.offset_ms + s.delay_ms / 2


def test_the_injected_clock_is_the_one_measured(ntp: NtpResponder) -> None:
    class Ahead(SystemClock):
        def wall_ms(self) -> int:
            return super().wall_ms() + 10_000

    s = query_once(server(ntp), clock=Ahead())
    assert offset_within_bound(s, -10_000), s


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ({"stratum": 16}, "stratum 16: server unsynchronised"),
        ({"stratum": 0}, "stratum 0: server unsynchronised"),
        ({"leap": 3}, "leap indicator 3: server unsynchronised"),
        ({"root_dispersion_s": 1.2}, "root distance 1201 ms > 1000 ms"),
        ({"root_delay_s": 1.8, "root_dispersion_s": 0.2}, "root distance 1100 ms > 1000 ms"),
    ],
)
def test_unsynchronised_replies_are_rejected(
    ntp: NtpResponder, behaviour: dict[str, float], reason: str
) -> None:
    ntp.configure(**behaviour)
    report = query_server(server(ntp), samples=2, sample_interval_s=0)
    assert report.samples
    assert rejection_reason(report.samples[0]) == reason
    check = assess_ntp([report])
    assert check.outcome is NtpOutcome.UNAVAILABLE
    assert reason in check.evidence()


def test_kiss_of_death_ends_the_series(ntp: NtpResponder) -> None:
    ntp.configure(stratum=0)
    report = query_server(server(ntp), samples=4, sample_interval_s=0)
    assert len(report.samples) == 1
    assert ntp.requests == 1


def test_samples_are_spaced(ntp: NtpResponder) -> None:
    pauses: list[float] = []
    report = query_server(server(ntp), samples=3, sample_interval_s=2.0, sleep=pauses.append)
    assert len(report.samples) == 3
    assert pauses == [2.0, 2.0]


def test_silent_server_times_out(ntp: NtpResponder) -> None:
    ntp.configure(silent=True)
    report = query_server(server(ntp), samples=2, timeout_s=0.2, sample_interval_s=0)
    assert report.samples == ()
    assert report.failures == ("no reply within 0.2 s", "no reply within 0.2 s")
    check = assess_ntp([report])
    assert check.outcome is NtpOutcome.UNAVAILABLE
    assert check.evidence() == f"127.0.0.1:{ntp.port}: no reply within 0.2 s"


def test_closed_port_is_refused() -> None:
    with NtpResponder() as gone:
        port = gone.port
    with pytest.raises(NtpQueryError, match="connection refused"):
        query_once(NtpServer("127.0.0.1", port), timeout_s=2)


def test_unresolvable_host() -> None:
    # An empty label fails in the IDNA encoding, before any DNS traffic.
    with pytest.raises(NtpQueryError, match=r"^host name is not valid \(.+\)$"):
        query_once(NtpServer("bad..name"), timeout_s=0.5)


def test_a_reply_that_does_not_echo_our_request_is_not_an_answer(ntp: NtpResponder) -> None:
    ntp.configure(echo_origin=False)
    with pytest.raises(NtpQueryError, match=r"no reply within 0\.3 s"):
        query_once(server(ntp), timeout_s=0.3)
    assert ntp.wait_for_replies(1)


def test_a_reply_that_is_not_from_a_server_is_refused(ntp: NtpResponder) -> None:
    ntp.configure(mode=3)
    with pytest.raises(NtpQueryError, match="not a server reply: mode 3, expected 4"):
        query_once(server(ntp))


def _closed_udp_port() -> int:
    """A loopback UDP port nothing listens on (the kernel answers a query with port unreachable):
    one just bound and released, rather than a fixed port of the machine."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_query_servers_keeps_order_and_reports_every_server() -> None:
    with NtpResponder(Behaviour(offset_s=0.1)) as a, NtpResponder(Behaviour(offset_s=0.3)) as b:
        servers = [server(b), NtpServer("127.0.0.1", _closed_udp_port()), server(a)]
        # (3 s: time for the responder threads on a loaded machine; the closed port answers at once.)
        reports = query_servers(servers, samples=2, timeout_s=3.0, sample_interval_s=0)
        assert [r.server for r in reports] == [str(s) for s in servers]
        assert [len(r.samples) for r in reports] == [2, 0, 2]
        assert offset_within_bound(reports[0].samples[0], 300), reports[0]
        assert reports[1].failures
        async_reports = asyncio.run(aquery_servers(servers[:1], samples=1, sample_interval_s=0))
        assert offset_within_bound(async_reports[0].samples[0], 300), async_reports[0]


def test_query_servers_of_nothing() -> None:
    assert query_servers([]) == ()


@pytest.mark.parametrize(
    ("spec", "expected", "text"),
    [
        ("pool.ntp.org", NtpServer("pool.ntp.org", 123), "pool.ntp.org"),
        ("127.0.0.1:11123", NtpServer("127.0.0.1", 11123), "127.0.0.1:11123"),
        ("[::1]:5000", NtpServer("::1", 5000), "[::1]:5000"),
        ("[::1]", NtpServer("::1", 123), "::1"),
        ("2001:db8::1", NtpServer("2001:db8::1", 123), "2001:db8::1"),
        ("ntp_1.corp.example.", NtpServer("ntp_1.corp.example.", 123), "ntp_1.corp.example."),
    ],
)
def test_server_spec_parsing(spec: str, expected: NtpServer, text: str) -> None:
    assert NtpServer.parse(spec) == expected
    assert str(NtpServer.parse(spec)) == text


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("host:abc", "port 'abc' is not a number"),
        (":123", "expected HOST or HOST:PORT"),
        ("host:70000", "port '70000' is not a number from 1 to 65535"),
        ("time server", "'time server' is not a host name or IP address"),
        ("bad..name", "'bad..name' is not a host name"),
        ("-lead.example", "'-lead.example' is not a host name"),
        ("[not:an:ip]:123", "'not:an:ip' is not a host name or IP address"),
    ],
)
def test_server_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        NtpServer.parse(spec)


def test_probe_store_time_uses_the_monotonic_round_trip() -> None:
    clock = ManualClock(wall_ms=1_000_000, monotonic_ms=50)

    def store_time() -> int:
        clock.advance(8)  # the round trip
        clock.jump(-500)  # a wall step in the middle must not make the rtt negative
        return 1_005_004

    check = probe_store_time(clock, store_time)
    assert check.rtt_ms == 8.0
    assert check.offset_ms == 5000.0
