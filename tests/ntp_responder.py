"""A small NTP server for tests: real NTP v3/v4 packets on a loopback UDP port.

It answers client requests (mode 3) with a server reply (mode 4) built from
``time.time()`` plus a chosen offset, after a chosen network delay, with a
chosen stratum, leap indicator, root delay and root dispersion. Behaviour
can be changed while it runs (:meth:`NtpResponder.configure`); every reply
is counted so tests can wait for one instead of sleeping.

    with NtpResponder(Behaviour(offset_s=0.5)) as ntp:
        query_once(NtpServer("127.0.0.1", ntp.port))
"""

from __future__ import annotations

import dataclasses
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass
from types import TracebackType

__all__ = ["Behaviour", "NtpResponder"]

_NTP_DELTA = 2_208_988_800  # seconds from 1900-01-01 to 1970-01-01


@dataclass(frozen=True)
class Behaviour:
    """What the responder serves."""

    offset_s: float = 0.0
    """Added to the true time in the receive and transmit timestamps."""
    delay_in_s: float = 0.0
    """Simulated network delay before the request 'arrives' (stamped after it)."""
    delay_out_s: float = 0.0
    """Simulated network delay after the reply is stamped, before it is sent."""
    stratum: int = 2
    leap: int = 0
    root_delay_s: float = 0.001
    root_dispersion_s: float = 0.001
    mode: int = 4
    silent: bool = False
    """Drop requests (the client times out)."""
    echo_origin: bool = True
    """Copy the request's transmit timestamp into the reply (False: a bogus reply)."""


def _ntp_timestamp(unix_s: float) -> bytes:
    ntp = unix_s + _NTP_DELTA
    seconds = int(ntp)
    fraction = int((ntp - seconds) * 2**32) & 0xFFFFFFFF
    return struct.pack("!II", seconds, fraction)


def _short(value_s: float) -> int:
    """NTP short format (16.16 fixed point seconds)."""
    return max(0, min(0xFFFFFFFF, round(value_s * 2**16)))


class NtpResponder:
    """An NTP server on ``127.0.0.1:<free port>``, served from a daemon thread."""

    def __init__(self, behaviour: Behaviour | None = None, *, host: str = "127.0.0.1") -> None:
        self._behaviour = behaviour or Behaviour()
        self._lock = threading.Lock()
        self._replies = 0
        self._requests = 0
        self._replied = threading.Condition(self._lock)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, 0))
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name=f"ntp-responder-{self.port}", daemon=True)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def behaviour(self) -> Behaviour:
        with self._lock:
            return self._behaviour

    def configure(self, **changes: object) -> None:
        """Change what is served from now on, e.g. ``configure(stratum=16)``."""
        with self._lock:
            self._behaviour = dataclasses.replace(self._behaviour, **changes)  # type: ignore[arg-type]

    @property
    def replies(self) -> int:
        with self._lock:
            return self._replies

    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests

    def wait_for_replies(self, count: int, timeout_s: float = 5.0) -> bool:
        """Block until at least ``count`` replies were sent (bounded by ``timeout_s``)."""
        with self._replied:
            return self._replied.wait_for(lambda: self._replies >= count, timeout=timeout_s)

    def start(self) -> NtpResponder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._wake_w.send(b"x")
        self._thread.join(timeout=5)
        self._sock.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> NtpResponder:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _serve(self) -> None:
        while True:
            ready, _, _ = select.select([self._sock, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                data, peer = self._sock.recvfrom(1024)
            except OSError:
                return
            self._answer(data, peer)

    def _answer(self, data: bytes, peer: tuple[str, int]) -> None:
        with self._lock:
            self._requests += 1
            b = self._behaviour
        if len(data) < 48 or b.silent:
            return
        version = (data[0] >> 3) & 0x7
        if data[0] & 0x7 != 3:  # only client requests
            return
        if b.delay_in_s:
            time.sleep(b.delay_in_s)
        received = time.time() + b.offset_s
        origin = data[40:48] if b.echo_origin else b"\x00" * 7 + b"\x01"
        header = struct.pack(
            "!BBbbII4s",
            (b.leap & 0x3) << 6 | (version & 0x7) << 3 | (b.mode & 0x7),
            b.stratum,
            6,  # poll
            -20,  # precision ~ 1 us
            _short(b.root_delay_s),
            _short(b.root_dispersion_s),
            b"LOCL",
        )
        transmitted = time.time() + b.offset_s
        reply = (
            header
            + _ntp_timestamp(received - 16)  # reference timestamp: last "sync"
            + origin
            + _ntp_timestamp(received)
            + _ntp_timestamp(transmitted)
        )
        if b.delay_out_s:
            time.sleep(b.delay_out_s)
        self._sock.sendto(reply, peer)
        with self._replied:
            self._replies += 1
            self._replied.notify_all()
