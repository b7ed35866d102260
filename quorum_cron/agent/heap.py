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

Then full collections come less often (:data:`FULL_EVERY`). With the job table
frozen, CPython (3.11 to 3.13) runs a full collection every 10 collections of the
middle generation once what was promoted since the last one exceeds a quarter of
the (small) unfrozen old generation: a minute's burst, whose slot records, vote
requests and replies live a second or two and are promoted, triggered one
every few seconds, each walking the burst's objects (about 45 ms at 10,000
jobs). Those objects are freed by reference counting when their slot is done;
a full collection is only needed for cyclic garbage, which an agent makes
little of (an incremental collector with two generations, as in CPython 3.14,
ignores this threshold). Measured (``benchmarks/scale.py``, 10,000 jobs, 3 agents, over each
agent's life): 19-21 full collections and 1.6-2.1 s in the collector before,
4 and 0.6 s after; each agent's CPU per slot fell from 131-140 to 104-109 µs.

And with a large table young collections come less often: every ``jobs / 10``
new objects, up to :data:`YOUNG_EVERY`. A burst's slot records live a few
seconds, so at 700 objects a young collection every few hundred slots found
most of them alive, moved them on to the middle and then the old
generation, and the old generation's count set off a full collection: at
100,000 jobs, each walking the burst's half a million objects, about 0.3 s,
several a minute. At 10,000 more of them are gone before the first look, the
middle generation fills 14 times slower, and (with the full threshold above)
no full collection ran in two measured minutes of 100,000-job bursts; each
agent's collector time per slot fell from 35-37 to 28-32 µs
(docs/benchmarks.md, "A bound that dropped results"). Why not 10,000 for
every size: a young collection of 10,000 objects takes 2-6 ms and leaves
the processor's caches cold, and at 10,000 jobs, where full collections were
already rare, the 48 such collections of two minutes cost each agent more
(0.12-0.29 s) than the 900 small ones they replaced (0.07 s).

Called when the agent is ready, and when a reload has replaced the job table (the
collection before the freeze reclaims the replaced definitions). Only for
:data:`SETTLE_MIN_JOBS` jobs or more: below that a full collection is a few
milliseconds, and an application that embeds a small :class:`~quorum_cron.app.App`
keeps its interpreter's collector exactly as it configured it (the freeze and the
thresholds are process-wide: they also cover the application's own objects). A
threshold is only ever raised, never lowered, so an application that set a
higher one keeps it, and one that disabled the collector keeps it disabled.
"""

from __future__ import annotations

import gc

__all__ = ["FULL_EVERY", "SETTLE_MIN_JOBS", "YOUNG_EVERY", "settle"]

SETTLE_MIN_JOBS = 1_000
"""The job count from which :func:`settle` freezes the heap (about 20 ms per full collection)."""


YOUNG_EVERY = 10_000
"""The collector's first threshold once settled, at most: a young collection every ``jobs / 10``
net new tracked objects, up to 10,000 (and never below CPython's default of 700)."""

FULL_EVERY = 100
"""The collector's third threshold once settled: a full collection at most every 100 collections
of the middle generation (CPython's default is 10)."""


def settle(jobs: int) -> bool:
    """For ``jobs`` >= :data:`SETTLE_MIN_JOBS`: collect the garbage there is, exclude every
    surviving object from later collections, and raise the young collection's threshold to
    ``jobs // 10`` (at most :data:`YOUNG_EVERY`) and the full collection's to
    :data:`FULL_EVERY` (each only if it is lower). Returns whether it did."""
    if jobs < SETTLE_MIN_JOBS:
        return False
    gc.collect()
    gc.freeze()
    young, middle, full = gc.get_threshold()
    gc.set_threshold(max(young, min(YOUNG_EVERY, jobs // 10)), middle, max(full, FULL_EVERY))
    return True
