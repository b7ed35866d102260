"""Benchmark: Redis CPU per slot for a slot's whole life in the store, phase by phase.

Usage::

    .venv/bin/python benchmarks/store_cycle.py [--jobs 10000] [--rounds 3] [--voters 3]
        [--sweeps 2] [--redis-server PATH] [--label NAME] [--callgrind] [--fold]

Why: ``scale.py`` measures the store's end-to-end cost per slot with real
agents, but a run takes minutes, shares two vCPUs with three busy agents and
says little about *which* step costs what (its ``--scripts`` profile uses
SLOWLOG, whose wall times include the server's waits for a CPU). This drives
``RedisStore`` from one process, one step at a time, so the server's CPU
(``INFO cpu``) measured around each phase is that phase's own, within a few
seconds, and a change of a script can be measured against the code before it
(``QC_BENCH_CODE``, benchmarks/_common.py) within minutes.

Per round (fire time ``base + round``; every job due at once, as at a minute
boundary with ``* * * * *``), what the agents of ``scale.py`` do:

* ``vote`` — each of ``voters`` nodes sends one batch naming every job (the
  first records, the ``quorum``-th commits and assigns, the rest are decided
  votes), with epoch 1 and the voters' membership record;
* ``start`` — each executor starts its slots (one ``fenced`` batch); with
  ``--fold`` the votes ask for the start and go in the agents' burst order,
  so nearly every commit starts its slot (docs/protocol.md, "A start folded
  into the commit") and this phase starts only the others;
* ``finish`` — each executor finishes them succeeded, detail ``exit 0``;
* ``sweep`` — ``sweeps`` nodes sweep every job (``scale.py`` counted about
  6 sweep items per slot over 3 agents: the sweeps after the executors'
  finish notices and the full-sweep backstop).

Same-run baseline, ``floor``: one minimal Lua call per batch doing the
writes a slot needs and nothing else — per vote one ``SET`` of the slot key,
per start one ``SET``, per finish one ``SET`` and one ``XADD`` of a
four-field ledger entry, per sweep item one ``ZRANGEBYSCORE`` — with no
protocol (no checks, no JSON, no indexes, no reply payload). The store's cost
over the floor is what its protocol spends.

Reported per phase: Redis CPU µs per slot (``used_cpu_sys + used_cpu_user``
deltas, the whole server) and the commands the scripts ran per slot
(``INFO commandstats``). JSON under ``benchmarks/results/``.

``--callgrind`` runs the server under valgrind's callgrind and reports, per
phase, the server's instructions per slot (``callgrind_control -e Ir``
before and after each phase, all threads): a count that does not depend on
what else the machine does. On this shared 2-vCPU machine the same code's CPU
per phase varies by ±15 % from run to run, more than most changes of a
script; instructions tell two codes apart to within the server's own
background work (``serverCron``, a few hundred instructions per slot here).
Use it with ``QC_BENCH_CODE`` for an A/B (docs/benchmarks.md, "Store
cycle"); a run of 1,000 jobs takes about half a minute.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import ArgumentParser, write_result  # noqa: E402

from quorum_cron.core.membership import MembershipRecord  # noqa: E402
from quorum_cron.core.model import FencedRequest, SlotState, SweepParams  # noqa: E402
from quorum_cron.store.base import VoteRequest, VoteStatus  # noqa: E402
from quorum_cron.store.embedded.single import EmbeddedRedis  # noqa: E402
from quorum_cron.store.redis import RedisStore  # noqa: E402
from quorum_cron.store.rendezvous import rank  # noqa: E402

NAMESPACE = "bench"
DEADLINE_MS = 3_600_000
SKEW_MS = 250
LEASE_MS = 600_000
START_TIMEOUT_MS = 600_000
PHASES = ("vote", "start", "finish", "sweep")

FLOOR_LUA = """
-- ARGV[1] phase: v vote, s start, f finish, w sweep; ARGV[2] fire ms; KEYS: slot keys
local phase, fire = ARGV[1], ARGV[2]
for i = 1, #KEYS do
  if phase == 'w' then
    redis.call('ZRANGEBYSCORE', KEYS[i] .. ':open', '-inf', '+inf', 'LIMIT', '0', '16')
  else
    redis.call('SET', KEYS[i], phase .. fire, 'PX', '600000')
    if phase == 'f' then
      redis.call('XADD', KEYS[i] .. ':ledger', 'MAXLEN', '100', '*', 'fire', fire, 'state', 'succeeded')
    end
  end
end
return #KEYS
"""


def _cpu(admin: redis.Redis) -> float:
    info = admin.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _instructions(pid: int) -> int:
    """The callgrind-run server's instructions so far, all threads (``callgrind_control -e Ir``)."""
    out = subprocess.run(
        ["callgrind_control", "-e", "Ir", str(pid)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return ir_total(out, pid)


def ir_total(out: str, pid: int) -> int:
    """The sum of the per-thread ``Ir`` counters in ``callgrind_control -e Ir``'s output."""
    counts = [int(n.replace(",", "")) for n in re.findall(r"^\s*Th \d+\s+([\d,]+)", out, re.M)]
    if not counts:
        raise SystemExit(f"callgrind_control -e Ir {pid}: no counters in {out!r}")
    return sum(counts)


def _commands(admin: redis.Redis) -> dict[str, int]:
    stats = admin.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


class Meter:
    """Redis CPU and command calls per phase, summed over the rounds."""

    def __init__(self, admin: redis.Redis, callgrind: bool = False) -> None:
        self.admin = admin
        self.pid = int(admin.info("server")["process_id"]) if callgrind else 0
        self.cpu: dict[str, float] = defaultdict(float)
        self.instr: dict[str, int] = defaultdict(int)
        self.calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def phase(self, name: str, work: Callable[..., Any], *args: Any) -> Any:
        before_calls = _commands(self.admin)
        before = _cpu(self.admin)
        instr = _instructions(self.pid) if self.pid else 0
        out = work(*args)
        if self.pid:
            self.instr[name] += _instructions(self.pid) - instr
        self.cpu[name] += _cpu(self.admin) - before
        after_calls = _commands(self.admin)
        for cmd, n in after_calls.items():
            delta = n - before_calls.get(cmd, 0)
            if cmd not in ("info",) and delta:
                self.calls[name][cmd] += delta
        return out

    def report(self, slots: int) -> dict[str, Any]:
        per = {p: round(self.cpu[p] * 1e6 / slots, 1) for p in PHASES}
        per["total"] = round(sum(self.cpu.values()) * 1e6 / slots, 1)
        calls = {
            p: {c: round(n / slots, 2) for c, n in sorted(self.calls[p].items(), key=lambda kv: -kv[1])}
            for p in PHASES
        }
        out: dict[str, Any] = {"redis_cpu_us_per_slot": per, "calls_per_slot": calls}
        if self.pid:
            ir = {p: round(self.instr[p] / slots) for p in PHASES}
            ir["total"] = sum(ir.values())
            out["redis_instructions_per_slot"] = ir
        return out


def _vote_passes(jobs: list[str], fire: int, nodes: list[str], quorum: int) -> list[tuple[str, list[str]]]:
    """The votes of a round as the agents' burst order sends them at one pace (``--fold``): first
    every node's top-quorum slots it would not win, then those it would (its vote commits them,
    and the commit folds the start in), then the rest (decided votes); a batch per node each."""
    members = tuple(sorted(nodes))
    passes: dict[str, tuple[list[str], list[str], list[str]]] = {n: ([], [], []) for n in nodes}
    for job in jobs:
        for node in nodes:
            ahead = rank(job, fire, node, members)
            passes[node][1 if ahead == 0 else 0 if ahead < quorum else 2].append(job)
    return [(node, passes[node][k]) for k in range(3) for node in nodes if passes[node][k]]


def run_store(
    port: int,
    jobs: list[str],
    rounds: int,
    voters: int,
    sweeps: int,
    base: int,
    callgrind: bool = False,
    fold: bool = False,
) -> dict[str, Any]:
    """The store's cycle; raises SystemExit when a slot did not end ``succeeded`` exactly once.

    ``fold``: the votes ask for the start (``VoteRequest.start_lease_ms``) in the agents' burst
    order, so the executor's vote commits nearly every slot and starts it in the same step; the
    ``start`` phase then starts only the slots whose commit did not."""
    admin = redis.Redis(host="127.0.0.1", port=port)
    client = redis.Redis(host="127.0.0.1", port=port)
    store = RedisStore(client, NAMESPACE)
    nodes = [f"node-{v}" for v in range(voters)]
    quorum = voters // 2 + 1
    record = MembershipRecord.decode(f"1;{voters},{quorum}," + ",".join(sorted(nodes))).encode()
    params = [SweepParams(job, DEADLINE_MS, START_TIMEOUT_MS) for job in jobs]
    store.vote(
        [
            VoteRequest(
                "warm-up", base - 1, nodes[0], "h1", quorum, SKEW_MS, DEADLINE_MS, epoch=1, membership=record
            )
        ]
    )
    meter = Meter(admin, callgrind)
    for r in range(rounds):
        fire = base + r
        committed: list[Any] = []
        passes = _vote_passes(jobs, fire, nodes, quorum) if fold else [(node, jobs) for node in nodes]

        def votes(
            fire: int = fire, committed: list[Any] = committed, passes: list[tuple[str, list[str]]] = passes
        ) -> None:
            for node, batch in passes:
                ask: dict[str, Any] = {"start_lease_ms": LEASE_MS, "incarnation": f"i-{node}"} if fold else {}
                reqs = [
                    VoteRequest(
                        j, fire, node, "h1", quorum, SKEW_MS, DEADLINE_MS, epoch=1, membership=record, **ask
                    )
                    for j in batch
                ]
                for res in store.vote(reqs):
                    if res.status == VoteStatus.COMMITTED:
                        committed.append(res.slot)
                    elif res.status not in (VoteStatus.RECORDED, VoteStatus.DECIDED):
                        raise SystemExit(f"vote {res.status}: {res.reason}")

        meter.phase("vote", votes)
        if len(committed) != len(jobs):
            raise SystemExit(f"round {r}: {len(committed)} commits for {len(jobs)} jobs")
        by_executor: dict[str, list[Any]] = defaultdict(list)
        for slot in committed:
            by_executor[slot.executor].append(slot)

        def fenced(op: str, by_executor: dict[str, list[Any]] = by_executor) -> None:
            for node, all_slots in by_executor.items():
                slots = [s for s in all_slots if op != "start" or s.state == SlotState.COMMITTED]
                if not slots:
                    continue
                reqs = [
                    FencedRequest(op, s.job, s.fire_ms, node, s.token, LEASE_MS, True, "exit 0")
                    if op == "finish"
                    else FencedRequest(op, s.job, s.fire_ms, node, s.token, LEASE_MS)
                    for s in slots
                ]
                for res in store.fenced(reqs):
                    if isinstance(res, Exception) or not res.ok:
                        raise SystemExit(f"{op}: {res}")

        meter.phase("start", fenced, "start")
        meter.phase("finish", fenced, "finish")

        def sweep() -> None:
            for _ in range(sweeps):
                if store.sweep(params).changed:
                    raise SystemExit("a sweep changed a slot that was on time")

        meter.phase("sweep", sweep)
    for job in jobs[:: max(1, len(jobs) // 50)]:
        states = [e.state.value for e in store.ledger(job, 100)]
        if states != ["succeeded"] * rounds:
            raise SystemExit(f"{job}: ledger {states}, expected {rounds} x succeeded")
    client.close()
    admin.close()
    return meter.report(len(jobs) * rounds)


def run_floor(
    port: int, jobs: list[str], rounds: int, voters: int, sweeps: int, base: int, callgrind: bool = False
) -> dict[str, Any]:
    """The floor: the same batches, the bare writes (see the module's docstring)."""
    admin = redis.Redis(host="127.0.0.1", port=port)
    client = redis.Redis(host="127.0.0.1", port=port)
    sha = client.script_load(FLOOR_LUA)
    keys = [f"qc:{{{NAMESPACE}f:{j}}}:slot" for j in jobs]
    batch = 500

    def calls(phase: str, fire: int, times: int) -> None:
        for _ in range(times):
            pipe = client.pipeline(transaction=False)
            for i in range(0, len(keys), batch):
                chunk = keys[i : i + batch]
                pipe.evalsha(sha, len(chunk), *chunk, phase, fire)
            pipe.execute()

    meter = Meter(admin, callgrind)
    for r in range(rounds):
        fire = base + r
        meter.phase("vote", calls, "v", fire, voters)
        meter.phase("start", calls, "s", fire, 1)
        meter.phase("finish", calls, "f", fire, 1)
        meter.phase("sweep", calls, "w", fire, sweeps)
    client.close()
    admin.close()
    return meter.report(len(jobs) * rounds)


def add_cycle_arguments(ap: argparse.ArgumentParser, jobs: int, rounds: int) -> None:
    """The options this script shares with ``chunk_probe.py``."""
    ap.add_argument("--jobs", type=int, default=jobs)
    ap.add_argument("--rounds", type=int, default=rounds, help="slots per job")
    ap.add_argument("--voters", type=int, default=3)
    ap.add_argument("--sweeps", type=int, default=2, help="full sweeps of every job per round")
    ap.add_argument("--redis-server", default=None, help="server binary (default: as store_vote.py)")
    ap.add_argument("--label", default="", help="suffix of the JSON file name")
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="run the server under callgrind; report instructions per slot",
    )


def callgrind_wrapper(binary: str | None, directory: Path) -> str:
    """A script in ``directory`` that starts ``binary`` (default: as :class:`EmbeddedRedis`) under
    callgrind, its profile written beside it; SystemExit when valgrind is missing."""
    missing = [t for t in ("valgrind", "callgrind_control") if shutil.which(t) is None]
    if missing:
        raise SystemExit(f"--callgrind: {' and '.join(missing)} not on PATH (apt-get install valgrind)")
    wrapper = directory / "redis-server"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec valgrind --tool=callgrind --callgrind-out-file={directory}/callgrind.%p.out "
        f'{binary or EmbeddedRedis().binary} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    add_cycle_arguments(ap, jobs=10_000, rounds=3)
    ap.add_argument(
        "--fold",
        action="store_true",
        help="votes ask for the start, in the agents' burst order (the start folded into the commit)",
    )
    args = ap.parse_args(argv)
    if args.jobs < 1 or args.rounds < 1 or args.voters < 1 or args.sweeps < 0:
        raise SystemExit("--jobs, --rounds and --voters must be >= 1, --sweeps >= 0")
    jobs = [f"job-{i:06d}" for i in range(args.jobs)]
    tmp = tempfile.TemporaryDirectory(prefix="qc-store-cycle-")
    binary = callgrind_wrapper(args.redis_server, Path(tmp.name)) if args.callgrind else args.redis_server
    with tmp, EmbeddedRedis(binary, startup_timeout=60.0 if args.callgrind else 10.0) as server:
        probe = server.client()
        version = probe.info("server")["redis_version"]
        sec, usec = probe.time()
        base = int(sec) * 1000 + int(usec) // 1000 - 60_000  # due, well inside every deadline
        probe.flushall()
        probe.close()
        print(
            f"redis {version}; {args.jobs:,} jobs x {args.rounds} rounds; {args.voters} voters; "
            f"{args.sweeps} sweeps per round",
            flush=True,
        )
        t0 = time.perf_counter()
        cycle = (server.port, jobs, args.rounds, args.voters, args.sweeps, base, args.callgrind)
        floor = run_floor(*cycle)
        store = run_store(*cycle, fold=args.fold)
        wall = time.perf_counter() - t0
    header = f"{'Redis CPU µs per slot':24}" + "".join(f"{p:>9}" for p in (*PHASES, "total"))
    print()
    print(header)
    print("-" * len(header))
    for name, res in (("floor (same run)", floor), ("store", store)):
        cpu = res["redis_cpu_us_per_slot"]
        print(f"{name:24}" + "".join(f"{cpu[p]:>9.1f}" for p in (*PHASES, "total")))
    if args.callgrind:
        print()
        print(f"{'instructions per slot':24}" + "".join(f"{p:>9}" for p in (*PHASES, "total")))
        for name, res in (("floor (same run)", floor), ("store", store)):
            ir = res["redis_instructions_per_slot"]
            print(f"{name:24}" + "".join(f"{ir[p]:>9,}" for p in (*PHASES, "total")))
    print()
    for p in PHASES:
        calls = ", ".join(f"{c} {n:g}" for c, n in store["calls_per_slot"][p].items())
        print(f"store {p:7} commands per slot: {calls}")
    doc = {
        "redis": version,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "jobs": args.jobs,
        "rounds": args.rounds,
        "voters": args.voters,
        "sweeps": args.sweeps,
        "callgrind": args.callgrind,
        "fold": args.fold,
        "wall_s": round(wall, 1),
        "floor": floor,
        "store": store,
    }
    variant = "-".join(v for v, on in (("callgrind", args.callgrind), ("fold", args.fold)) if on)
    write_result("store_cycle", doc, args.label, variant=variant)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
