"""The process side of the embedded topologies: one server process, free ports, bounded polling.

What :mod:`.cluster` and :mod:`.sentinel` share, kept apart from either
topology's own readiness rules: starting, pinging (and checking that the
port is really ours), killing and stopping one ``redis-server`` /
``redis-sentinel`` process; choosing free loopback ports; polling a
readiness check up to a deadline; and :class:`Topology`, the bookkeeping
that stops every process a topology started and removes its directory.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

from quorum_cron.store.embedded.single import EmbeddedRedisError

__all__ = ["ServerProc", "Topology", "await_until", "command", "find_tool", "free_ports"]


def command(client: redis.Redis, *args: Any) -> Any:
    """One raw command (redis-py leaves ``execute_command`` untyped)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def find_tool(name: str) -> str:
    """Path of ``name`` (``redis-cli``, ``redis-sentinel``) on PATH, else :class:`EmbeddedRedisError`."""
    path = shutil.which(name)
    if path is None:
        raise EmbeddedRedisError(f"no {name} binary on PATH: install redis-tools / redis-sentinel")
    return path


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int, *, bus: bool) -> list[int]:
    """``n`` distinct free ports (with ``bus``: port + 10000 free as well)."""
    out: list[int] = []
    for _ in range(200 * n):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port in out or (bus and (port > 55_000 or not _port_free(port + 10_000))):
            continue
        out.append(port)
        if len(out) == n:
            return out
    raise EmbeddedRedisError(f"could not find {n} free loopback ports")


def await_until(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    interval: float = 0.05,
    describe: Callable[[], str] | None = None,
) -> None:
    """Poll ``check`` until true or ``timeout`` seconds passed (then raise naming ``what``)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (redis.RedisError, OSError) as exc:
            last = exc
        time.sleep(interval)  # poll interval, not a readiness guess
    state = ""
    if describe is not None:
        try:
            state = f"; state: {describe()}"
        except (redis.RedisError, OSError, EmbeddedRedisError) as exc:
            state = f"; state unknown: {exc}"
    raise EmbeddedRedisError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last}){state}")


@dataclass
class ServerProc:
    """One server process the topology owns: its role name, port and process.

    ``password``: the server's ``requirepass``, used by :meth:`client` (and so
    by every readiness check) unless the caller passes its own.
    """

    name: str
    port: int
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def client(self, **kwargs: Any) -> redis.Redis:
        kwargs.setdefault("socket_timeout", 2.0)
        kwargs.setdefault("socket_connect_timeout", 1.0)
        kwargs.setdefault("password", self.password)
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def ping(self) -> bool:
        if not self.running:
            raise EmbeddedRedisError(f"{self.name} on port {self.port} exited: {self.tail()}")
        c = self.client()
        try:
            # Our process, not another one that won the port between choosing and binding.
            pid = int(c.info("server")["process_id"])
        finally:
            c.close()
        if self.proc is not None and pid != self.proc.pid:
            raise EmbeddedRedisError(f"port {self.port} of {self.name} is taken by another process")
        return True

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL: a crash) and reap the process."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self, timeout: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-600:]
        except OSError:
            return ""


class Topology:
    """Process bookkeeping shared by the cluster and the sentinel set."""

    def __init__(self, prefix: str) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix=prefix)
        self.dir = Path(self._dir.name)
        self.servers: list[ServerProc] = []

    def _server(self, name: str, port: int, args: list[str], password: str | None = None) -> ServerProc:
        proc = ServerProc(name, port, args, self.dir / f"{name}-{port}.log", password=password)
        self.servers.append(proc)
        proc.start()
        return proc

    def _stop_servers(self) -> None:
        for s in self.servers:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                s.stop()
        self.servers = []
        for d in self.dir.iterdir():
            with contextlib.suppress(OSError):
                shutil.rmtree(d) if d.is_dir() else d.unlink()

    def stop(self) -> None:
        """Stop every process started (idempotent) and remove the working directory."""
        self._stop_servers()
        with contextlib.suppress(OSError):
            self._dir.cleanup()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
