"""Benchmark: the common leader-with-TTL-lease scheduler, on the same Redis and workload.

Usage::

    .venv/bin/python benchmarks/leader_baseline.py [--nodes 5] [--jobs 3] [--before 30] [--after 30]
        [--ttl-ms 10000] [--poll-ms 100] [--no-quorum]

The baseline is written the way such schedulers usually are (RedBeat,
rq-scheduler, a Kubernetes lease): ``--nodes`` separate processes, each
looping every ``--poll-ms``:

* not leader: ``redis.lock.Lock.acquire`` — ``SET leader <me> NX PX ttl``;
* leader: every ``ttl / 3`` ``Lock.reacquire`` (the Lua compare-and-pexpire
  of redis-py); on failure it steps down;
* leader, per schedule: ``GET last:<job>``; when the latest due fire time is
  newer, ``SET last:<job> <t>`` and spawn the job (``subprocess.Popen``).
  Like celery beat, a backlog is coalesced: only the latest due slot runs.

The job is the same bash one-liner as ``fire_latency.py`` (it records its
own start). Phase ``steady`` (``--before`` s), then the leader is SIGKILLed
at a half second and phase ``failover`` runs ``--after`` s. Measured: fire
latency (job start - nominal fire time) per phase, **failover time** (kill
→ first job started by the new leader), and slots missed / duplicated
around the kill.

Unless ``--no-quorum``, the same run then starts ``--nodes`` quorum-cron
agents on a fresh Redis with the same jobs and kills the node that ran the
latest slot the same way, for the comparison (``run_all.py`` passes
``--no-quorum`` and takes the agents' figures from ``fire_latency.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fire_latency
from _common import (
    REAPER,
    ArgumentParser,
    EmbeddedRedis,
    int_at_least,
    now_ms,
    print_table,
    sleep_until_ms,
    start_process,
    stats_ms,
    write_result,
)

LOCK = "lb:leader"


# -- the baseline scheduler (its own process) ------------------------------------


def scheduler_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", required=True)
    ap.add_argument("--host", default="127.0.0.1", help="Redis host (the chaos harness: its proxy)")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--jobs", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ttl-ms", type=int, required=True)
    ap.add_argument("--poll-ms", type=int, required=True)
    ap.add_argument("--period-ms", type=int, default=1000)
    a = ap.parse_args(argv)
    client = redis.Redis(host=a.host, port=a.port, socket_timeout=2.0)
    lock = client.lock(LOCK, timeout=a.ttl_ms / 1000, blocking=False, thread_local=False)
    cmd = fire_latency.job_command(a.out)
    names = [f"job{i}" for i in range(a.jobs)]
    leader = False
    renew_at = 0.0
    children: list[subprocess.Popen[bytes]] = []
    while True:
        mono = time.monotonic()
        try:
            if not leader:
                if lock.acquire(blocking=False, token=a.node):
                    leader, renew_at = True, mono + a.ttl_ms / 3000
                    print(json.dumps({"event": "leader", "node": a.node, "at": time.time()}), flush=True)
            elif mono >= renew_at:
                try:
                    lock.reacquire()
                    renew_at = mono + a.ttl_ms / 3000
                except redis.exceptions.LockError:
                    leader = False
            if leader:
                now = int(time.time() * 1000)
                latest = now // a.period_ms * a.period_ms
                for job in names:
                    last = client.get(f"lb:last:{job}")
                    if last is None or int(last) < latest:
                        client.set(f"lb:last:{job}", latest)
                        env = dict(
                            os.environ,
                            QUORUM_CRON_JOB=job,
                            QUORUM_CRON_SLOT_MS=str(latest),
                            QUORUM_CRON_NODE=a.node,
                        )
                        children.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL))
        except redis.RedisError:
            leader = False
        children = [c for c in children if c.poll() is None]
        time.sleep(max(0.0, a.poll_ms / 1000 - (time.monotonic() - mono)))


# -- measuring -------------------------------------------------------------------


def _slots(
    stamps: list[tuple[str, int, str, float]], names: list[str], lo: int, hi: int
) -> tuple[dict[str, Any], list[float]]:
    due = [(j, t) for j in names for t in range(lo, hi, 1000)]
    runs = Counter((s[0], s[1]) for s in stamps if s[0] in names)
    first: dict[tuple[str, int], float] = {}
    for job, slot, _, started in stamps:
        if job in names:
            first[(job, slot)] = min(started, first.get((job, slot), started))
    delays = [first[k] - k[1] for k in due if k in first]
    return {
        "due": len(due),
        "ran": sum(1 for k in due if runs[k] >= 1),
        "missed": sum(1 for k in due if runs[k] == 0),
        "duplicated": sum(1 for k in due if runs[k] > 1),
        "job": stats_ms(delays),
    }, delays


def _failover(stamps: list[tuple[str, int, str, float]], victim: str, killed_at: float) -> dict[str, Any]:
    after = sorted((s[3], s[2]) for s in stamps if s[0] != "reference" and s[3] > killed_at)
    first = after[0] if after else (float("nan"), "")
    return {
        "victim": victim,
        "kill_to_first_start_ms": round(first[0] - killed_at, 1),
        "new_executor": first[1],
    }


def run_leader(
    nodes: int, jobs: int, before: int, after: int, ttl_ms: int, poll_ms: int, work: Path
) -> dict[str, Any]:
    out = work / "leader-stamps.log"
    out.touch()
    names = [f"job{i}" for i in range(jobs)]
    with REAPER.server(EmbeddedRedis()) as server:
        procs = {}
        for i in range(1, nodes + 1):
            node = f"s{i}"
            cmd = [sys.executable, __file__, "--scheduler", "--node", node, "--port", str(server.port)]
            cmd += [
                "--jobs",
                str(jobs),
                "--out",
                str(out),
                "--ttl-ms",
                str(ttl_ms),
                "--poll-ms",
                str(poll_ms),
            ]
            procs[node] = start_process(cmd, log=work / f"leader-{node}.log")
        client = server.client()
        deadline = time.monotonic() + 30
        while client.get(LOCK) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("no baseline scheduler became leader")
            time.sleep(0.05)
        t0 = (now_ms() // 1000 + 3) * 1000
        t_kill = t0 + before * 1000 - 500
        t_end = t0 + (before + after) * 1000
        print(
            f"baseline: {nodes} schedulers, lease {ttl_ms} ms, poll {poll_ms} ms; steady {before} s ...",
            flush=True,
        )
        sleep_until_ms(t_kill)
        held = client.get(LOCK)
        victim = held.decode() if isinstance(held, bytes) else str(held)
        killed_at = time.time() * 1000
        REAPER.kill(procs[victim])
        print(f"SIGKILLed leader {victim}; failover phase {after} s ...", flush=True)
        sleep_until_ms(t_end + 2000)
        client.close()
        for p in procs.values():
            REAPER.kill(p)
    stamps = fire_latency.read_stamps(out)
    steady, _ = _slots(stamps, names, t0, t0 + before * 1000)
    failover, _ = _slots(stamps, names, t0 + before * 1000, t_end)
    return {"steady": steady, "failover": failover, **_failover(stamps, victim, killed_at)}


def _rows(scheduler: str, result: dict[str, Any], killed_key: str, kill_ms: object) -> list[dict[str, Any]]:
    """The table rows of one scheduler: steady, then after the kill."""
    rows = []
    for phase, key in (("steady", "steady"), ("after kill", killed_key)):
        r = result[key]
        rows.append(
            {
                "scheduler": scheduler,
                "phase": phase,
                "slots": r["due"],
                "missed": r["missed"],
                "dup": r["duplicated"],
                "p50 ms": r["job"]["p50"],
                "p99 ms": r["job"]["p99"],
                "max ms": r["job"]["max"],
                "kill→next start ms": kill_ms if key == killed_key else "",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--scheduler"]:
        with contextlib.suppress(KeyboardInterrupt):
            return scheduler_main(argv[1:])
        return 0
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int_at_least(2), default=5, help="schedulers (the leader is killed)")
    ap.add_argument("--jobs", type=int_at_least(1), default=3)
    ap.add_argument("--before", type=int_at_least(1), default=30)
    ap.add_argument("--after", type=int_at_least(1), default=30)
    ap.add_argument("--ttl-ms", type=int_at_least(3), default=10_000, help="leader lease TTL")
    ap.add_argument("--poll-ms", type=int_at_least(1), default=100, help="scheduler poll interval")
    ap.add_argument("--no-quorum", action="store_true", help="skip the quorum-cron comparison run")
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)
    doc: dict[str, Any] = {
        "nodes": args.nodes,
        "jobs": args.jobs,
        "ttl_ms": args.ttl_ms,
        "poll_ms": args.poll_ms,
    }
    with tempfile.TemporaryDirectory(prefix="qc-bench-leader-") as tmp:
        try:
            doc["leader"] = run_leader(
                args.nodes, args.jobs, args.before, args.after, args.ttl_ms, args.poll_ms, Path(tmp)
            )
            if not args.no_quorum:
                q = fire_latency.run(args.nodes, args.jobs, args.before, args.after, Path(tmp))
                for key in ("steady", "one_killed", "reference_steady", "reference_one_killed"):
                    q[key].pop("_job_delays", None)
                doc["quorum"] = q
        finally:
            REAPER.reap()
    lead = doc["leader"]
    rows = _rows("leader lease", lead, "failover", lead["kill_to_first_start_ms"])
    if "quorum" in doc:
        q = doc["quorum"]
        rows += _rows("quorum-cron", q, "one_killed", q["kill_to_next_start_ms"])
    cols = [
        "scheduler",
        "phase",
        "slots",
        "missed",
        "dup",
        "p50 ms",
        "p99 ms",
        "max ms",
        "kill→next start ms",
    ]
    print_table(
        rows, cols, f"leader-lease baseline (lease {args.ttl_ms} ms, poll {args.poll_ms} ms) vs quorum-cron"
    )
    doc["table"] = rows
    write_result("leader_baseline", doc, args.label)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
