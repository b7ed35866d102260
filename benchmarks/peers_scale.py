"""Benchmark: the peers at scale — quorum-cron, APScheduler 3 and Celery beat + RedBeat, 10k / 100k jobs.

Usage::

    pip install -e '.[test,peers]'
    .venv/bin/python benchmarks/peers_scale.py [--jobs 10000] [--only PEER ...] [--bursts 2]
        [--register-timeout S] [--aps-grace 30] [--worker-concurrency 2] [--label L]
    .venv/bin/python benchmarks/peers.py --scale ...     # the same
    .venv/bin/python benchmarks/peers_scale.py --table [RESULT.json]

The same load as ``scale.py`` puts on quorum-cron (issue 27): ``--jobs`` jobs,
all ``* * * * *`` (every slot of the installation due in the same second),
each on its own fresh redis-server on a free loopback port, one after the
other in the same run (the issue asks for the comparison in one run: the
machine's load drifts over an hour, and a figure of another hour is not a
comparison):

* ``quorum-cron`` — ``scale.py --no-reference`` as a child process (3
  agents of the Python API, coroutine jobs, the default ``start_timeout``),
  its result converted to this script's form (:func:`from_scale`, the
  whole ``scale.py`` result kept under ``scale``), with the ledger's word on
  the window's slots;
* ``apscheduler`` — two APScheduler 3 ``BlockingScheduler`` processes sharing
  one ``RedisJobStore`` (as ``peers.py`` sets them up), each adding every job
  at start with a fixed id and ``replace_existing=True``, trigger
  ``CronTrigger.from_crontab("* * * * *")``, the default thread pool (10
  threads), ``coalesce`` and ``max_instances`` left at their defaults and
  ``misfire_grace_time`` = ``--aps-grace`` (30 s: quorum-cron's default
  starting deadline for ``* * * * *``; APScheduler's own default of 1 s
  would refuse most of a burst by design);
* ``celery-redbeat`` — two ``celery beat`` with RedBeat (its defaults: one
  beat holds the lock and sends, the other waits) and one ``celery worker``
  (prefork, ``--worker-concurrency`` processes, default 2 = the vCPUs of the
  machine measured), the jobs as static ``beat_schedule`` entries
  (``crontab()``, one task per job with the job's name as argument) that
  RedBeat copies into Redis at start.

The work is a trivial in-process callable (the APScheduler job, the Celery
task) that appends ``job slot pid start`` to a file of its own process: the
job's own start, in real time. ``slot`` is the nominal minute: for
APScheduler the minute the run started in (exact: a run later than
``--aps-grace`` < 60 s is refused by APScheduler itself, logged "was missed
by"); for Celery the fire time of the run beat sends: the first minute
after the entry's last run (:func:`next_minute_ms`), computed in the beat
process when it sends and carried to the worker in a message header (a
``before_task_publish`` handler), so a run sent or queued late keeps its own
slot. Measurement hooks only: a ``RedBeatScheduler`` subclass (which also
computes that slot) and an APScheduler listener stamp when the entries are
stored and when the active beat first ticks; nothing of the peers'
behaviour is changed.

Timeline, as ``scale.py``: every process is spawned; **registration** ends
when each scheduler process has stored its jobs (and the store holds all
``--jobs``; for Celery also: the worker is ready and a beat holds the lock);
a peer that has not done so within ``--register-timeout`` s is stopped and
reported so. The first minute boundary after that is a warm-up burst; then
``--bursts`` measured minutes; the window runs from 2 s before the first
measured boundary to 2 s before the boundary after the last. Reported (pure
functions below, unit-tested in tests/test_peers_scale_analysis.py):

* **lateness** — first start of each (job, slot) minus the slot, p50 / p99 /
  max over the measured slots and per burst;
* **missed / duplicated** — (job, slot) pairs of the measured minutes with no
  start before the window's end / starts beyond the first;
* **CPU, RSS** — utime + stime over the window and VmRSS at its end of each
  process group (``/proc``: a Celery worker with its pool processes);
* **Redis CPU** over the window; for Celery, the tasks still queued at the
  window's end; every start in the window whatever its slot
  (``window_starts``: what a peer that is behind was busy with).

Every process is started in a session of its own and killed (its process
group, by pid) when the peer is done, on errors and on Ctrl-C. Results:
``benchmarks/results/peers_scale-<stamp>.json`` (the latest kept per
variant: the size, plus the peers when not all). A run without quorum-cron
(``--only apscheduler celery-redbeat``) prints, as a reference, its
figures from the latest ``benchmarks/results/scale-*.json`` of the same
size, marked "separate run".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

HERE = Path(__file__).resolve().parent
MINUTE_MS = 60_000
PEERS = ["quorum-cron", "apscheduler", "celery-redbeat"]
LABELS = {
    "apscheduler": "APScheduler 3, 2 schedulers, shared RedisJobStore",
    "celery-redbeat": "Celery beat + RedBeat (2 beats), 1 worker",
    "quorum-cron": "quorum-cron, 3 agents (scale.py, this run)",
}
SEPARATE_RUN = "quorum-cron, 3 agents (scale.py, separate run)"
APS_RUN_TIMES = "apscheduler.run_times"  # RedisJobStore's default sorted set
REDBEAT_SCHEDULE = "redbeat::schedule"  # RedBeat's default sorted set (key prefix "redbeat:")
REDBEAT_LOCK = "redbeat::lock"


def job_names(jobs: int) -> list[str]:
    return [f"j{i:06d}" for i in range(jobs)]


def floor_minute_ms(ms: float) -> int:
    return int(ms // MINUTE_MS * MINUTE_MS)


def next_minute_ms(last_run_ms: float | None, now_ms: float) -> int:
    """The fire time of the run Celery beat sends for a ``crontab()`` entry (every minute): the
    first minute boundary after the entry's last run; for one that never ran, the current minute."""
    if last_run_ms is None:
        return floor_minute_ms(now_ms)
    return floor_minute_ms(last_run_ms) + MINUTE_MS


# -- the peers' processes (this script with --role) --------------------------------------
#
# Only the standard library is imported at module level: the Celery worker and the
# schedulers import this module, and its size must not count in their RSS.

_REC_LOCK = threading.Lock()
_REC_FILE: dict[int, Any] = {}


def record(job: str, slot_ms: int, start_s: float) -> None:
    """Append ``job slot pid start`` to this process's file in ``$PSCALE_OUT`` (line-buffered)."""
    pid = os.getpid()
    with _REC_LOCK:
        f = _REC_FILE.get(pid)
        if f is None:
            f = _REC_FILE[pid] = open(  # noqa: SIM115 (kept open for the process's life)
                Path(os.environ["PSCALE_OUT"]) / f"rec-{pid}.txt", "a", buffering=1
            )
        f.write(f"{job} {slot_ms} {pid} {start_s:.6f}\n")


def stamp(key: str) -> None:
    """Record the wall time of ``key`` (once) in ``$PSCALE_OUT/stats-$PSCALE_NAME.json``."""
    path = Path(os.environ["PSCALE_OUT"]) / f"stats-{os.environ.get('PSCALE_NAME', os.getpid())}.json"
    with _REC_LOCK:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = {"pid": os.getpid()}
        if key in doc:
            return
        doc[key] = time.time()
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(path)


def aps_tick(job: str) -> None:
    """The APScheduler job: its slot is the minute it started in (lateness < the misfire grace < 60 s)."""
    start = time.time()
    record(job, floor_minute_ms(start * 1000), start)


def aps_main(name: str) -> int:
    from apscheduler.events import EVENT_SCHEDULER_STARTED  # type: ignore[import-untyped]
    from apscheduler.jobstores.redis import RedisJobStore  # type: ignore[import-untyped]
    from apscheduler.schedulers.blocking import BlockingScheduler  # type: ignore[import-untyped]
    from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]

    os.environ["PSCALE_NAME"] = name
    stamp("imported")
    port = int(os.environ["PSCALE_REDIS_URL"].rsplit(":", 1)[1].split("/")[0])
    sched = BlockingScheduler(
        jobstores={"default": RedisJobStore(host="127.0.0.1", port=port)},
        job_defaults={"misfire_grace_time": int(os.environ.get("PSCALE_APS_GRACE", "30"))},
        timezone="UTC",
    )
    trigger = CronTrigger.from_crontab("* * * * *", timezone="UTC")
    for job in job_names(int(os.environ["PSCALE_JOBS"])):
        sched.add_job("peers_scale:aps_tick", trigger, args=[job], id=job, replace_existing=True)
    stamp("declared")
    # Dispatched by start() once the pending jobs are in the store.
    sched.add_listener(lambda event: stamp("registered"), EVENT_SCHEDULER_STARTED)
    sched.start()
    return 0


def make_celery() -> Any:
    """The Celery app of the worker and of the beats (``$PSCALE_ROLE``: ``beat`` or ``worker``)."""
    from celery import Celery  # type: ignore[import-untyped]
    from celery.schedules import crontab  # type: ignore[import-untyped]

    url = os.environ["PSCALE_REDIS_URL"]
    app = Celery("pscale", broker=url)
    app.conf.redbeat_redis_url = url
    app.conf.broker_connection_retry_on_startup = True
    app.conf.task_ignore_result = True

    @app.task(name="pscale.tick", bind=True)  # type: ignore[untyped-decorator,unused-ignore]
    def tick(self: Any, job: str) -> None:
        start = time.time()
        slot = getattr(self.request, "pscale_slot", None)  # a message header: see below
        if slot is None:
            stamp("task_without_slot_header")  # its slot falls back to its own start's minute
        record(job, int(slot) if slot is not None else floor_minute_ms(start * 1000), start)

    role = os.environ.get("PSCALE_ROLE", "")
    if role == "beat":
        from celery.signals import before_task_publish  # type: ignore[import-untyped]
        from redbeat import RedBeatScheduler  # type: ignore[import-untyped]

        class TimedRedBeatScheduler(RedBeatScheduler):  # type: ignore[misc]
            """RedBeat, with time stamps: entries stored; first tick (the lock holder's)."""

            def setup_schedule(self) -> None:
                stamp("declared")
                super().setup_schedule()
                stamp("registered")

            def tick(self, *args: Any, **kwargs: Any) -> Any:
                stamp("active")
                return super().tick(*args, **kwargs)

            def apply_async(self, entry: Any, *args: Any, **kwargs: Any) -> Any:
                # The run being sent is the entry's first fire time after its last run.
                last = entry.last_run_at
                sending[0] = next_minute_ms(
                    None if last is None else last.timestamp() * 1000, time.time() * 1000
                )
                try:
                    return super().apply_async(entry, *args, **kwargs)
                finally:
                    sending[0] = None

        sending: list[int | None] = [None]

        def slot_header(headers: dict[str, Any] | None = None, **_: Any) -> None:
            if headers is not None and sending[0] is not None:
                headers["pscale_slot"] = sending[0]

        before_task_publish.connect(slot_header, weak=False)
        app.conf.beat_scheduler = TimedRedBeatScheduler
        app.conf.beat_schedule = {
            job: {"task": "pscale.tick", "schedule": crontab(), "args": (job,)}
            for job in job_names(int(os.environ["PSCALE_JOBS"]))
        }
    elif role == "worker":
        from celery.signals import worker_ready  # type: ignore[import-untyped,unused-ignore]

        worker_ready.connect(lambda **_: stamp("registered"), weak=False)
    return app


celery_app = make_celery() if os.environ.get("PSCALE_ROLE") and __name__ != "__main__" else None


def role_main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    role, rest = argv[0], argv[1:]
    if role == "aps":
        import peers_scale  # the module the jobs' references name (not __main__)

        return peers_scale.aps_main(rest[0])
    if role == "celery":
        from celery.__main__ import main as celery_main  # type: ignore[import-untyped]

        os.environ.setdefault("PSCALE_NAME", rest[0])
        stamp("imported")
        sys.argv = ["celery", "-A", "peers_scale:celery_app", *rest]
        celery_main()
        return 0
    raise SystemExit(f"peers_scale.py: unknown role {role!r}")


# -- pure analysis (tests/test_peers_scale_analysis.py) ----------------------------------


@dataclass(frozen=True)
class Rec:
    job: str
    slot_ms: int
    pid: int
    start_ms: float


def parse_records(text: str) -> list[Rec]:
    """The starts in ``text`` (lines ``job slot pid start_s``); malformed lines skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        try:
            out.append(Rec(parts[0], int(parts[1]), int(parts[2]), float(parts[3]) * 1000))
        except ValueError:
            continue
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (as benchmarks/_common.py); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


def lateness_stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"n": 0, "p50": math.nan, "p99": math.nan, "max": math.nan}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 1),
        "p99": round(percentile(values, 99), 1),
        "max": round(max(values), 1),
    }


def burst_figures(
    recs: Iterable[Rec],
    jobs: Sequence[str],
    first_ms: int,
    bursts: int,
    *,
    until_ms: float = math.inf,
    names: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """Missed, duplicated and lateness of the ``bursts`` minutes from ``first_ms`` (a minute boundary).

    A start counts for its (job, slot) when its slot is one of those minutes and
    it started before ``until_ms`` (the window's end). ``names`` maps pids to
    process names for ``by_process``.
    """
    slots = [first_ms + k * MINUTE_MS for k in range(bursts)]
    wanted = set(slots)
    known = set(jobs)
    runs: Counter[tuple[str, int]] = Counter()
    first: dict[tuple[str, int], float] = {}
    by_pid: Counter[int] = Counter()
    unknown = 0
    for r in recs:
        if r.slot_ms not in wanted or r.start_ms >= until_ms:
            continue
        if r.job not in known:
            unknown += 1
            continue
        key = (r.job, r.slot_ms)
        runs[key] += 1
        first[key] = min(r.start_ms, first.get(key, r.start_ms))
        by_pid[r.pid] += 1
    due = len(known) * bursts
    late = {key: start - key[1] for key, start in first.items()}
    per_burst = []
    for k, slot in enumerate(slots):
        values = [v for (_, s), v in late.items() if s == slot]
        per_burst.append({"minute": k + 1, "fire_ms": slot, "started": len(values), **lateness_stats(values)})
    by_process: Counter[str] = Counter()
    for pid, n in by_pid.items():
        by_process[(names or {}).get(pid, f"pid {pid}")] += n
    return {
        "due": due,
        "started": len(runs),
        "missed": due - len(runs),
        "duplicated": sum(n - 1 for n in runs.values()),
        "unknown_jobs": unknown,
        "lateness_ms": lateness_stats(list(late.values())),
        "bursts_detail": per_burst,
        "by_process": dict(sorted(by_process.items())),
    }


def window_starts(recs: Iterable[Rec], lo_ms: float, hi_ms: float, first_ms: int) -> dict[str, Any]:
    """Every start in the window ``[lo_ms, hi_ms)``, whatever its slot: how many, their slots in
    minutes relative to the first measured one (``-1``: the warm-up), and their lateness — what a
    peer that is behind was busy with."""
    inside = [r for r in recs if lo_ms <= r.start_ms < hi_ms]
    by_slot = Counter(int((r.slot_ms - first_ms) // MINUTE_MS) for r in inside)
    return {
        "starts": len(inside),
        "by_slot_minute": {str(k): n for k, n in sorted(by_slot.items())},
        "lateness_ms": lateness_stats([r.start_ms - r.slot_ms for r in inside]),
    }


def warm_up_lateness(recs: Iterable[Rec], warm_ms: int) -> dict[str, float]:
    """Lateness of the first start of each job in the warm-up minute (not counted)."""
    first: dict[str, float] = {}
    for r in recs:
        if r.slot_ms == warm_ms:
            first[r.job] = min(r.start_ms, first.get(r.job, r.start_ms))
    return lateness_stats([t - warm_ms for t in first.values()])


def proc_stat(text: str) -> tuple[int, int, float]:
    """(ppid, process group, utime + stime in clock ticks) from a ``/proc/<pid>/stat`` line."""
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[2]), float(int(fields[11]) + int(fields[12]))


def status_rss_kb(text: str) -> int:
    """``VmRSS`` in kB from ``/proc/<pid>/status`` (0 when absent: a zombie)."""
    m = re.search(r"^VmRSS:\s+(\d+)\s+kB", text, re.MULTILINE)
    return int(m.group(1)) if m else 0


def registration_note(peer: str, jobs: int, timeout_s: float, stored: int, missing: Sequence[str]) -> str:
    """What to say of a peer that did not finish registering in time."""
    note = f"did not finish registering {jobs:,} jobs in {timeout_s:.0f} s ({stored:,} in the store"
    if missing:
        note += "; not done: " + ", ".join(missing)
    return note + ")"


def status_of(res: Mapping[str, Any]) -> str:
    """One line on how the peer coped: its failure, or the missed share."""
    if res.get("status") != "ok":
        return str(res.get("note") or res.get("status") or "?")
    parts = []
    if res["missed"]:
        parts.append(f"{res['missed']:,} of {res['due']:,} missed")
    seen = res.get("window_starts") or {}
    if not res.get("started") and seen:
        if seen.get("starts"):
            late = seen["lateness_ms"]
            parts.append(
                f"the window's {seen['starts']:,} starts were runs of earlier minutes, "
                f"{late['p50'] / 1000:.0f}-{late['max'] / 1000:.0f} s late"
            )
        else:
            parts.append("no job started in the window")
    if res["duplicated"]:
        parts.append(f"{res['duplicated']:,} duplicated")
    ledger = res.get("ledger")
    if ledger and set(ledger) != {"succeeded"}:
        parts.append("the ledger: " + ", ".join(f"{n:,} {what}" for what, n in sorted(ledger.items())))
    dead = [n for n, p in res.get("procs", {}).items() if not p.get("alive", True)]
    if dead:
        parts.append("exited: " + ", ".join(dead))
    backlog = res.get("queued_at_window_end")
    if backlog:
        parts.append(f"{backlog:,} tasks still queued at the window's end")
    refused = sum(res.get("aps_misfired", {}).values())
    if refused:
        parts.append(f"{refused:,} runs refused as misfired in the whole run (warm-up included)")
    return "; ".join(parts) if parts else "all ran once"


def _num(v: object, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}") + unit
    return f"{v:,}{unit}" if isinstance(v, int) else f"{v}{unit}"


def _seconds(ms: float | None) -> str:
    if ms is None or math.isnan(ms):
        return "-"
    return f"{ms / 1000:.2f}" if abs(ms) < 10_000 else f"{ms / 1000:.1f}"


def row_of(res: Mapping[str, Any]) -> dict[str, str]:
    """A table row (strings) for one peer's result, failed or not."""
    row = {
        "setup": LABELS.get(str(res["peer"]), str(res["peer"])),
        "jobs": f"{res['jobs']:,}",
        "registered in": _num(res.get("registered_s"), " s"),
    }
    if res.get("status") != "ok":
        return {**row, "status": status_of(res)}
    lat = res["lateness_ms"]
    procs = res.get("procs", {})
    sched = [p for p in procs.values() if p.get("kind") == "scheduler"]
    work = [p for p in procs.values() if p.get("kind") == "worker"]
    return {
        **row,
        "lateness p50 / p99 / max s": " / ".join(_seconds(lat[k]) for k in ("p50", "p99", "max")),
        "missed": f"{res['missed']:,} of {res['due']:,}",
        "duplicated": f"{res['duplicated']:,}",
        "scheduler CPU s": " + ".join(_num(p.get("cpu_s")) for p in sched) or "-",
        "worker CPU s": " + ".join(_num(p.get("cpu_s")) for p in work) or "-",
        "RSS MB": " / ".join(_num(p.get("rss_mb")) for p in [*sched, *work]) or "-",
        "status": status_of(res),
    }


def from_scale(scale: Mapping[str, Any]) -> dict[str, Any]:
    """quorum-cron's result in the peers' form, from a ``scale.py`` result of the same load.

    Its agents are the schedulers and run the jobs themselves (no worker);
    ``registered_s`` is when the last agent was ready; ``ledger`` is what the
    store recorded for the window's slots (every one ``succeeded`` when all
    went well). The whole ``scale.py`` result is kept under ``scale``.
    """
    agents = scale.get("agents_detail", [])
    return {
        "peer": "quorum-cron",
        "label": LABELS["quorum-cron"],
        "jobs": scale["jobs"],
        "status": "ok",
        "registered_s": max((a.get("ready_s", math.nan) for a in agents), default=math.nan),
        "lateness_ms": scale["lateness_ms"],
        "warm_up_lateness_ms": scale.get("warm_up_lateness_ms"),
        "missed": scale["missed"],
        "duplicated": scale["duplicated"],
        "due": scale["slots_due"],
        "ledger": scale.get("ledger"),
        "redis": scale.get("redis"),
        "redis_cpu_s": scale.get("redis_cpu_s"),
        "window": scale.get("window"),
        "procs": {
            a["node"]: {
                "kind": "scheduler",
                "alive": a.get("alive_at_window_end", True),
                "cpu_s": a.get("cpu_s"),
                "rss_mb": a.get("rss_mb"),
            }
            for a in agents
        },
        "scale": dict(scale),
    }


def reference_row(scale: Mapping[str, Any], source: str) -> dict[str, str]:
    """The quorum-cron row from a ``scale.py`` result of another run (a peers run without it)."""
    res = from_scale(scale)
    row = row_of(res)
    row["setup"] = SEPARATE_RUN
    row["status"] = f"{status_of(res)} (from {source})"
    return row


def pick_reference(
    docs: Iterable[tuple[str, Mapping[str, Any]]], jobs: int
) -> tuple[str, Mapping[str, Any]] | None:
    """The latest ``scale.py`` result (name, doc) comparable to ``jobs`` jobs ``* * * * *``:
    one standalone Redis, 3 agents, coroutine jobs, default start timeout, this tree's code."""
    found = [
        (str(doc.get("when", "")), name, doc)
        for name, doc in docs
        if doc.get("jobs") == jobs
        and doc.get("schedule") == "* * * * *"
        and doc.get("topology") == "standalone"
        and doc.get("agents") == 3
        and doc.get("callable", "async") == "async"
        and str(doc.get("start_timeout", "default")).startswith("default")
        and "-code-" not in str(doc.get("variant", ""))
    ]
    if not found:
        return None
    _, name, doc = max(found, key=lambda t: t[0])
    return name, doc


COLUMNS = [
    "setup",
    "jobs",
    "registered in",
    "lateness p50 / p99 / max s",
    "missed",
    "duplicated",
    "scheduler CPU s",
    "worker CPU s",
    "RSS MB",
    "status",
]


def markdown(rows: Sequence[Mapping[str, str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(r.get(c, "") for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


# -- the driver --------------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, int, float]]:
    """Every live process: pid → (ppid, process group, CPU ticks)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            out[int(entry.name)] = proc_stat((entry / "stat").read_text())
    return out


def group_usage(leader: int) -> dict[str, Any]:
    """CPU seconds and RSS of the process group ``leader`` leads (it and its pool processes)."""
    tick = os.sysconf("SC_CLK_TCK")
    table = _proc_table()
    members = [pid for pid, (_, pgrp, _) in table.items() if pgrp == leader]
    rss = 0
    for pid in members:
        with contextlib.suppress(OSError):
            rss += status_rss_kb(Path(f"/proc/{pid}/status").read_text())
    return {"pids": members, "cpu_s": sum(table[p][2] for p in members) / tick, "rss_kb": rss}


@dataclass
class Spawned:
    name: str
    kind: str  # "scheduler" or "worker"
    proc: subprocess.Popen[bytes]
    spawned: float


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def run_peer(peer: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Start ``peer`` on a fresh Redis, measure its bursts, stop it; every wait is bounded."""
    from _common import REAPER, EmbeddedRedis, sleep_until_ms, start_process

    jobs = args.jobs
    names = job_names(jobs)
    res: dict[str, Any] = {"peer": peer, "label": LABELS[peer], "jobs": jobs, "status": "ok"}
    env = {
        "PSCALE_OUT": str(work),
        "PSCALE_JOBS": str(jobs),
        "PSCALE_APS_GRACE": str(args.aps_grace),
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(HERE),
        "NO_PROXY": "127.0.0.1,localhost",
    }
    me = [sys.executable, str(Path(__file__).resolve()), "--role"]
    with REAPER.server(EmbeddedRedis()) as server:
        env["PSCALE_REDIS_URL"] = server.url
        client = server.client(socket_timeout=10)
        res["redis"] = str(client.info("server").get("redis_version", "?"))
        procs: list[Spawned] = []

        def spawn(name: str, kind: str, cmd: list[str], **extra: str) -> None:
            t = time.time()
            p = start_process(
                cmd, log=work / f"{name}.log", env={**env, "PSCALE_NAME": name, **extra}, cwd=work
            )
            procs.append(Spawned(name, kind, p, t))

        if peer == "apscheduler":
            store_key = APS_RUN_TIMES
            for name in ("aps1", "aps2"):
                spawn(name, "scheduler", [*me, "aps", name])
        else:
            store_key = REDBEAT_SCHEDULE
            worker = ["worker", "--loglevel", "WARNING", "--concurrency", str(args.worker_concurrency)]
            spawn("worker", "worker", [*me, "celery", *worker, "--hostname", "w1@%h"], PSCALE_ROLE="worker")
            for name in ("beat1", "beat2"):
                beat = ["beat", "--loglevel", "WARNING", "--schedule", str(work / f"{name}.db")]
                spawn(name, "scheduler", [*me, "celery", *beat], PSCALE_ROLE="beat")
        t_spawn = min(s.spawned for s in procs)
        print(f"  {peer}: {len(procs)} processes spawned, {jobs:,} jobs each ...", flush=True)
        try:
            # -- registration, bounded --------------------------------------------------
            deadline = time.monotonic() + args.register_timeout
            while True:
                stats = {s.name: _read_json(work / f"stats-{s.name}.json") for s in procs}
                stored = int(client.zcard(store_key))
                dead = [s.name for s in procs if s.proc.poll() is not None]
                if dead:
                    res["status"] = "failed"
                    gone = next(s for s in procs if s.name == dead[0])
                    res["note"] = f"{dead[0]} exited during start-up (exit {gone.proc.returncode})"
                    res["log_tail"] = _tail(work / f"{dead[0]}.log")
                    break
                missing = [n for n, s in stats.items() if "registered" not in s]
                if peer == "celery-redbeat" and not any("active" in s for s in stats.values()):
                    missing.append("no beat holds the lock")
                if stored < jobs:
                    missing.append(f"{stored:,} of {jobs:,} stored")
                if not missing:
                    break
                if time.monotonic() > deadline:
                    res["status"] = "not registered"
                    res["note"] = registration_note(peer, jobs, args.register_timeout, stored, missing)
                    break
                time.sleep(0.5)
            res["startup"] = {
                n: {k: round(float(v) - s.spawned, 2) for k, v in stats[n].items() if k != "pid"}
                for n, s in ((p.name, p) for p in procs)
            }
            res["stored_at_registration"] = stored
            if res["status"] != "ok":
                print(f"  {peer}: {res['note']}", flush=True)
                return res
            ready = max(float(s["registered"]) for s in stats.values())
            res["registered_s"] = round(ready - t_spawn, 2)
            # -- warm-up burst, then the measured ones ---------------------------------
            warm = (int((ready + 3) * 1000) // MINUTE_MS + 1) * MINUTE_MS
            first = warm + MINUTE_MS
            lo, hi = first - 2000, first + args.bursts * MINUTE_MS - 2000
            print(
                f"  {peer}: registered in {res['registered_s']:.1f} s; warm-up at "
                f"{time.strftime('%H:%M:%S', time.gmtime(warm / 1000))}, {args.bursts} measured from "
                f"{time.strftime('%H:%M:%S', time.gmtime(first / 1000))} UTC",
                flush=True,
            )
            sleep_until_ms(lo)
            use0 = {s.name: group_usage(s.proc.pid) for s in procs}
            redis0 = client.info("cpu")
            while time.time() * 1000 < hi:
                time.sleep(min(1.0, max(0.0, hi / 1000 - time.time())))
            use1 = {s.name: group_usage(s.proc.pid) for s in procs}
            redis1 = client.info("cpu")
            res["queued_at_window_end"] = int(client.llen("celery")) if peer == "celery-redbeat" else None
            res["redis_used_memory_mb"] = round(int(client.info("memory")["used_memory"]) / 2**20, 1)
            alive = {s.name: s.proc.poll() is None for s in procs}
            time.sleep(1.0)  # the starts of the window's last second reach the files
        finally:
            for s in procs:
                REAPER.kill(s.proc)
            client.close()
    pid_names = {pid: s.name for s in procs for pid in [*use0[s.name]["pids"], *use1[s.name]["pids"]]}
    text = "".join(p.read_text(errors="replace") for p in sorted(work.glob("rec-*.txt")))
    recs = parse_records(text)
    figures = burst_figures(recs, names, first, args.bursts, until_ms=hi, names=pid_names)
    res.update(figures)
    res["warm_up_lateness_ms"] = warm_up_lateness(recs, warm)
    res["window_starts"] = window_starts(recs, lo, hi, first)
    res["window"] = {"from_ms": lo, "to_ms": hi, "seconds": (hi - lo) / 1000, "warm_up_fire_ms": warm}
    res["procs"] = {
        s.name: {
            "kind": s.kind,
            "alive": alive[s.name],
            "processes": len(use1[s.name]["pids"]),
            "cpu_s": round(use1[s.name]["cpu_s"] - use0[s.name]["cpu_s"], 2),
            "rss_mb_at_window_start": round(use0[s.name]["rss_kb"] / 1024, 1),
            "rss_mb": round(use1[s.name]["rss_kb"] / 1024, 1),
        }
        for s in procs
    }
    res["redis_cpu_s"] = round(
        float(redis1["used_cpu_sys"]) + float(redis1["used_cpu_user"])
        - float(redis0["used_cpu_sys"]) - float(redis0["used_cpu_user"]),
        2,
    )  # fmt: skip
    logs = {s.name: (work / f"{s.name}.log").read_text(errors="replace") for s in procs}
    res["log_lines"] = {n: t.count("\n") for n, t in logs.items()}  # warnings and errors: whole run
    if peer == "apscheduler":  # runs it refused, whole run (warm-up included)
        res["aps_misfired"] = {n: t.count("was missed by") for n, t in logs.items()}
        res["aps_max_instances_skips"] = {
            n: t.count("maximum number of running instances") for n, t in logs.items()
        }
    return res


def latest_scale(jobs: int) -> tuple[str, Mapping[str, Any]] | None:
    from _common import RESULTS

    docs = []
    for path in sorted(RESULTS.glob("scale-*.json")):
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(path.read_text())
            if isinstance(doc, dict):
                docs.append((path.name, doc))
    return pick_reference(docs, jobs)


def table(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    """The rows of a run; without quorum-cron in it, its latest comparable ``scale.py`` result."""
    rows = [row_of(r) for r in doc["peers"]]
    if any(r.get("peer") == "quorum-cron" for r in doc["peers"]):
        return rows
    ref = latest_scale(int(doc["jobs"]))
    if ref is not None:
        rows.append(reference_row(ref[1], ref[0]))
    return rows


def run_quorum_cron(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """quorum-cron under the same load: ``scale.py`` (3 agents, its own fresh Redis) as a child,
    its output shown as it runs, its result read back (:func:`from_scale`). Bounded: a run that
    outlives the registration timeout plus its minutes is stopped (SIGTERM: scale.py stops its
    agents and server) and reported as failed."""
    import signal
    import subprocess

    out = work / "scale.json"
    cmd = [sys.executable, str(HERE / "scale.py"), "--jobs", str(args.jobs), "--bursts", str(args.bursts)]
    cmd += ["--no-reference", "--json", str(out)]
    limit = args.register_timeout + (args.bursts + 3) * MINUTE_MS / 1000 + 120
    proc = subprocess.Popen(cmd)
    try:
        code = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    base = {"peer": "quorum-cron", "label": LABELS["quorum-cron"], "jobs": args.jobs, "status": "failed"}
    if code is None:
        return {**base, "note": f"scale.py did not finish in {limit:.0f} s (stopped)"}
    if not out.exists():
        return {**base, "note": f"scale.py exited {code} without a result"}
    res = from_scale(json.loads(out.read_text()))
    res["scale_exit"] = code
    return res


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("celery", "celery-redbeat", "kombu", "APScheduler", "redis"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--role"]:
        return role_main(argv[1:])
    sys.path.insert(0, str(HERE))
    from _common import REAPER, ArgumentParser, print_table, write_result

    ap = ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--only", nargs="+", choices=PEERS, default=PEERS, metavar="PEER")
    ap.add_argument("--bursts", type=int, default=2, help="measured minutes after the warm-up minute")
    ap.add_argument(
        "--register-timeout",
        type=float,
        default=None,
        help="seconds a peer may take to register its jobs (default 120 + jobs / 500)",
    )
    ap.add_argument("--aps-grace", type=int, default=30, help="APScheduler's misfire_grace_time, s (< 60)")
    ap.add_argument("--worker-concurrency", type=int, default=2, help="Celery worker pool processes")
    ap.add_argument("--label", default="")
    ap.add_argument("--table", nargs="?", const="latest", metavar="RESULT.json", help="print the table only")
    args = ap.parse_args(argv)
    if args.table:
        from _common import RESULTS

        found = sorted(RESULTS.glob("peers_scale-*.json"))
        if args.table == "latest" and not found:
            raise SystemExit("peers_scale.py: no benchmarks/results/peers_scale-*.json yet")
        path = found[-1] if args.table == "latest" else Path(args.table)
        print(markdown(table(json.loads(path.read_text()))))
        return 0
    if args.jobs < 1 or args.bursts < 1:
        ap.error("--jobs and --bursts: expected integers >= 1")
    if not 0 < args.aps_grace < 60:
        ap.error("--aps-grace: expected 1..59 s (a run's slot is the minute it started in)")
    if args.register_timeout is None:
        args.register_timeout = 120 + args.jobs / 500
    vers = versions()
    missing = [d for d, v in vers.items() if v == "not installed"]
    if missing:
        raise SystemExit(f"peers_scale.py: {', '.join(missing)} not installed: pip install -e '.[peers]'")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), flush=True)
    doc: dict[str, Any] = {
        "jobs": args.jobs,
        "bursts": args.bursts,
        "schedule": "* * * * *",
        "register_timeout_s": args.register_timeout,
        "aps_misfire_grace_s": args.aps_grace,
        "worker_concurrency": args.worker_concurrency,
        "versions": vers,
        "peers": [],
    }
    t0 = time.monotonic()
    try:
        for peer in args.only:
            print(f"{peer} ({time.monotonic() - t0:.0f} s so far)", flush=True)
            with tempfile.TemporaryDirectory(prefix=f"qc-peers-scale-{peer}-") as tmp:
                try:
                    if peer == "quorum-cron":
                        res = run_quorum_cron(args, Path(tmp))
                    else:
                        res = run_peer(peer, args, Path(tmp))
                except Exception as exc:  # a peer's failure is a result: the next peer runs
                    print(f"  failed: {exc}", flush=True)
                    res = {
                        "peer": peer,
                        "jobs": args.jobs,
                        "status": "failed",
                        "note": str(exc).splitlines()[0],
                    }
            doc["peers"].append(res)
    finally:
        REAPER.reap()
    doc["seconds"] = round(time.monotonic() - t0, 1)
    rows = table(doc)
    doc["table"] = rows
    print_table(rows, COLUMNS, f"the peers at scale: {args.jobs:,} jobs '* * * * *' ({doc['seconds']:.0f} s)")
    size = f"{args.jobs // 1000}k" if args.jobs % 1000 == 0 else f"{args.jobs}j"
    variant = size + ("" if args.only == PEERS else "-" + "-".join(args.only))
    variant += f"-b{args.bursts}" if args.bursts != 2 else ""
    write_result("peers_scale", doc, args.label, variant=variant)
    print()
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
