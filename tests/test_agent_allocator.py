"""The C allocator's settings (:mod:`quorum_cron.agent.allocator`), checked by what glibc then
does: threads share one arena, freed heap goes back to the system after a large block was freed,
a setting the environment gives glibc is left alone, and an agent applies them only for a
large job table, in the App and in ``quorum-cron agent``. Each check runs in a fresh interpreter
or process: the settings are process-wide."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import urllib.request
from pathlib import Path

import pytest

from quorum_cron.agent import allocator
from quorum_cron.agent.allocator import (
    IDLE_MS,
    TRIM_GAP_MS,
    BurstTrim,
    _glibc,
    tune_allocator,
)
from quorum_cron.agent.heap import SETTLE_MIN_JOBS
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, free_port

_LIBC = _glibc()
pytestmark = pytest.mark.skipif(
    _LIBC is None or not hasattr(_LIBC, "mallinfo2"),
    reason="the C library is not glibc 2.33 or later (no mallopt and mallinfo2 to test with)",
)

_PROBE = """
import ctypes, json, os, sys, threading

libc = ctypes.CDLL(None)

def arenas():
    # malloc_stats() prints one "Arena N:" block per arena to the C stderr.
    r, w = os.pipe()
    saved = os.dup(2)
    os.dup2(w, 2)
    libc.malloc_stats()
    os.dup2(saved, 2)
    os.close(w)
    text = os.read(r, 1 << 20).decode()
    os.close(r)
    return sum(line.startswith("Arena ") for line in text.splitlines())

def allocate_in_threads(n=4):
    # Each thread holds blocks larger than Python's small-object limit (from malloc) while
    # the others allocate, so glibc would give each its own arena.
    barrier = threading.Barrier(n)
    def work():
        held = [bytes(2048) for _ in range(200)]
        barrier.wait()
        del held
    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads: t.start()
    for t in threads: t.join()

class MI(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in
                ("arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split())]

def raise_thresholds():
    # Free an 8 MB mapped block: untuned, glibc raises its mmap threshold to 8 MB and its trim
    # threshold to 16 MB (tuned before or after, both stay at 128 KiB).
    block = bytes(8_000_000)
    del block

def kept_after_free():
    # KB of freed heap top glibc keeps once 6 MB of blocks from the heap were freed.
    info = libc.mallinfo2
    info.restype = MI
    held = [bytes(3000) for _ in range(2000)]
    del held
    return info().keepcost // 1024
"""


_ALLOCATOR_VARS = (
    "MALLOC_",
    "GLIBC_TUNABLES",
    "LD_PRELOAD",
    "PYTHONMALLOC",
    "PYTHONTRACEMALLOC",
    "PYTHONDEVMODE",
)
"""Variables of the parent's that would change the allocator under test: glibc's own settings, a
preloaded allocator, Python's allocator choice or tracing. A probe runs without them."""


def _run(body: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run ``body`` after :data:`_PROBE` in a new interpreter; it prints one JSON line."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(_ALLOCATOR_VARS)}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE + textwrap.dedent(body)],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


_TUNED = """
from quorum_cron.agent.allocator import tune_allocator
raise_thresholds()
applied = tune_allocator()
raise_thresholds()
allocate_in_threads()
print(json.dumps({"applied": list(applied), "arenas": arenas(), "kept_kb": kept_after_free()}))
"""

_UNTUNED = """
raise_thresholds()
allocate_in_threads()
print(json.dumps({"arenas": arenas(), "kept_kb": kept_after_free()}))
"""


def test_tuned_threads_share_one_arena_and_a_freed_heap_top_goes_back() -> None:
    before = _run(_UNTUNED)
    assert before["arenas"] > 1, "the probe must give threads arenas of their own untuned"
    assert before["kept_kb"] > 4096, "untuned, glibc keeps a freed top below its raised threshold"
    after = _run(_TUNED)
    assert after["applied"] == ["arena_max", "mmap_threshold", "trim_threshold"]
    assert after["arenas"] == 1
    assert after["kept_kb"] < 1024, "tuned, the freed top goes back to the system"


def test_a_setting_the_environment_gives_glibc_is_left_alone() -> None:
    by_variable = _run(_TUNED, {"MALLOC_ARENA_MAX": "4"})
    assert by_variable["applied"] == ["mmap_threshold", "trim_threshold"]
    assert by_variable["arenas"] > 1
    by_tunable = _run(
        _TUNED, {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=65536:glibc.malloc.mmap_threshold=65536"}
    )
    assert by_tunable["applied"] == ["arena_max"]
    assert by_tunable["arenas"] == 1


def test_only_a_tunable_that_is_set_counts() -> None:
    """``GLIBC_TUNABLES`` is ``name=value`` items joined by ``:``: a name without a value, or one
    that only contains another's, sets nothing (pure: no ``mallopt`` is called for a full set)."""
    everything = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "1", "MALLOC_TRIM_THRESHOLD_": "1"}
    assert tune_allocator(everything) == ()
    names = ("arena_max", "mmap_threshold", "trim_threshold")
    tunables = ":".join(f"glibc.malloc.{n}={v}" for n, v in zip(names, (2, 1, 1), strict=True))
    assert tune_allocator({"GLIBC_TUNABLES": tunables}) == ()
    result = _run(
        """
from quorum_cron.agent.allocator import tune_allocator
applied = tune_allocator({"GLIBC_TUNABLES": "glibc.malloc.arena_max:xglibc.malloc.trim_threshold=1"})
print(json.dumps({"applied": list(applied)}))
"""
    )
    assert result == {"applied": list(names)}


_AGENT = """
import asyncio, time
from quorum_cron.app import App

jobs, url, tune = {jobs}, {url!r}, {tune}
raise_thresholds()
app = App(namespace="alloc", members=["n1"], node_id="n1", redis_url=url, tune_allocator=tune)
async def noop(ctx):
    return None
for i in range(jobs):
    app.cron("0 0 1 1 *", name=f"job-{{i}}")(noop)

async def run():
    task = asyncio.ensure_future(app.serve())
    await asyncio.wait_for(app.ready(), 60)
    app.stop()
    await asyncio.wait_for(task, 60)

asyncio.run(run())
allocate_in_threads()
print(json.dumps({{"arenas": arenas(), "kept_kb": kept_after_free()}}))
"""


@pytest.mark.parametrize(
    ("jobs", "tune", "tuned"),
    [(SETTLE_MIN_JOBS, True, True), (SETTLE_MIN_JOBS - 1, True, False), (SETTLE_MIN_JOBS, False, False)],
)
def test_an_app_tunes_the_allocator_before_its_threads_only_for_a_large_table(
    redis_server: EmbeddedRedis, jobs: int, tune: bool, tuned: bool
) -> None:
    """On a Redis store (its server checks run on a worker thread, the node's store work on
    threads of its own) every thread shares the one arena, unless the table is small or the
    program said no."""
    redis_server.client().flushall()
    result = _run(_AGENT.format(jobs=jobs, url=redis_server.url, tune=tune))
    if tuned:
        assert result["arenas"] == 1
        assert result["kept_kb"] < 1024
    else:
        assert result["arenas"] > 1
        assert result["kept_kb"] > 4096


_HEAP = 64 << 20
"""glibc's ``HEAP_MAX_SIZE`` on a 64-bit system: a thread arena's heap is a mapping of this size
aligned to it, read-write as far as it is in use and inaccessible beyond (``MAP_NORESERVE``,
so it does not merge with a neighbour, unless the kernel ignores that flag: overcommit mode 2,
see the test's skip)."""


def _overcommit_mode() -> str:
    try:
        return Path("/proc/sys/vm/overcommit_memory").read_text().strip()
    except OSError:
        return "unknown"


def _thread_arena_heaps(pid: int) -> int:
    """How many glibc thread-arena heaps the process ``pid`` has mapped (``/proc/PID/maps``)."""
    regions = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split()
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        regions.append((lo, hi, parts[1], parts[5] if len(parts) > 5 else ""))
    heaps = 0
    for i, (lo, hi, perms, name) in enumerate(regions):
        if lo % _HEAP or name or not perms.startswith("rw"):
            continue
        end = hi
        if i + 1 < len(regions):
            nlo, nhi, nperms, nname = regions[i + 1]
            if nlo == hi and nperms.startswith("---") and not nname:
                end = nhi
        heaps += end - lo == _HEAP
    return heaps


@pytest.mark.slow
@pytest.mark.skipif(
    ctypes.sizeof(ctypes.c_long) != 8 or _overcommit_mode() not in ("0", "1"),
    reason="thread-arena heaps are read from /proc/PID/maps as 64 MiB mappings: needs a 64-bit "
    "system and vm.overcommit_memory 0 or 1 (under 2 the kernel merges them with neighbours)",
)
@pytest.mark.parametrize(("jobs", "tuned"), [(SETTLE_MIN_JOBS, True), (SETTLE_MIN_JOBS - 1, False)])
def test_the_agent_command_tunes_the_allocator_before_its_threads(
    tmp_path: Path, redis_server: EmbeddedRedis, jobs: int, tuned: bool
) -> None:
    """``quorum-cron agent`` with a large table: once it has joined and served one scrape (its
    store, notice and metrics threads have all allocated), no thread has an arena of its own;
    with a small one they do (the count this reads is seen to work)."""
    redis_server.client().flushall()
    c = Cluster(tmp_path, redis_server.url, 1, namespace="alloc")
    try:
        table = "".join(
            f'[[jobs]]\nname = "job-{i}"\nschedule = "0 0 1 1 *"\ncommand = ["true"]\n\n' for i in range(jobs)
        )
        unset = [f"--unset={k}" for k in os.environ if k.startswith(_ALLOCATOR_VARS)]
        port = free_port()
        node = c.start(
            "n1", c.config(table), "--metrics-port", str(port), wrap=["env", *unset] if unset else ()
        )
        c.wait_joined(["n1"], timeout=60)
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # (loopback: no proxy)
        with direct.open(f"http://127.0.0.1:{port}/metrics", timeout=30) as page:
            assert b"quorum_cron_store_up" in page.read()
        heaps = _thread_arena_heaps(node.pid)
        if tuned:
            assert heaps == 0, f"{heaps} thread arenas after tuning"
        else:
            assert heaps >= 1, "untuned, the agent's threads allocate from arenas of their own"
    finally:
        c.close()


_SCATTERED = """
from quorum_cron.agent import allocator
from quorum_cron.agent.allocator import BurstTrim, IDLE_MS

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

if {tune}:
    allocator.tune_allocator()
# A burst's leftovers: blocks from the heap (under the 128 KiB mapping threshold), about 40 MB,
# freed but one in `every`, the last one kept (no free top for the trim threshold to give back):
# each hole spans at least 8 pages of whatever size the kernel's are.
every = max(8, -(-8 * os.sysconf("SC_PAGE_SIZE") // 8000) + 1)
blocks = [bytes(8000) for _ in range(5120 // every * every)]
kept = blocks[every - 1 :: every]
del blocks
before = rss_mb()
trimmed = BurstTrim().idle(0, IDLE_MS, 0)
print(json.dumps({{"trimmed": trimmed, "freed_mb": before - rss_mb(), "held_mb": len(kept) * 8000 / 2**20}}))
"""


@pytest.mark.skipif(
    bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    reason="a free-threaded build allocates objects with mimalloc, not glibc's malloc",
)
@pytest.mark.parametrize(
    ("tune", "env"),
    [(True, {}), (False, {}), (True, {"MALLOC_TRIM_THRESHOLD_": "131072"})],
    ids=["tuned", "untuned", "trimming-set-by-the-operator"],
)
def test_a_trim_while_idle_gives_the_freed_pages_inside_the_heap_back(
    tune: bool, env: dict[str, str]
) -> None:
    """About 35 MB freed between blocks that stay: tuned, the idle moment's trim hands it back to
    the system; untuned (an application's allocator), or with glibc's trimming set by the
    operator, nothing is trimmed."""
    result = _run(_SCATTERED.format(tune=tune), env)
    assert result["held_mb"] < 10, result
    if tune and not env:
        assert result["trimmed"] is True
        assert result["freed_mb"] > 25, result
    else:
        assert result["trimmed"] is False
        assert result["freed_mb"] < 5, result


def test_a_trim_waits_for_an_idle_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a wait of IDLE_MS or more, with nothing on its way to the store, TRIM_GAP_MS after the
    last trim (``malloc_trim`` replaced by a counter here: the probe above shows the real one's
    effect)."""
    calls: list[int] = []

    def malloc_trim(pad: int) -> int:
        calls.append(pad)
        return 1

    monkeypatch.setattr(allocator, "_TRIM", [malloc_trim])
    trim = BurstTrim()
    assert not trim.idle(0, IDLE_MS - 1, 0), "a timer is near: the burst may go on"
    assert not trim.idle(0, IDLE_MS, 1), "a vote or a result is still on its way"
    assert trim.idle(0, IDLE_MS, 0)
    assert calls == [0]
    assert not trim.idle(TRIM_GAP_MS - 1, IDLE_MS, 0), "too soon after the last trim"
    assert trim.idle(TRIM_GAP_MS, IDLE_MS, 0)
    assert calls == [0, 0]
