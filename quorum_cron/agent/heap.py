"""The agent's long-lived heap, moved out of the garbage collector's way once it is built.

Why: an agent's job table, schedules, plans, metric tables and per-job core state
live as long as the process, and CPython's full (generation 2) collection walks
every one of them each time it runs. At 10,000 jobs (``benchmarks/scale.py``) a
full collection took about 220 ms and ran 9 to 12 times in two minutes of bursts:
2.0 to 2.6 s of each agent's 4.2 to 5.0 s of CPU, and a 220 ms stop of its event
loop in the middle of a minute's burst. :func:`settle` collects what is already
garbage, then freezes the survivors (:func:`gc.freeze`): later collections skip
them, as they skip anything in the permanent generation. Nothing is freed early:
the frozen objects stay reachable as before and reference counting frees them as
before (nearly every object goes that way); only their cycle checks stop, so one
that later becomes part of an unreachable cycle stays until the process ends,
which for a job table that lives as long as the agent does not arise. Measured:
a full collection went from about 220 to about 40 ms.

Called when the agent is ready, and when a reload has replaced the job table (the
collection before the freeze reclaims the replaced definitions). Only for
:data:`SETTLE_MIN_JOBS` jobs or more: below that a full collection is a few
milliseconds, and an application that embeds a small :class:`~quorum_cron.app.App`
keeps its interpreter's collector exactly as it configured it (the freeze is
process-wide: it also covers the application's own objects of that moment).
"""

from __future__ import annotations

import gc

__all__ = ["SETTLE_MIN_JOBS", "settle"]

SETTLE_MIN_JOBS = 1_000
"""The job count from which :func:`settle` freezes the heap (about 20 ms per full collection)."""


def settle(jobs: int) -> bool:
    """For ``jobs`` >= :data:`SETTLE_MIN_JOBS`: collect the garbage there is, then exclude every
    surviving object from later collections. Returns whether it did."""
    if jobs < SETTLE_MIN_JOBS:
        return False
    gc.collect()
    gc.freeze()
    return True
