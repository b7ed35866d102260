"""Benchmark: what an agent's log line costs to write, one write per line against batches.

Usage::

    .venv/bin/python benchmarks/log_lines.py [--lines 20000] [--rounds 3] [--label NAME]

Why: an executor logs two INFO lines per slot it runs (``run``, ``finish``),
and the agent's handler writes them in batches at most 50 ms apart
(``quorum_cron/agent/logwriter.py``) instead of one ``write`` per line, as
``logging.StreamHandler`` does. ``scale.py`` cannot resolve a cost of a few
µs per line (its agents' CPU moves by ±7 % with the hour), so this measures
it alone: ``--lines`` JSON ``run`` lines as the agent formats them (the
same formatter, scrub filter and ``event`` call), into

* **a pipe** read by another process (stderr under systemd, Docker or
  Kubernetes: every write wakes the reader), and
* **a file** (``2> agent.log``),

each through ``logging.StreamHandler`` (the same-run baseline: what the
agent did before) and through the agent's handler, in a child process per
measurement, alternating, ``--rounds`` times. Reported per line: the
writing process's CPU and wall time (the median of the rounds), and how many
``write`` calls reached the stream.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ArgumentParser, code_env, print_table, write_result

_CHILD = r"""
import io, json, logging, sys, time
from quorum_cron.agent import logs
from quorum_cron.agent.logwriter import BatchedLineHandler

handler_kind, lines = sys.argv[1], int(sys.argv[2])


class Counting(io.TextIOWrapper):
    writes = 0

    def write(self, s):
        Counting.writes += 1
        return super().write(s)


stream = Counting(open(sys.stderr.fileno(), "wb", closefd=False), encoding="utf-8", line_buffering=True)
handler = logging.StreamHandler(stream) if handler_kind == "plain" else BatchedLineHandler(stream)
handler.setFormatter(logs.JsonFormatter("n1"))
handler.addFilter(logs._ScrubFilter())
root = logging.getLogger("quorum_cron")
root.addHandler(handler)
root.setLevel("INFO")
root.propagate = False
log = logging.getLogger("quorum_cron.agent.bench")
cpu0, wall0 = time.process_time(), time.perf_counter()
for i in range(lines):
    job = f"job-{i:06d}"
    logs.event(log, logging.INFO, "run", f"{job}@1796473200000 started (token 12, 3 votes)",
               job=job, slot=1796473200000, token=12, delay_ms=812, votes=3)
handler.flush()
cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
print(json.dumps({"cpu_us": cpu / lines * 1e6, "wall_us": wall / lines * 1e6, "writes": Counting.writes}))
"""

HANDLERS = ("plain", "batched")
SINKS = ("pipe", "file")


def measure(handler: str, sink: str, lines: int, scratch: Path) -> dict[str, float]:
    """One child process writing ``lines`` lines through ``handler`` into ``sink``."""
    cmd = [sys.executable, "-c", _CHILD, handler, str(lines)]
    if sink == "pipe":
        reader = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        assert reader.stdin is not None
        try:
            out = subprocess.run(
                cmd, stderr=reader.stdin, stdout=subprocess.PIPE, env=code_env(), check=True, timeout=300
            )
        finally:
            reader.stdin.close()
            reader.wait(timeout=60)
    else:
        with (scratch / f"{handler}.log").open("wb") as f:
            out = subprocess.run(
                cmd, stderr=f, stdout=subprocess.PIPE, env=code_env(), check=True, timeout=300
            )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)
    if args.lines < 1 or args.rounds < 1:
        ap.error(f"--lines {args.lines} / --rounds {args.rounds}: expected at least 1 each")
    runs: dict[str, list[dict[str, float]]] = {f"{h} {s}": [] for s in SINKS for h in HANDLERS}
    with tempfile.TemporaryDirectory(prefix="qc-bench-log-") as scratch:
        for _ in range(args.rounds):
            for sink in SINKS:
                for handler in HANDLERS:
                    runs[f"{handler} {sink}"].append(measure(handler, sink, args.lines, Path(scratch)))
    rows: list[dict[str, Any]] = []
    for name, results in runs.items():
        handler, sink = name.split()
        rows.append(
            {
                "handler": "StreamHandler (baseline)" if handler == "plain" else "agent (batched)",
                "sink": sink,
                "cpu_us_per_line": round(statistics.median(r["cpu_us"] for r in results), 2),
                "wall_us_per_line": round(statistics.median(r["wall_us"] for r in results), 2),
                "writes_per_line": round(statistics.median(r["writes"] for r in results) / args.lines, 4),
                "rounds_cpu_us": [round(r["cpu_us"], 2) for r in results],
            }
        )
    print(f"{args.lines:,} JSON 'run' lines, median of {args.rounds} rounds, alternating\n")
    print_table(rows, ["sink", "handler", "cpu_us_per_line", "wall_us_per_line", "writes_per_line"])
    write_result("log_lines", {"lines": args.lines, "rounds": args.rounds, "rows": rows}, args.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
