"""The harness's private network: namespaces, one bridge, veth pairs and nftables faults.

Layout (every address exists only inside namespaces this module creates, so
no packet can reach a real network)::

    <prefix>-hub    bridge br0 10.213.0.1/24; the latency proxy listens here
    <prefix>-r1     Redis primary   10.213.0.2   (veth eth0 <-> hub port r1)
    <prefix>-r2     Redis replica   10.213.0.3
    <prefix>-n1..   one agent each  10.213.0.11 ...

The bridge sits in the hub namespace, not the root one: the root namespace
gets no interface, route or address from the harness. A namespace's name is
``qch<pid>-<start>-<role>``: the harness's pid and its start time (clock
ticks since boot, ``/proc/<pid>/stat``), which together name one process for
the machine's uptime. :func:`clean_stale` removes every ``qch*`` namespace
whose harness is no longer alive (a run that crashed or was SIGKILLed),
killing the processes still inside it first. A pid alone could not tell: once
the kernel gave a dead harness's pid to another process, its namespaces looked
alive and were never cleaned. A namespace named the older way,
``qch<pid>-<role>``, still goes by the pid alone. A process is killed only
through a pidfd, after checking that it is inside the namespace being removed:
a pid listed a moment earlier may already belong to someone else.

Faults on a node's link are nftables rules in *that node's* namespace (table
``inet qchaos``), on its traffic to and from the hub address: both
directions dropped (partition), one direction dropped (one-way cut), or a
random share dropped with ``numgen random`` (loss). ``heal`` deletes the
table. ``tc netem`` does not exist in this kernel; latency comes from the
proxy (``chaos.proxy``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["HUB_IP", "PREFIX", "Net", "NetError", "clean_stale", "kill_inside", "ns_pids", "start_time"]

PREFIX = "qch"
HUB_IP = "10.213.0.1"
_SUBNET = "10.213.0"
_NAME = re.compile(rf"^{PREFIX}(\d+)-(?:(\d+)-)?[a-z0-9]+$")
"""``qch<pid>-<start>-<role>``, or the older ``qch<pid>-<role>`` (no start time)."""
_NETNS_DIR = Path("/var/run/netns")


class NetError(RuntimeError):
    """An ``ip``/``nft`` command failed (the message names the command and its stderr)."""


def _run(cmd: Sequence[str], *, stdin: str | None = None) -> str:
    done = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True, timeout=20, check=False)
    if done.returncode != 0:
        raise NetError(f"{' '.join(cmd)!r} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _namespaces() -> list[str]:
    out = _run(["ip", "netns", "list"])
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def ns_pids(ns: str) -> list[int]:
    """Pids of the processes inside namespace ``ns`` (empty if it is gone)."""
    try:
        out = _run(["ip", "netns", "pids", ns])
    except NetError:
        return []
    return [int(p) for p in out.split() if p.isdigit()]


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot: ``/proc/<pid>/stat`` field 22),
    or None if there is no such process. With the pid it names one process: a pid is reused,
    the pair is not (until a reboot, which removes the namespaces too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2, the command name, is in parentheses and may hold spaces and ")": split after the last.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[22 - 3])


def _alive(pid: int, start: int | None) -> bool:
    """Whether the harness that named a namespace ``pid`` (and ``start``, if the name has it) runs."""
    if start is not None:
        return start_time(pid) == start
    try:  # the older name: the pid is all there is to go by
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _identity(path: str) -> tuple[int, int] | None:
    """The (device, inode) of the network namespace at ``path`` (a ``/proc/<pid>/ns/net`` link or a
    namespace's file in /var/run/netns), or None if it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def kill_inside(ns: str, pid: int) -> bool:
    """SIGCONT then SIGKILL ``pid`` if it is inside namespace ``ns``; whether it was.

    Through a pidfd: it holds on to the process it was opened for, so a pid that changed
    hands after the check gets no signal (the pidfd's own process is gone: ESRCH). A
    process outside ``ns`` is never signalled, whatever list its pid came from.
    """
    want = _identity(str(_NETNS_DIR / ns))
    if want is None:
        return False
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already (or no pidfd: such a kernel runs no harness of this age)
        return False
    try:
        if _identity(f"/proc/{pid}/ns/net") != want:
            return False
        signal.pidfd_send_signal(fd, signal.SIGCONT)
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def _delete(ns: str) -> None:
    """Kill what runs inside ``ns`` (SIGCONT first: a stopped process ignores nothing but dies slowly)."""
    for _ in range(3):
        pids = ns_pids(ns)
        if not pids:
            break
        for pid in pids:
            kill_inside(ns, pid)
        time.sleep(0.1)
    with contextlib.suppress(NetError):
        _run(["ip", "netns", "del", ns])


def clean_stale() -> list[str]:
    """Delete the namespaces (and what runs in them) left by harness runs that are no longer alive."""
    removed = []
    for ns in _namespaces():
        m = _NAME.match(ns)
        if m and not _alive(int(m.group(1)), None if m.group(2) is None else int(m.group(2))):
            _delete(ns)
            removed.append(ns)
    return removed


@dataclass
class Net:
    """The namespaces of one run; :meth:`close` removes them all (idempotent)."""

    nodes: list[str]
    redis: list[str] = field(default_factory=lambda: ["r1"])
    prefix: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}-{start_time(os.getpid())}")
    created: list[str] = field(default_factory=list)

    def ns(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    @property
    def hub(self) -> str:
        return self.ns("hub")

    def ip(self, role: str) -> str:
        """The address of ``role`` (a Redis name ``r1``/``r2`` or a node name)."""
        if role in self.redis:
            return f"{_SUBNET}.{2 + self.redis.index(role)}"
        return f"{_SUBNET}.{11 + self.nodes.index(role)}"

    def exec_prefix(self, role: str) -> list[str]:
        """Command prefix that runs a program inside ``role``'s namespace (``ip netns exec`` execs it)."""
        return ["ip", "netns", "exec", self.ns(role)]

    def up(self) -> None:
        """Create the hub with its bridge and one namespace + veth pair per Redis server and node."""
        _run(["ip", "netns", "add", self.hub])
        self.created.append(self.hub)
        hub = ["ip", "-n", self.hub]
        _run([*hub, "link", "set", "lo", "up"])
        _run([*hub, "link", "add", "br0", "type", "bridge"])
        _run([*hub, "addr", "add", f"{HUB_IP}/24", "dev", "br0"])
        _run([*hub, "link", "set", "br0", "up"])
        for role in [*self.redis, *self.nodes]:
            ns = self.ns(role)
            _run(["ip", "netns", "add", ns])
            self.created.append(ns)
            port = f"v{role}"
            _run([*hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run([*hub, "link", "set", port, "master", "br0", "up"])
            inner = ["ip", "-n", ns]
            _run([*inner, "link", "set", "lo", "up"])
            _run([*inner, "addr", "add", f"{self.ip(role)}/24", "dev", "eth0"])
            _run([*inner, "link", "set", "eth0", "up"])

    # -- faults on one node's link to the hub (where Redis is reached) ---------------

    def _rules(self, node: str, output: str, input_: str) -> None:
        self.heal(node)
        table = (
            "table inet qchaos {\n"
            " chain output { type filter hook output priority 0; policy accept;\n"
            f"  {output}\n }}\n"
            " chain input { type filter hook input priority 0; policy accept;\n"
            f"  {input_}\n }}\n"
            "}\n"
        )
        _run(["ip", "netns", "exec", self.ns(node), "nft", "-f", "-"], stdin=table)

    def cut(self, node: str, *, outbound: bool, inbound: bool) -> None:
        """Drop ``node``'s packets to the hub (``outbound``) and/or from it (``inbound``)."""
        out = f"ip daddr {HUB_IP} drop" if outbound else ""
        inp = f"ip saddr {HUB_IP} drop" if inbound else ""
        self._rules(node, out, inp)

    def loss(self, node: str, percent: int) -> None:
        """Drop ``percent`` % of ``node``'s packets to and from the hub, at random (nft ``numgen``)."""
        if not 0 < percent < 100:
            raise ValueError(f"loss percent {percent} out of range: expected 1-99")
        self._rules(
            node,
            f"ip daddr {HUB_IP} numgen random mod 100 < {percent} drop",
            f"ip saddr {HUB_IP} numgen random mod 100 < {percent} drop",
        )

    def heal(self, node: str) -> None:
        """Remove every fault rule of ``node`` (no error if there is none)."""
        ns = self.ns(node)
        listed = _run(["ip", "netns", "exec", ns, "nft", "list", "tables"])
        if "qchaos" in listed:
            _run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "qchaos"])

    def close(self) -> None:
        """Kill every process left in this run's namespaces and delete them (hub last)."""
        for ns in reversed(self.created):
            _delete(ns)
        self.created.clear()
        # Also whatever a half-finished ``up`` created before failing.
        for ns in _namespaces():
            if ns.startswith(self.prefix + "-"):
                _delete(ns)
