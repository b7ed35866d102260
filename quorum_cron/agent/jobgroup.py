"""A command's process group: its output tails, its protocol, its stdin, and killing it.

Split from :mod:`.jobprocess` (which decides when a run ends and what it
reports) so that module stays about the run; this one is what talks to the
operating system about the job's processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable

__all__ = [
    "DEFAULT_TAIL_BYTES",
    "KILL_GRACE_S",
    "JobProtocol",
    "Tail",
    "detail_of",
    "feed_stdin",
    "kill_group",
    "signal_name",
]

DEFAULT_TAIL_BYTES = 2048
"""Output kept per stream for the ledger; the rest is read and dropped."""

KILL_GRACE_S = 2.0
"""Between SIGTERM and SIGKILL to the process group."""


class Tail:
    """The last ``limit`` bytes written to a stream, and how many were dropped before them."""

    def __init__(self, limit: int = DEFAULT_TAIL_BYTES) -> None:
        self.limit = limit
        self._buf = bytearray()
        self.dropped = 0

    def write(self, data: bytes) -> None:
        self._buf += data
        excess = len(self._buf) - self.limit
        if excess > 0:
            del self._buf[:excess]
            self.dropped += excess

    def text(self) -> str:
        body = self._buf.decode("utf-8", errors="replace")
        return f"[{self.dropped} bytes dropped]...{body}" if self.dropped else body


class JobProtocol(asyncio.SubprocessProtocol):
    """Keeps the tails of stdout/stderr and says when the process exited and when its pipes closed.

    ``process_exited`` comes from the child watcher (the process itself);
    ``Process.wait()`` of :mod:`asyncio.subprocess` may instead wait until
    every pipe is closed, which a background child can postpone for ever.
    """

    def __init__(self, out: Tail, err: Tail, on_output: Callable[[str, bytes], None] | None = None) -> None:
        self._tails = {1: out, 2: err}
        self._on_output = on_output
        self._open = {1, 2}
        self.exited = asyncio.Event()
        self.pipes_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        tail = self._tails.get(fd)
        if tail is not None:
            chunk = data if isinstance(data, bytes) else data.encode()
            tail.write(chunk)
            if self._on_output is not None:
                self._on_output("stdout" if fd == 1 else "stderr", chunk)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open:
            self.pipes_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


def feed_stdin(transport: asyncio.SubprocessTransport, data: bytes) -> None:
    """Queue ``data`` on the process's stdin and close it once written.

    Never awaited: a process that exits without reading its input (cron's
    pipe) is no error, and a full pipe must not hold the run — the pipe
    transport writes in the background and is closed with the run.
    """
    pipe = transport.get_pipe_transport(0)
    if pipe is None:
        return
    assert isinstance(pipe, asyncio.WriteTransport)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        pipe.close()


async def kill_group(pgid: int, proto: JobProtocol) -> None:
    """SIGTERM the process group, then SIGKILL it if the leader has not exited in time.

    Bounded: a leader that survives SIGKILL (uninterruptible sleep) is
    given up on after another grace period rather than holding the agent.
    """
    if proto.exited.is_set():
        _signal_group(pgid, signal.SIGKILL)  # leftovers of an exited leader
        return
    _signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proto.exited.wait()), KILL_GRACE_S)
    _signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proto.exited.wait()), KILL_GRACE_S)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)


def detail_of(head: str, out: Tail, err: Tail) -> str:
    parts = [head]
    for name, tail in (("stdout", out), ("stderr", err)):
        text = tail.text()
        if text:
            parts.append(f"--- {name} ---\n{text.rstrip()}")
    return "\n".join(parts)
