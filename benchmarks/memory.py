"""Benchmark: Redis memory per retained slot, and memory over a long run.

Usage::

    .venv/bin/python benchmarks/memory.py [--jobs 100] [--slots 50] [--long-seconds 20]

Starts its own redis-server and drives :class:`RedisStore` the way a
5-node cluster does (node ids ``node-1`` … ``node-5``, 16-hex spec hashes,
quorum 3): per slot, five votes (one batch per node per round), a fenced
start and a finish by the chosen executor (detail ``exit 0``), so every
slot ends ``succeeded`` with its slot record, its ``:slots`` member and its
ledger entry — everything a retained slot costs.

**Retained** (``--jobs`` K x ``--slots`` M, default retention 7 days and
default ledger length 10 000, so nothing is dropped): ``used_memory``
delta / slots, and a per-structure split from ``MEMORY USAGE`` (slot
records, ledger streams, ``:slots`` sorted sets, per-job meta). Reference
in the same run: the same number of bare keys, one ``SET key
"succeeded" PX <7 d>`` per slot — what one key per slot costs on this
server before any content.

**Long run** (``--long-seconds``): the same workload in real time with a
short retention (``--long-retention-ms``, default 2 s) and ledger length
(``--long-ledger``, default 50, so the ledgers are full early) through the store's own options, sampling
``used_memory`` twice a second. Reported: slots written, retention windows
covered, the mean of the second and of the last quarter of the run and the
slope of a least-squares line over the second half (bytes per second):
memory is flat when the slope is ~0 while slots keep being written.

Target (issue 6): ≤ 1 KB per retained slot; flat over a long run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REAPER,
    ArgumentParser,
    EmbeddedRedis,
    float_at_least,
    int_at_least,
    print_table,
    server_name,
    write_result,
)

from quorum_cron.store.base import VoteRequest, VoteStatus
from quorum_cron.store.redis import RedisStore

NS = "bench"
NODES = [f"node-{i}" for i in range(1, 6)]
QUORUM = 3
SPEC = "3f9a1c0d5e7b2a46"
DEADLINE_MS = 86_400_000
LEASE_MS = 15_000
WEEK_MS = 7 * 86_400_000


def _used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def _server_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def run_slots(store: RedisStore, jobs: list[str], fire: int) -> int:
    """One round: every node votes for every job's slot ``fire``; executors start and finish."""
    done = 0
    commits = []
    for node in NODES:
        results = store.vote(
            [VoteRequest(job, fire, node, SPEC, QUORUM, 250, DEADLINE_MS) for job in jobs],
        )
        commits += [r.slot for r in results if r.status == VoteStatus.COMMITTED]
    for view in commits:
        ok = store.start(view.job, fire, view.executor, view.token, LEASE_MS)
        if ok.ok and store.finish(view.job, fire, view.executor, view.token, True, "exit 0").ok:
            done += 1
    return done


def _memory_usage(client: redis.Redis, pattern: str) -> tuple[int, int]:
    total = count = 0
    for key in client.scan_iter(match=pattern, count=1000):
        total += int(client.memory_usage(key, samples=0) or 0)
        count += 1
    return total, count


def retained(server: EmbeddedRedis, jobs: int, slots: int) -> dict[str, Any]:
    client = server.client()
    client.flushall()
    names = [f"job-{i:05d}" for i in range(jobs)]
    store = RedisStore(client, NS)
    store.vote([VoteRequest("warm-up", 1, NODES[0], SPEC, QUORUM, 250, DEADLINE_MS)])  # scripts loaded
    client.delete(*client.keys("*warm-up*"))
    time.sleep(0.2)
    before = _used(client)
    base = _server_ms(client) - slots * 1000 - 60_000
    done = sum(run_slots(store, names, base + m * 1000) for m in range(slots))
    total = jobs * slots
    if done != total:
        raise SystemExit(f"retained: {done} of {total} slots succeeded")
    after = _used(client)
    parts = {}
    for what, pattern in (
        ("slot records", f"qc:{{{NS}:*}}:slot:*"),
        ("ledger streams", f"qc:{{{NS}:*}}:ledger"),
        ("slots zsets", f"qc:{{{NS}:*}}:slots"),
        ("open zsets", f"qc:{{{NS}:*}}:open"),
        ("job meta", f"qc:{{{NS}:*}}:meta"),
    ):
        b, n = _memory_usage(client, pattern)
        parts[what] = {"bytes": b, "keys": n, "bytes_per_slot": round(b / total, 1)}
    sample_key = next(iter(client.scan_iter(match=f"qc:{{{NS}:*}}:slot:*", count=100)))
    sample_value = client.get(sample_key) or b""
    # Reference: one bare key per slot with the same key names and TTL.
    client.flushall()
    time.sleep(0.2)
    ref_before = _used(client)
    pipe = client.pipeline(transaction=False)
    for m in range(slots):
        for job in names:
            pipe.set(f"qc:{{{NS}:{job}}}:slot:{base + m * 1000}", "succeeded", px=WEEK_MS)
        if len(pipe) >= 5000:
            pipe.execute()
    pipe.execute()
    ref_after = _used(client)
    client.flushall()
    client.close()
    return {
        "jobs": jobs,
        "slots_per_job": slots,
        "slots": total,
        "used_memory_delta": after - before,
        "bytes_per_slot": round((after - before) / total, 1),
        "reference_bare_key_bytes_per_slot": round((ref_after - ref_before) / total, 1),
        "memory_usage_bytes_per_slot": round(sum(p["bytes"] for p in parts.values()) / total, 1),
        "parts": parts,
        "sample_slot_value_bytes": len(sample_value),
        "sample_slot_value": sample_value.decode("utf-8", errors="replace")
        if isinstance(sample_value, bytes)
        else str(sample_value),
    }


def long_run(
    server: EmbeddedRedis, jobs: int, seconds: float, retention_ms: int, ledger: int
) -> dict[str, Any]:
    client = server.client()
    client.flushall()
    names = [f"job-{i:05d}" for i in range(jobs)]
    store = RedisStore(client, NS, retention_ms=retention_ms, ledger_maxlen=ledger)
    store.vote([VoteRequest("warm-up", 1, NODES[0], SPEC, QUORUM, 250, DEADLINE_MS)])
    client.delete(*client.keys("*warm-up*"))
    samples: list[tuple[float, int, int]] = []  # (seconds, used_memory, slots so far)
    written = 0
    t0 = time.monotonic()
    next_sample = t0
    last_fire = 0
    while True:
        now = time.monotonic()
        if now >= next_sample:
            samples.append((round(now - t0, 3), _used(client), written))
            next_sample += 0.5
        if now - t0 >= seconds:
            break
        fire = _server_ms(client) - 1
        if fire <= last_fire:
            time.sleep(0.001)
            continue
        last_fire = fire
        written += run_slots(store, names, fire)
    keys = client.dbsize()
    client.flushall()
    client.close()
    half = [s for s in samples if s[0] >= seconds / 2]
    n = len(half)
    mx = sum(s[0] for s in half) / n
    my = sum(s[1] for s in half) / n
    var = sum((s[0] - mx) ** 2 for s in half) or 1.0
    slope = sum((s[0] - mx) * (s[1] - my) for s in half) / var
    q2 = [s[1] for s in samples if seconds / 4 <= s[0] < seconds / 2]
    q4 = [s[1] for s in samples if s[0] >= seconds * 3 / 4]
    rate = written / seconds
    return {
        "jobs": jobs,
        "seconds": seconds,
        "retention_ms": retention_ms,
        "ledger_maxlen": ledger,
        "slots_written": written,
        "slots_per_s": round(rate, 1),
        "retention_windows": round(seconds * 1000 / retention_ms, 1),
        "keys_at_end": keys,
        "used_memory_q2_mean": round(sum(q2) / max(1, len(q2))),
        "used_memory_q4_mean": round(sum(q4) / max(1, len(q4))),
        "growth_q2_to_q4_pct": round(
            (sum(q4) / max(1, len(q4))) / (sum(q2) / max(1, len(q2))) * 100 - 100, 2
        ),
        "slope_bytes_per_s": round(slope, 1),
        "slope_bytes_per_slot_written": round(slope / rate, 2) if rate else 0.0,
        "used_memory_kb_every_2s": [round(s[1] / 1024) for s in samples[::4]],
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int_at_least(1), default=100)
    ap.add_argument("--slots", type=int_at_least(1), default=50, help="slots per job (retained)")
    ap.add_argument("--long-jobs", type=int_at_least(1), default=20)
    # Sampled twice a second: from 2 s on, the 2nd and 4th quarters each hold a sample.
    ap.add_argument("--long-seconds", type=float_at_least(2), default=20.0)
    ap.add_argument("--long-retention-ms", type=int_at_least(1), default=2_000)
    ap.add_argument("--long-ledger", type=int_at_least(1), default=50)
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)
    with REAPER.server(EmbeddedRedis()) as server:
        info = server.client().info("server")
        print(f"{server_name(info)} on port {server.port}", flush=True)
        ret = retained(server, args.jobs, args.slots)
        print(f"retained: {ret['slots']} slots, {ret['bytes_per_slot']} B/slot", flush=True)
        flat = long_run(server, args.long_jobs, args.long_seconds, args.long_retention_ms, args.long_ledger)
    REAPER.reap()
    rows: list[dict[str, object]] = [
        {"what": "retained slot (used_memory delta)", "bytes/slot": ret["bytes_per_slot"]},
        {"what": "retained slot (sum of MEMORY USAGE)", "bytes/slot": ret["memory_usage_bytes_per_slot"]},
    ]
    rows += [{"what": f"  {k}", "bytes/slot": v["bytes_per_slot"]} for k, v in ret["parts"].items()]
    rows.append(
        {"what": "reference: bare key per slot", "bytes/slot": ret["reference_bare_key_bytes_per_slot"]}
    )
    print_table(
        rows,
        ["what", "bytes/slot"],
        f"memory per retained slot ({ret['jobs']} jobs x {ret['slots_per_job']})",
    )
    print(f"sample slot value ({ret['sample_slot_value_bytes']} B): {ret['sample_slot_value'][:200]}")
    print_table(
        [flat],
        [
            "seconds",
            "slots_written",
            "retention_windows",
            "used_memory_q2_mean",
            "used_memory_q4_mean",
            "growth_q2_to_q4_pct",
            "slope_bytes_per_slot_written",
        ],
        f"long run: retention {flat['retention_ms']} ms, ledger {flat['ledger_maxlen']}, {flat['jobs']} jobs",
    )
    print(f"used_memory every 2 s (KB): {flat['used_memory_kb_every_2s']}")
    write_result("memory", {"retained": ret, "long_run": flat}, args.label)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
