"""Run every benchmark with sizes that finish in under 10 minutes on a 2-core machine.

Usage::

    .venv/bin/python benchmarks/run_all.py [--quick] [--only NAME ...] [--peers] [--scale]

Each benchmark runs as its own process (its own redis-server on a free
loopback port, its own clean-up), with a wall-clock bound; its JSON lands in
``benchmarks/results/`` with the label ``all-<stamp>``. Then this script
prints a summary table, writes ``benchmarks/results/summary-<stamp>.json``
and ``benchmarks/results/latest.md`` (the table for the README); when a
benchmark failed (exit status 1), only the summary, which lists the failures.
``benchmarks/results/`` keeps the latest run of each benchmark (and variant)
and the latest summary: writing one removes the older ones but those the
README or docs/ cite (``_common.keep_latest``); git keeps the history.

``store_vote`` runs twice, with redis-py's pure-Python reply parser and
with ``hiredis`` (when installed), to measure what the ``hiredis`` extra buys.
``--quick`` shrinks every size (a smoke run of about 2 minutes; figures noisier).
``--peers`` also runs ``peers.py`` (Celery beat + RedBeat, APScheduler,
rq-scheduler and the lease baseline next to quorum-cron under the same
faults; needs ``pip install -e '.[peers]'``; about 13 more minutes).
``--scale`` also runs ``scale.py`` at 10,000 jobs on 3 agents (about 5 more minutes).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import ArgumentParser, keep_latest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

FULL: dict[str, list[str]] = {
    "store_vote": ["--jobs", "1000", "10000", "--slots", "5000"],
    "fire_latency": ["--jobs", "3", "--before", "100", "--after", "100"],
    "memory": ["--jobs", "100", "--slots", "50", "--long-seconds", "20"],
    "sim_speed": ["--minutes", "10"],
    "leader_baseline": ["--jobs", "3", "--before", "30", "--after", "30", "--no-quorum"],
    "peers": [],
    "scale": ["--jobs", "10000", "--agents", "3", "--bursts", "2"],
}
QUICK: dict[str, list[str]] = {
    "store_vote": ["--jobs", "1000", "--slots", "2000"],
    "fire_latency": ["--jobs", "3", "--before", "30", "--after", "30"],
    "memory": ["--jobs", "20", "--slots", "20", "--long-seconds", "8"],
    "sim_speed": ["--minutes", "2"],
    "leader_baseline": ["--jobs", "3", "--before", "15", "--after", "20", "--no-quorum"],
    "peers": ["--faults", "kill", "--steady", "5", "--after", "15"],
    "scale": ["--jobs", "2000", "--agents", "3", "--bursts", "1"],
}
TIMEOUT_S = {
    "store_vote": 240,
    "fire_latency": 420,
    "memory": 180,
    "sim_speed": 300,
    "leader_baseline": 180,
    "peers": 1080,
    "scale": 900,
}
OPTIONAL = {"peers", "scale"}  # run only when asked for (--peers / --scale, or by name in --only)


def _hiredis() -> bool:
    try:
        import hiredis  # noqa: F401
    except ImportError:
        return False
    return True


def _run(name: str, args: list[str], label: str) -> tuple[int, float]:
    """Run ``benchmarks/<name>.py`` in its own process group, bounded; returns (exit code, seconds)."""
    cmd = [sys.executable, str(HERE / f"{name}.py"), *args, "--label", label]
    print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    try:
        code = proc.wait(timeout=TIMEOUT_S[name])
    except subprocess.TimeoutExpired:
        print(f"!!! {name} exceeded {TIMEOUT_S[name]} s: stopped", flush=True)
        code = -1
    except KeyboardInterrupt:
        code = -2
    finally:
        if proc.poll() is None:
            # SIGTERM first: the benchmark's own handler kills what it started; then the group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if code == -2:
        raise KeyboardInterrupt
    return code, time.monotonic() - t0


def _load(name: str, label: str) -> dict[str, Any] | None:
    found = sorted(RESULTS.glob(f"{name}-*-{label}.json"))
    return json.loads(found[-1].read_text()) if found else None


# -- the summary -----------------------------------------------------------------


def _fmt(v: object, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if not isinstance(v, float):
        return f"{v}{unit}"
    return f"{v:,.0f}{unit}" if abs(v) >= 100 else f"{v:.1f}{unit}"


def _verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "**no**")


Row = dict[str, str]


def summarize(docs: dict[str, dict[str, Any] | None]) -> list[Row]:
    rows: list[Row] = []

    def add(area: str, figure: str, value: str, reference: str, target: str, ok: bool | None) -> None:
        rows.append(
            {
                "area": area,
                "figure": figure,
                "value": value,
                "reference": reference,
                "target": target,
                "met": _verdict(ok),
            }
        )

    for parser in ("python", "hiredis"):
        sv = docs.get(f"store_vote:{parser}")
        if not sv:
            continue
        res = sv["results"]
        for jobs in sorted({r["jobs"] for r in res}):
            by = {r["mode"]: r for r in res if r["jobs"] == jobs}
            st, ce = by.get("store"), by.get("ceiling")
            if not st or not ce:
                continue
            tag = f"{jobs // 1000}k jobs, {parser}"
            add(
                "commit",
                f"slots/s, 5 voters ({tag})",
                _fmt(st["slots_per_s"]),
                f"ceiling {_fmt(ce['slots_per_s'])}",
                ">= 20,000",
                st["slots_per_s"] >= 20_000,
            )
            add(
                "commit",
                f"share of ceiling ({tag})",
                f"{st['ratio_to_ceiling'] * 100:.0f}%",
                "100%",
                ">= 50%",
                st["ratio_to_ceiling"] >= 0.5,
            )
            if parser == "hiredis" or not docs.get("store_vote:hiredis"):
                add(
                    "commit",
                    f"Redis CPU per slot ({jobs // 1000}k jobs)",
                    _fmt(st["redis_cpu_us_per_slot"], " µs"),
                    f"ceiling {_fmt(ce['redis_cpu_us_per_slot'], ' µs')}",
                    "<= 25 µs",
                    st["redis_cpu_us_per_slot"] <= 25,
                )
    py, hi = docs.get("store_vote:python"), docs.get("store_vote:hiredis")
    if py and hi:
        for jobs in sorted({r["jobs"] for r in py["results"]}):
            a = next((r for r in py["results"] if r["jobs"] == jobs and r["mode"] == "store"), None)
            b = next((r for r in hi["results"] if r["jobs"] == jobs and r["mode"] == "store"), None)
            if a and b:
                add(
                    "commit",
                    f"hiredis vs pure-Python parser ({jobs // 1000}k jobs)",
                    f"{(b['slots_per_s'] / a['slots_per_s'] - 1) * 100:+.0f}% slots/s, "
                    f"{(b['client_cpu_s'] / a['client_cpu_s'] - 1) * 100:+.0f}% client CPU",
                    f"{_fmt(a['slots_per_s'])} slots/s without",
                    "helps?",
                    None,
                )

    fl = docs.get("fire_latency")
    if fl:
        st, ref = fl["steady"], fl["reference_steady"]
        # The issue reads the target on the ledger's start stamp (the fenced
        # start, right before the spawn); the job's own stamp cross-checks it
        # and adds fork/exec and bash start-up, which the local timer pays too.
        add(
            "fire latency",
            f"p50 fire → ledger start stamp, steady ({st['due']} slots)",
            _fmt(st["ledger"]["p50"], " ms"),
            "-",
            "<= 3 ms",
            st["ledger"]["p50"] <= 3,
        )
        add(
            "fire latency",
            "p99 fire → ledger start stamp, steady",
            _fmt(st["ledger"]["p99"], " ms"),
            "-",
            "<= 10 ms",
            st["ledger"]["p99"] <= 10,
        )
        add(
            "fire latency",
            "p50 / p99 fire → job's own start stamp (after fork/exec + bash start), steady",
            f"{_fmt(st['job']['p50'])} / {_fmt(st['job']['p99'], ' ms')}",
            f"local timer {_fmt(ref['job']['p50'])} / {_fmt(ref['job']['p99'], ' ms')}",
            "-",
            None,
        )
        kd, kref = fl["one_killed"], fl["reference_one_killed"]
        # Noise: how far the local timer's own p99 moved between the phases,
        # and at least the ledger stamp's resolution (whole milliseconds).
        noise = max(1.0, abs(kref["job"]["p99"] - ref["job"]["p99"]))
        add(
            "fire latency",
            f"p99 fire → ledger start stamp after SIGKILL of 1 of {fl['nodes']} ({kd['due']} slots)",
            _fmt(kd["ledger"]["p99"], " ms"),
            f"steady {_fmt(st['ledger']['p99'], ' ms')}",
            f"steady p99 ± noise ({noise:.1f} ms)",
            kd["ledger"]["p99"] <= st["ledger"]["p99"] + noise,
        )
        add(
            "fire latency",
            "p50 / p99 fire → job's own start stamp after the kill",
            f"{_fmt(kd['job']['p50'])} / {_fmt(kd['job']['p99'], ' ms')}",
            f"local timer {_fmt(kref['job']['p50'])} / {_fmt(kref['job']['p99'], ' ms')}",
            "-",
            None,
        )
        add(
            "fire latency",
            "missed / duplicated slots, both phases",
            f"{st['missed'] + kd['missed']} / {st['duplicated'] + kd['duplicated']}",
            "-",
            "0 / 0",
            st["missed"] + kd["missed"] + st["duplicated"] + kd["duplicated"] == 0,
        )
    mem = docs.get("memory")
    if mem:
        r, lr = mem["retained"], mem["long_run"]
        add(
            "memory",
            f"Redis bytes per retained slot ({r['jobs']} jobs x {r['slots_per_job']})",
            _fmt(r["bytes_per_slot"], " B"),
            f"bare key {_fmt(r['reference_bare_key_bytes_per_slot'], ' B')}",
            "<= 1 KB",
            r["bytes_per_slot"] <= 1024,
        )
        add(
            "memory",
            f"used_memory growth, 2nd → 4th quarter of a {lr['seconds']:.0f} s run "
            f"({lr['slots_written']:,} slots, {lr['retention_windows']:.0f} retentions)",
            f"{lr['growth_q2_to_q4_pct']:+.1f}%",
            f"slope {lr['slope_bytes_per_slot_written']:+.1f} B per slot written",
            "flat (within ±10%)",
            abs(lr["growth_q2_to_q4_pct"]) <= 10,
        )
    sim = docs.get("sim_speed")
    if sim:
        by = {r["run"]: r for r in sim["results"]}
        f, c, b = by.get("faults"), by.get("no faults"), by.get("bare loop")
        if f:
            add(
                "simulator",
                f"simulated / wall time, {sim['nodes']} nodes x {sim['jobs']} jobs/min, faults",
                f"{_fmt(f['speedup'])}x",
                f"no faults {_fmt(c['speedup'] if c else None)}x; "
                f"bare loop {_fmt(b['events_per_s'] if b else None)} ev/s",
                ">= 3000x",
                f["speedup"] >= 3000,
            )
    lb = docs.get("leader_baseline")
    if lb:
        lead = lb["leader"]
        q_p50 = fl["steady"]["job"]["p50"] if fl else None
        add(
            "baseline",
            f"leader lease (poll {lb['poll_ms']} ms): p50 / p99 fire → job started",
            f"{_fmt(lead['steady']['job']['p50'])} / {_fmt(lead['steady']['job']['p99'], ' ms')}",
            f"quorum-cron p50 {_fmt(q_p50, ' ms')}",
            "-",
            None,
        )
        q_next = fl["kill_to_next_start_ms"] if fl else None
        q_missed = fl["one_killed"]["missed"] if fl else None
        add(
            "baseline",
            f"leader lease (TTL {lb['ttl_ms'] // 1000} s) SIGKILLed: kill → next job start",
            _fmt(float(lead["kill_to_first_start_ms"]), " ms"),
            f"quorum-cron {_fmt(q_next, ' ms')} (next slot was 500 ms away)",
            "-",
            None,
        )
        add(
            "baseline",
            "slots missed / duplicated after the kill",
            f"{lead['failover']['missed']} / {lead['failover']['duplicated']} of {lead['failover']['due']}",
            f"quorum-cron {q_missed} / {fl['one_killed']['duplicated'] if fl else '-'}",
            "-",
            None,
        )
    sc = docs.get("scale")
    if sc:
        lat = sc["lateness_ms"]
        tag = f"{sc['jobs']:,} jobs '{sc['schedule']}', {sc['agents']} agents, {sc['topology']}"
        ref = sc.get("reference") or {}
        add(
            "scale",
            f"burst p50 / p99 / max fire → job's own start ({tag}, {sc['bursts']} min)",
            f"{_fmt(lat['p50'])} / {_fmt(lat['p99'])} / {_fmt(lat['max'], ' ms')}",
            f"plain asyncio burst p99 {_fmt(ref.get('lateness_ms', {}).get('p99'), ' ms')}" if ref else "-",
            "p99 <= 2,000 ms",
            lat["p99"] <= 2000,
        )
        add(
            "scale",
            "missed / duplicated; takeovers; refused starts",
            f"{sc['missed']:,} / {sc['duplicated']:,} of {sc['slots_due']:,}; {sc['takeovers']:,}; "
            f"{sc['start_refused']:,}",
            "-",
            "0 / 0; 0 takeovers",
            sc["missed"] + sc["duplicated"] + sc["takeovers"] == 0,
        )
        add(
            "scale",
            "Redis CPU per slot, end to end",
            _fmt(sc["redis_cpu_us_per_slot"], " µs"),
            "-",
            "<= 50 µs",
            sc["redis_cpu_us_per_slot"] <= 50,
        )
        worst = max(sc["agents_detail"], key=lambda a: a["cpu_us_per_slot"])
        fat = max(sc["agents_detail"], key=lambda a: a["rss_kb_per_job"])
        add(
            "scale",
            "agent CPU per slot (worst agent); RSS per job (largest)",
            f"{_fmt(worst['cpu_us_per_slot'], ' µs')}; {_fmt(fat['rss_kb_per_job'], ' KB')}",
            "-",
            "<= 150 µs; <= 3 KB",
            worst["cpu_us_per_slot"] <= 150 and fat["rss_kb_per_job"] <= 3,
        )
    pe = docs.get("peers")
    if pe:
        for sc in pe["scenarios"]:
            if sc["fault"] != "kill" or "error" in sc:
                continue
            nxt = sc["fault_to_next_run_ms"]
            add(
                "peers",
                f"{sc['peer']}: SIGKILL of the active scheduler → next run; missed / duplicated after",
                f"{_fmt(float(nxt), ' ms') if nxt is not None else 'none'}; "
                f"{sc['after']['missed']} / {sc['after']['duplicated']} of {sc['after']['expected']}",
                "same job, same Redis",
                "-",
                None,
            )
    return rows


def _server(meta: dict[str, Any]) -> str:
    """The server as ``store_vote`` named it: "Redis 7.0.15 (…)" or "Valkey 8.1.8 (…)";
    results from before it named the product are Redis's version alone."""
    server = str(meta.get("redis", "?"))
    return server if server.startswith(("Redis ", "Valkey ")) else f"Redis {server}"


def markdown(rows: list[Row], stamp: str, meta: dict[str, Any]) -> str:
    lines = [
        # The summary's file name, not its stamp alone: keep_latest spares a cited result.
        f"Figures from `python benchmarks/run_all.py` (`summary-{stamp}.json`; {meta['cpus']} vCPUs, shared; "
        f"load average {meta['loadavg_1m_at_start']} at the start; {_server(meta)}). "
        "Each reference was measured in the same run.",
        "",
        "| area | figure | value | reference (same run) | target | met |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['area']} | {r['figure']} | {r['value']} | {r['reference']} | {r['target']} | {r['met']} |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    ap.add_argument("--only", nargs="+", choices=sorted(FULL), help="run only these benchmarks")
    ap.add_argument("--peers", action="store_true", help="also run peers.py (needs the peers extra)")
    ap.add_argument("--scale", action="store_true", help="also run scale.py (10k jobs on 3 agents, ~5 min)")
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    stamp = time.strftime("%Y%m%dT%H%M%S")
    label = f"all-{stamp}"
    meta = {
        "cpus": os.cpu_count(),
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
        "hiredis": _hiredis(),
    }
    asked = {"peers": args.peers, "scale": args.scale}
    wanted = args.only or [n for n in FULL if n not in OPTIONAL or asked[n]]
    timings: dict[str, float] = {}
    codes: dict[str, int] = {}
    docs: dict[str, dict[str, Any] | None] = {}
    t0 = time.monotonic()
    for name in wanted:
        if name == "store_vote":
            for parser in ("python", "hiredis") if meta["hiredis"] else ("python",):
                key = f"store_vote:{parser}"
                extra = ["--parser", parser]
                if parser == "python" and meta["hiredis"]:
                    # Only for the hiredis comparison: 1k jobs, no per-job (cluster) mode.
                    extra += ["--jobs", "1000", "--modes", "ceiling", "store"]
                codes[key], timings[key] = _run(name, [*sizes[name], *extra], f"{label}-{parser}")
                docs[key] = _load(name, f"{label}-{parser}")
                if docs[key]:
                    meta["redis"] = docs[key].get("redis", "?")  # type: ignore[union-attr]
        else:
            codes[name], timings[name] = _run(name, sizes[name], label)
            docs[name] = _load(name, label)
    total = time.monotonic() - t0
    rows = summarize(docs)
    print(f"\n=== summary ({total:.0f} s in all; load average now {os.getloadavg()[0]:.1f})")
    widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in rows[0]} if rows else {}
    if rows:
        print("  ".join(k.ljust(w) for k, w in widths.items()))
        for r in rows:
            print("  ".join(r[k].ljust(w) for k, w in widths.items()))
    failed = {k: c for k, c in codes.items() if c != 0}
    if failed:
        print(f"benchmarks that failed: {failed}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary = {
        "when": stamp,
        "label": label,
        "quick": args.quick,
        "meta": meta,
        "seconds": {k: round(v, 1) for k, v in timings.items()},
        "total_seconds": round(total, 1),
        "exit_codes": codes,
        "rows": rows,
        "results": docs,
    }
    path = RESULTS / f"summary-{stamp}.json"
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    if failed:
        # A run with a failure records itself, but its table lacks rows: it
        # replaces neither latest.md (the README's table) nor the older summary.
        print(f"\nwrote {path.relative_to(ROOT)}; latest.md and the older summaries left as they were")
        return 1
    keep_latest("summary", path)
    md = RESULTS / "latest.md"
    md.write_text(markdown(rows, stamp, meta))
    print(f"\nwrote {path.relative_to(ROOT)} and {md.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
