"""The C allocator's settings in a node that schedules many jobs (glibc only).

Why: at 10,000 jobs an agent's live Python objects are about 2 KB per job
(``tracemalloc``), its resident memory above the imports 3.2 to 3.4 KB
(``benchmarks/scale.py``). Much of the difference is memory glibc keeps after
a minute's burst, in two ways this module turns off:

* **one arena per thread.** glibc gives each thread that allocates its own
  arena (up to eight per core). The agent's store thread parses every reply
  of a burst, so its arena grows to the burst's peak and keeps that memory
  apart from the main thread's, which has a peak of its own. One arena
  (``M_ARENA_MAX`` 1) holds one peak.
* **sliding thresholds.** A block of 128 KiB or more is mapped on its own
  and unmapped when freed, and a freed heap top above 128 KiB goes back to
  the system; but each mapped block freed raises the first threshold to
  its size and the second to twice that (up to 32 and 64 MiB), and from then
  on a burst's large buffers (packed commands of a thousand votes, a batch of
  log lines) come from the heap and its freed top stays. Declaring 100,000
  jobs already raises both. ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD``
  set to glibc's own starting values (128 KiB) hold them there.

Measured (``scale.py``, 3 agents, alternating with the code before;
docs/benchmarks.md, "The C allocator's arenas and thresholds"): RSS per job
above the imports lower by 0.25-0.28 KB at 10,000 jobs and 0.12 KB at
100,000; no change in CPU that two pairs could resolve.

The costs, for a program that embeds an ``App``: every thread then takes
the one arena's lock to allocate (Python code holds the GIL anyway; C
extensions that allocate with the GIL released, and free-threaded builds,
may wait on it), each buffer of 128 KiB or more is mapped and unmapped, and
the settings last as long as the process. So they are applied only from
:data:`~.heap.SETTLE_MIN_JOBS` jobs (a process that schedules a thousand
jobs is a scheduler first; the collector settings of :mod:`.heap` start
there too), by the faces before any thread of the node starts (the arena
setting holds only for threads that allocate for the first time
afterwards): :func:`quorum_cron.agent.startup.tune_allocator_for`, called by
``quorum-cron agent`` before it serves metrics or the dashboard and by
``App`` before its server checks. ``App(tune_allocator=False)`` leaves the
allocator alone, and so does a setting the environment gives glibc itself
(``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
or ``GLIBC_TUNABLES`` naming it) for that setting: the operator's choice
(docs/operations.md, "Leave the C allocator to the agent"). Elsewhere
(musl, macOS) nothing is done.

**While idle, the freed memory goes back** (:class:`BurstTrim`). The trim
threshold only returns a free heap *top*; a minute's burst frees its slot
records, replies and runs all over the heap, between blocks that stay, and
glibc keeps those pages. Whenever the node is idle (the loop's next wake-up
a second or more away, no vote or result on its way to the store), at most
once every ten seconds, the agent calls ``malloc_trim(0)``, which hands every
whole free page inside the heap back to the system. Not once per burst: a
burst's memory is freed over the following seconds and minutes (finishes,
lease ends, the sweeps after them, replies parsed on the store thread), and
a trim at the first idle moment after a burst measured no gain at all. A
trim walks the heap's free blocks with its lock held: about 0.1 ms with
nothing freed, 3 ms for 70 MB with 27,000 free blocks, 20 ms for 570 MB with
200,000 (here), and every thread that allocates meanwhile waits; hence only
while the loop is idle and no vote or result is on its way (a sweep's or a
renewal's reply may still be parsed on the store thread, which then waits
those milliseconds). Measured (``scale.py``, 10,000 jobs, 3 agents, alternating with the
code before in one hour): RSS per job above the imports 0.08-0.12 KB lower
(about 2 MB of each agent's 70), every agent under 3 KB; the agents' CPU per
slot moved with the hour, not the trim (docs/benchmarks.md, "The heap
trimmed while idle"). The next burst faults those pages in again. Only where
:func:`tune_allocator` set the trim threshold: an operator who sets glibc's
trimming keeps its own, and so does an ``App(tune_allocator=False)`` unless
something else in its process tuned the allocator (the settings, and so the
trim, are the process's).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Mapping

__all__ = [
    "ARENA_MAX",
    "IDLE_MS",
    "MMAP_THRESHOLD",
    "TRIM_GAP_MS",
    "TRIM_THRESHOLD",
    "BurstTrim",
    "tune_allocator",
]

ARENA_MAX = 1
"""glibc arenas for the whole process: the main one, shared by every thread."""

MMAP_THRESHOLD = 128 * 1024
"""The block size from which glibc maps a block on its own (its starting value), held fixed."""

TRIM_THRESHOLD = 128 * 1024
"""The free heap top above which glibc gives memory back to the system (its starting value), held fixed."""

IDLE_MS = 1_000
"""A wait of the loop this long is an idle moment: the burst before it is over."""

TRIM_GAP_MS = 10_000
"""At most one trim this often, whatever the bursts."""

_TRIM: list[Callable[[int], int]] = []
"""glibc's ``malloc_trim``, once :func:`tune_allocator` set the trim threshold (process-wide, as
the setting is)."""

_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

# (mallopt parameter, value, the environment variable glibc reads, its tunable's name)
_SETTINGS = (
    (_M_ARENA_MAX, ARENA_MAX, "MALLOC_ARENA_MAX", "glibc.malloc.arena_max"),
    (_M_MMAP_THRESHOLD, MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold"),
    (_M_TRIM_THRESHOLD, TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold"),
)


def tune_allocator(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """Apply :data:`ARENA_MAX`, :data:`MMAP_THRESHOLD` and :data:`TRIM_THRESHOLD` through
    ``mallopt``, each unless ``environ`` sets it for glibc (its variable, or a ``name=value``
    item of ``GLIBC_TUNABLES``); returns the names of those applied (none off glibc)."""
    libc = _glibc()
    if libc is None:
        return ()
    named = {item.partition("=")[0] for item in environ.get("GLIBC_TUNABLES", "").split(":") if "=" in item}
    applied = []
    for param, value, variable, tunable in _SETTINGS:
        if variable in environ or tunable in named:
            continue
        if libc.mallopt(param, value) == 1:
            applied.append(tunable.rsplit(".", 1)[1])
    if "trim_threshold" in applied and not _TRIM:
        trim = libc.malloc_trim
        trim.argtypes = (ctypes.c_size_t,)
        trim.restype = ctypes.c_int
        _TRIM.append(trim)
    return tuple(applied)


class BurstTrim:
    """Hands the memory a burst freed back to the system while the node is idle after it.

    The agent offers each wait of its loop (:meth:`idle`); a no-op unless
    :func:`tune_allocator` set the trim threshold.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: int | None = None

    def idle(self, mono_ms: int, wait_ms: float, in_flight: int) -> bool:
        """At ``mono_ms`` the loop is about to wait ``wait_ms`` with ``in_flight`` votes and results
        on their way to the store: trim if that is an idle moment and the last trim is
        :data:`TRIM_GAP_MS` old. Returns whether it trimmed."""
        if wait_ms < IDLE_MS or in_flight or not _TRIM:
            return False
        if self._last is not None and mono_ms - self._last < TRIM_GAP_MS:
            return False
        self._last = mono_ms
        _TRIM[0](0)
        return True


def _glibc() -> ctypes.CDLL | None:
    """The process's C library if it is glibc (which names itself by ``gnu_get_libc_version``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return libc
