"""Processes of one run: Redis servers, the proxy, and the nodes, each inside its namespace.

Every process is started through ``ip netns exec`` (which execs, so the pid
we hold is the program's own) in a session of its own, its output in a log
file of the run directory, and registered in :class:`Procs`, which kills
them all — by pid and process group, never by name — when the run ends,
fails or is interrupted. Each also gets ``PR_SET_PDEATHSIG``: if the
harness itself is SIGKILLed, the kernel kills them; the namespaces left
behind are removed by the next run (``netns.clean_stale``).

Redis runs with AOF (``appendfsync always``: the strict setting that
docs/operations.md recommends) and also listens on a Unix socket in the run
directory: the harness in the root namespace reads the ledger and promotes
the replica through that file, without any route into the namespaces.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import redis

from chaos.netns import Net

__all__ = ["SOCKETS", "SOCKET_PATH_MAX", "Procs", "RedisServer", "dir_too_long"]


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the harness dies, even by SIGKILL (Linux prctl)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


SOCKET_PATH_MAX = 107
"""The longest Unix socket path Linux binds (``sun_path`` is 108 bytes with its NUL)."""
SOCKETS = ("proxy.sock", "r1.sock", "r2.sock")
"""The Unix sockets a run puts in its directory (the proxy's control, each Redis server's)."""


def dir_too_long(workdir: Path) -> str | None:
    """Why ``workdir`` cannot hold the run's Unix sockets (its path is too long), or None."""
    longest = max(len(os.fsencode(workdir.absolute() / name)) for name in SOCKETS)
    if longest <= SOCKET_PATH_MAX:
        return None
    return (
        f"{workdir.absolute()}/proxy.sock would be {longest} bytes: expected a run directory whose "
        f"Unix sockets fit the {SOCKET_PATH_MAX} bytes Linux allows (a shorter --dir)"
    )


class Procs:
    """The processes of one run; :meth:`close` kills every one still alive (idempotent)."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.live: list[subprocess.Popen[bytes]] = []

    def start(
        self, name: str, cmd: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                list(cmd),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=dict(os.environ, **(env or {})),
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self.live.append(proc)
        return proc

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL ``proc`` and its process group (SIGCONT first, in case it is stopped); reap it.

        Nothing is sent to a process already reaped (a node killed by a fault and restarted, a
        Redis crashed on purpose, a node that exited and was polled): its pid is free, and the
        kernel may have given it to another process that leads a group of its own, which a
        ``killpg`` at the end of the run would kill. What such a process left in its group
        runs in the run's namespaces, which are emptied when they are deleted.
        """
        if proc.returncode is not None:
            return
        for sig in (signal.SIGCONT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)

    def close(self) -> None:
        for proc in self.live:
            self.kill(proc)
        self.live.clear()


class RedisServer:
    """One redis-server in namespace ``role`` with AOF, its data in ``workdir/role``."""

    PORT = 6379

    def __init__(self, net: Net, procs: Procs, role: str, workdir: Path, binary: str) -> None:
        self.net, self.procs, self.role, self.binary = net, procs, role, binary
        self.dir = workdir / role
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = workdir / f"{role}.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.replica_of: str | None = None

    @property
    def ip(self) -> str:
        return self.net.ip(self.role)

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=5)

    def start(self, replica_of: RedisServer | None = None, timeout: float = 15) -> None:
        self.replica_of = replica_of.ip if replica_of is not None else None
        cmd = [*self.net.exec_prefix(self.role), self.binary, "--bind", self.ip, "--port", str(self.PORT)]
        cmd += ["--protected-mode", "no", "--unixsocket", str(self.socket), "--unixsocketperm", "700"]
        cmd += ["--dir", str(self.dir), "--save", "", "--appendonly", "yes", "--appendfsync", "always"]
        # Redis 7 delays a diskless full sync by 5 s waiting for more replicas; there is one.
        cmd += ["--repl-diskless-sync-delay", "0"]
        if self.replica_of is not None:
            cmd += ["--replicaof", self.replica_of, str(self.PORT)]
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        self.proc = self.procs.start(f"redis-{self.role}", cmd)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server {self.role} exited with {self.proc.returncode} at start")
            with contextlib.suppress(redis.RedisError, OSError):
                c = self.client()
                try:
                    # A replica answers PING before its first sync; wait for the link.
                    if c.ping() and (
                        self.replica_of is None or c.info("replication").get("master_link_status") == "up"
                    ):
                        return
                finally:
                    c.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server {self.role} not ready after {timeout:.0f} s")
            time.sleep(0.05)

    def wait_replica_synced(self, timeout: float = 20) -> None:
        """Until this primary has a replica in state ``online`` (``WAIT`` can succeed again)."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(redis.RedisError, OSError):
                c = self.client()
                try:
                    info = c.info("replication")
                finally:
                    c.close()
                if any(
                    str(v).find("state=online") >= 0 or (isinstance(v, dict) and v.get("state") == "online")
                    for k, v in info.items()
                    if k.startswith("slave")
                ):
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server {self.role}: no replica online after {timeout:.0f} s")
            time.sleep(0.05)

    def crash(self) -> None:
        """SIGKILL: what survives is what the AOF holds."""
        if self.proc is not None:
            self.procs.kill(self.proc)
            self.proc = None

    def promote(self) -> None:
        """``REPLICAOF NO ONE``: this replica becomes a primary with the data it has."""
        c = self.client()
        try:
            c.execute_command("REPLICAOF", "NO", "ONE")  # type: ignore[no-untyped-call]
        finally:
            c.close()
        self.replica_of = None
