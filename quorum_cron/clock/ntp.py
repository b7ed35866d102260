"""The skew guard's I/O: NTP queries over UDP and the store ``TIME`` probe.

Everything here measures and returns values for :mod:`quorum_cron.clock.skew` to
judge; nothing here decides trust.

An NTP query is one client packet (mode 3) and its server reply, parsed with
:mod:`ntplib`'s packet classes. The client side is written here rather than
through ``ntplib.NTPClient.request`` for three reasons:

* the originate and destination timestamps come from an injected
  :class:`~quorum_cron.clock.base.Clock`, so the measured offset is the offset of
  the clock the node actually votes with (``SystemClock`` in production,
  whatever libfaketime makes of it under test);
* the request carries a random transmit timestamp (RFC 9109) and a reply
  must echo it as its originate timestamp, so a stray or forged datagram is
  not taken for an answer;
* the socket is connected, so an ICMP "port unreachable" surfaces at once
  as "connection refused" instead of a timeout.

Failures never raise out of :func:`query_server`: they become
``ServerReport.failures`` lines naming the reason ("no reply within 1 s",
"connection refused", "host name does not resolve ..."), which the guard reports as
"NTP unavailable" under the configured policy.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import ntplib

from quorum_cron.clock.base import Clock, SystemClock
from quorum_cron.clock.servers import NTP_PORT, split_ntp_server
from quorum_cron.clock.skew import ClockError, NtpSample, ServerReport, StoreTimeCheck
from quorum_cron.errors import ConfigError

__all__ = [
    "DEFAULT_SAMPLES",
    "DEFAULT_SAMPLE_INTERVAL_S",
    "DEFAULT_TIMEOUT_S",
    "NTP_PORT",
    "NtpQueryError",
    "NtpServer",
    "aquery_servers",
    "probe_store_time",
    "query_once",
    "query_server",
    "query_servers",
]

DEFAULT_SAMPLES = 4
DEFAULT_TIMEOUT_S = 1.0
DEFAULT_SAMPLE_INTERVAL_S = 2.0
"""Pause between two queries to one server: public servers drop or kiss-o'-death
clients that ask more often than every 2 s (ntpd's ``discard minimum``)."""
MAX_SAMPLES = 64
_MAX_WORKERS = 16
_MAX_STRAY_REPLIES = 8
_PACKET_LEN = 48
_MODE_SERVER = 4


class NtpQueryError(ClockError):
    """One NTP query got no usable reply; the message is the reason."""


@dataclass(frozen=True, slots=True)
class NtpServer:
    """An NTP server address: host name or IP, and UDP port."""

    host: str
    port: int = NTP_PORT

    def __post_init__(self) -> None:
        if not self.host:
            raise ConfigError("NTP server host is empty: expected a host name or IP address")
        if not 0 < self.port < 65536:
            raise ConfigError(f"NTP server {self.host!r} port {self.port}: expected 1..65535")

    @classmethod
    def parse(cls, spec: str) -> NtpServer:
        """Read ``HOST``, ``HOST:PORT``, ``[IPV6]`` or ``[IPV6]:PORT`` (a bare IPv6 address works too)."""
        return cls(*split_ntp_server(spec))

    def __str__(self) -> str:
        if self.port == NTP_PORT:
            return self.host
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _ntp_seconds(wall_ms: int) -> float:
    return ntplib.system_to_ntp_time(wall_ms / 1000)  # type: ignore[no-any-return]


def query_once(
    server: NtpServer,
    *,
    clock: Clock | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    version: int = 4,
) -> NtpSample:
    """Send one NTP request and turn the reply into an :class:`NtpSample`.

    The sample is returned whatever its stratum or leap indicator: judging
    it is :func:`quorum_cron.clock.skew.rejection_reason`'s job.

    Raises:
        NtpQueryError: no reply, refused, unresolvable host, or a reply that
            is not an answer to this request.
    """
    if version not in (3, 4):
        raise ValueError(f"NTP version {version}: expected 3 or 4")
    clock = clock if clock is not None else SystemClock()
    try:
        family, _, _, _, address = socket.getaddrinfo(server.host, server.port, type=socket.SOCK_DGRAM)[0]
    except UnicodeError as exc:  # (IDNA: an empty or too long label, before any DNS query)
        raise NtpQueryError(f"host name is not valid ({exc})") from None
    except OSError as exc:
        # Every line that shows this names the server already; the resolver's own text comes
        # after, without "[Errno -2]": "Temporary failure" (DNS down) is worth telling apart.
        raise NtpQueryError(f"host name does not resolve (resolver: {exc.strerror or exc})") from None
    nonce = secrets.token_bytes(8)
    request = bytes([version << 3 | 3]) + bytes(39) + nonce
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(address)
            t1 = clock.wall_ms()
            sock.send(request)
            for _ in range(_MAX_STRAY_REPLIES):
                data = sock.recv(1024)
                if data[24:32] == nonce:
                    break
            else:
                raise NtpQueryError(f"{_MAX_STRAY_REPLIES} replies that do not answer this request")
            t4 = clock.wall_ms()
    except TimeoutError:
        raise NtpQueryError(f"no reply within {timeout_s:g} s") from None
    except ConnectionRefusedError:
        raise NtpQueryError("connection refused (nothing listening on that port)") from None
    except OSError as exc:
        raise NtpQueryError(exc.strerror or str(exc)) from None
    if len(data) < _PACKET_LEN:
        raise NtpQueryError(f"short reply: {len(data)} bytes, expected >= {_PACKET_LEN}")
    stats = ntplib.NTPStats()
    stats.from_data(data)
    if stats.mode != _MODE_SERVER:
        raise NtpQueryError(f"not a server reply: mode {stats.mode}, expected {_MODE_SERVER}")
    # The clock reads whole milliseconds: the request left in [t1, t1 + 1) and
    # the reply arrived in [t4, t4 + 1). Taking t4 + 1 makes the delay an upper
    # bound of the true round trip, and the offset the midpoint of what the
    # rounding allows, so delay/2 still covers the rounding error.
    stats.orig_timestamp = _ntp_seconds(t1)
    stats.dest_timestamp = _ntp_seconds(t4 + 1)
    return NtpSample(
        server=str(server),
        offset_ms=float(stats.offset) * 1000,
        delay_ms=float(stats.delay) * 1000,
        root_delay_ms=float(stats.root_delay) * 1000,
        root_dispersion_ms=float(stats.root_dispersion) * 1000,
        stratum=int(stats.stratum),
        leap=int(stats.leap),
    )


def query_server(
    server: NtpServer,
    *,
    samples: int = DEFAULT_SAMPLES,
    clock: Clock | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sample_interval_s: float = DEFAULT_SAMPLE_INTERVAL_S,
    version: int = 4,
    sleep: Callable[[float], None] = time.sleep,
) -> ServerReport:
    """Query ``server`` ``samples`` times, ``sample_interval_s`` apart; never raises for the network.

    A stratum-0 reply (kiss-o'-death, or a server that is not synchronised)
    ends the series early: the server asked us to back off.
    """
    if not 1 <= samples <= MAX_SAMPLES:
        raise ValueError(f"samples {samples}: expected 1..{MAX_SAMPLES}")
    got: list[NtpSample] = []
    failures: list[str] = []
    for i in range(samples):
        if i and sample_interval_s > 0:
            sleep(sample_interval_s)
        try:
            sample = query_once(server, clock=clock, timeout_s=timeout_s, version=version)
        except NtpQueryError as exc:
            failures.append(str(exc))
            continue
        got.append(sample)
        if sample.stratum == 0:
            break
    return ServerReport(server=str(server), samples=tuple(got), failures=tuple(failures))


def query_servers(
    servers: Sequence[NtpServer],
    *,
    samples: int = DEFAULT_SAMPLES,
    clock: Clock | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sample_interval_s: float = DEFAULT_SAMPLE_INTERVAL_S,
    version: int = 4,
) -> tuple[ServerReport, ...]:
    """Query every server concurrently (one thread each); reports in ``servers`` order."""
    if not servers:
        return ()

    def one(server: NtpServer) -> ServerReport:
        return query_server(
            server,
            samples=samples,
            clock=clock,
            timeout_s=timeout_s,
            sample_interval_s=sample_interval_s,
            version=version,
        )

    with ThreadPoolExecutor(max_workers=min(len(servers), _MAX_WORKERS)) as pool:
        return tuple(pool.map(one, servers))


async def aquery_servers(
    servers: Sequence[NtpServer],
    *,
    samples: int = DEFAULT_SAMPLES,
    clock: Clock | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sample_interval_s: float = DEFAULT_SAMPLE_INTERVAL_S,
    version: int = 4,
) -> tuple[ServerReport, ...]:
    """:func:`query_servers` off the event loop (``asyncio.to_thread``)."""
    return await asyncio.to_thread(
        query_servers,
        servers,
        samples=samples,
        clock=clock,
        timeout_s=timeout_s,
        sample_interval_s=sample_interval_s,
        version=version,
    )


def probe_store_time(clock: Clock, read_store_ms: Callable[[], int]) -> StoreTimeCheck:
    """Compare ``clock`` with the store's clock (``read_store_ms`` is e.g. ``store.time_ms``).

    The round trip is measured on the monotonic clock, so a wall-clock step
    during the probe cannot make it negative (jump detection catches the
    step). Exceptions from ``read_store_ms`` (``StoreUnavailable``) propagate.
    """
    wall_before = clock.wall_ms()
    mono_before = clock.monotonic_ms()
    store_ms = read_store_ms()
    rtt = clock.monotonic_ms() - mono_before
    return StoreTimeCheck(offset_ms=store_ms - (wall_before + rtt / 2), rtt_ms=float(rtt))
