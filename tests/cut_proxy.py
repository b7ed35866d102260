"""A loopback TCP proxy in front of a real redis-server that makes Redis vanish at a chosen command.

The proxy forwards bytes both ways until a client sends a command holding
``marker`` (e.g. a unique ``--by``): that command goes through and its reply
comes back, and the *next* command any client sends finds Redis gone: its
connection is closed unanswered, and every later connection is closed as soon
as it opens (redis-py's one reconnect fails too). With ``drop_reply`` the
marked command itself reaches Redis and runs, but its reply is dropped and
the connection closed: the caller cannot tell whether it happened. With
``blip`` as well, Redis is back at once: the connection that lost the reply
is the only one closed, and redis-py's reconnect (and what it sends again)
goes through.

So a test names the exact point where the store disappears in the middle of a
command's calls, with no timing: no sleep-and-hope, no fake server.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

__all__ = ["CutProxy", "cut_proxy"]


class CutProxy:
    """See the module docstring; ``url`` is the proxy's ``redis://`` URL, ``cut`` set once Redis vanished."""

    def __init__(
        self, target_port: int, marker: bytes, *, drop_reply: bool = False, blip: bool = False
    ) -> None:
        self._target = ("127.0.0.1", target_port)
        self._marker = marker
        self._drop_reply = drop_reply
        self._blip = blip
        self._armed = False
        self.cut = threading.Event()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"

    def start(self) -> None:
        self._spawn(self._accept)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        self._listener.close()

    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            if self.cut.is_set() and not self._blip:
                client.close()  # Redis is gone: a reconnect is closed at once
                continue
            server = socket.create_connection(self._target)
            self._spawn(self._upstream, client, server)
            self._spawn(self._downstream, client, server)

    def _vanish(self, client: socket.socket, server: socket.socket) -> None:
        self.cut.set()
        self._hang_up(client, server)

    @staticmethod
    def _hang_up(client: socket.socket, server: socket.socket) -> None:
        """Close both ends (either side closing ends the pair: no thread is left reading)."""
        for s in (client, server):
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _upstream(self, client: socket.socket, server: socket.socket) -> None:
        """Client to Redis: the marked command passes (or passes and loses its reply); the next is cut."""
        try:
            while chunk := client.recv(65536):
                with self._lock:
                    if (self.cut.is_set() or self._armed) and not self._blip:
                        self._vanish(client, server)
                        return
                    if self._marker in chunk and not self.cut.is_set():
                        self._armed = True
                server.sendall(chunk)
        except OSError:
            pass
        self._hang_up(client, server)

    def _downstream(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while chunk := server.recv(65536):
                with self._lock:
                    if self._armed and self._drop_reply:  # (the marked command ran: its reply is lost)
                        self._armed = False
                        self._vanish(client, server)
                        return
                client.sendall(chunk)
        except OSError:
            pass
        self._hang_up(client, server)


@contextmanager
def cut_proxy(
    target_port: int, marker: bytes, *, drop_reply: bool = False, blip: bool = False
) -> Iterator[CutProxy]:
    proxy = CutProxy(target_port, marker, drop_reply=drop_reply, blip=blip)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.close()
