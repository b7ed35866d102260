"""Benchmark: fire latency of real agents — nominal fire time → job process started.

Usage::

    .venv/bin/python benchmarks/fire_latency.py [--nodes 5] [--jobs 3] [--before 100] [--after 100]

Starts its own redis-server and ``--nodes`` agent processes
(``python -m quorum_cron.agent``) sharing one config with ``--jobs`` jobs
``@every 1s`` (``overlap = "allow"``: with the default ``forbid`` a slot is
skipped whenever the previous run's finish has not reached the store within
the second, which is a different figure). Every job is the same tiny command::

    bash -c 'printf "%s %s %s %s\\n" "$QUORUM_CRON_JOB" "$QUORUM_CRON_SLOT_MS" "$QUORUM_CRON_NODE" \\
        "$EPOCHREALTIME" >> FILE'

``$EPOCHREALTIME`` is bash's own clock (no ``date`` fork), read right after
the shell started: the job records its own start. Per slot:

* ``job`` — the job's own stamp minus the nominal fire time (includes the
  fork/exec of bash and its start-up);
* ``ledger`` — the ledger's ``started_ms`` (Redis ``TIME`` at the fenced
  start, just before the agent spawns the process) minus the fire time,
  whole milliseconds;

Phase ``steady``: ``--before`` seconds with every node up. Then the node
that executed the latest slot is SIGKILLed at a half second (between two
slots), and phase ``one-killed`` runs ``--after`` more seconds with N-1
nodes. Every slot due in each phase must have run exactly once (ground
truth: the job's own lines); missed and duplicated slots are counted.

**Reference, in the same run**: a plain local timer (a separate Python
process: asyncio sleep until the fire time, then
``asyncio.create_subprocess_exec`` of the same command — what the agent
does, minus the protocol) fires the same job every second, offset by half
a second so it does not collide with the agents' own slots. Its delay is
what any scheduler pays on this machine under this load; the difference
``agent - reference`` is what the quorum protocol costs.

``QC_BENCH_CODE=DIR`` runs another tree's agents (benchmarks/_common.py);
the result records which code each agent joined with (``agents_joined``).

Targets (issue 6): p50 ≤ 3 ms, p99 ≤ 10 ms; after the kill p99 within noise
of the steady phase and no slot missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REAPER,
    AgentCluster,
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

from quorum_cron.store.embedded.topology import EmbeddedCluster

BASH = shutil.which("bash") or "/bin/bash"
RECORD = (
    'printf "%s %s %s %s\\n" "$QUORUM_CRON_JOB" "$QUORUM_CRON_SLOT_MS" "$QUORUM_CRON_NODE" "$EPOCHREALTIME"'
)


def job_command(out: Path) -> list[str]:
    return [BASH, "-c", f'{RECORD} >> "{out}"']


def read_stamps(path: Path) -> list[tuple[str, int, str, float]]:
    """(job, slot_ms, node, started ms as float) per line the jobs wrote."""
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4:
            rows.append((parts[0], int(parts[1]), parts[2], float(parts[3]) * 1000))
    return rows


# -- the reference timer (its own process) ---------------------------------------


async def _reference_timer(out: Path, first_ms: int, count: int, offset_ms: int) -> None:
    cmd = job_command(out)
    procs: list[asyncio.subprocess.Process] = []
    for i in range(count):
        fire = first_ms + i * 1000 + offset_ms
        await asyncio.sleep(max(0.0, fire / 1000 - time.time()))
        env = dict(
            os.environ, QUORUM_CRON_JOB="reference", QUORUM_CRON_SLOT_MS=str(fire), QUORUM_CRON_NODE="ref"
        )
        procs.append(
            await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        )
        done = [p for p in procs if p.returncode is not None]
        for p in done:
            procs.remove(p)
    for p in procs:
        await p.wait()


def reference_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--first-ms", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--offset-ms", type=int, default=500)
    a = ap.parse_args(argv)
    asyncio.run(_reference_timer(a.out, a.first_ms, a.count, a.offset_ms))
    return 0


# -- the benchmark ---------------------------------------------------------------


def _phase(
    name: str,
    stamps: list[tuple[str, int, str, float]],
    ledger: dict[str, dict[int, Any]],
    spawned: dict[tuple[str, int], float],
    jobs: list[str],
    lo: int,
    hi: int,
) -> dict[str, Any]:
    """Figures for the agents' slots with ``lo <= fire < hi``."""
    due = [(j, t) for j in jobs for t in range(lo, hi, 1000)]
    mine = [s for s in stamps if s[0] in jobs and lo <= s[1] < hi]
    runs = Counter((s[0], s[1]) for s in mine)
    first_start: dict[tuple[str, int], float] = {}
    for job, slot, _, started in mine:
        key = (job, slot)
        first_start[key] = min(started, first_start.get(key, started))
    job_delays = [first_start[k] - k[1] for k in due if k in first_start]
    ledger_delays = []
    states: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for job, t in due:
        entry = ledger[job].get(t)
        states[str(entry.state) if entry is not None else "no entry"] += 1
        if entry is not None and str(entry.state) != "succeeded":
            reasons[f"{entry.state}: {entry.reason}"] += 1
        if entry is not None and entry.started_ms:
            ledger_delays.append(float(entry.started_ms - t))
    agent_delays = [spawned[k] for k in due if k in spawned]
    by_node = Counter(s[2] for s in mine)
    return {
        "phase": name,
        "due": len(due),
        "ran": sum(1 for k in due if runs[k] >= 1),
        "missed": sum(1 for k in due if runs[k] == 0),
        "duplicated": sum(1 for k in due if runs[k] > 1),
        "ledger_states": dict(states),
        "not_succeeded": dict(reasons),
        "executors": dict(sorted(by_node.items())),
        "job": stats_ms(job_delays),
        "ledger": stats_ms(ledger_delays),
        "agent": stats_ms(agent_delays),
        "_job_delays": job_delays,
    }


def _reference(stamps: list[tuple[str, int, str, float]], lo: int, hi: int) -> dict[str, Any]:
    delays = [started - slot for job, slot, _, started in stamps if job == "reference" and lo <= slot < hi]
    return {"phase": "reference", "job": stats_ms(delays), "_job_delays": delays}


def run(
    nodes: int,
    jobs: int,
    before: int,
    after: int,
    workdir: Path,
    cluster_extra: str = "",
    topology: str = "standalone",
) -> dict[str, Any]:
    out = workdir / "stamps.log"
    out.touch()
    names = [f"job{i}" for i in range(jobs)]
    cmd = job_command(out)
    job_tables = "".join(
        f'[[jobs]]\nname = "{n}"\nschedule = "@every 1s"\ncommand = {json.dumps(cmd)}\n'
        'starting_deadline = "10s"\noverlap = "allow"\n\n'
        for n in names
    )
    server: Any = EmbeddedRedis() if topology == "standalone" else EmbeddedCluster(3, 0)
    with REAPER.server(server):  # started by its with-block, stopped at the end or by the reaper
        cluster = AgentCluster(workdir, server.url, nodes, extra=cluster_extra)
        config = cluster.config(job_tables)
        node_ids = [f"n{i}" for i in range(1, nodes + 1)]
        cluster.start(config, node_ids)
        cluster.wait_joined()
        t0 = (now_ms() // 1000 + 3) * 1000  # warm-up: the first slots after joining are not counted
        t_kill = t0 + before * 1000 - 500
        t_end = t0 + (before + after) * 1000
        ref = start_process(
            [
                sys.executable,
                __file__,
                "--reference-timer",
                "--out",
                str(out),
                "--first-ms",
                str(t0),
                "--count",
                str(before + after),
            ]
        )
        print(f"{nodes} agents joined; {jobs} job(s) every second; steady phase {before} s ...", flush=True)
        sleep_until_ms(t_kill - 400)
        recent = [s for s in read_stamps(out) if s[0] != "reference"]
        victim = max(recent, key=lambda s: s[1])[2] if recent else node_ids[0]
        sleep_until_ms(t_kill)
        killed_at = time.time() * 1000
        cluster.kill(victim)
        print(
            f"SIGKILLed {victim} at t0+{(killed_at - t0) / 1000:.3f} s; phase one-killed {after} s ...",
            flush=True,
        )
        sleep_until_ms(t_end + 3000)
        ref.wait(timeout=30)
        cluster.stop()
        stamps = read_stamps(out)
        ledger = {n: cluster.ledger(n) for n in names}
        spawned = {
            (str(e["job"]), int(e["slot"])): float(e["delay_ms"])
            for n in node_ids
            for e in cluster.events(n, "run")
            if "delay_ms" in e and "slot" in e
        }
        # What each agent itself says it runs (since issue 22 the joined line names the
        # membership record and its epoch), and every membership event: a refused vote
        # or a node outside the record would show here.
        joined = {n: (cluster.events(n, "joined") or [{}])[0] for n in node_ids}
        membership_events = Counter(
            f"{e.get('event')}{'' if int(e.get('ts', 0)) < t0 else ' (measured phases)'}"
            for n in node_ids
            for e in cluster.events(n)
            if str(e.get("event", "")).startswith(("membership", "not_a_member"))
        )
    steady = _phase("steady", stamps, ledger, spawned, names, t0, t0 + before * 1000)
    killed = _phase("one-killed", stamps, ledger, spawned, names, t0 + before * 1000, t_end)
    ref_a = _reference(stamps, t0, t0 + before * 1000)
    ref_b = _reference(stamps, t0 + before * 1000, t_end)
    after_kill = sorted(s[3] for s in stamps if s[0] != "reference" and s[3] > killed_at)
    # The first slots after the kill: how long the cluster took to fire again, the worst delay.
    first_after = after_kill[0] - killed_at if after_kill else float("nan")
    lo_b = t0 + before * 1000
    window = [s[3] - s[1] for s in stamps if s[0] in names and lo_b <= s[1] < lo_b + 10_000]
    return {
        "topology": topology,
        "nodes": nodes,
        "jobs": jobs,
        "victim": victim,
        "kill_to_next_start_ms": round(first_after, 2),
        "first_10s_after_kill_max_ms": round(max(window), 2) if window else float("nan"),
        "agents_joined": joined,
        "membership_events": dict(membership_events),
        "steady": steady,
        "one_killed": killed,
        "reference_steady": ref_a,
        "reference_one_killed": ref_b,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--reference-timer"]:
        return reference_main(argv[1:])
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int_at_least(2), default=5, help="agents (one is killed)")
    ap.add_argument(
        "--jobs", type=int_at_least(1), default=3, help="jobs @every 1s (slots per phase = jobs x seconds)"
    )
    ap.add_argument("--before", type=int_at_least(1), default=100, help="seconds of the steady phase")
    ap.add_argument(
        "--after", type=int_at_least(1), default=100, help="seconds after the SIGKILL of one node"
    )
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--topology",
        choices=["standalone", "cluster", "both"],
        default="standalone",
        help="one redis-server, a local 3-master Redis Cluster (agents use a redis+cluster:// URL), "
        "or both one after the other in this run",
    )
    args = ap.parse_args(argv)
    # "both": standalone then cluster in one invocation, so the two are compared
    # under the same load (each still written as its own variant).
    topologies = ["standalone", "cluster"] if args.topology == "both" else [args.topology]
    for topology in topologies:
        measure_one(args, topology)
    return 0


def measure_one(args: argparse.Namespace, topology: str) -> None:
    """Run, print and write the result of one topology."""
    with tempfile.TemporaryDirectory(prefix="qc-bench-fire-") as tmp:
        try:
            res = run(args.nodes, args.jobs, args.before, args.after, Path(tmp), topology=topology)
        finally:
            REAPER.reap()
    rows = []
    for key in ("steady", "reference_steady", "one_killed", "reference_one_killed"):
        r = res[key]
        rows.append(
            {
                "phase": key,
                "slots": r.get("due", r["job"]["n"]),
                "missed": r.get("missed", ""),
                "dup": r.get("duplicated", ""),
                "pre-spawn p50": r.get("agent", {}).get("p50", ""),
                "pre-spawn p99": r.get("agent", {}).get("p99", ""),
                "job p50": r["job"]["p50"],
                "job p99": r["job"]["p99"],
                "job max": r["job"]["max"],
                "ledger p50": r.get("ledger", {}).get("p50", ""),
                "ledger p99": r.get("ledger", {}).get("p99", ""),
                "ledger max": r.get("ledger", {}).get("max", ""),
            }
        )
    cols = ["phase", "slots", "missed", "dup", "ledger p50", "ledger p99", "ledger max"]
    cols += ["pre-spawn p50", "pre-spawn p99", "job p50", "job p99", "job max"]
    print_table(rows, cols, f"fire latency ({topology}), ms after the nominal fire time")
    print(
        f"killed {res['victim']}: next job start {res['kill_to_next_start_ms']:.0f} ms after the kill; "
        f"executors after: {res['one_killed']['executors']}"
    )
    for key in ("steady", "one_killed", "reference_steady", "reference_one_killed"):
        res[key].pop("_job_delays", None)
    res["table"] = rows
    write_result("fire_latency", res, args.label, variant=topology)


if __name__ == "__main__":
    raise SystemExit(main())
