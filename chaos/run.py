"""One harness run: network, Redis, N nodes, the fault schedule, then ground truth and ledger on disk.

The nodes are either real ``quorum-cron agent`` processes (``scheduler =
"quorum"``) or the leader-lease baseline of ``benchmarks/leader_baseline.py``
(``"leader"``), both running the same jobs, both under the same schedule.
Each job appends ``JOB SLOT_MS NODE START TOKEN`` to the ground-truth file
in the run directory (outside every namespace), ``START`` from bash's
``$EPOCHREALTIME``: the real clock, because libfaketime skips ``bash``
(``FAKETIME_SKIP_CMDS``) while it moves the node's own clock.

Every node runs under libfaketime from the start, its fake time read from a
file of its own on every call (``FAKETIME_NO_CACHE``); a clock fault
rewrites that file. Only the wall clock is faked: monotonic time (leases,
timeouts) stays real, as on a host whose NTP steps the clock.

Everything is bounded: the schedule ends at ``seconds``, each wait has a
deadline, the whole run has a ceiling (``SIGALRM``), and the ``with``
block removes every process and namespace on exit, error, Ctrl-C, SIGTERM or SIGHUP.
"""

from __future__ import annotations

import contextlib
import glob
import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from chaos.bash import find_bash
from chaos.check import TAIL_MS
from chaos.interrupts import check_signals, held, on_alarm, on_interrupt, on_term, pending, sleep_until
from chaos.netns import HUB_IP, Net, clean_stale
from chaos.options import Options, RunRecord
from chaos.plan import GAP_S, Fault
from chaos.planfile import schedule_of
from chaos.proxy import ProxyControl
from chaos.servers import Procs, RedisServer, dir_too_long
from quorum_cron.store.embedded.single import find_redis_server
from quorum_cron.store.redis import RedisStore

__all__ = ["Options", "RunRecord", "libfaketime", "run", "run_start_ms"]

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "chaos"
PROXY_BASE = 7000
EXIT_ID_TAKEN = 3


def libfaketime() -> str | None:
    """Path of the multi-threaded libfaketime (the agent has threads), or None."""
    for pattern in ("/usr/lib/*/faketime/libfaketimeMT.so.1", "/usr/lib/faketime/libfaketimeMT.so.1"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Harness:
    """The processes and namespaces of one run (a context manager that removes them all)."""

    def __init__(self, opts: Options) -> None:
        self.o = opts
        # Absolute: redis-server chdirs to its --dir before it binds its socket, and the jobs'
        # ground-truth path must not depend on the agents' cwd (a relative --dir failed at start).
        self.dir = opts.workdir.absolute()
        too_long = dir_too_long(self.dir)
        if too_long:  # redis-server would exit at start: "unix socket path too long"
            raise RuntimeError(too_long)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        # A reused run directory starts empty: old ground truth would be judged with the new run,
        # and an old run.json with a run that is interrupted or fails (it writes none).
        for stale in [*(self.dir / "logs").glob("*.log"), self.dir / "proxy.sock", self.dir / "ledger.json",
                      self.dir / "run.json"]:  # fmt: skip
            stale.unlink(missing_ok=True)
        for data in ("r1", "r2"):
            shutil.rmtree(self.dir / data, ignore_errors=True)
        self.truth = self.dir / "ground-truth.log"
        self.truth.write_text("")
        self.net = Net(opts.node_names, ["r1", "r2"] if opts.replica else ["r1"])
        self.procs = Procs(self.dir / "logs")
        self.redis_bin = find_redis_server()
        self.primary: RedisServer | None = None
        self.replica: RedisServer | None = None
        self.proxy: ProxyControl | None = None
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}
        self.faketime = libfaketime()
        self.fault_log = (self.dir / "faults.jsonl").open("w")
        self.notes: list[str] = []
        self.crashes: list[str] = []
        self.crashed: set[str] = set()

    # -- lifetime --------------------------------------------------------------------

    def __enter__(self) -> Harness:
        for ns in clean_stale():
            print(f"chaos: removed namespace {ns} left by an earlier run", file=sys.stderr)
        # SIGHUP too: a closed terminal or a dropped ssh session killed the harness outright,
        # leaving every namespace behind (its children died with it, by PDEATHSIG).
        self._old_term = {sig: signal.signal(sig, on_term) for sig in (signal.SIGTERM, signal.SIGHUP)}
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        interrupted = bool(pending)  # the cleanup of an interrupted run: its signal is on its way
        with held():  # a signal now (Ctrl-C again, SIGTERM...) waits until everything is removed
            signal.alarm(0)
            self.procs.close()
            self.net.close()
            self.fault_log.close()
            for sig, old in self._old_term.items():
                signal.signal(sig, old)
        if pending and not interrupted:
            raise pending[0]

    # -- setup -----------------------------------------------------------------------

    def port(self, node: str) -> int:
        return PROXY_BASE + self.o.node_names.index(node) + 1

    def clock(self, node: str) -> Path:
        return self.dir / f"clock-{node}"

    def set_clock(self, node: str, offset_ms: int) -> None:
        tmp = self.dir / f".clock-{node}.tmp"
        tmp.write_text(f"{offset_ms / 1000:+.3f}\n")
        tmp.replace(self.clock(node))

    def up(self) -> None:
        if self.faketime is None:
            raise RuntimeError("libfaketime not found (apt-get install faketime)")
        self.net.up()
        self.primary = RedisServer(self.net, self.procs, "r1", self.dir, self.redis_bin)
        self.primary.start()
        if self.o.replica:
            self.replica = RedisServer(self.net, self.procs, "r2", self.dir, self.redis_bin)
            self.replica.start(replica_of=self.primary)
        ctl = self.dir / "proxy.sock"
        cmd = [*self.net.exec_prefix("hub"), sys.executable, "-m", "chaos.proxy", "--listen", HUB_IP]
        cmd += ["--ports", *(str(self.port(n)) for n in self.o.node_names)]
        cmd += ["--target-host", self.primary.ip, "--target-port", str(RedisServer.PORT)]
        cmd += ["--control", str(ctl), "--seed", str(self.o.seed), "--max-seconds", str(self.o.seconds + 600)]
        self.procs.start("proxy", cmd, env={"PYTHONPATH": str(ROOT)})
        self.proxy = ProxyControl(ctl)
        self.proxy.wait_ready()
        self.config = self._write_config()
        for node in self.o.node_names:
            check_signals()
            self.set_clock(node, 0)
            self.start_node(node)
        for node in self.o.node_names:
            if not self.wait_started(node):
                raise RuntimeError(
                    f"node {node} exited with {self.nodes[node].returncode} at start: {self.last_log(node)}"
                )

    def _job_command(self) -> list[str]:
        bash = find_bash() or "/bin/bash"  # checked before the run (chaos.bash.bash_problem)
        record = (
            'printf "%s %s %s %s %s\\n" "$QUORUM_CRON_JOB" "$QUORUM_CRON_SLOT_MS" "$QUORUM_CRON_NODE" '
            '"$EPOCHREALTIME" "${QUORUM_CRON_TOKEN:--}" >> "$0"'
        )
        return [bash, "-c", record, str(self.truth)]

    def _write_config(self) -> Path:
        o = self.o
        jobs = ""
        for i in range(o.jobs):
            command = ", ".join(json.dumps(a) for a in self._job_command())
            jobs += (
                f'[[jobs]]\nname = "job{i}"\nschedule = "@every {o.period_ms // 1000}s"\n'
                f'command = [{command}]\noverlap = "allow"\ntimeout = "30s"\n'
                f'starting_deadline = "{o.starting_deadline_ms}ms"\n\n'
            )
        path = self.dir / "cluster.toml"
        path.write_text(
            "[cluster]\n"
            f'name = "{NAMESPACE}"\nsize = {o.nodes}\n'
            f'redis_url = "redis://{HUB_IP}:{PROXY_BASE + 1}/0"\n'
            f'heartbeat = "{o.heartbeat_ms}ms"\nlease = "{o.lease_ms}ms"\n'
            f'start_timeout = "{o.start_timeout_ms}ms"\nmax_skew = "{o.max_skew_ms}ms"\n'
            'ntp_unreachable = "store-time"\n'
            f"ledger_maxlen = {self.o.ledger_maxlen}\n"
            f"wait_replicas = {1 if o.replica else 0}\n\n" + jobs
        )
        return path

    def _env(self, node: str) -> dict[str, str]:
        assert self.faketime is not None
        return {
            "LD_PRELOAD": self.faketime,
            "FAKETIME_TIMESTAMP_FILE": str(self.clock(node)),
            "FAKETIME_NO_CACHE": "1",
            # Only the wall clock moves; see tests/test_agent_observability.py for the monotonic fix.
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_FORCE_MONOTONIC_FIX": "0",
            # The jobs' bash reads the real clock for the ground truth.
            "FAKETIME_SKIP_CMDS": "bash",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(ROOT),
        }

    def start_node(self, node: str) -> None:
        url = f"redis://{HUB_IP}:{self.port(node)}/0"
        if self.o.scheduler == "quorum":
            cmd = [sys.executable, "-m", "quorum_cron.agent", "--config", str(self.config)]
            cmd += ["--node-id", node, "--redis", url, "--log-json", "--grace", "2s"]
        else:
            cmd = [sys.executable, "-m", "chaos.leader_node", "--node", node, "--host", HUB_IP]
            cmd += ["--port", str(self.port(node)), "--jobs", str(self.o.jobs), "--out", str(self.truth)]
            cmd += ["--ttl-ms", str(self.o.leader_ttl_ms), "--poll-ms", "100"]
            cmd += ["--period-ms", str(self.o.period_ms)]
        self.nodes[node] = self.procs.start(
            f"node-{node}", [*self.net.exec_prefix(node), *cmd], env=self._env(node)
        )

    def _joined(self, node: str, since: int) -> bool:
        log = self.dir / "logs" / f"node-{node}.log"
        for line in log.read_text(errors="replace").splitlines()[since:]:
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict) and doc.get("event") == "joined":
                    return True
        return False

    def _log_lines(self, node: str) -> int:
        log = self.dir / "logs" / f"node-{node}.log"
        return len(log.read_text(errors="replace").splitlines()) if log.exists() else 0

    def wait_started(self, node: str, since: int = 0, timeout: float = 30) -> bool:
        """Until the node joined (agent) or is running 1 s (baseline); False if it exited."""
        deadline = time.monotonic() + timeout
        proc = self.nodes[node]
        started = time.monotonic()
        while time.monotonic() < deadline:
            check_signals()
            if proc.poll() is not None:
                return False
            if self.o.scheduler == "quorum":
                if self._joined(node, since):
                    return True
            elif time.monotonic() - started > 1:
                return True
            time.sleep(0.05)
        raise RuntimeError(f"node {node} did not start within {timeout:.0f} s (see logs/node-{node}.log)")

    def restart_node(self, node: str) -> None:
        """Start ``node`` again; a restart refused because the old id is still held is retried (bounded)."""
        for _attempt in range(8):
            since = self._log_lines(node)
            self.start_node(node)
            if self.wait_started(node, since):
                return
            code = self.nodes[node].returncode
            if code != EXIT_ID_TAKEN:
                raise RuntimeError(f"node {node} exited with {code} at restart (see logs/node-{node}.log)")
            time.sleep(0.5)
        raise RuntimeError(f"node {node}: its id stayed held after 8 restarts")

    # -- faults ----------------------------------------------------------------------

    def aim(self, f: Fault) -> Fault:
        """``f`` with the node that started the latest job among its targets, if it is aimed."""
        if not f.aim:
            return f
        lines = [line.split() for line in self.truth.read_text().splitlines()]
        runs = [(float(p[3]), p[2]) for p in lines if len(p) >= 4 and p[2] in self.o.node_names]
        if not runs:
            return f
        latest = max(runs)[1]
        if latest in f.targets:
            return f
        return replace(f, targets=tuple(sorted((latest, *f.targets[:-1]))))

    def apply(self, f: Fault) -> None:
        assert self.proxy is not None and self.primary is not None
        if f.kind in ("partition-minority", "partition-majority"):
            for n in f.targets:
                self.net.cut(n, outbound=True, inbound=True)
        elif f.kind == "cut-outbound":
            for n in f.targets:
                self.net.cut(n, outbound=True, inbound=False)
        elif f.kind == "cut-inbound":
            for n in f.targets:
                self.net.cut(n, outbound=False, inbound=True)
        elif f.kind == "loss":
            for n in f.targets:
                self.net.loss(n, int(f.params["percent"]))
        elif f.kind == "latency":
            for n in f.targets:
                self.proxy.delay(self.port(n), f.params["delay_ms"], f.params["jitter_ms"])
        elif f.kind == "pause":
            for n in f.targets:
                self.nodes[n].send_signal(signal.SIGSTOP)
        elif f.kind == "kill":
            for n in f.targets:
                self.procs.kill(self.nodes[n])
        elif f.kind == "clock-offset":
            for n in f.targets:
                self.set_clock(n, int(f.params["offset_ms"]))
        elif f.kind == "clock-step":
            for n in f.targets:
                self.set_clock(n, int(f.params["step_ms"]))
        elif f.kind == "redis-restart":
            self.primary.crash()
        elif f.kind == "promotion":
            if self.replica is None:
                raise RuntimeError("fault 'promotion' needs the replica (run without --no-replica)")
            self.primary.crash()
            self.replica.promote()
            self.proxy.retarget(self.replica.ip, RedisServer.PORT)
            self.primary, self.replica = self.replica, self.primary
        else:
            raise ValueError(f"unknown fault kind {f.kind!r}")

    def heal(self, f: Fault) -> None:
        assert self.proxy is not None and self.primary is not None
        if f.kind in ("partition-minority", "partition-majority", "cut-outbound", "cut-inbound", "loss"):
            for n in f.targets:
                self.net.heal(n)
        elif f.kind == "latency":
            for n in f.targets:
                self.proxy.delay(self.port(n), 0, 0)
        elif f.kind == "pause":
            for n in f.targets:
                self.nodes[n].send_signal(signal.SIGCONT)
        elif f.kind == "kill":
            for n in f.targets:
                self.restart_node(n)
        elif f.kind in ("clock-offset", "clock-step"):
            for n in f.targets:
                self.set_clock(n, 0)
        elif f.kind == "redis-restart":
            self.primary.start(replica_of=None)
            if self.replica is not None:
                self.primary.wait_replica_synced()
        elif f.kind == "promotion":
            assert self.replica is not None
            self.replica.start(replica_of=self.primary)
            self.primary.wait_replica_synced()

    def log_fault(self, f: Fault, start_ms: int, end_ms: int) -> dict[str, Any]:
        doc = {
            "index": f.index,
            "kind": f.kind,
            "targets": list(f.targets),
            "params": f.params,
            "aimed": f.aim,
            "planned_at_s": f.at_s,
            "start_ms": start_ms,
            "end_ms": end_ms,
            "recovered_ms": end_ms + int(self.o.recovery_s * 1000),
        }
        self.fault_log.write(json.dumps(doc) + "\n")
        self.fault_log.flush()
        return doc

    def check_alive(self) -> None:
        """Record every node that exited by itself (a crash is a finding, never ignored)."""
        for node, proc in self.nodes.items():
            if proc.poll() is not None and node not in self.crashed:
                self.crashed.add(node)
                why = f"exited by itself with {proc.returncode}"
                if '"event":"stopping"' in self.last_log(node, lines=5):
                    # The harness sends no SIGTERM before the end: someone else stopped it (seen:
                    # another session's `pkill -f "node-id n1"` on a shared machine).
                    why = f"was stopped by a signal the harness did not send (exit {proc.returncode})"
                self.crashes.append(f"node {node} {why}: {self.last_log(node)}")

    def last_log(self, node: str, lines: int = 1) -> str:
        """The last ``lines`` of ``node``'s log (what an agent that exits prints last: its error)."""
        log = self.dir / "logs" / f"node-{node}.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-lines:] if log.exists() else []
        return " ".join(tail)[: 300 * lines]

    # -- after the run ---------------------------------------------------------------

    def stop_nodes(self) -> None:
        # Popen.send_signal, not os.kill: it signals nothing once the process was reaped (a node
        # that crashed), whose pid may have gone to another process since.
        for proc in self.nodes.values():
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        for proc in self.nodes.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.procs.kill(proc)

    def dump_ledger(self) -> None:
        assert self.primary is not None
        store = RedisStore.from_url(f"unix://{self.primary.socket}", NAMESPACE, socket_timeout=10.0)
        try:
            doc = {
                f"job{i}": [
                    {
                        k: (list(v) if isinstance(v, tuple) else str(v) if k == "state" else v)
                        for k, v in asdict(e).items()
                    }
                    for e in store.ledger(f"job{i}", self.o.ledger_maxlen)
                ]
                for i in range(self.o.jobs)
            }
        finally:
            store.close()
        (self.dir / "ledger.json").write_text(json.dumps(doc))


def run_start_ms(now_ms: int, period_ms: int) -> int:
    """The run's start: the first instant at least 1 s after ``now_ms`` that lies half a period
    past a fire time.

    The schedule's times are relative to the start, so a fixed phase of the start against
    the jobs' fire times makes where each fault falls between two slots a property of the
    seed, not of the second the run happened to begin in. Half a period keeps a fault
    planned at a whole second (the first one, at 4 s) from racing a fire time: with a 2 s
    period, seed 2's +3.6 s clock step starts 1 s after a fire time on every run, so on the
    baseline its leader jumps past the next fire time and never runs that slot.
    """
    half = period_ms // 2
    return -(-(now_ms + 1000 - half) // period_ms) * period_ms + half


def run(opts: Options, *, echo: bool = True) -> RunRecord:
    """Carry out one run; returns its record (also written to ``workdir/run.json``)."""
    schedule = schedule_of(opts)
    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    old_int = signal.signal(signal.SIGINT, on_interrupt)
    pending.clear()
    signal.alarm(int(opts.seconds) + 180)
    try:
        with Harness(opts) as h:
            h.up()
            t0 = run_start_ms(_now_ms(), opts.period_ms)
            record = RunRecord(
                asdict(opts) | {"workdir": str(opts.workdir)}, t0, t0 + int(opts.seconds * 1000)
            )
            if echo:
                print(
                    f"chaos: {opts.scheduler}, {opts.nodes} nodes, seed {opts.seed}, {len(schedule)} faults, "
                    f"{opts.seconds:.0f} s; run dir {opts.workdir}",
                    flush=True,
                )
            quiet_from = 0
            for f in schedule:
                # A heal can take longer than planned (a restart, a resync): keep the gap after it.
                begin = max(t0 + f.at_s * 1000, quiet_from + GAP_S * 1000)
                if begin + (f.duration_s + opts.recovery_s) * 1000 > record.end_ms:
                    record.notes.append(f"fault #{f.index} ({f.kind}) dropped: earlier heals ran late")
                    break
                sleep_until(begin)
                f = h.aim(f)
                start = _now_ms()
                h.apply(f)
                sleep_until(start + f.duration_s * 1000)
                h.heal(f)
                h.check_alive()
                record.faults.append(h.log_fault(f, start, _now_ms()))
                quiet_from = record.faults[-1]["recovered_ms"]
                if echo:
                    print(f"  {(start - t0) / 1000:6.1f}s  #{f.index} {f.describe()}", flush=True)
            sleep_until(record.end_ms + opts.starting_deadline_ms + TAIL_MS)
            h.check_alive()
            record.crashes = h.crashes
            record.stopped_ms = _now_ms()  # the checker's end of "in flight" (chaos.check.SETTLE_MS)
            h.stop_nodes()
            h.dump_ledger()
            record.notes += h.notes
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGINT, old_int)
    (opts.workdir / "run.json").write_text(json.dumps(asdict(record), indent=1, default=str))
    return record
