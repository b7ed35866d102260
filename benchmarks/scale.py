"""Benchmark: many jobs on one Redis — the minute-boundary burst, end to end, on real agents.

Usage::

    .venv/bin/python benchmarks/scale.py [--jobs 10000] [--agents 3] [--bursts 2] [--spread] [--cluster]
        [--scripts] [--json FILE]

Starts its own redis-server on a free loopback port (``--cluster``: a local
3-master Redis Cluster, no replicas) and ``--agents`` agent processes of the
**Python API** (:class:`quorum_cron.app.App`, each in its own process: this
script run with ``--agent``), every one declaring the same ``--jobs`` jobs
``* * * * *`` — the worst case, every slot of the installation due in the
same second. ``--spread`` declares them ``H * * * * *`` instead (six fields:
the second is ``H``, hashed from the job's name, so each job fires once a
minute at its own second). Each job is an in-process callable (a coroutine
by default, ``--callable thread`` for a plain function on the API's worker
thread) that appends ``(job, slot, wall time)`` to a list the process
flushes to a file every two seconds: the job's own start, at almost no cost.

Timeline: the agents start; the first minute boundary after every agent is
ready is the **warm-up** burst (not counted); then ``--bursts`` measured
minutes. The measured window runs from 2 s before the first measured
boundary to 2 s before the boundary after the last one, so it holds whole
minutes: each burst and everything the cluster does between bursts
(sweeps, heartbeats, polls). It reports:

* **lateness** — the job's own start minus the slot's nominal fire time,
  p50 / p99 / max per burst and over the window;
* **missed / duplicated** — per job, slots in the window with no start /
  more than one start (must be 0 / 0: printed loudly otherwise);
* **the ledger's word** — what the store recorded for each of the window's
  slots once the agents stopped (``Store.read_slots``): every one must be
  ``succeeded``. A start counts a slot as run, but a slot whose result did
  not reach the store in its lease ends ``lost`` although the job ran (at
  100,000 jobs, two in five did before the core stopped dropping results it
  had not sent yet: docs/benchmarks.md, "A bound that dropped results");
* **takeovers and refused starts** — counted in each agent from its
  store's replies (a sweep's slot handed to another executor, a start not
  accepted) over the window: not from its ``takeover`` and
  ``start_refused`` log lines, which a node bounds to 50 an event a minute;
* **Redis CPU per slot** — ``used_cpu_sys + used_cpu_user`` delta over the
  window (summed over the masters with ``--cluster``) / slots due: all the
  server did, not only the vote; with ``INFO commandstats`` calls per slot,
  and, with ``--scripts``, the time inside each of the product's scripts
  (``SLOWLOG`` with a 0 µs threshold over the window, the script named by
  its SHA-1: which script the ``EVALSHA`` time goes to, per slot and per
  job group). That is a profile, not a measurement to quote: the server then
  logs every command, its scripts' own calls too, which adds about a
  quarter to its CPU per slot (a burst of votes: 24 → 31 µs); durations are
  wall time in the command (on a busy machine, also the time the server
  waited for a core); and the log keeps
  the last 1,000,000 commands (about 36 per slot: ~25,000 slots), so a
  larger run reports the split as incomplete;
* **agent CPU per slot** — each agent's ``utime + stime``
  (``/proc/<pid>/stat``) delta over the window / slots due (cluster-wide:
  every agent votes on every slot); **RSS per job** — its ``VmRSS`` at the
  end of the window / jobs (the whole process, interpreter included), and
  the same above the process's RSS once its imports were done (what the
  jobs add: the interpreter and libraries alone are ~40 MB);
* **GC per slot** — each agent's garbage-collector pauses over the window
  (``gc.callbacks``, every generation, wall time of each pause) / slots due;
* **start-up** — spawn → jobs declared → node ready (joined), and spawn →
  first vote sent (the first vote waits for the next due slot: with
  ``* * * * *`` the next minute boundary, so it is reported with the
  boundary it waited for);
* **log lines per slot** — every agent's log lines in the window / slots;
* **Redis memory per job at rest** — ``used_memory`` 2 s before the first
  measured burst (warm-up done: one slot of each job in the ledger) minus
  the empty server's, / jobs.

**Reference, in the same run** (not with ``--spread``): a plain asyncio
process that, at the half minute of the first measured minute (when the
burst is normally over), creates ``--jobs`` tasks of the same recording
callable: what starting that many in-process callables at once costs any
scheduler on this machine under this load, with no protocol at all.

The first vote is found by wrapping ``quorum_cron.agent.storeio.perform``
in the agent process (a timestamp on the first ``Vote*`` action): the API
has no event for it. Targets (issue 27): 10k jobs on 3 agents and one
Redis, burst p99 ≤ 2 s, 0 / 0, no takeovers; Redis CPU ≤ 50 µs per slot;
agent CPU ≤ 150 µs per slot; RSS ≤ 3 KB per job.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    CODE,
    REAPER,
    ArgumentParser,
    EmbeddedRedis,
    code_env,
    print_table,
    sleep_until_ms,
    start_process,
    stats_ms,
    write_result,
)

from quorum_cron.config.schedule import Schedule
from quorum_cron.store import scripts as _scripts
from quorum_cron.store.options import StoreOptions, open_store

SCRIPTS = [v for v in vars(_scripts).values() if isinstance(v, _scripts.Script)]

NAMESPACE = "scale"
SLOWLOG_MAX = 1_000_000
"""``--scripts``: the commands the server's log keeps (Redis's own limit is the memory)."""
FLUSH_S = 2.0
"""How often an agent process appends its recorded starts to its file."""


def job_names(jobs: int) -> list[str]:
    return [f"j{i:06d}" for i in range(jobs)]


def schedule_of(spread: bool) -> str:
    return "H * * * * *" if spread else "* * * * *"


def window_slots(names: list[str], spread: bool, first: int, bursts: int) -> list[tuple[str, int]]:
    """The slots (job, fire ms) the measured window holds: each job's ``bursts`` fire times from
    ``first`` on (with ``--spread``, each job's own hashed second)."""
    if not spread:
        return [(j, first + k * 60_000) for k in range(bursts) for j in names]
    out = []
    for j in names:
        at, schedule = first - 1, Schedule.parse(schedule_of(True), job=j)
        for _ in range(bursts):
            at = schedule.next_after(at)
            out.append((j, at))
    return out


def ledger_outcomes(url: str, slots: list[tuple[str, int]]) -> dict[str, int]:
    """How many of ``slots`` the store recorded in each state (``absent``: no record at all)."""
    store = open_store(url, StoreOptions(NAMESPACE))
    states: Counter[str] = Counter()
    try:
        for i in range(0, len(slots), 2_000):
            chunk = slots[i : i + 2_000]
            found = {(v.job, v.fire_ms): v.state.value for v in store.read_slots(chunk)}
            states.update(found.get(s, "absent") for s in chunk)
    finally:
        store.close()
    return dict(states.most_common())


def all_good(res: dict[str, Any]) -> bool:
    """0 missed, 0 duplicated, and the ledger says every slot of the window succeeded."""
    ledger = res.get("ledger", {})
    return res["missed"] == 0 and res["duplicated"] == 0 and ledger.get("succeeded") == res["slots_due"]


# -- the agent process (this script with --agent) ---------------------------------


class Recorder:
    """Starts recorded in memory, appended to ``out`` by a daemon thread every :data:`FLUSH_S`."""

    def __init__(self, out: Path, stats: Path, spawned: float) -> None:
        self.out = out
        self.stats_path = stats
        self.rows: deque[tuple[str, int, float]] = deque()  # append/popleft are thread-safe
        self.stats: dict[str, Any] = {"pid": os.getpid(), "spawned": spawned, "started": time.time()}
        self.actions: dict[str, int] = {}
        """Store actions performed, by type (``Vote``, ``Start``...), and ``<type> items`` for batches."""
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="scale-recorder", daemon=True)
        self._gc_t0 = 0.0
        self.stats["gc"] = {"s": [0.0, 0.0, 0.0], "n": [0, 0, 0]}
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        """Time the collector's pauses by generation (a collection stops the loop it runs on)."""
        if phase == "start":
            self._gc_t0 = time.perf_counter()
            return
        gen = info.get("generation", 0)
        self.stats["gc"]["s"][gen] += time.perf_counter() - self._gc_t0
        self.stats["gc"]["n"][gen] += 1

    def start(self) -> None:
        self._thread.start()

    def mark(self, key: str, when: float | None = None) -> None:
        if key not in self.stats:
            self.stats[key] = time.time() if when is None else when
            self.write_stats()

    def write_stats(self) -> None:
        with self._lock:
            self.stats["actions"] = self.actions.copy()  # (dict.copy is one C call: no torn read)
            self.stats["actions_at"] = time.time()
            tmp = self.stats_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.stats))
            tmp.replace(self.stats_path)

    def flush(self) -> None:
        rows = [self.rows.popleft() for _ in range(len(self.rows))]
        if rows:
            with self.out.open("a") as f:
                f.write("".join(f"{j} {s} {t:.6f}\n" for j, s, t in rows))

    def _loop(self) -> None:
        while not self._done.wait(FLUSH_S):
            self.flush()
            self.write_stats()

    def close(self) -> None:
        self._done.set()
        if self._thread.ident is not None:  # (started once the node was ready)
            self._thread.join(timeout=5)
        self.flush()
        # What a full collection still walks at the end (objects not frozen by the agent's
        # heap.settle): its count and commonest types, to see what makes generation 2 cost.
        kinds = Counter(type(o).__name__ for o in gc.get_objects(2))
        self.stats["gc_gen2_at_end"] = {"objects": sum(kinds.values()), "types": dict(kinds.most_common(12))}
        self.write_stats()


def _wrap_first_vote(rec: Recorder) -> None:
    """Stamp the first ``Vote`` action the node's store worker performs (no API event for it),
    and count the actions by type (and the items of a batch: a vote's requests, a sweep's jobs)."""
    try:
        import quorum_cron.agent.storeio as storeio
    except ImportError:
        return
    original: Callable[..., object] | None = getattr(storeio, "perform", None)
    if original is None:
        return
    inner: Callable[..., object] = original

    counts = rec.actions

    def outcome(kind: str, reply: object) -> None:
        """Count what a reply shows went wrong (the log's lines of it are bounded)."""
        if kind == "Sweep":  # a slot a sweep hands to another executor comes back committed
            moved = sum(1 for v in getattr(reply, "changed", ()) if str(v.state) == "committed")
            counts["takeovers"] = counts.get("takeovers", 0) + moved
        elif kind == "Start" and getattr(reply, "ok", True) is False:
            counts["Start refused"] = counts.get("Start refused", 0) + 1

    def perform(store: object, node: str, action: object) -> object:
        kind = type(action).__name__
        counts[kind] = counts.get(kind, 0) + 1  # only the store worker thread writes
        for field in ("requests", "params", "slots", "jobs"):
            batch = getattr(action, field, None)
            if isinstance(batch, tuple):
                counts[f"{kind} items"] = counts.get(f"{kind} items", 0) + len(batch)
                break
        if "first_vote" not in rec.stats and kind.startswith("Vote"):
            rec.mark("first_vote")
        reply = inner(store, node, action)
        outcome(kind, reply)
        return reply

    storeio.perform = perform  # type: ignore[attr-defined]

    batched: Callable[..., list[object]] | None = getattr(storeio, "perform_fenced", None)
    if batched is None:  # (code before the batched fenced calls)
        return
    inner_batched: Callable[..., list[object]] = batched

    def perform_fenced(store: object, node: str, actions: list[object]) -> list[object]:
        for action in actions:
            kind = type(action).__name__
            counts[kind] = counts.get(kind, 0) + 1
        counts["fenced batches"] = counts.get("fenced batches", 0) + 1
        replies = inner_batched(store, node, actions)
        for action, reply in zip(actions, replies, strict=False):
            outcome(type(action).__name__, reply)
        return replies

    storeio.perform_fenced = perform_fenced  # type: ignore[attr-defined]
    fenced_kind = getattr(storeio, "_FENCED", None)
    if fenced_kind is not None:  # (the worker's batch kinds carry their call, since cb60001)
        setattr(storeio, "_FENCED", (perform_fenced, fenced_kind[1]))  # noqa: B010 (typed as the original)


def agent_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-url", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--agents", type=int, required=True)
    ap.add_argument("--jobs", type=int, required=True)
    ap.add_argument("--spread", action="store_true")
    ap.add_argument("--callable", choices=["async", "thread"], default="async")
    ap.add_argument("--start-timeout", default="")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stats", type=Path, required=True)
    ap.add_argument("--spawned", type=float, required=True)
    a = ap.parse_args(argv)
    rec = Recorder(a.out, a.stats, a.spawned)

    from quorum_cron.agent.logs import configure_logging
    from quorum_cron.app import App, JobContext

    rec.mark("imported")
    rec.stats["rss_kb_imported"] = _proc_rss_kb(os.getpid())  # the interpreter and libraries, no job yet
    _wrap_first_vote(rec)
    members = [f"n{i}" for i in range(1, a.agents + 1)]
    durations = {"start_timeout": a.start_timeout} if a.start_timeout else {}
    app = App(
        namespace=NAMESPACE, members=members, redis_url=a.redis_url, node_id=a.node, grace="5s", **durations
    )
    append = rec.rows.append

    async def record_async(ctx: JobContext) -> None:
        append((ctx.job, ctx.slot_ms, time.time()))

    def record_thread(ctx: JobContext) -> None:
        append((ctx.job, ctx.slot_ms, time.time()))

    func: Callable[[JobContext], object] = record_async if a.callable == "async" else record_thread
    schedule = schedule_of(a.spread)
    for name in job_names(a.jobs):
        app.cron(schedule, name=name)(func)
    rec.mark("registered")
    configure_logging(a.node, json_lines=True, level="INFO")

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, app.stop)
        task = asyncio.ensure_future(app.serve())
        try:
            await app.ready()
            rec.mark("ready")
            rec.start()  # (the recorder's thread after the node's: App tunes the allocator before those)
        finally:
            await task

    try:
        asyncio.run(serve())
    finally:
        rec.close()
    return 0


# -- the reference process (this script with --reference) --------------------------


def reference_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--at-ms", type=int, required=True)
    ap.add_argument("--jobs", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    rows: list[tuple[str, int, float]] = []

    async def record(job: str, slot: int) -> None:
        rows.append((job, slot, time.time()))

    async def fire() -> None:
        names = job_names(a.jobs)
        # Two steps: Linux lets a long epoll_wait end up to 0.1 % (at most 100 ms) late
        # (timer slack), which is not what starting the callables costs.
        await asyncio.sleep(max(0.0, a.at_ms / 1000 - time.time() - 1))
        await asyncio.sleep(max(0.0, a.at_ms / 1000 - time.time()))
        tasks = [asyncio.ensure_future(record(n, a.at_ms)) for n in names]
        await asyncio.gather(*tasks)

    asyncio.run(fire())
    a.out.write_text("".join(f"{j} {s} {t:.6f}\n" for j, s, t in rows))
    return 0


# -- measuring ---------------------------------------------------------------------


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (``/proc/<pid>/stat``); NaN once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Servers:
    """The Redis side: one server, or the masters of a local cluster (figures summed)."""

    def __init__(self, cluster: bool) -> None:
        self.cluster = cluster
        self.topology: Any
        if cluster:
            from quorum_cron.store.embedded.cluster import EmbeddedCluster

            self.topology = EmbeddedCluster(3, 0)
        else:
            self.topology = EmbeddedRedis()
        REAPER.server(self.topology)
        self.topology.start()
        self.clients = [s.client() for s in self.topology.masters()] if cluster else [self.topology.client()]

    @property
    def url(self) -> str:
        return str(self.topology.url)

    def snapshot(self) -> dict[str, Any]:
        """CPU seconds, used_memory and commandstats calls, per server."""
        per = []
        for c in self.clients:
            cpu = c.info("cpu")
            mem = c.info("memory")
            cmd = c.info("commandstats")
            per.append(
                {
                    "cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
                    "used_memory": int(mem["used_memory"]),
                    "calls": {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in cmd.items()},
                    "usec": {k.removeprefix("cmdstat_"): int(v["usec"]) for k, v in cmd.items()},
                }
            )
        return {"t": time.time(), "servers": per}

    def record_scripts(self) -> None:
        """Log every command from now on (SLOWLOG, 0 µs threshold): the window's time per script.

        Redis 7 logs a script's own calls too (besides its EVALSHA, whose duration holds
        them): ~36 entries per slot, a few hundred bytes each.
        """
        for c in self.clients:
            c.config_set("slowlog-max-len", SLOWLOG_MAX)
            c.config_set("slowlog-log-slower-than", 0)
            c.slowlog_reset()

    def script_time(self) -> dict[str, dict[str, int]] | None:
        """Per script name: calls, job groups (its numkeys) and µs inside it, summed over the
        servers; None when a server's log filled up (its oldest entries were dropped)."""
        names = {s.sha: s.name for s in SCRIPTS}
        out: dict[str, dict[str, int]] = {}
        complete = True
        for c in self.clients:
            c.config_set("slowlog-log-slower-than", -1)
            complete = complete and int(c.slowlog_len()) < SLOWLOG_MAX
            for e in c.slowlog_get(SLOWLOG_MAX):
                cmd = e.get("command", b"")
                parts = (cmd.decode(errors="replace") if isinstance(cmd, bytes) else str(cmd)).split(" ")
                if parts[0].upper() != "EVALSHA" or len(parts) < 3:
                    continue
                row = out.setdefault(names.get(parts[1], parts[1][:8]), {"calls": 0, "groups": 0, "us": 0})
                row["calls"] += 1
                row["groups"] += int(parts[2]) if parts[2].isdigit() else 0
                row["us"] += int(e.get("duration", 0))
            c.slowlog_reset()
        return out if complete else None

    def version(self) -> str:
        info = self.clients[0].info("server")
        return f"{info.get('redis_version', '?')}"

    def close(self) -> None:
        for c in self.clients:
            with contextlib.suppress(Exception):
                c.close()


def read_rows(path: Path) -> list[tuple[str, int, float]]:
    """(job, slot ms, started ms) per line written."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                out.append((parts[0], int(parts[1]), float(parts[2]) * 1000))
    return out


def read_log(path: Path, lo_ms: float, hi_ms: float) -> tuple[int, Counter[str], int]:
    """(lines in [lo, hi), events by name in the window, lines that are not JSON)."""
    lines = 0
    events: Counter[str] = Counter()
    other = 0
    with contextlib.suppress(FileNotFoundError), path.open(errors="replace") as f:
        for line in f:
            try:
                doc = json.loads(line)
                ts = float(doc["ts"])
            except (ValueError, KeyError, TypeError):
                other += 1
                continue
            if lo_ms <= ts < hi_ms:
                lines += 1
                events[str(doc.get("event", ""))] += 1
    return lines, events, other


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    nodes = [f"n{i}" for i in range(1, args.agents + 1)]
    names = job_names(args.jobs)
    servers = Servers(args.cluster)
    print(f"redis {servers.version()} at {servers.url}", flush=True)
    empty = servers.snapshot()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    spawned: dict[str, float] = {}
    for node in nodes:
        spawned[node] = time.time()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--agent", "--redis-url", servers.url]
        cmd += ["--node", node, "--agents", str(args.agents), "--jobs", str(args.jobs)]
        cmd += ["--callable", args.callable, "--out", str(workdir / f"{node}.rec")]
        cmd += ["--stats", str(workdir / f"{node}.json"), "--spawned", repr(spawned[node])]
        cmd += ["--spread"] if args.spread else []
        cmd += ["--start-timeout", args.start_timeout] if args.start_timeout else []
        env = {"PYTHONUNBUFFERED": "1", "NO_PROXY": "127.0.0.1,localhost", **code_env()}
        procs[node] = start_process(cmd, log=workdir / f"{node}.log", env=env, cwd=CODE)
    print(
        f"{args.agents} agents started, {args.jobs:,} jobs '{schedule_of(args.spread)}' each ...", flush=True
    )
    deadline = time.monotonic() + 120 + args.jobs / 200
    while True:
        dead = [n for n, p in procs.items() if p.poll() is not None]
        if dead:
            tail = (workdir / f"{dead[0]}.log").read_text(errors="replace")[-3000:]
            raise SystemExit(f"agent {dead[0]} exited before it was ready:\n{tail}")
        stats = {n: _read_json(workdir / f"{n}.json") for n in nodes}
        if all("ready" in s for s in stats.values()):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"agents not ready in time: {stats}")
        time.sleep(0.2)
    ready_at = max(float(s["ready"]) for s in stats.values())
    warm = (int(ready_at * 1000) // 60_000 + 1) * 60_000  # the warm-up burst
    first = warm + 60_000
    lo, hi = first - 2000, first + args.bursts * 60_000 - 2000
    print(
        f"all ready {max(ready_at - spawned[n] for n in nodes):.1f} s after spawn; warm-up burst at "
        f"{time.strftime('%H:%M:%S', time.gmtime(warm / 1000))}, {args.bursts} measured from "
        f"{time.strftime('%H:%M:%S', time.gmtime(first / 1000))} UTC",
        flush=True,
    )
    ref = None
    ref_at = first + 30_000
    if not args.spread and not args.no_reference:
        ref = start_process(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--reference",
                "--at-ms",
                str(ref_at),
                "--jobs",
                str(args.jobs),
                "--out",
                str(workdir / "reference.rec"),
            ]
        )
    sleep_until_ms(lo)
    pids = {n: procs[n].pid for n in nodes}
    actions0 = {n: _read_json(workdir / f"{n}.json") for n in nodes}
    if args.scripts:
        servers.record_scripts()
    before = servers.snapshot()
    cpu0 = {n: _proc_cpu_s(pids[n]) for n in nodes}
    rss_rest = {n: _proc_rss_kb(pids[n]) for n in nodes}
    print("window open (warm-up done) ...", flush=True)
    sleep_until_ms(hi)
    after = servers.snapshot()
    cpu1 = {n: _proc_cpu_s(pids[n]) for n in nodes}
    if args.scripts:
        after["scripts"] = servers.script_time()
    rss = {n: _proc_rss_kb(pids[n]) for n in nodes}
    actions1 = {n: _read_json(workdir / f"{n}.json") for n in nodes}
    alive = {n: procs[n].poll() is None for n in nodes}
    print("window closed; stopping the agents ...", flush=True)
    time.sleep(FLUSH_S + 1)
    for p in procs.values():
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGTERM)
    for p in procs.values():
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            REAPER.kill(p)
    if ref is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            ref.wait(timeout=30)
    stats = {n: _read_json(workdir / f"{n}.json") for n in nodes}
    ledger = ledger_outcomes(servers.url, window_slots(names, args.spread, first, args.bursts))
    servers.close()
    return analyse(
        args,
        workdir,
        names,
        nodes,
        spawned,
        stats,
        empty=empty,
        before=before,
        after=after,
        cpu=(cpu0, cpu1),
        rss=(rss_rest, rss),
        alive=alive,
        actions=(actions0, actions1),
        window=(lo, hi, warm, first),
        ref_at=ref_at if ref is not None else None,
        redis=servers.version(),
        ledger=ledger,
    )


def analyse(
    args: argparse.Namespace,
    workdir: Path,
    names: list[str],
    nodes: list[str],
    spawned: dict[str, float],
    stats: dict[str, dict[str, Any]],
    *,
    empty: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
    cpu: tuple[dict[str, float], dict[str, float]],
    rss: tuple[dict[str, int], dict[str, int]],
    alive: dict[str, bool],
    window: tuple[int, int, int, int],
    actions: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]] | None = None,
    ref_at: int | None,
    redis: str,
    ledger: dict[str, int] | None = None,
) -> dict[str, Any]:
    lo, hi, warm, first = window
    start_lo, start_hi = first, first + args.bursts * 60_000  # slots counted: fire time in here
    rows = [r for n in nodes for r in read_rows(workdir / f"{n}.rec")]
    by_node = {n: 0 for n in nodes}
    for n in nodes:
        by_node[n] = sum(1 for r in read_rows(workdir / f"{n}.rec") if start_lo <= r[1] < start_hi)
    counted = [r for r in rows if start_lo <= r[1] < start_hi]
    runs = Counter((j, s) for j, s, _ in counted)
    first_start: dict[tuple[str, int], float] = {}
    for j, s, t in counted:
        first_start[(j, s)] = min(t, first_start.get((j, s), t))
    per_job = Counter(j for j, _ in runs)
    due = len(names) * args.bursts
    missed = sum(max(0, args.bursts - per_job[j]) for j in names)
    duplicated = sum(c - 1 for c in runs.values() if c > 1)
    unknown = sorted({j for j, _ in runs} - set(names))
    off_grid = 0 if args.spread else sum(1 for _, s in runs if s % 60_000)
    lateness = [t - s for (j, s), t in first_start.items()]
    bursts = []
    for k in range(args.bursts):
        b_lo, b_hi = first + k * 60_000, first + (k + 1) * 60_000
        late = [t - s for (j, s), t in first_start.items() if b_lo <= s < b_hi]
        bursts.append({"minute": k + 1, "fire_ms": b_lo, "starts": len(late), **stats_ms(late)})
    warm_late = [t - s for j, s, t in rows if warm <= s < warm + 60_000]

    redis_cpu = sum(
        float(a["cpu_s"]) - float(b["cpu_s"])
        for a, b in zip(after["servers"], before["servers"], strict=True)
    )
    per_master = [
        round(a["cpu_s"] - b["cpu_s"], 3) for a, b in zip(after["servers"], before["servers"], strict=True)
    ]
    calls: Counter[str] = Counter()
    usec: Counter[str] = Counter()
    usec_per_master: list[dict[str, float]] = []
    for a, b in zip(after["servers"], before["servers"], strict=True):
        mine: Counter[str] = Counter()
        for k, v in a["calls"].items():
            calls[k] += v - b["calls"].get(k, 0)
            usec[k] += a["usec"][k] - b["usec"].get(k, 0)
            mine[k] += a["usec"][k] - b["usec"].get(k, 0)
        usec_per_master.append({k: round(v / 1e6, 3) for k, v in mine.most_common(8) if v > 0})
    mem_rest = sum(s["used_memory"] for s in before["servers"]) - sum(
        s["used_memory"] for s in empty["servers"]
    )
    window_s = (hi - lo) / 1000
    agents = []
    store_actions: Counter[str] = Counter()
    log_lines = 0
    events_all: Counter[str] = Counter()
    moved: dict[str, int] = {}  # per node: takeovers, refused starts (see the module docstring)
    refused: dict[str, int] = {}
    for n in nodes:
        lines, events, other = read_log(workdir / f"{n}.log", lo, hi)
        log_lines += lines
        events_all.update(events)
        st = stats.get(n, {})
        sp = spawned[n]
        d_cpu = cpu[1][n] - cpu[0][n]
        # Store actions over the window (the agent writes its counts every FLUSH_S: ±2 s at each edge).
        acts: Counter[str] = Counter()
        if actions is not None:
            a0, a1 = actions[0].get(n, {}).get("actions", {}), actions[1].get(n, {}).get("actions", {})
            acts = Counter({k: int(v) - int(a0.get(k, 0)) for k, v in a1.items()})
        moved[n] = acts.pop("takeovers", 0) if actions is not None else events["takeover"]
        refused[n] = acts.pop("Start refused", 0) if actions is not None else events["start_refused"]
        store_actions.update(acts)
        n_jobs, rss_imported = len(names), int(st.get("rss_kb_imported", 0))
        gc_s = float("nan")  # the collector's pauses over the window (the same ±2 s edges), all generations
        gc_gen: dict[str, list[float]] = {}  # the same by generation: seconds, collections
        if actions is not None and "gc" in actions[1].get(n, {}) and "gc" in actions[0].get(n, {}):
            g0, g1 = actions[0][n]["gc"], actions[1][n]["gc"]
            gc_s = sum(g1["s"]) - sum(g0["s"])
            gc_gen = {
                "s": [round(b - a, 3) for a, b in zip(g0["s"], g1["s"], strict=True)],
                "n": [b - a for a, b in zip(g0["n"], g1["n"], strict=True)],
            }
        agents.append(
            {
                "node": n,
                "alive_at_window_end": alive[n],
                "executed": by_node[n],
                "imported_s": round(float(st.get("imported", "nan")) - sp, 2),
                "registered_s": round(float(st.get("registered", "nan")) - sp, 2),
                "ready_s": round(float(st.get("ready", "nan")) - sp, 2),
                "first_vote_s": round(float(st.get("first_vote", "nan")) - sp, 2),
                "cpu_s": round(d_cpu, 2),
                "cpu_us_per_slot": round(d_cpu / due * 1e6, 1) if due else float("nan"),
                "cpu_share": round(d_cpu / window_s, 3),
                "gc_us_per_slot": round(gc_s / due * 1e6, 1) if due else float("nan"),
                "gc_in_window_by_generation": gc_gen,
                "rss_mb_at_rest": round(rss[0][n] / 1024, 1),
                "rss_mb": round(rss[1][n] / 1024, 1),
                "rss_kb_per_job": round(rss[1][n] / len(names), 2),
                "rss_kb_per_job_above_imports": round((rss[1][n] - rss_imported) / n_jobs, 2),
                "log_lines": lines,
                "log_lines_per_slot": round(lines / due, 2) if due else float("nan"),
                # (From the store's replies, not the log: a node logs at most 50 lines of an
                # event a minute, LineBudget; the log's own counts stay under "events".)
                "takeovers": moved[n],
                "start_refused": refused[n],
                "non_json_lines": other,
                "events": dict(events.most_common()),
                "store_actions_per_slot": {k: round(v / due, 3) for k, v in acts.most_common() if v},
            }
        )
    reference = None
    if ref_at is not None:
        ref_rows = read_rows(workdir / "reference.rec")
        reference = {
            "fire_ms": ref_at,
            "jobs": len(ref_rows),
            "lateness_ms": stats_ms([t - s for _, s, t in ref_rows]),
        }
    return {
        "jobs": len(names),
        "agents": len(nodes),
        "bursts": args.bursts,
        "schedule": schedule_of(args.spread),
        "spread": args.spread,
        "topology": "cluster" if args.cluster else "standalone",
        "callable": args.callable,
        "start_timeout": args.start_timeout or "default (5s)",
        "redis": redis,
        "window": {"from_ms": lo, "to_ms": hi, "seconds": window_s, "warm_up_fire_ms": warm},
        "slots_due": due,
        "slots_started": len(runs),
        "missed": missed,
        "duplicated": duplicated,
        "ledger": ledger or {},
        "unknown_jobs": unknown[:10],
        "off_minute_slots": off_grid,
        "lateness_ms": stats_ms(lateness),
        "bursts_detail": bursts,
        "warm_up_lateness_ms": stats_ms(warm_late),
        "takeovers": sum(moved.values()),
        "start_refused": sum(refused.values()),
        "redis_cpu_s": round(redis_cpu, 3),
        "redis_cpu_us_per_slot": round(redis_cpu / due * 1e6, 1) if due else float("nan"),
        "redis_cpu_share": round(redis_cpu / window_s, 3),
        "redis_cpu_s_per_master": per_master,
        # Per server, the seconds inside its 8 costliest commands over the window (INFO
        # commandstats usec): where an uneven master of a cluster spends its time.
        "redis_command_s_per_master": usec_per_master,
        "redis_calls_per_slot": {k: round(v / due, 3) for k, v in calls.most_common() if v > 0},
        "redis_usec_per_slot": {k: round(v / due, 2) for k, v in usec.most_common() if v > 0},
        # --scripts: SLOWLOG over the window, µs inside each script per slot and per job group
        # it handled ("incomplete": the log overflowed; "not recorded": no --scripts).
        **script_split(after, due),
        "redis_memory_bytes_at_rest": mem_rest,
        "redis_memory_bytes_per_job": round(mem_rest / len(names), 1),
        "log_lines_per_slot": round(log_lines / due, 2) if due else float("nan"),
        "events_per_slot": {k: round(v / due, 3) for k, v in events_all.most_common()},
        "store_actions_per_slot": {k: round(v / due, 3) for k, v in store_actions.most_common() if v},
        "agents_detail": agents,
        "reference": reference,
    }


def script_split(after: dict[str, Any], due: int) -> dict[str, Any]:
    """The ``--scripts`` figures of a run (see :meth:`Servers.script_time`)."""
    if "scripts" not in after:
        return {"redis_script_time": "not recorded (no --scripts)"}
    scripts = after["scripts"]
    if scripts is None:
        return {"redis_script_time": f"incomplete: more than {SLOWLOG_MAX:,} commands in the window"}
    rows = sorted(scripts.items())
    return {
        "redis_script_time": "SLOWLOG (it adds server CPU: not for the CPU figures)",
        "redis_script_us_per_slot": {k: round(v["us"] / due, 2) for k, v in rows if due},
        "redis_script_groups_per_slot": {k: round(v["groups"] / due, 3) for k, v in rows if due},
        "redis_script_us_per_group": {k: round(v["us"] / v["groups"], 2) for k, v in rows if v["groups"]},
    }


AGENT_COLUMNS = ["node", "executed", "ready_s", "first_vote_s", "cpu_us_per_slot", "gc_us_per_slot", "rss_mb",
                 "rss_kb_per_job", "rss_kb_per_job_above_imports", "log_lines_per_slot", "takeovers",
                 "start_refused"]  # fmt: skip


def report(res: dict[str, Any]) -> None:
    lat = res["lateness_ms"]
    rows: list[dict[str, object]] = [
        {
            "burst": f"minute {b['minute']}",
            "starts": b["starts"],
            "p50": b["p50"],
            "p99": b["p99"],
            "max": b["max"],
        }
        for b in res["bursts_detail"]
    ]
    rows.append(
        {"burst": "window", "starts": lat["n"], "p50": lat["p50"], "p99": lat["p99"], "max": lat["max"]}
    )
    w = res["warm_up_lateness_ms"]
    rows.append({"burst": "(warm-up)", "starts": w["n"], "p50": w["p50"], "p99": w["p99"], "max": w["max"]})
    ref = res["reference"]
    if ref:
        r = ref["lateness_ms"]
        rows.append(
            {"burst": "reference", "starts": r["n"], "p50": r["p50"], "p99": r["p99"], "max": r["max"]}
        )
    print_table(
        rows,
        ["burst", "starts", "p50", "p99", "max"],
        f"{res['jobs']:,} jobs '{res['schedule']}' on {res['agents']} agents, {res['topology']} Redis "
        f"{res['redis']}: fire → the job's own start, ms",
    )
    print_table(
        res["agents_detail"],
        AGENT_COLUMNS,
        "agents (start-up s after spawn; CPU over the window)",
    )
    verdict = "OK" if res["missed"] == 0 and res["duplicated"] == 0 else "*** NOT 0 / 0 ***"
    print(
        f"\nslots due {res['slots_due']:,}: missed {res['missed']}, duplicated {res['duplicated']}  {verdict}"
    )
    ledger = ", ".join(f"{state} {n:,}" for state, n in res["ledger"].items())
    print(f"the ledger on those slots: {ledger}  {'OK' if all_good(res) else '*** NOT ALL SUCCEEDED ***'}")
    if res["unknown_jobs"] or res["off_minute_slots"]:
        print(
            f"*** unexpected starts: unknown jobs {res['unknown_jobs']}, "
            f"off-minute slots {res['off_minute_slots']}"
        )
    print(f"takeovers {res['takeovers']}, refused starts {res['start_refused']} (all agents, window)")
    print(
        f"Redis CPU {res['redis_cpu_s']:.2f} s over {res['window']['seconds']:.0f} s = "
        f"{res['redis_cpu_us_per_slot']:.1f} µs per slot ({res['redis_cpu_share'] * 100:.0f}% of a core"
        + (f"; per master {res['redis_cpu_s_per_master']} s" if res["topology"] == "cluster" else "")
        + (
            "".join(
                f"\n  master {i + 1} commands (s): {m}"
                for i, m in enumerate(res["redis_command_s_per_master"])
            )
            if res["topology"] == "cluster"
            else ""
        )
        + ")"
    )
    top = ", ".join(f"{k} {v}" for k, v in list(res["redis_calls_per_slot"].items())[:6])
    print(f"Redis calls per slot: {top}")
    per_script = res.get("redis_script_us_per_slot")
    if per_script is not None:
        groups = res["redis_script_groups_per_slot"]
        each = ", ".join(f"{k} {v} µs ({groups.get(k, 0)} groups)" for k, v in per_script.items())
        print(f"Redis time inside each script per slot (SLOWLOG, adds server CPU): {each}")
    elif "incomplete" in res.get("redis_script_time", ""):
        print(f"Redis time per script: {res['redis_script_time']}")
    acts = ", ".join(f"{k} {v}" for k, v in res.get("store_actions_per_slot", {}).items())
    print(f"agents' store actions per slot (all agents; 'items': requests or jobs in a batch): {acts}")
    print(f"Redis memory at rest {res['redis_memory_bytes_per_job']:,.0f} B per job")
    print(
        f"log lines per slot (all agents) {res['log_lines_per_slot']}; "
        f"events per slot {res['events_per_slot']}"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--agent"]:
        return agent_main(argv[1:])
    if argv[:1] == ["--reference"]:
        return reference_main(argv[1:])
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000, help="jobs declared by every agent")
    ap.add_argument("--agents", type=int, default=3, help="agent processes (cluster size)")
    ap.add_argument("--bursts", type=int, default=2, help="measured minutes after the warm-up minute")
    ap.add_argument(
        "--spread", action="store_true", help="'H * * * * *' (hashed second) instead of '* * * * *'"
    )
    ap.add_argument(
        "--cluster", action="store_true", help="a local 3-master Redis Cluster instead of one server"
    )
    ap.add_argument(
        "--callable", choices=["async", "thread"], default="async", help="coroutine or plain function"
    )
    ap.add_argument("--no-reference", action="store_true", help="skip the plain-asyncio reference burst")
    ap.add_argument(
        "--keep", type=Path, default=None, help="keep the agents' logs and recorded starts in this directory"
    )
    ap.add_argument(
        "--start-timeout",
        default="",
        help="the agents' start_timeout (default: the product's, 5s): how long a committed slot may "
        "wait for its executor's start before a sweep hands it to another voter",
    )
    ap.add_argument(
        "--scripts",
        action="store_true",
        help="profile the server's time per script over the window (SLOWLOG of every command: "
        "adds about a quarter to the server's CPU, so its CPU figures are not to be quoted)",
    )
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the result to FILE instead of benchmarks/results/ (peers_scale.py runs this "
        "script so and keeps the result inside its own)",
    )
    args = ap.parse_args(argv)
    for what, value, low in (
        ("--jobs", args.jobs, 1),
        ("--agents", args.agents, 1),
        ("--bursts", args.bursts, 1),
    ):
        if value < low:
            ap.error(f"{what} {value}: expected an integer >= {low}")
    size = f"{args.jobs // 1000}k" if args.jobs % 1000 == 0 else f"{args.jobs}j"
    variant = f"{size}-{args.agents}a-{'cluster' if args.cluster else 'standalone'}"
    variant += "-spread" if args.spread else ""
    variant += "-thread" if args.callable == "thread" else ""
    variant += f"-st{args.start_timeout}" if args.start_timeout else ""
    variant += "-scripts" if args.scripts else ""
    with tempfile.TemporaryDirectory(prefix="qc-bench-scale-") as tmp:
        workdir = Path(tmp)
        if args.keep is not None:
            workdir = args.keep
            workdir.mkdir(parents=True, exist_ok=True)
            for old in [*workdir.glob("n*.rec"), *workdir.glob("n*.log"), *workdir.glob("reference.rec")]:
                old.unlink()  # the recorded starts are appended to: a previous run's must go
        try:
            res = run(args, workdir)
        finally:
            REAPER.reap()
    report(res)
    write_result("scale", res, args.label, variant=variant, path=args.json)
    return 0 if all_good(res) else 1


if __name__ == "__main__":
    raise SystemExit(main())
