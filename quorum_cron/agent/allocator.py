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
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

__all__ = ["ARENA_MAX", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_allocator"]

ARENA_MAX = 1
"""glibc arenas for the whole process: the main one, shared by every thread."""

MMAP_THRESHOLD = 128 * 1024
"""The block size from which glibc maps a block on its own (its starting value), held fixed."""

TRIM_THRESHOLD = 128 * 1024
"""The free heap top above which glibc gives memory back to the system (its starting value), held fixed."""

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
