"""A cluster of real agent processes for the multi-process tests.

Each node is ``python -m quorum_cron agent`` with JSON logs on stderr; a
reader thread per node collects the log events, and tests wait for events
(or ledger entries, or ground-truth lines) with bounded deadlines through
:meth:`Cluster.wait` — never a sleep that hopes something happened.

Ground truth is what the jobs themselves append to a file
(``examples/record_slot.sh``): one ``start`` and one ``end`` line per run.

Faults are timed by the store's facts, not by the wall clock: a node is
killed, or Redis is, only while the store holds none of the slots the fault
could interrupt (:meth:`Cluster.between_slots`), and a test's checked window
opens at a slot the ledger shows succeeded for every job
(:meth:`Cluster.running_since`), not some time after the nodes joined.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import redis

from quorum_cron.store.base import LedgerEntry, SlotState, SlotView
from quorum_cron.store.embedded.single import find_redis_server
from quorum_cron.store.redis import RedisStore

__all__ = [
    "IN_FLIGHT",
    "RECORD",
    "Cluster",
    "JobLine",
    "Node",
    "OwnedRedis",
    "free_port",
    "job_toml",
    "never_during_the_test",
]

RECORD = Path(__file__).resolve().parent.parent / "examples" / "record_slot.sh"
T = TypeVar("T")
IN_FLIGHT = frozenset({SlotState.PROPOSED, SlotState.COMMITTED, SlotState.RUNNING})
"""Slot states a fault can interrupt: votes stored without a decision, a commit not started, a run."""
LOOK_MS = 120_000
"""How far around now :meth:`Cluster.in_flight` looks for slots (the tests' slots are seconds apart)."""
AGENT = [sys.executable, "-m", "quorum_cron.agent"]


@dataclass(frozen=True)
class JobLine:
    """One ground-truth line written by ``record_slot.sh``."""

    kind: str
    job: str
    slot: int
    token: int
    node: str
    pid: int
    mark: str


@dataclass
class Node:
    name: str
    proc: subprocess.Popen[bytes]
    events: list[dict[str, object]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        """The agent's own pid: under a wrapper (``faketime``) it is the wrapper's child."""
        for e in self.logged("joined"):
            if isinstance(e.get("pid"), int):
                return int(str(e["pid"]))
        return self.proc.pid

    def logged(self, event: str, **match: object) -> list[dict[str, object]]:
        return [
            e
            for e in list(self.events)
            if e.get("event") == event and all(e.get(k) == v for k, v in match.items())
        ]


def never_during_the_test() -> str:
    """A yearly schedule whose fire time is about six months away in every zone.

    A fixed "never" (``0 0 1 1 *``, ``@yearly``) fires on New Year in some zone: a test that ran
    then saw a slot it did not expect. Midnight of the 1st of the month five to six months ahead
    cannot come during a test, whatever the day it runs.
    """
    month = time.gmtime().tm_mon
    return f"0 0 1 {(month + 5) % 12 + 1} *"


def job_toml(name: str, schedule: str, out: Path, *, secs: float = 0, mark: str = "-", **opts: str) -> str:
    """A ``[[jobs]]`` table running ``record_slot.sh`` (extra options as TOML strings)."""
    lines = [
        "[[jobs]]",
        f'name = "{name}"',
        f'schedule = "{schedule}"',
        f'command = ["{RECORD}", "{out}", "{secs:g}", "{mark}"]',
    ]
    lines += [f"{k} = {v}" for k, v in opts.items()]
    return "\n".join(lines) + "\n"


class Cluster:
    """N agent processes sharing one Redis and one ground-truth file."""

    def __init__(
        self,
        tmp: Path,
        redis_url: str,
        size: int,
        *,
        namespace: str = "t",
        cluster_opts: str = "",
    ) -> None:
        self.tmp = tmp
        self.redis_url = redis_url
        self.size = size
        self.namespace = namespace
        self.cluster_opts = cluster_opts
        self.out = tmp / "ran.log"
        self.out.touch()
        self.nodes: dict[str, Node] = {}
        self._cond = threading.Condition()
        self._store: RedisStore | None = None

    # -- config and processes ------------------------------------------------

    def config(self, jobs: str, *, name: str = "cluster.toml", extra: str = "") -> Path:
        """A config file for this cluster; ``extra``: more ``[cluster]`` lines (alerts...)."""
        path = self.tmp / name
        path.write_text(
            "[cluster]\n"
            f'name = "{self.namespace}"\n'
            f"size = {self.size}\n"
            f'redis_url = "{self.redis_url}"\n'
            'heartbeat = "500ms"\n'
            'ntp_unreachable = "store-time"\n'
            f"{self.cluster_opts}\n{extra}\n\n{jobs}"
        )
        return path

    def start(
        self,
        name: str,
        config: Path,
        *extra: str,
        wrap: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> Node:
        """Start agent ``name``; ``wrap`` prefixes the command (e.g. ``faketime``), ``env`` adds variables."""
        cmd = [*wrap, *AGENT, "--config", str(config), "--node-id", name]
        cmd += ["--log-json", *extra]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=dict(os.environ, PYTHONUNBUFFERED="1", NO_PROXY="127.0.0.1,localhost", **(env or {})),
            start_new_session=True,
        )
        node = Node(name, proc)
        self.nodes[name] = node
        threading.Thread(target=self._read, args=(node,), daemon=True).start()
        return node

    def _read(self, node: Node) -> None:
        assert node.proc.stderr is not None
        for raw in iter(node.proc.stderr.readline, b""):
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            with self._cond:
                try:
                    doc = json.loads(text)
                except ValueError:
                    doc = None
                if isinstance(doc, dict):
                    node.events.append(doc)
                else:
                    node.text.append(text)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait(self, what: str, check: Callable[[], T | None], timeout: float, poll: float = 0.2) -> T:
        """Wait until ``check()`` returns something truthy (woken by log lines, polled for the rest)."""
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{self.describe()}")
            with self._cond:
                self._cond.wait(min(poll, left))

    def wait_joined(self, names: Iterable[str], timeout: float = 30) -> None:
        names = list(names)
        self.wait(
            f"{names} to join",
            lambda: all(self.nodes[n].logged("joined") for n in names) or self._dead(names),
            timeout,
        )
        assert not self._dead(names), self.describe()

    def _dead(self, names: list[str]) -> bool:
        return any(self.nodes[n].proc.poll() is not None for n in names)

    def signal(self, name: str, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.nodes[name].pid, sig)

    def stop(self, names: Iterable[str] | None = None, timeout: float = 20) -> dict[str, int]:
        """SIGTERM the nodes, wait for them; returns exit codes."""
        chosen = [self.nodes[n] for n in (names or list(self.nodes))]
        for n in chosen:
            if n.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(n.pid, signal.SIGCONT)
                    os.kill(n.pid, signal.SIGTERM)
        codes = {}
        for n in chosen:
            try:
                codes[n.name] = n.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                n.proc.kill()
                codes[n.name] = n.proc.wait()
        return codes

    def close(self) -> None:
        for n in self.nodes.values():
            if n.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    # The agent's session: a wrapper and its child (jobs run in sessions of their own).
                    os.killpg(n.proc.pid, signal.SIGCONT)
                    os.killpg(n.proc.pid, signal.SIGKILL)
                n.proc.wait()
        if self._store is not None:
            self._store.close()

    def describe(self) -> str:
        parts = []
        for n in self.nodes.values():
            tail = [json.dumps(e) for e in n.events[-12:]] + n.text[-8:]
            parts.append(f"--- {n.name} (exit {n.proc.poll()}):\n" + "\n".join(tail))
        return "\n".join(parts)

    # -- ground truth and ledger ---------------------------------------------

    def lines(self, kind: str = "start", job: str | None = None) -> list[JobLine]:
        out = []
        for raw in self.out.read_text().splitlines():
            p = raw.split()
            if len(p) == 7 and p[0] == kind and (job is None or p[1] == job):
                out.append(JobLine(p[0], p[1], int(p[2]), int(p[3]), p[4], int(p[5]), p[6]))
        return out

    @property
    def store(self) -> RedisStore:
        if self._store is None:
            self._store = RedisStore.from_url(self.redis_url, self.namespace, socket_timeout=5.0)
        return self._store

    def ledger(self, job: str) -> dict[int, LedgerEntry]:
        """Each slot's latest ledger entry (a retried slot also has earlier ``retrying`` entries)."""
        return {e.fire_ms: e for e in reversed(self.store.ledger(job, 10_000))}

    def succeeded(self, job: str) -> set[int]:
        return {t for t, e in self.ledger(job).items() if e.state == SlotState.SUCCEEDED}

    def running_since(self, jobs: Iterable[str], timeout: float = 30) -> int:
        """The fire time after which every job has run: the latest of the jobs' first
        succeeded slots, once each has one.

        A node that logged ``joined`` may still be a second or two from its first vote on a
        loaded machine (its first tick reads the high-water marks first), so "every node
        joined" does not make the next slot runnable; a succeeded ledger entry for every job
        shows a quorum voting and an executor starting jobs.
        """
        names = list(jobs)

        def check() -> int | None:
            firsts = []
            for job in names:
                done = self.succeeded(job)
                if not done:
                    return None
                firsts.append(min(done))
            return max(firsts)

        return self.wait(f"every job of {names} to succeed once", check, timeout)

    def in_flight(self, jobs: Iterable[str], node: str | None = None) -> list[SlotView]:
        """Slots of ``jobs`` (fire times within :data:`LOOK_MS` of now) that the store holds in
        :data:`IN_FLIGHT`; with ``node``, only those it could still take part in: proposed with
        its vote (the vote may complete a quorum that assigns it the slot), or committed to it,
        or running on it.

        Each job's slots are read twice and the second read is used: a command an agent wrote
        to its connection before it was stopped is in the server's socket buffer by then, and
        the server has handled it before it handles a command sent after the first reply.
        """
        now = now_ms()
        out = []
        for job in jobs:
            self.store.slots(job, now - LOOK_MS, now + LOOK_MS)
            for v in self.store.slots(job, now - LOOK_MS, now + LOOK_MS):
                if v.state not in IN_FLIGHT:
                    continue
                if node is None or (
                    node in v.voters if v.state == SlotState.PROPOSED else v.executor == node
                ):
                    out.append(v)
        return out

    def _moved_on(self, views: list[SlotView]) -> bool:
        """Every slot of ``views`` changed state or executor since it was read."""
        return all(
            (now.state, now.executor) != (was.state, was.executor)
            for was, now in zip(views, (self.store.slot(v.job, v.fire_ms) for v in views), strict=True)
        )

    @contextlib.contextmanager
    def between_slots(
        self, jobs: Iterable[str], names: Iterable[str] | None = None, *, involving: str | None = None,
        timeout: float = 30,
    ) -> Iterator[None]:  # fmt: skip
        """Hold the agents ``names`` (default: all) stopped with SIGSTOP at a moment when the
        store holds no slot of ``jobs`` in flight (only those ``involving`` that node, if given):
        the body's fault (a SIGKILL, Redis killed) then interrupts no vote, commit or run of
        theirs. The agents get SIGCONT when the body ends.

        Stopped, an agent sends nothing more, so what the store shows cannot change under it
        (:meth:`in_flight` sees what it had already sent). While a slot is in flight the
        agents run on and this waits for the ledger to move that slot on, then tries again.
        """
        jobs, chosen = list(jobs), list(names or self.nodes)
        deadline = time.monotonic() + timeout
        while True:
            for n in chosen:
                self.signal(n, signal.SIGSTOP)
            busy = self.in_flight(jobs, involving)
            if not busy:
                break
            for n in chosen:
                self.signal(n, signal.SIGCONT)
            if time.monotonic() > deadline:
                raise AssertionError(f"no moment between slots in {timeout:.0f} s: {busy}\n{self.describe()}")
            self.wait(
                f"slots {[(v.job, v.fire_ms) for v in busy]} to move on",
                functools.partial(self._moved_on, busy),
                max(0.1, deadline - time.monotonic()),
            )
        try:
            yield
        finally:
            for n in chosen:
                self.signal(n, signal.SIGCONT)


def due(period_ms: int, first_after: int, last: int) -> list[int]:
    """Fire times of an ``@every`` schedule with ``first_after < t <= last``."""
    return list(range((first_after // period_ms + 1) * period_ms, last + 1, period_ms))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def scrape(port: int) -> dict[str, float]:
    """An agent's ``/metrics`` on loopback: each sample line's name and labels -> its value."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        lines = resp.read().decode().splitlines()
    return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in lines if ln and ln[0] != "#"}


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (32768 if it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port free on loopback right now, below the kernel's range for outgoing connections.

    ``bind(0)`` picks from that range, which every client's local port comes from too: a server
    killed for an outage and restarted on its port could find it taken by one of the agents'
    reconnects. Below the range only a listener can take it.
    """
    low = _ephemeral_low()
    pick = random.SystemRandom()
    for _ in range(200):
        port = pick.randrange(10_000, low) if low > 10_100 else pick.randrange(1_025, 10_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free TCP port on loopback below the ephemeral range after 200 tries")


class OwnedRedis:
    """A redis-server the test owns, killed and restarted on the same port (an outage)."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._args = [find_redis_server(), "--port", str(self.port), "--bind", "127.0.0.1"]
        self._log = tmp / f"redis-{self.port}.log"
        self._args += ["--save", "", "--appendonly", "no", "--dir", str(tmp), "--logfile", str(self._log)]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10) -> None:
        self.proc = proc = subprocess.Popen(self._args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.RedisError:
                    if proc.poll() is not None:  # (a taken port, say: its own words, not a timeout)
                        out = self._log.read_text(errors="replace") if self._log.exists() else ""
                        raise AssertionError(
                            f"redis-server on port {self.port} exited {proc.returncode}: {out[-1000:]}"
                        ) from None
                    if time.monotonic() > deadline:
                        raise AssertionError(f"redis-server on port {self.port} did not answer") from None
                    time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
