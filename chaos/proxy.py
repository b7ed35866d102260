"""A userspace TCP proxy in front of Redis: per-node latency and jitter, and the failover address.

``tc netem`` does not exist in this kernel, so delay is added here. The proxy
runs inside the hub namespace (``python -m chaos.proxy``); each node gets its
own listening port, so a delay applies to one node's link only. Every chunk
read from either side is written to the other side ``delay ± jitter`` ms
later, never before an earlier chunk (TCP order is kept; jitter only makes
the gaps uneven). All ports forward to one target, the current Redis
primary; retargeting (a promotion) closes every open connection, as a
virtual IP moving to another server would.

Control: a Unix socket (a file, so the harness reaches it from the root
namespace) taking one JSON object per line and answering ``ok`` or
``error: ...``::

    {"op": "delay", "port": 7001, "ms": 200, "jitter": 80}
    {"op": "target", "host": "10.213.0.3", "port": 6379}

The jitter comes from a ``random.Random`` seeded on the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import random
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ProxyControl", "main"]

_CHUNK = 65536
_QUEUE = 1024  # chunks in flight per direction; a full queue stops reading (back-pressure)


@dataclass
class _Link:
    delay_ms: float = 0.0
    jitter_ms: float = 0.0


@dataclass
class _Proxy:
    host: str
    target: tuple[str, int]
    rng: random.Random
    links: dict[int, _Link] = field(default_factory=dict)
    conns: set[asyncio.Task[None]] = field(default_factory=set)

    def lag(self, port: int) -> float:
        link = self.links[port]
        if link.delay_ms <= 0 and link.jitter_ms <= 0:
            return 0.0
        return max(0.0, link.delay_ms + self.rng.uniform(-link.jitter_ms, link.jitter_ms)) / 1000

    async def pump(self, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUE)

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            with contextlib.suppress(OSError):
                writer.write_eof()

        sender = asyncio.create_task(deliver())
        last = 0.0
        try:
            while True:
                data = await reader.read(_CHUNK)
                last = max(last, time.monotonic() + self.lag(port))
                await queue.put((last, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()

    async def serve(self, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.conns.add(task)
        up_writer: asyncio.StreamWriter | None = None
        try:
            up_reader, upstream = await asyncio.wait_for(asyncio.open_connection(*self.target), 2.0)
            up_writer = upstream
            await asyncio.gather(self.pump(port, reader, upstream), self.pump(port, up_reader, writer))
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            self.conns.discard(task)
            for w in (writer, up_writer):
                if w is not None:
                    w.close()

    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write((self.apply(line) + "\n").encode())
                await writer.drain()
        finally:
            writer.close()

    def apply(self, line: bytes) -> str:
        try:
            cmd = json.loads(line)
            if cmd["op"] == "delay":
                self.links[int(cmd["port"])] = _Link(float(cmd["ms"]), float(cmd.get("jitter", 0)))
            elif cmd["op"] == "target":
                self.target = (str(cmd["host"]), int(cmd["port"]))
                for task in list(self.conns):
                    task.cancel()
            else:
                return f"error: unknown op {cmd['op']!r}: expected 'delay' or 'target'"
        except (ValueError, KeyError, TypeError) as exc:
            return f"error: bad control line {line[:200]!r}: {exc}"
        return "ok"


async def _main(args: argparse.Namespace) -> None:
    proxy = _Proxy(args.listen, (args.target_host, args.target_port), random.Random(args.seed))
    servers = []
    for port in args.ports:
        proxy.links[port] = _Link()

        handler = functools.partial(proxy.serve, port)
        servers.append(await asyncio.start_server(handler, args.listen, port, reuse_address=True))
    servers.append(await asyncio.start_unix_server(proxy.control, str(args.control)))
    # Bounded: the harness kills the proxy at the end, and it stops by itself after --max-seconds.
    await asyncio.sleep(args.max_seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description="latency proxy of the chaos harness")
    ap.add_argument("--listen", required=True)
    ap.add_argument("--ports", type=int, nargs="+", required=True)
    ap.add_argument("--target-host", required=True)
    ap.add_argument("--target-port", type=int, required=True)
    ap.add_argument("--control", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=4 * 3600)
    asyncio.run(_main(ap.parse_args()))


class ProxyControl:
    """The harness's side of the control socket."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def wait_ready(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not self.path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency proxy did not create its control socket {self.path}")
            time.sleep(0.02)

    def send(self, **cmd: object) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.path))
            s.sendall(json.dumps(cmd).encode() + b"\n")
            reply = s.makefile().readline().strip()
        if reply != "ok":
            raise RuntimeError(f"latency proxy refused {cmd}: {reply}")

    def delay(self, port: int, ms: float, jitter: float = 0) -> None:
        self.send(op="delay", port=port, ms=ms, jitter=jitter)

    def retarget(self, host: str, port: int) -> None:
        self.send(op="target", host=host, port=port)


if __name__ == "__main__":
    main()
