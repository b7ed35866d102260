"""Throwaway local Redis Cluster and Sentinel sets (tests and benchmarks).

:class:`EmbeddedCluster` starts ``masters * (1 + replicas)`` ``redis-server
--cluster-enabled yes`` processes on free loopback ports and joins them with
``redis-cli --cluster create ... --cluster-replicas N --cluster-yes``;
:class:`EmbeddedSentinel` starts one master, its replicas and a set of
``redis-sentinel`` processes watching it. Both wait for readiness by polling
the servers' own reports (``CLUSTER INFO``, replication links, what each
sentinel knows) up to bounded deadlines, and both stop every process they
started — by the process they hold, SIGTERM then SIGKILL — on ``stop()``,
on leaving the ``with`` block, and on a failed start.

Nothing is persisted, everything binds to 127.0.0.1. A cluster node's bus
port is its port + 10000, so ports are chosen with both free.
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
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

from quorum_cron.embedded import EmbeddedRedisError, find_redis_server

__all__ = ["EmbeddedCluster", "EmbeddedSentinel", "ServerProc", "find_tool"]


def _cmd(client: redis.Redis, *args: Any) -> Any:
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


def _free_ports(n: int, *, bus: bool) -> list[int]:
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


def _await(
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
    """One server process the topology owns: its role name, port and process."""

    name: str
    port: int
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

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


class _Topology:
    """Process bookkeeping shared by the cluster and the sentinel set."""

    def __init__(self, prefix: str) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix=prefix)
        self.dir = Path(self._dir.name)
        self.servers: list[ServerProc] = []

    def _server(self, name: str, port: int, args: list[str]) -> ServerProc:
        proc = ServerProc(name, port, args, self.dir / f"{name}-{port}.log")
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


class EmbeddedCluster(_Topology):
    """A local Redis Cluster: ``masters`` shards with ``replicas`` replicas each.

    ``node_timeout_ms`` is the cluster's failure-detection time (a killed
    master's replica is promoted about that long after the kill).
    """

    def __init__(
        self,
        masters: int = 3,
        replicas: int = 1,
        *,
        node_timeout_ms: int = 1000,
        binary: str | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__("quorum-cron-cluster-")
        self.binary = binary or find_redis_server()
        self.cli = find_tool("redis-cli")
        self.masters_n = masters
        self.replicas_n = replicas
        self.node_timeout_ms = node_timeout_ms
        self.startup_timeout = startup_timeout

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]

    @property
    def url(self) -> str:
        """``redis+cluster://`` URL naming every node as a seed."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def __enter__(self) -> EmbeddedCluster:
        return self if self.servers else self.start()

    def start(self) -> EmbeddedCluster:
        """Start and join the nodes; a start that lost a port race is retried on new ports (3 times)."""
        for attempt in range(3):
            try:
                self._start()
                return self
            except EmbeddedRedisError as exc:
                self._stop_servers()
                lost_race = "taken by another process" in str(exc) or "not empty" in str(exc)
                if attempt == 2 or not lost_race:
                    self.stop()
                    raise
            except BaseException:
                self.stop()
                raise
        return self  # pragma: no cover - the loop returns or raises

    def _start(self) -> None:
        n = self.masters_n * (1 + self.replicas_n)
        for i, port in enumerate(_free_ports(n, bus=True)):
            d = self.dir / str(port)
            d.mkdir()
            args = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", str(d), "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", str(self.node_timeout_ms),
                    "--cluster-require-full-coverage", "no",
                    "--cluster-allow-reads-when-down", "no"]  # fmt: skip
            self._server(f"node{i}", port, args)
        for s in self.servers:
            _await(f"{s.name} to answer PING", s.ping, self.startup_timeout)
        cmd = [self.cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports)]
        cmd += ["--cluster-replicas", str(self.replicas_n), "--cluster-yes"]
        done = subprocess.run(cmd, capture_output=True, timeout=self.startup_timeout, check=False)
        if done.returncode != 0:
            raise EmbeddedRedisError(
                f"redis-cli --cluster create failed: {done.stdout.decode(errors='replace')[-600:]}"
            )
        self.await_healthy()

    def info(self, server: ServerProc) -> dict[str, Any]:
        c = server.client()
        try:
            raw = _cmd(c, "CLUSTER", "INFO")
        finally:
            c.close()
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return dict(line.split(":", 1) for line in text.split() if ":" in line)

    def roles(self) -> dict[int, str]:
        """Port -> ``master`` / ``slave`` for every running node, by its own ``ROLE``."""
        out = {}
        for s in self.servers:
            if s.running:
                c = s.client()
                try:
                    role = _cmd(c, "ROLE")[0]
                finally:
                    c.close()
                out[s.port] = role.decode() if isinstance(role, bytes) else str(role)
        return out

    def masters(self) -> list[ServerProc]:
        roles = self.roles()
        return [s for s in self.servers if roles.get(s.port) == "master"]

    def server(self, port: int) -> ServerProc:
        return next(s for s in self.servers if s.port == port)

    def await_healthy(self, timeout: float | None = None) -> None:
        """Every running node reports ``cluster_state:ok``; ``masters_n`` masters, replicas linked."""

        def healthy() -> bool:
            live = [s for s in self.servers if s.running]
            if not all(self.info(s).get("cluster_state") == "ok" for s in live):
                return False
            if len(self.masters()) != self.masters_n:
                return False
            for m in self.masters():
                c = m.client()
                try:
                    rep = c.info("replication")
                finally:
                    c.close()
                linked = [k for k, v in rep.items() if k.startswith("slave") and isinstance(v, dict)
                          and v.get("state") == "online"]  # fmt: skip
                if len(linked) < min(self.replicas_n, len(live) // self.masters_n - 1):
                    return False
            return all(self.info(s).get("cluster_known_nodes") == str(len(self.servers)) for s in live)

        _await("the cluster to be healthy", healthy, timeout or self.startup_timeout, 0.1)

    def master_of(self, key: str) -> ServerProc:
        """The running master that owns ``key``'s hash slot, as the nodes themselves say."""
        for s in self.masters():
            c = s.client()
            try:
                slot = int(_cmd(c, "CLUSTER", "KEYSLOT", key))
                for start, end, *_ in _cmd(c, "CLUSTER", "SLOTS"):
                    if int(start) <= slot <= int(end):
                        port = int(_[0][1])
                        return self.server(port)
            finally:
                c.close()
        raise EmbeddedRedisError(f"no running master owns the slot of {key!r}")

    def replica_of(self, master: ServerProc) -> ServerProc:
        c = master.client()
        try:
            my_id = _cmd(c, "CLUSTER", "MYID")
        finally:
            c.close()
        my_id = my_id.decode() if isinstance(my_id, bytes) else my_id
        for s in self.servers:
            if s.running and s is not master:
                c = s.client()
                try:
                    rep = c.info("replication")
                    nodes = _cmd(c, "CLUSTER", "NODES")
                finally:
                    c.close()
                text = nodes.decode() if isinstance(nodes, bytes) else str(nodes)
                mine = [ln for ln in text.splitlines() if "myself" in ln]
                if rep.get("role") == "slave" and mine and mine[0].split()[3] == my_id:
                    return s
        raise EmbeddedRedisError(f"no running replica of {master.name}")

    def migrate_slot(
        self,
        key: str,
        target: ServerProc,
        *,
        between: Callable[[], None] | None = None,
        moved: Callable[[], None] | None = None,
    ) -> int:
        """Move ``key``'s hash slot to ``target`` (a master), as ``redis-cli --cluster reshard`` does.

        ``between`` runs after the slot is marked MIGRATING/IMPORTING and
        before its keys move; ``moved`` after the keys moved (in one
        ``MIGRATE`` per 1000 keys) and before the slot is assigned to
        ``target`` (the source answers ASK for them meanwhile). Returns the
        slot.
        """
        source = self.master_of(key)
        if source is target:
            raise EmbeddedRedisError(f"{key!r} already lives on {target.name}")
        src, dst = source.client(), target.client()
        try:
            slot = int(_cmd(src, "CLUSTER", "KEYSLOT", key))
            src_id = _cmd(src, "CLUSTER", "MYID")
            dst_id = _cmd(dst, "CLUSTER", "MYID")
            _cmd(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            _cmd(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            if between is not None:
                between()
            while True:
                keys = _cmd(src, "CLUSTER", "GETKEYSINSLOT", slot, 1000)
                if not keys:
                    break
                _cmd(src, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
            if moved is not None:
                moved()
            for c in (dst, src):
                _cmd(c, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
            for m in self.masters():
                if m is not source and m is not target:
                    c = m.client()
                    try:
                        _cmd(c, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
                    finally:
                        c.close()
        finally:
            src.close()
            dst.close()
        return slot


FAILOVER_TIMEOUT_MS = 3000
"""The sentinels' ``failover-timeout``: a split leader election is retried after twice this."""


class EmbeddedSentinel(_Topology):
    """A master, ``replicas`` replicas and ``sentinels`` Sentinels (quorum 2) watching it as ``name``.

    ``down_after_ms``: how long a silent master takes to be judged down
    (the failover starts then).
    """

    def __init__(
        self,
        replicas: int = 2,
        sentinels: int = 3,
        *,
        name: str = "qc",
        down_after_ms: int = 2000,
        binary: str | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__("quorum-cron-sentinel-")
        self.binary = binary or find_redis_server()
        self.sentinel_binary = shutil.which("redis-sentinel")
        self.name = name
        self.replicas_n = replicas
        self.sentinels_n = sentinels
        self.down_after_ms = down_after_ms
        self.startup_timeout = startup_timeout
        self.data: list[ServerProc] = []
        self.sentinels: list[ServerProc] = []

    @property
    def url(self) -> str:
        """``redis+sentinel://`` URL naming every sentinel and the master name, DB 0."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.name}/0"

    def __enter__(self) -> EmbeddedSentinel:
        return self if self.servers else self.start()

    def start(self) -> EmbeddedSentinel:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _data_args(self, port: int) -> list[str]:
        d = self.dir / str(port)
        d.mkdir(exist_ok=True)
        return [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(d)]  # fmt: skip

    def _start(self) -> None:
        ports = _free_ports(1 + self.replicas_n + self.sentinels_n, bus=False)
        master_port = ports[0]
        self.data.append(self._server("master", master_port, self._data_args(master_port)))
        for i, port in enumerate(ports[1 : 1 + self.replicas_n]):
            args = [*self._data_args(port), "--replicaof", "127.0.0.1", str(master_port)]
            self.data.append(self._server(f"replica{i}", port, args))
        for s in self.data:
            _await(f"{s.name} to answer PING", s.ping, self.startup_timeout)
        for i, port in enumerate(ports[1 + self.replicas_n :]):
            conf = self.dir / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
                f"sentinel monitor {self.name} 127.0.0.1 {master_port} 2\n"
                f"sentinel down-after-milliseconds {self.name} {self.down_after_ms}\n"
                # A short failover timeout: when the sentinels' leader election splits
                # (each voted for itself), the failover is retried after twice this, so
                # 10 s (an election wait of 10 s, a retry after 20 s) could outlast a
                # test's bounded wait; on loopback a promotion takes milliseconds.
                f"sentinel failover-timeout {self.name} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {self.name} 1\n"
            )
            args = (
                [self.sentinel_binary, str(conf)]
                if self.sentinel_binary
                else [self.binary, str(conf), "--sentinel"]
            )
            self.sentinels.append(self._server(f"sentinel{i}", port, args))
        self.await_healthy()

    def sentinel_view(self, s: ServerProc) -> dict[str, Any]:
        c = s.client(decode_responses=True)
        try:
            raw = _cmd(c, "SENTINEL", "MASTER", self.name)
        finally:
            c.close()
        if isinstance(raw, dict):
            return raw
        return dict(zip(raw[::2], raw[1::2], strict=False))

    def master(self) -> ServerProc:
        """The data server every running sentinel names as master (raises while they disagree)."""
        ports = set()
        for s in self.sentinels:
            if s.running:
                view = self.sentinel_view(s)
                ports.add(int(view["port"]))
        if len(ports) != 1:
            raise EmbeddedRedisError(f"sentinels disagree on the master: {sorted(ports)}")
        port = ports.pop()
        return next(s for s in self.data if s.port == port)

    def await_healthy(self, timeout: float | None = None) -> None:
        """Every sentinel agrees on a running master, knows the other sentinels and the linked replicas."""
        live_replicas = sum(1 for s in self.data if s.running) - 1

        def healthy() -> bool:
            for s in self.sentinels:
                if not s.running:
                    continue
                v = self.sentinel_view(s)
                if "s_down" in v.get("flags", "") or "o_down" in v.get("flags", ""):
                    return False
                if int(v["num-other-sentinels"]) < self.sentinels_n - 1:
                    return False
                if int(v["num-slaves"]) < live_replicas:  # a failover needs a replica to promote
                    return False
            try:
                m = self.master()
            except EmbeddedRedisError:  # the sentinels do not agree yet
                return False
            if not m.running:
                return False
            c = m.client()
            try:
                rep = c.info("replication")
            finally:
                c.close()
            return rep.get("role") == "master" and int(rep.get("connected_slaves", 0)) >= live_replicas

        _await("the sentinel set to be healthy", healthy, timeout or self.startup_timeout, 0.1, self.describe)

    def describe(self) -> str:
        """What each sentinel and data server says (for failure messages)."""
        parts = []
        for s in self.sentinels:
            if s.running:
                v = self.sentinel_view(s)
                parts.append(f"{s.name}: master {v['port']} flags {v['flags']} "
                             f"others {v['num-other-sentinels']} replicas {v['num-slaves']}")  # fmt: skip
        for d in self.data:
            if d.running:
                c = d.client()
                try:
                    rep = c.info("replication")
                finally:
                    c.close()
                parts.append(f"{d.name}:{d.port} {rep.get('role')} replicas {rep.get('connected_slaves')}")
        for s in self.sentinels:  # the failover's steps as each sentinel logged them
            lines = s.tail().splitlines()
            events = [ln.split(" # ", 1)[-1] for ln in lines if "failover" in ln or "leader" in ln]
            if events:
                parts.append(f"{s.name} log: " + " | ".join(events[-6:]))
        return "; ".join(parts)

    def await_failover(self, old: ServerProc, timeout: float = 30.0) -> ServerProc:
        """Wait until every sentinel names a running master other than ``old``; return it."""
        found: list[ServerProc] = []

        def moved() -> bool:
            try:
                m = self.master()
            except EmbeddedRedisError:  # the sentinels do not agree yet
                return False
            if m is old or not m.running:
                return False
            c = m.client()
            try:
                if c.info("replication").get("role") != "master":
                    return False
            finally:
                c.close()
            found.append(m)
            return True

        _await(f"the sentinels to promote a replica of {old.name}", moved, timeout, 0.1, self.describe)
        return found[-1]
