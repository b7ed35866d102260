"""Benchmark: quorum-cron against the schedulers people use, same Redis, same job, same faults.

Usage::

    pip install -e '.[test,peers]'
    .venv/bin/python benchmarks/peers.py [--only PEER ...] [--faults FAULT ...]
        [--steady 10] [--after 20] [--pause 12] [--label L]
    .venv/bin/python benchmarks/peers.py --table [RESULT.json] [--readme]
    .venv/bin/python benchmarks/peers.py --scale [--jobs 10000 ...]  # peers_scale.py: 10k / 100k jobs

Setups (each on its own fresh redis-server on a free loopback port, two
scheduler processes unless said; docs/benchmarks.md § Peers says why each
is configured so):

* ``quorum-cron`` — 3 agents (the smallest cluster that survives a fault);
* ``lease`` — ``leader_baseline.py``'s leader with a 10 s TTL lease;
* ``celery-default`` — Celery beat + RedBeat with its defaults (lock
  1,500 s = 5 x ``beat_max_loop_interval`` 300 s), one worker;
* ``celery-tuned`` — the same with ``redbeat_lock_timeout = 5`` and
  ``beat_max_loop_interval = 1``;
* ``apscheduler`` — two APScheduler 3 ``BlockingScheduler`` sharing one
  ``RedisJobStore`` (cron ``second="*"``), as it is commonly deployed;
* ``rq-scheduler`` — two ``rqscheduler --interval 1`` and one ``rq worker``.

Every setup runs the same job every second: the bash one-liner that
appends ``job slot who $EPOCHREALTIME`` to a file (ground truth; see
``peers_analysis.py`` for what is computed from it). Faults, each in a run
of its own: ``--steady`` seconds, then at a half second

* ``kill`` — SIGKILL of the active scheduler (the lock or lease holder;
  for quorum-cron the node that ran the latest slot);
* ``kill-holding-lock`` — rq-scheduler only: SIGKILL while it holds its lock;
* ``pause`` — SIGSTOP of the active scheduler for ``--pause`` s (longer than
  every lock but RedBeat's default), then SIGCONT;
* ``clock`` — the active scheduler's host clock runs 5 s ahead
  (libfaketime, from the start), and it is SIGKILLed: the others take over
  from state written by a wrong clock;

then ``--after`` seconds. ``--table`` prints the README's comparison table
from the latest (or the given) result; with ``--readme`` it also rewrites
that table in README.md and docs/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import peers_analysis as pa  # noqa: E402
from _common import (  # noqa: E402
    AGENT,
    REAPER,
    RESULTS,
    ROOT,
    AgentCluster,
    ArgumentParser,
    EmbeddedRedis,
    now_ms,
    print_table,
    sleep_until_ms,
    start_process,
    write_result,
)
from _peer_procs import job_command  # noqa: E402

PROCS = [sys.executable, str(HERE / "_peer_procs.py")]
SKEW = "+5s"
FAKETIME_ENV = {
    # As tests/test_agent_observability.py: only the wall clock is off.
    "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    "FAKETIME_FORCE_MONOTONIC_FIX": "0",
}
PEERS = ["quorum-cron", "lease", "celery-default", "celery-tuned", "apscheduler", "rq-scheduler"]
FAULTS = ["kill", "kill-holding-lock", "pause", "clock"]
LABELS = {
    "quorum-cron": "quorum-cron, 3 agents",
    "lease": "leader lease (TTL 10 s), 2 schedulers",
    "celery-default": "Celery beat + RedBeat, defaults (lock 1,500 s)",
    "celery-tuned": "Celery beat + RedBeat, lock 5 s, loop 1 s",
    "apscheduler": "APScheduler 3, 2 schedulers, shared RedisJobStore",
    "rq-scheduler": "rq-scheduler, 2 schedulers (--interval 1)",
}
FAULT_LABELS = {
    "kill": "SIGKILL active",
    "kill-holding-lock": "SIGKILL holding lock",
    "pause": "SIGSTOP active",
    "clock": "active clock +5 s, SIGKILL",
}
README_START = "<!-- peers-table:start -->"
README_END = "<!-- peers-table:end -->"


def versions() -> dict[str, str]:
    out = {}
    for dist in ("quorum-cron", "celery", "celery-redbeat", "APScheduler", "rq", "rq-scheduler", "redis"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    try:
        cmd = ["redis-server", "--version"]
        line = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
        out["redis-server"] = next((w[2:] for w in line.split() if w.startswith("v=")), line.strip())
    except (OSError, subprocess.TimeoutExpired):
        out["redis-server"] = "?"
    return out


# -- a setup under test ----------------------------------------------------------


@dataclass
class Setup:
    """One peer's processes on one Redis; subclasses start them and find the active one."""

    server: EmbeddedRedis
    work: Path
    out: Path
    skewed: bool = False  # the first scheduler runs under libfaketime, 5 s ahead
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    schedulers: list[str] = field(default_factory=list)  # the names of the faultable processes
    basis: str = "slot"

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PEERS_OUT": str(self.out),
            "PEERS_REDIS_URL": self.server.url,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(HERE),
            **extra,
        }

    def spawn(self, name: str, cmd: list[str], env: dict[str, str], *, skew: bool = False) -> None:
        if skew:
            faketime = shutil.which("faketime")
            if faketime is None:
                raise SystemExit("peers.py: the clock fault needs `faketime` (apt-get install faketime)")
            cmd = [faketime, "-f", SKEW, *cmd]
            env = {**env, **FAKETIME_ENV}
        self.procs[name] = start_process(cmd, log=self.work / f"{name}.log", env=env)

    def start(self) -> None:
        raise NotImplementedError

    def active(self) -> str:
        """The scheduler to fault: the lock / lease holder, or the one that ran the latest run."""
        runs = pa.parse(self.out.read_text())
        mine = [r for r in runs if r.who in self.schedulers]
        return mine[-1].who if mine else self.schedulers[0]

    def stop(self) -> None:
        for proc in self.procs.values():
            REAPER.kill(proc)

    def check_alive(self) -> None:
        dead = [n for n, p in self.procs.items() if p.poll() is not None]
        if dead:
            tail = (self.work / f"{dead[0]}.log").read_text(errors="replace")[-1500:]
            raise RuntimeError(f"{dead} exited at start:\n{tail}")

    def wait_runs(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(pa.parse(self.out.read_text())) < count:
            self.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {count} runs within {timeout:.0f} s; logs in {self.work}")
            time.sleep(0.2)


class QuorumCron(Setup):
    def start(self) -> None:
        self.cluster = AgentCluster(self.work, self.server.url, 3, namespace="peers")
        cmd = job_command(self.out)
        config = self.cluster.config(
            f'[[jobs]]\nname = "tick"\nschedule = "@every 1s"\ncommand = {json.dumps(cmd)}\n'
            'starting_deadline = "10s"\noverlap = "allow"\n'
        )
        self.schedulers = ["n1", "n2", "n3"]
        for node in self.schedulers:
            agent = [*AGENT, "--config", str(config), "--node-id", node, "--log-json", "--grace", "5s"]
            skew = self.skewed and node == "n1"
            env = {"PYTHONUNBUFFERED": "1", "NO_PROXY": "127.0.0.1,localhost"}
            faketime = shutil.which("faketime") if skew else None
            if skew and faketime is None:
                raise SystemExit("peers.py: the clock fault needs `faketime` (apt-get install faketime)")
            full = [faketime, "-f", SKEW, *agent] if faketime else agent
            if skew:
                env.update(FAKETIME_ENV)
            self.cluster.procs[node] = self.procs[node] = start_process(
                full, log=self.cluster.log(node), env=env
            )
        self.cluster.wait_joined()
        self.wait_runs(2, 30)

    def active(self) -> str:
        if self.skewed:
            return "n1"  # the node with the wrong clock (it abstains from voting: its clock is checked)
        return super().active()

    def stop(self) -> None:
        self.cluster.stop(timeout=5)
        super().stop()


class Lease(Setup):
    def start(self) -> None:
        self.schedulers = ["s1", "s2"]
        for node in self.schedulers:
            args = ["--node", node, "--port", str(self.server.port), "--jobs", "1", "--out", str(self.out)]
            args += ["--ttl-ms", "10000", "--poll-ms", "100"]
            self.spawn(node, [*PROCS, "lease", *args], self.env(), skew=self.skewed and node == "s1")
            if node == "s1":
                self.wait_runs(1, 30)  # s1 leads (the skewed one, in the clock case)
        self.wait_runs(3, 30)

    def active(self) -> str:
        held = self.server.client().get("lb:leader")
        return held.decode() if isinstance(held, bytes) else str(held)


class Celery(Setup):
    lock_s: int | None = None

    def start(self) -> None:
        self.basis = "period"
        extra = {"PEERS_CELERY": "1"}
        if self.lock_s is not None:
            extra["PEERS_REDBEAT_LOCK_S"] = str(self.lock_s)
        env = self.env(**extra)
        worker = ["celery", "worker", "--loglevel", "WARNING", "--concurrency", "2", "--hostname", "w1@%h"]
        self.spawn("worker", [*PROCS, *worker], env)
        self.schedulers = ["beat1", "beat2"]
        for name in self.schedulers:
            beat = ["celery", "beat", "--loglevel", "INFO", "--schedule", str(self.work / f"{name}.db")]
            self.spawn(name, [*PROCS, *beat], env, skew=self.skewed and name == "beat1")
            if name == "beat1":
                self._wait_lock("beat1", 60)
        self.wait_runs(3, 60)

    def _wait_lock(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while "Acquired lock" not in (self.work / f"{name}.log").read_text(errors="replace"):
            self.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not acquire RedBeat's lock within {timeout:.0f} s")
            time.sleep(0.2)

    def active(self) -> str:
        for name in self.schedulers:
            if "Acquired lock" in (self.work / f"{name}.log").read_text(errors="replace"):
                return name
        return self.schedulers[0]


class CeleryDefault(Celery):
    lock_s = None


class CeleryTuned(Celery):
    lock_s = 5


class APScheduler(Setup):
    def start(self) -> None:
        self.schedulers = ["aps1", "aps2"]
        for name in self.schedulers:
            cmd = [*PROCS, "apscheduler", name, str(self.server.port)]
            self.spawn(name, cmd, self.env(), skew=self.skewed and name == "aps1")
            if name == "aps1":
                self.wait_runs(1, 30)
        self.wait_runs(4, 30)

    def active(self) -> str:
        return "aps1"  # both run every job: the first one started (the skewed one, in the clock case)


class RQ(Setup):
    LOCK = "rq:scheduler_lock"

    def start(self) -> None:
        from redis import Redis
        from rq_scheduler import Scheduler  # type: ignore[import-untyped]

        self.basis = "period"
        env = self.env()
        worker = ["rqworker", "--url", self.server.url, "--logging_level", "WARNING"]
        self.spawn("worker", [*PROCS, *worker], env)
        conn = Redis(host="127.0.0.1", port=self.server.port)
        first = datetime.utcnow().replace(microsecond=0) + timedelta(seconds=2)
        Scheduler(connection=conn).schedule(
            scheduled_time=first, func="_peer_procs.rq_tick", interval=1, repeat=None, result_ttl=60
        )
        conn.close()
        self.schedulers = ["rqs1", "rqs2"]
        for name in self.schedulers:
            cmd = [*PROCS, "rqscheduler", "--url", self.server.url, "--interval", "1"]
            self.spawn(name, cmd, env, skew=self.skewed and name == "rqs1")
            if name == "rqs1":
                self.wait_runs(1, 30)
        self.wait_runs(3, 30)

    def active(self) -> str:
        return "rqs1"  # both take the lock in turn, each for a few ms per second

    def catch_holder(self, victim: str, deadline_ms: float) -> bool:
        """Leave ``victim`` SIGSTOPped while it holds the lock; False if not caught by ``deadline_ms``.

        The other scheduler is stopped first (when the lock is free, so it
        holds nothing), so that the next lock to appear is the victim's; the
        victim is stopped the moment it does, and caught if the lock is still
        there then. The other is continued before returning, either way.
        """
        other = self.procs[next(n for n in self.schedulers if n != victim)]
        client = self.server.client()
        try:
            while now_ms() < deadline_ms:
                signal_group(other, signal.SIGSTOP)
                time.sleep(0.02)
                if client.get(self.LOCK) is not None:  # perhaps the other's: let it finish
                    signal_group(other, signal.SIGCONT)
                    time.sleep(0.1)
                    continue
                # Held for a few ms a second: poll without sleeping, at most 2 s per try.
                until = min(deadline_ms, now_ms() + 2000)
                while now_ms() < until and client.get(self.LOCK) is None:
                    pass
                signal_group(self.procs[victim], signal.SIGSTOP)
                if client.get(self.LOCK) is not None:
                    signal_group(other, signal.SIGCONT)
                    return True
                signal_group(self.procs[victim], signal.SIGCONT)
                signal_group(other, signal.SIGCONT)
                time.sleep(0.1)
            return False
        finally:
            signal_group(other, signal.SIGCONT)
            client.close()


SETUPS: dict[str, type[Setup]] = {
    "quorum-cron": QuorumCron,
    "lease": Lease,
    "celery-default": CeleryDefault,
    "celery-tuned": CeleryTuned,
    "apscheduler": APScheduler,
    "rq-scheduler": RQ,
}


def signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


# -- one scenario ----------------------------------------------------------------


def scenario(peer: str, fault: str, steady: int, after: int, pause: int, work: Path) -> dict[str, Any]:
    out = work / "runs.log"
    out.touch()
    with REAPER.server(EmbeddedRedis()) as server:
        setup = SETUPS[peer](server, work, out, skewed=fault == "clock")
        try:
            setup.start()
            t0 = (now_ms() // 1000 + 2) * 1000
            t_fault = t0 + steady * 1000 - 500
            sleep_until_ms(t_fault)
            victim = setup.active()
            held_lock: bool | None = None
            if isinstance(setup, RQ) and fault in ("kill-holding-lock", "pause"):
                # Takes up to a few seconds: the after window starts at the fault.
                held_lock = setup.catch_holder(victim, t_fault + 8000)
                if not held_lock:
                    signal_group(setup.procs[victim], signal.SIGSTOP)
            if fault in ("kill", "clock", "kill-holding-lock"):
                if fault == "kill-holding-lock" and not isinstance(setup, RQ):
                    raise ValueError(f"fault {fault!r} does not apply to {peer}")
                fault_at = time.time() * 1000
                REAPER.kill(setup.procs[victim])
                for proc in setup.procs.values():
                    signal_group(proc, signal.SIGCONT)
            elif fault == "pause":
                if not isinstance(setup, RQ):
                    signal_group(setup.procs[victim], signal.SIGSTOP)
                fault_at = time.time() * 1000
                sleep_until_ms(fault_at + pause * 1000)
                for proc in setup.procs.values():
                    signal_group(proc, signal.SIGCONT)
            else:
                raise ValueError(f"unknown fault {fault!r}")
            t_after = (int(fault_at) // 1000 + 1) * 1000
            t_end = t_after + after * 1000
            print(f"  {fault} of {victim} at t0+{(fault_at - t0) / 1000:.2f} s", flush=True)
            sleep_until_ms(t_end + 1500)
        finally:
            for proc in setup.procs.values():
                signal_group(proc, signal.SIGCONT)
            setup.stop()
    runs = pa.parse(out.read_text())
    return {
        "peer": peer,
        "fault": fault,
        "victim": victim,
        "held_lock": held_lock,
        "pause_s": pause if fault == "pause" else None,
        "fault_at_ms": round(fault_at, 1),
        "t0_ms": t0,
        # The whole seconds before the fault's own second (half of it is after the fault).
        "steady": pa.window(runs, t0, t0 + (steady - 1) * 1000, basis=setup.basis),
        "after": pa.window(runs, t_after, t_end, basis=setup.basis),
        "fault_to_next_run_ms": pa.next_run_ms(runs, fault_at),
        "watched_after_fault_s": round((t_end - fault_at) / 1000, 1),
        # The ground truth itself: (start - t0 ms, process, reported slot - t0 ms or None).
        "runs": [
            [round(r.start_ms - t0, 1), r.who, None if r.slot_ms is None else r.slot_ms - t0] for r in runs
        ],
    }


def plan(peers: list[str], faults: list[str]) -> list[tuple[str, str]]:
    return [(p, f) for p in peers for f in faults if f != "kill-holding-lock" or p == "rq-scheduler"]


# -- tables ----------------------------------------------------------------------


def _ms(v: float | None, watched: float) -> str:
    if v is None:
        return f"none in {watched:.0f} s"
    return f"{v / 1000:.1f} s" if v >= 1000 else f"{v:.0f} ms"


def _lateness(lat: dict[str, float] | None) -> str:
    """p50 / p99 of the runs after the fault ("-" when none ran)."""
    if not lat or not lat.get("n"):
        return "-"
    return f"{lat['p50']:.0f} / {lat['p99']:.0f} ms"


def rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for s in doc["scenarios"]:
        if "error" in s:
            out.append({"setup": LABELS[s["peer"]], "fault": FAULT_LABELS[s["fault"]], "error": s["error"]})
            continue
        st, af = s["steady"], s["after"]
        lat = st["lateness_ms"]
        mark = "" if st["lateness_basis"] == "slot" else " ¹"
        out.append(
            {
                "setup": LABELS[s["peer"]] + mark,
                "fault": FAULT_LABELS[s["fault"]] + (" (lock not caught)" if s["held_lock"] is False else ""),
                "fault → next run": _ms(s["fault_to_next_run_ms"], s["watched_after_fault_s"]),
                "missed": f"{af['missed']} of {af['expected']}",
                "duplicated": f"{af['duplicated']}",
                "steady missed / dup": f"{st['missed']} / {st['duplicated']}",
                "steady lateness p50 / p99": f"{lat['p50']:.0f} / {lat['p99']:.0f} ms",
                "after lateness p50 / p99": _lateness(af.get("lateness_ms")),
            }
        )
    return out


COLUMNS = [
    "setup",
    "fault",
    "fault → next run",
    "missed",
    "duplicated",
    "steady missed / dup",
    "steady lateness p50 / p99",
    "after lateness p50 / p99",
]


def markdown(doc: dict[str, Any]) -> str:
    v = doc["versions"]
    when = datetime.strptime(doc["when"], "%Y%m%dT%H%M%S").strftime("%Y-%m-%d")
    head = (
        f"Measured {when} by `python benchmarks/peers.py` ({doc['machine']['cpus']} vCPUs, shared with "
        f"other work; load average {doc['machine']['loadavg_1m_at_start']} at the start) with "
        f"Redis {v['redis-server']}, quorum-cron {v['quorum-cron']}, Celery {v['celery']} + "
        f"celery-redbeat {v['celery-redbeat']}, APScheduler {v['APScheduler']}, rq {v['rq']} + "
        f"rq-scheduler {v['rq-scheduler']}. One job every second; {doc['steady_s']} s steady, the fault "
        f"at a half second, then {doc['after_s']} s watched (SIGSTOP lasts {doc['pause_s']} s); "
        "missed and duplicated count the runs after the fault, from the job's own lines."
    )
    lines = [head, "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    previous = ""
    for r in rows(doc):
        r["setup"], previous = ("" if r["setup"] == previous else r["setup"]), r["setup"]
        if "error" in r:
            cells = [r["setup"], r["fault"], f"failed: {r['error']}"] + [""] * (len(COLUMNS) - 3)
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append("| " + " | ".join(r[c] for c in COLUMNS) + " |")
    lines += [
        "",
        "¹ Celery beat and rq-scheduler schedule each run one period after the previous one was sent, "
        "so they have no fixed fire times: missed and duplicated are counted from the gaps between runs, "
        "and lateness is the gap to the previous run minus 1 s (docs/benchmarks.md § Peers).",
    ]
    return "\n".join(lines) + "\n"


def latest_result() -> Path:
    found = sorted(RESULTS.glob("peers-*.json"))
    if not found:
        raise SystemExit("peers.py: no benchmarks/results/peers-*.json yet; run benchmarks/peers.py first")
    return found[-1]


def write_readme(table: str) -> None:
    """Replace the table between the markers in README.md and docs/benchmarks.md."""
    for doc in (ROOT / "README.md", ROOT / "docs" / "benchmarks.md"):
        text = doc.read_text()
        if README_START not in text or README_END not in text:
            raise SystemExit(f"peers.py: {doc.name} has no {README_START} ... {README_END} markers")
        head, rest = text.split(README_START, 1)
        _, tail = rest.split(README_END, 1)
        doc.write_text(f"{head}{README_START}\n{table}{README_END}{tail}")
        print(f"rewrote the comparison table in {doc.relative_to(ROOT)}")


# -- main ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--scale" in argv:  # the peers at scale, no faults: benchmarks/peers_scale.py
        import peers_scale

        return peers_scale.main([a for a in argv if a != "--scale"])
    ap = ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=PEERS, default=PEERS, metavar="PEER")
    ap.add_argument("--faults", nargs="+", choices=FAULTS, default=FAULTS, metavar="FAULT")
    ap.add_argument("--steady", type=int, default=10, help="seconds before the fault")
    ap.add_argument("--after", type=int, default=20, help="seconds watched after the fault")
    ap.add_argument("--pause", type=int, default=12, help="seconds the SIGSTOP lasts")
    ap.add_argument("--label", default="")
    ap.add_argument("--table", nargs="?", const="latest", metavar="RESULT.json", help="print the table only")
    ap.add_argument(
        "--readme", action="store_true", help="with --table: rewrite it in README.md and docs/benchmarks.md"
    )
    # Taken before parsing (above); listed so that --help shows it.
    ap.add_argument(
        "--scale",
        action="store_true",
        help="run peers_scale.py instead, with the other arguments (see its --help)",
    )
    args = ap.parse_args(argv)
    if args.table:
        path = latest_result() if args.table == "latest" else Path(args.table)
        table = markdown(json.loads(path.read_text()))
        print(table)
        if args.readme:
            write_readme(table)
        return 0
    if "pause" in args.faults and args.after < args.pause + 5:
        ap.error(f"--after {args.after}: expected at least --pause + 5 = {args.pause + 5}")
    vers = versions()
    extra = ("celery", "celery-redbeat", "APScheduler", "rq-scheduler")
    missing = [d for d in extra if vers[d] == "not installed"]
    if missing and set(args.only) - {"quorum-cron", "lease"}:
        raise SystemExit(f"peers.py: {', '.join(missing)} not installed: pip install -e '.[peers]'")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), flush=True)
    todo = plan(args.only, args.faults)
    doc: dict[str, Any] = {
        "versions": vers,
        "steady_s": args.steady,
        "after_s": args.after,
        "pause_s": args.pause,
        "skew": SKEW,
        "scenarios": [],
    }
    t_start = time.monotonic()
    try:
        for i, (peer, fault) in enumerate(todo, 1):
            so_far = time.monotonic() - t_start
            print(f"[{i}/{len(todo)}] {peer}: {fault} ({so_far:.0f} s so far)", flush=True)
            with tempfile.TemporaryDirectory(prefix=f"qc-peers-{peer}-") as tmp:
                try:
                    res = scenario(peer, fault, args.steady, args.after, args.pause, Path(tmp))
                except (RuntimeError, OSError) as exc:
                    print(f"  failed: {exc}", flush=True)
                    res = {"peer": peer, "fault": fault, "error": str(exc).splitlines()[0]}
            doc["scenarios"].append(res)
    finally:
        REAPER.reap()
    doc["seconds"] = round(time.monotonic() - t_start, 1)
    measured = rows(doc)
    print_table(measured, COLUMNS, f"peers under faults ({doc['seconds']:.0f} s)")
    doc["table"] = measured
    path = write_result("peers", doc, args.label)
    print()
    print(markdown(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
