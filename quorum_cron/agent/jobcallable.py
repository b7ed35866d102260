"""A Python job's call, as :mod:`.jobprocess` runs it: on the loop or in a thread, and what it returned.

Why apart: which callables are coroutine functions, what a job that raises ``SystemExit`` or
``KeyboardInterrupt`` becomes (a failure of its run, never an exit of the program), and what a
returned awaitable or generator means are rules of their own, tested on their own.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from quorum_cron.agent.jobprocess import JobContext

__all__ = [
    "JOB_THREADS",
    "Escaped",
    "JobThreads",
    "awaited",
    "close",
    "in_thread",
    "on_loop",
    "returned_awaitable",
    "runs_on_loop",
]

JOB_THREADS: Final = 64
"""How many plain-function jobs run at once in a process; more wait for a thread (and their own
timeout runs while they wait)."""


class JobThreads:
    """Daemon worker threads for plain-function jobs, apart from the event loop's default executor.

    Why not that executor (``run_in_executor(None, ...)``): it has min(32, CPUs + 4) threads, six
    on two cores, shared with the agent's own ``to_thread`` calls (the notice listener's start and
    join, alerts) and with the program's. Six hung jobs starved all of them, and a job queued
    behind them was reported timed out without having started. Its threads are also joined when
    the interpreter exits, so one job that never returns kept a stopped node's process alive
    until a second signal (an App audit). These threads are daemons, up to :data:`JOB_THREADS`
    of them, started as needed and kept for the next runs.
    """

    def __init__(self, limit: int = JOB_THREADS) -> None:
        self._limit = limit
        self._queue: queue.SimpleQueue[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[object], Callable[[], object]]
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, loop: asyncio.AbstractEventLoop, call: Callable[[], object]) -> asyncio.Future[object]:
        """Run ``call`` on a job thread; the future (of ``loop``) gets its result or exception."""
        future: asyncio.Future[object] = loop.create_future()
        self._queue.put((loop, future, call))
        with self._lock:
            if self._idle == 0 and self._threads < self._limit:
                self._threads += 1
                threading.Thread(target=self._work, name="quorum-cron-job", daemon=True).start()
            else:
                self._idle -= 1  # (that idle thread takes this call)
        return future

    def _work(self) -> None:
        while True:
            loop, future, call = self._queue.get()
            try:
                result: object = call()
                ok = True
            except BaseException as exc:  # (in_thread turned SystemExit/KeyboardInterrupt into Escaped)
                result, ok = exc, False
            try:
                loop.call_soon_threadsafe(_settle, future, ok, result)
            except RuntimeError:  # the loop is closed: nobody waits for it
                close(result)
            with self._lock:
                self._idle += 1


def _settle(future: asyncio.Future[object], ok: bool, result: object) -> None:
    if future.cancelled():  # (timed out or stopped: the outcome was said already)
        close(result)
        return
    if ok:
        future.set_result(result)
    else:
        assert isinstance(result, BaseException)
        try:
            future.set_exception(result)
        except TypeError:  # (StopIteration: a future cannot hold it)
            future.set_exception(RuntimeError(repr(result)))


JOBS: Final = JobThreads()
"""The process's job threads."""


def runs_on_loop(func: Callable[..., object]) -> bool:
    """Whether a job is a coroutine function (run on the loop) rather than a plain one (a thread).

    An object whose ``__call__`` is ``async def`` is one. An ``async def`` under a plain
    decorator is not taken for one here (the decorator may block, or run it with ``asyncio.run``):
    it runs in a thread, and the coroutine it returns is then awaited on the loop.
    """
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(type(func), "__call__", None)  # noqa: B004 (the type's: the one Python calls)
    return not inspect.isroutine(func) and inspect.iscoroutinefunction(call)


class Escaped(Exception):
    """A job raised SystemExit or KeyboardInterrupt: carried as an ordinary exception, so that it
    fails this run only (a task re-raises those two out of the event loop, ending the program)."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(repr(raised))
        self.raised = raised


def in_thread(func: Callable[[JobContext], object], ctx: JobContext) -> object:
    try:
        result = func(ctx)
    except (SystemExit, KeyboardInterrupt) as exc:
        raise Escaped(exc) from None
    _refuse_generator(result)
    return result


async def on_loop(func: Callable[[JobContext], object], ctx: JobContext) -> object:
    try:
        result = func(ctx)
        _refuse_generator(result)
        if inspect.isawaitable(result):
            return await result
        return result
    except (SystemExit, KeyboardInterrupt) as exc:  # (not CancelledError: a stop's cancellation)
        raise Escaped(exc) from None


async def awaited(awaitable: Awaitable[object]) -> object:
    try:
        return await awaitable
    except (SystemExit, KeyboardInterrupt) as exc:
        raise Escaped(exc) from None


def _refuse_generator(result: object) -> None:
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        kind = type(result).__name__
        close(result)
        raise TypeError(
            f"the job returned a {kind} (its body never ran): expected a function, not a generator"
        )


def returned_awaitable(work: asyncio.Future[object]) -> bool:
    """A thread's job ended by returning an awaitable (still to be awaited on the loop)."""
    return (
        not isinstance(work, asyncio.Task)
        and work.done()
        and not work.cancelled()
        and work.exception() is None
        and inspect.isawaitable(work.result())
    )


def close(result: object) -> None:
    """Close a coroutine or generator that will never run (no "never awaited" warning)."""
    close = getattr(result, "close", None)
    if inspect.iscoroutine(result) or inspect.isgenerator(result):
        assert close is not None
        close()
