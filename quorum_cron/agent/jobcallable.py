"""A Python job's call, as :mod:`.jobprocess` runs it: on the loop or in a thread, and what it returned.

Why apart: which callables are coroutine functions, what a job that raises ``SystemExit`` or
``KeyboardInterrupt`` becomes (a failure of its run, never an exit of the program), and what a
returned awaitable or generator means are rules of their own, tested on their own.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from quorum_cron.agent.jobprocess import JobContext

__all__ = ["Escaped", "awaited", "close", "in_thread", "on_loop", "returned_awaitable", "runs_on_loop"]


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
