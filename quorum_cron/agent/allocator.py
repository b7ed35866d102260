"""The C allocator's settings in a node that schedules many jobs (glibc only).

Why: at 10,000 jobs an agent's live Python objects are about 2 KB per job
(``tracemalloc``), its resident memory above the imports 3.2 to 3.4 KB
(``benchmarks/scale.py``). Much of the difference is memory glibc keeps after
a minute's burst, in two ways this module turns off:

* **one arena per thread.** glibc gives each thread that allocates its own
  arena (up to eight per core). The agent's store thread parses every reply
  of a burst, so its arena grows to the burst's peak and keeps that memory
  apart from the main thread's, which has a peak of its own. Under the GIL
  the threads seldom allocate at the same instant, so one arena
  (``M_ARENA_MAX`` 1) costs no measurable contention and holds one peak.
* **a sliding mmap threshold.** A block of 128 KiB or more is mapped on its
  own and unmapped when freed, and a freed heap top above 128 KiB goes back
  to the system; but each mapped block freed raises the first threshold to
  its size and the second to twice that (up to 32 and 64 MiB), and from then
  on a burst's large buffers (packed commands of a thousand votes, a batch of
  log lines) come from the heap and its freed top stays. Setting
  ``M_MMAP_THRESHOLD`` (to glibc's own start, 128 KiB) holds both fixed.

Measured (``scale.py``, 3 agents, alternating with the code before;
docs/benchmarks.md, "The C allocator's arenas and thresholds"): RSS per job
above the imports 3.03-3.13 KB against 3.21-3.34 at 10,000 jobs, 2.65-2.72
against 2.80-2.90 at 100,000; no change in CPU beyond the hour's spread.

The settings are process-wide, like :mod:`.heap`'s collector settings, and
applied from the same job count: a process that schedules a thousand jobs is a
scheduler first. The arena setting holds only for threads that allocate for
the first time afterwards, so :func:`quorum_cron.agent.startup.run_node`
applies them before the node's threads start. A setting the environment gives glibc itself
(``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``, or ``GLIBC_TUNABLES``
naming it) is left as it is: that is the operator's way to choose otherwise
(docs/operations.md, "Memory"). Elsewhere (musl, macOS) nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

__all__ = ["ARENA_MAX", "MMAP_THRESHOLD", "tune_allocator"]

ARENA_MAX = 1
"""glibc arenas for the whole process: the main one, shared by every thread."""

MMAP_THRESHOLD = 128 * 1024
"""The block size from which glibc maps memory of its own (its default start), held fixed."""

_M_MMAP_THRESHOLD = -3  # <malloc.h>
_M_ARENA_MAX = -8

# (mallopt parameter, value, the environment variable glibc reads, its tunable's name)
_SETTINGS = (
    (_M_ARENA_MAX, ARENA_MAX, "MALLOC_ARENA_MAX", "glibc.malloc.arena_max"),
    (_M_MMAP_THRESHOLD, MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold"),
)


def tune_allocator(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """Apply :data:`ARENA_MAX` and :data:`MMAP_THRESHOLD` through ``mallopt``, each unless
    ``environ`` sets it for glibc; returns the names of those applied (none off glibc)."""
    libc = _glibc()
    if libc is None:
        return ()
    tunables = environ.get("GLIBC_TUNABLES", "")
    applied = []
    for param, value, variable, tunable in _SETTINGS:
        if variable in environ or tunable in tunables:
            continue
        if libc.mallopt(param, value) == 1:
            applied.append(tunable.rsplit(".", 1)[1])
    return tuple(applied)


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
