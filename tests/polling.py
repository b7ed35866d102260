"""Waiting on a fact in a test that runs a real agent on real time (a store read, an event logged).

The in-process tests on a manual clock wait on signals instead
(``tests.agent_inproc.until``); these tests have a real Redis and real
timers, so they poll the fact, and the deadline only bounds a failure.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["until"]


async def until(what: str, check: Callable[[], bool], timeout: float = 15) -> None:
    """Poll ``check`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
