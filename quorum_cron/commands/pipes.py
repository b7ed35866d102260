"""Standard output whose reader may leave early: ``quorum-cron status | head -1``.

A command's exit status says what it found (``status``: 1 when the cluster
cannot run slots). When the reader of a pipe closes it before the output
ends, Python raises ``BrokenPipeError`` from the next write and click exits
1, which a ``set -o pipefail`` check reads as "cannot run slots". So the
rest of the output goes to ``/dev/null`` instead, the command finishes, and
its own exit status stands (what ``git`` and ``grep -q`` readers expect).

Any other write error (a full disk, ``> /dev/full``, an I/O error) ended in
a traceback, with the output cut short where it stopped: ``import-crontab >
cluster.toml`` on a full disk left half a config and no word of it. It is
one ``error:`` line naming where the output went and that it is incomplete,
exit status 1.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn, TextIO

__all__ = ["quiet_on_closed_pipe"]


class _ClosedPipeSafe:
    """A text stream that sends what follows to ``/dev/null`` once its reader has gone."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        try:
            return self._inner.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)
        except OSError as exc:
            self._cannot_write(exc)

    def flush(self) -> None:
        try:
            self._inner.flush()
        except BrokenPipeError:
            self._reader_gone()
        except OSError as exc:
            self._cannot_write(exc)

    def _cannot_write(self, exc: OSError) -> NoReturn:
        try:
            where = os.readlink(f"/proc/self/fd/{self._inner.fileno()}")
        except (OSError, ValueError):
            where = "standard output"
        self._reader_gone()  # (nothing more goes there: the flush at exit would fail again)
        why = exc.strerror or type(exc).__name__
        sys.stderr.write(f"error: cannot write the output to {where}: {why}: what it holds is incomplete\n")
        sys.stderr.flush()
        sys.exit(1)

    def _reader_gone(self) -> None:
        # (The buffered rest, and every later write, land on /dev/null: the interpreter's own
        # flush at exit would otherwise raise again and exit 120.)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._inner.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, buffer, ...
        return getattr(self._inner, name)


def quiet_on_closed_pipe() -> None:
    """Make ``sys.stdout`` survive its reader leaving (once per process; a no-op without a file
    descriptor, as under click's test runner)."""
    out = sys.stdout
    if isinstance(out, _ClosedPipeSafe):
        return
    try:
        out.fileno()
    except (AttributeError, OSError, ValueError):
        return
    sys.stdout = _ClosedPipeSafe(out)
