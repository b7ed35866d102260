"""Benchmark: response time of the web dashboard's pages on a big ledger.

Usage::

    .venv/bin/python benchmarks/web_page.py [--jobs 1000] [--entries 10000] [--requests 40]

Starts its own redis-server, fills it through :class:`RedisStore` the way a
3-node cluster does (two votes, a fenced start and a finish per slot, on an
injected clock ending at the server's current time): ``--entries`` ledger
entries (and slots) for the measured job ``job-0000`` (``@every 1m``, so
10 000 entries span about a week) and 10 entries for each of the other
``--jobs`` - 1 jobs. Then serves the dashboard with uvicorn on a loopback
port, as ``quorum-cron web`` does (production store: server clock), and
times ``--requests`` sequential GETs per page over one keep-alive HTTP
connection:

* ``job page`` — ``/jobs/job-0000``: the expected-vs-actual timeline of the
  default window (60 slots) and the newest history page; the figure the
  target is about;
* ``job page JSON`` — ``/api/jobs/job-0000``, the same data as JSON;
* ``job page, last history page`` — ``?page=199``: reads all 10 000 entries;
* ``job page, 7-day window`` — ``?window=7d``: 1 440 expected slots (the cut) and their slot records;
* ``jobs page`` — ``/``: every job's last 20 outcomes and pause state (2 reads per job);
* ``slot page`` and ``cluster page``.

References measured in the same run: ``/healthz`` (HTTP + framework, no
store) and the job page's store reads called directly (``slots`` of the
window + ``ledger(51)`` + ``control`` + ``audit``), so the page's own cost
(schedule walk, rendering) is visible.

Target (issue 14): job page ≤ 200 ms with 10 000 ledger entries and 1 000 jobs (p50 here; p90 and p99 shown).
"""

from __future__ import annotations

import http.client
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REAPER, ArgumentParser, EmbeddedRedis, int_at_least, print_table, stats_ms, write_result

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.base import VoteRequest
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.server import ServerThread, listen, start_in_thread
from quorum_cron.web.tokens import AdminTokens

NS = "bench"
MEASURED = "job-0000"
MINUTE = 60_000
TARGET_MS = 200.0


def _config(jobs: int) -> Config:
    specs = [JobSpec.create(f"job-{i:04d}", "@every 1m", command=("true",)) for i in range(jobs)]
    return Config(ClusterConfig(namespace=NS, size=3), tuple(specs))


def _fill(client: Any, config: Config, entries: int, others: int) -> tuple[int, float]:
    """Slots and ledger entries as a cluster writes them; returns (slots written, seconds)."""
    server_now = int(client.time()[0]) * 1000
    last_fire = server_now // MINUTE * MINUTE - MINUTE
    clock = [0]
    store = RedisStore(client, NS, clock=lambda: clock[0])
    specs = {s.name: s for s in config.jobs}
    started = time.perf_counter()
    written = 0
    for k in range(entries, 0, -1):
        fire = last_fire - (k - 1) * MINUTE
        names = [MEASURED] if k > others else list(specs)
        clock[0] = fire + 5
        reqs = [
            VoteRequest(n, fire, node, specs[n].spec_hash, 2, 250, specs[n].starting_deadline_ms)
            for n in names
            for node in ("n1", "n2")
        ]
        results = store.vote(reqs)
        clock[0] = fire + 20
        for r in results[1::2]:
            slot = r.slot
            store.start(slot.job, fire, slot.executor, slot.token, 15_000)
        clock[0] = fire + 900
        for r in results[1::2]:
            slot = r.slot
            ok = (fire // MINUTE) % 7 != 0
            store.finish(slot.job, fire, slot.executor, slot.token, ok, "exit 0" if ok else "exit 1")
            written += 1
    return written, time.perf_counter() - started


def _time_gets(port: int, path: str, n: int) -> tuple[dict[str, float], int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times: list[float] = []
    size = 0
    try:
        for i in range(n + 2):
            t0 = time.perf_counter()
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
            elapsed = (time.perf_counter() - t0) * 1000
            if resp.status != 200:
                raise RuntimeError(f"GET {path} answered {resp.status}: {body[:200]!r}")
            size = len(body)
            if i >= 2:  # two warm-up requests (template compilation, first connections)
                times.append(elapsed)
    finally:
        conn.close()
    return stats_ms(times), size


def _time_direct(store: RedisStore, n: int) -> dict[str, float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        now = store.time_ms()
        store.slots(MEASURED, now - 60 * MINUTE + 1, now)
        store.ledger(MEASURED, 51)
        store.control(MEASURED)
        store.audit(MEASURED, 10)
        times.append((time.perf_counter() - t0) * 1000)
    return stats_ms(times)


def main() -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int_at_least(1), default=1000)
    parser.add_argument(
        "--entries", type=int_at_least(1), default=10_000, help="ledger entries of the measured job"
    )
    parser.add_argument("--others", type=int, default=10, help="ledger entries of every other job")
    parser.add_argument("--requests", type=int_at_least(1), default=40, help="timed GETs per page")
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    config = _config(args.jobs)
    server = REAPER.server(EmbeddedRedis())
    server.start()
    client = server.client(socket_timeout=10.0)
    client.flushall()
    written, fill_s = _fill(client, config, args.entries, args.others)
    ledger_len = client.xlen(f"qc:{{{NS}:{MEASURED}}}:ledger")
    print(f"filled {written} slots in {fill_s:.1f} s; {MEASURED} has {ledger_len} ledger entries")

    store = RedisStore.from_url(server.url, NS, socket_timeout=5.0)
    sock = listen("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    web: ServerThread = start_in_thread(sock, config, store, server.url, AdminTokens())
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)

    fire = store.ledger(MEASURED, 1)[0].fire_ms
    pages = [
        ("healthz (reference: HTTP, no store)", "/healthz"),
        ("job page", f"/jobs/{MEASURED}"),
        ("job page JSON", f"/api/jobs/{MEASURED}"),
        ("job page, last history page", f"/jobs/{MEASURED}?page={max(0, args.entries // 50 - 1)}"),
        ("job page, 7-day window", f"/jobs/{MEASURED}?window=7d"),
        ("slot page", f"/jobs/{MEASURED}/slots/{fire}"),
        ("cluster page", "/cluster"),
        ("jobs page", "/"),
    ]
    rows: list[dict[str, Any]] = []
    try:
        direct = _time_direct(store, args.requests)
        rows.append({"page": "job page's store reads, direct (reference)", "bytes": 0, **direct})
        for name, path in pages:
            n = max(5, args.requests // 4) if name == "jobs page" else args.requests
            stats, size = _time_gets(port, path, n)
            rows.append({"page": name, "path": path, "bytes": size, **stats})
    finally:
        web.stop()
        store.close()
    print_table(rows, ["page", "n", "p50", "p90", "p99", "max", "bytes"], "response time, ms")
    job = next(r for r in rows if r["page"] == "job page")
    met = job["p50"] <= TARGET_MS
    print(
        f"\njob page p50 {job['p50']:.1f} ms (p99 {job['p99']:.1f} ms): target <= {TARGET_MS:.0f} ms "
        f"{'met' if met else 'NOT met'}"
    )
    write_result(
        "web_page",
        {
            "params": vars(args),
            "ledger_entries_measured_job": ledger_len,
            "fill_seconds": round(fill_s, 1),
            "rows": rows,
            "target_ms": TARGET_MS,
            "job_page_p50_ms": job["p50"],
            "met": met,
        },
        args.label,
    )


if __name__ == "__main__":
    main()
