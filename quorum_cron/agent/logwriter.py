"""The agent's log handler: lines written in batches, at most :data:`FLUSH_S` after they were logged.

Why: a ``StreamHandler`` writes and flushes each line on its own, one
``write`` system call per line, and an executor logs two INFO lines per
slot it runs. Into a pipe (stderr under systemd or a container runtime) a
JSON line cost 15.5 µs of CPU that way and 10.1 in batches, into a file
13.4 and 10.3, and the pipe's reader is woken once a batch instead of once
a line (``benchmarks/log_lines.py``; docs/benchmarks.md, "Less memory per
job, and log lines in batches").
This handler keeps the formatted lines and writes them together:

* at most :data:`FLUSH_S` after the first of them was logged (a daemon
  thread, woken only when a line waits: an idle agent wakes nobody);
* at once for a record at WARNING or above — what went wrong is never
  held back, and the lines before it go out first, in order;
* at once when :data:`MAX_PENDING_CHARS` wait (a bound on the memory);
* when logging shuts down (``logging.shutdown`` at exit flushes every
  handler), when the handler is closed or replaced, and on :meth:`flush`.

So a process killed by SIGKILL (or the OOM killer) loses at most the INFO
and DEBUG lines of its last :data:`FLUSH_S`; the slots themselves are in the
ledger, which no log line is the record of. Lines keep their order: every
write happens under the handler's lock.
"""

from __future__ import annotations

import logging
import threading
from typing import IO

__all__ = ["FLUSH_S", "MAX_PENDING_CHARS", "BatchedLineHandler"]

FLUSH_S = 0.05
"""How long a line may wait for the lines after it: below what a person tailing the log notices."""

MAX_PENDING_CHARS = 256 * 1024
"""Pending text that is written at once, whatever its age."""


class BatchedLineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` that writes its lines in batches (see the module docstring)."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        self._pending: list[str] = []
        self._chars = 0
        self._wake = threading.Event()
        """Set when a line starts to wait (the writer thread then gives it ``FLUSH_S``)."""
        self._stop = threading.Event()
        """Set by :meth:`close`: the writer thread ends, even mid-wait."""
        self._closed = False
        self._thread: threading.Thread | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record's line; write what waits if the record is a warning or worse."""
        # (Handler.handle holds the lock around emit: the pending list has one writer at a time.)
        try:
            line = self.format(record) + self.terminator
        except Exception:  # (as StreamHandler: a bad record is reported, never raised)
            self.handleError(record)
            return
        self._pending.append(line)
        self._chars += len(line)
        if record.levelno >= logging.WARNING or self._chars >= MAX_PENDING_CHARS or self._closed:
            self._write(record)
        elif len(self._pending) == 1:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="qc-log", daemon=True)
                self._thread.start()
            self._wake.set()

    def flush(self) -> None:
        """Write every line that waits, and flush the stream."""
        self.acquire()
        try:
            self._write(None)
        finally:
            self.release()

    def close(self) -> None:
        """Write what waits and stop the writer thread (later lines are written at once)."""
        self.acquire()
        try:
            self._closed = True
            self._write(None)
        finally:
            self.release()
        self._stop.set()
        self._wake.set()
        super().close()

    def _write(self, record: logging.LogRecord | None) -> None:
        """Under the lock: one write of every pending line, then the stream's flush."""
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self._chars = 0
        else:
            text = ""
        stream = self.stream
        try:
            if text:
                stream.write(text)
            if hasattr(stream, "flush"):
                stream.flush()
        except Exception:  # (a closed or broken stream: reported as StreamHandler does)
            if record is not None:
                self.handleError(record)

    def _run(self) -> None:
        """The writer thread: once a line waits, give the lines after it ``FLUSH_S``, then write."""
        while True:
            self._wake.wait()
            if self._stop.wait(FLUSH_S):
                return
            self._wake.clear()
            self.flush()
