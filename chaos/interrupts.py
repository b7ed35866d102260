"""Signals during a run: Ctrl-C, SIGTERM and the run's ceiling become exceptions that every wait re-raises.

The handlers raise (``KeyboardInterrupt``, ``SystemExit(128 + signum)``,
:class:`Ceiling`), so the ``with`` block of the run removes every process and
namespace on the way out. A signal that lands inside Python's at-fork hooks is
swallowed there; :func:`check_signals` raises it again at the next wait.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from types import FrameType

__all__ = [
    "Ceiling",
    "check_signals",
    "held",
    "on_alarm",
    "on_interrupt",
    "on_term",
    "pending",
    "sleep_until",
]

pending: list[BaseException] = []
"""A signal's exception that was raised once and may have been dropped (see :func:`raise_on`)."""
_held = [False]
"""True while :func:`held` runs its block: a signal is recorded in :data:`pending`, not raised."""


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Run the block without a signal raising inside it (the cleanup: raised in the middle of it,
    a Ctrl-C left the rest of the processes and namespaces behind); it stays in :data:`pending`."""
    _held[0] = True
    try:
        yield
    finally:
        _held[0] = False


def raise_on(exc: BaseException) -> None:
    """Raise ``exc`` now and remember it, so that the next wait raises it again.

    A signal that arrives while the harness forks a process raises inside Python's at-fork
    hooks (logging's lock release), which print "Exception ignored" and drop it: a SIGINT
    during bring-up was lost and the run went on for its full length (seen under coverage on
    a loaded machine, where a fork takes long enough to be hit).

    Only the first signal counts: once one is pending the run is on its way out, and a second
    Ctrl-C (users press it again) raised inside the cleanup and aborted it half-way, leaving
    every namespace behind under "processes and namespaces removed".
    """
    if pending:
        return
    pending.append(exc)
    if not _held[0]:
        raise exc


def check_signals() -> None:
    """Re-raise a signal's exception that an at-fork hook swallowed."""
    if pending:
        raise pending[0]


def on_interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGINT (Ctrl-C): ``KeyboardInterrupt``; ``python -m chaos`` exits 130."""
    raise_on(KeyboardInterrupt())


def on_term(signum: int, frame: FrameType | None) -> None:
    """SIGTERM, SIGHUP: ``SystemExit(128 + signum)`` once everything is removed."""
    raise_on(SystemExit(128 + signum))


class Ceiling(RuntimeError):
    """The run outlived its hard ceiling."""


def on_alarm(signum: int, frame: FrameType | None) -> None:
    """SIGALRM: the run's hard ceiling (``seconds + 180``)."""
    raise_on(Ceiling("the run exceeded its time ceiling"))


def sleep_until(ms: float) -> None:
    """Sleep until the wall-clock instant ``ms`` (epoch milliseconds), raising a pending signal."""
    while (left := ms / 1000 - time.time()) > 0:
        check_signals()
        time.sleep(min(left, 0.25))
    check_signals()
