"""``quorum-cron sim``: run, explore and replay the deterministic simulator.

The simulator itself lives in the ``sim`` package (pure, virtual time);
this module is only its command line: argument parsing, rich output, real
time measured for the speed report, files written where asked.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from quorum_cron.commands.sim_options import hours_option, load_template, start_option
from quorum_cron.printable import printable

__all__ = ["sim_group"]

START_HELP = (
    "With --config: the simulated time to begin at (ISO 8601, UTC unless it names an offset, "
    "e.g. 2026-03-29T00:30:00Z).  [default: 2023-11-14T22:14:00Z]"
)

SHRINK_RUNS = 60
"""Simulations the shrinker may spend per failing seed on the command line."""


def _scenario_dir() -> Path:
    import sim

    return Path(sim.__file__).parent / "scenarios"


def _console() -> Console:
    return Console(highlight=False)


def _load(spec: str) -> object:
    """A scenario from a path, or by the name of a shipped one."""
    import sim

    path = Path(spec)
    if not path.exists() and not spec.endswith(".toml"):
        shipped = _scenario_dir() / f"{spec}.toml"
        if shipped.exists():
            path = shipped
    if not path.exists():
        names = ", ".join(sorted(p.stem for p in _scenario_dir().glob("*.toml")))
        raise click.BadParameter(
            f"no scenario file {spec!r} (shipped scenarios: {names})", param_hint="SCENARIO"
        )
    try:
        return sim.load(path)
    except Exception as exc:  # ConfigError and friends: one line, no traceback
        raise click.BadParameter(str(exc), param_hint="SCENARIO") from None


def _writable(path: Path | None, option: str) -> None:
    """Refuse an output path whose directory does not exist now, not after the whole run."""
    if path is not None and not path.parent.is_dir():
        raise click.BadParameter(f"{path}: directory {str(path.parent)!r} does not exist", param_hint=option)


def _nodes_comment(names: tuple[tuple[str, str], ...]) -> str:
    """The comment line naming the member each simulated node stands for ("" without members)."""
    if not names:
        return ""
    return "# Nodes: " + ", ".join(f"{n} = {printable(m, 100)}" for n, m in names) + "\n"


def _nothing_checked(due: int, judged: int) -> str | None:
    """The warning for a run (or runs) that checked nothing (docs/simulator.md: a scenario that
    never reaches the state it was written for tests nothing; the report says so)."""
    if due == 0:
        return (
            "warning: no slot was due in the judged part of the run, so nothing was checked "
            "(a longer duration, or a job that fires more often, tests something)"
        )
    if judged == 0:
        return (
            f"warning: liveness judged 0 of {due} due slots (every one saw a health change "
            "or fell too near the end: a longer duration tests something)"
        )
    return None


def _print_report(
    console: Console, report: object, events: int, seconds: float, sim_ms: int, mutant: str = ""
) -> None:
    from sim.checker import KNOWN_LIMITS, Report

    assert isinstance(report, Report)
    if mutant:
        from sim.mutant_names import MUTANTS

        title = f"{report.scenario} · seed {report.seed} · MUTANT {mutant} (a broken {report.strategy})"
        console.print(
            f"[bold red]MUTANT {mutant} planted:[/bold red] {MUTANTS.get(mutant, '?')} "
            "(a testing aid: violations are the checker catching the planted bug)"
        )
    else:
        title = f"{report.scenario} · seed {report.seed} · {report.strategy}"
    table = Table(title=title)
    for col in ("due", "runs", "duplicates", "re-runs", "misses", "liveness-checked", "violations"):
        table.add_column(col, justify="right")
    table.add_row(
        str(report.due),
        str(report.runs),
        str(report.duplicates),
        str(report.reruns),
        str(report.misses),
        str(report.liveness_checked),
        str(len(report.violations)),
    )
    console.print(table)
    if report.exempt:
        console.print("exempt: " + ", ".join(f"{k} x{n}" for k, n in sorted(report.exempt.items())))
    for kind, n in sorted(report.by_kind().items()):
        known = " (a known limit of the design: docs/protocol.md)" if kind in KNOWN_LIMITS else ""
        console.print(f"[red]✗[/red] {kind}: {n}{known}")
    for v in report.violations[:10]:
        console.print(f"    {v}")
    if report.reached:
        console.print("reached: " + ", ".join(f"{k} x{n}" for k, n in sorted(report.reached.items())))
    warning = _nothing_checked(report.due, report.liveness_checked)
    if warning is not None:
        console.print(f"[yellow]{warning}[/yellow]")
    if seconds > 0:
        console.print(f"{events} events, {seconds:.2f} s real time, {sim_ms / 1000 / seconds:.0f}x real time")


@click.group("sim")
def sim_group() -> None:
    """Deterministic simulator: the real node core under partitions, pauses, clock faults."""


@sim_group.command("run")
@click.argument("scenario")
@click.option("--seed", type=int, default=None, help="Root seed (default: the file's, else 0).")
@click.option(
    "--strategy",
    type=click.Choice(["quorum", "leader", "lock"]),
    default=None,
    help="quorum (the protocol) or a baseline (default: the file's, else quorum).",
)
@click.option(
    "--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the trace."
)
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), help="Write a timeline PNG."
)
def run_cmd(
    scenario: str, seed: int | None, strategy: str | None, trace_path: Path | None, plot_path: Path | None
) -> None:
    """Run SCENARIO (a file, or a shipped scenario's name) once and check it."""
    import sim
    from sim.scenario import Scenario

    _writable(trace_path, "--trace")
    _writable(plot_path, "--plot")
    sc = _load(scenario)
    assert isinstance(sc, Scenario)
    seed = seed if seed is not None else (sc.seed or 0)
    if sc.mutant and strategy not in (None, "quorum"):
        raise click.BadParameter(
            f"{strategy!r} with {scenario!r}, whose mutant {sc.mutant!r} is a broken quorum protocol "
            "(expected no --strategy, or quorum)",
            param_hint="--strategy",
        )
    strategy = strategy or sc.strategy or "quorum"
    started = time.perf_counter()
    result = sim.run(sc, seed, strategy, mutant=sc.mutant)
    seconds = time.perf_counter() - started
    console = _console()
    _print_report(console, result.report, result.events, seconds, sc.duration_ms, sc.mutant)
    if trace_path is not None:
        result.trace.write(trace_path)
        console.print(f"trace: {trace_path} (sha256 {result.trace.sha256()[:16]}…)")
    if plot_path is not None:
        from sim.plot import plot_timeline

        plot_timeline(result.trace.records, plot_path)
        console.print(f"plot: {plot_path}")
    if result.report.unexpected():
        raise SystemExit(1)


@sim_group.command("explore")
@click.option("--seeds", type=click.IntRange(min=1), default=100, show_default=True, help="How many seeds.")
@click.option("--first-seed", type=int, default=0, show_default=True)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Explore the jobs and cluster of this agent config (not random jobs).",
)
@click.option(
    "--nodes", type=click.IntRange(min=1, max=99), default=None, help="[default: 5, or the config's size]"
)
@click.option("--jobs", type=click.IntRange(min=1, max=1000), default=None, help="Random jobs.  [default: 3]")
@click.option(
    "--hours",
    type=click.FloatRange(min=0.001, max=8784),  # (366 days: what a failing seed's file may hold)
    default=1.0,
    show_default=True,
    callback=hours_option,
)
@click.option("--start", callback=start_option, help=START_HELP)
@click.option(
    "--strategy", type=click.Choice(["quorum", "leader", "lock"]), default="quorum", show_default=True
)
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Processes.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("sim-failures"),
    show_default=True,
    help="Where failing seeds are written as scenario files.",
)
@click.option("--shrink/--no-shrink", default=True, show_default=True, help="Shrink failing runs first.")
@click.option(
    "--wait-replicas",
    type=click.IntRange(min=0, max=16),
    default=None,
    help="The store's wait_replicas (0: no WAIT, a failover may lose acknowledged writes).  "
    "[default: 1, or the config's]",
)
def explore_cmd(
    seeds: int,
    first_seed: int,
    config_path: Path | None,
    nodes: int | None,
    jobs: int | None,
    hours: float,
    strategy: str,
    workers: int,
    out: Path,
    shrink: bool,
    wait_replicas: int | None,
    start: int | None,
) -> None:
    """Run random fault schedules over many seeds; list failing seeds with their replay command.

    With --config, each seed runs that config's jobs on its cluster (faults drawn as for any seed).
    """
    import sim
    from sim.explore import ExploreError, explore, explore_scenario
    from sim.explore import shrink as shrink_run
    from sim.scenario import Scenario

    template: Scenario | None = None
    header = ""  # (a failing seed's file: which member each simulated node stands for)
    if config_path is not None:
        if jobs is not None:
            raise click.UsageError(
                "--jobs with --config (the config's jobs are explored: expected one of them)"
            )
        loaded, names = load_template(config_path, hours, nodes, start)
        header = _nodes_comment(names)
        assert isinstance(loaded, Scenario)
        template = loaded
        nodes, jobs = template.nodes, len(template.jobs)
        if wait_replicas is None:
            wait_replicas = template.settings.wait_replicas
    elif start is not None:
        raise click.UsageError("--start without --config (random jobs start at the default: pass --config)")
    nodes = 5 if nodes is None else nodes
    jobs = 3 if jobs is None else jobs
    wait_replicas = 1 if wait_replicas is None else wait_replicas
    console = _console()
    started = time.perf_counter()
    results = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(f"exploring ({strategy})", total=seeds)
        explored = explore(
            range(first_seed, first_seed + seeds),
            nodes=nodes,
            jobs=jobs,
            hours=hours,
            strategy=strategy,
            workers=workers,
            wait_replicas=wait_replicas,
            template=template,
        )
        try:
            for res in explored:
                results.append(res)
                progress.update(
                    task,
                    advance=1,
                    description=f"exploring ({strategy}) failing={sum(not r.ok for r in results)}",
                )
        except ExploreError as exc:
            raise click.ClickException(f"{exc} (the seeds before it passed: {len(results)})") from exc
    seconds = time.perf_counter() - started
    violations: Counter[str] = Counter()
    reached: Counter[str] = Counter()
    for r in results:
        violations.update(r.violations)
        reached.update(r.reached)
    what = f"{jobs} jobs" if template is None else f"{jobs} jobs of {config_path}"
    table = Table(
        title=f"{seeds} seeds x {nodes} nodes x {what} x {hours:g} h "
        f"({strategy}, wait_replicas={wait_replicas})"
    )
    for col in ("seeds", "failing", "runs", "duplicates", "misses", "events", "real time", "x real time"):
        table.add_column(col, justify="right")
    sim_s = seeds * hours * 3600
    table.add_row(
        str(seeds),
        str(sum(not r.ok for r in results)),
        str(sum(r.runs for r in results)),
        str(sum(r.duplicates for r in results)),
        str(sum(r.misses for r in results)),
        str(sum(r.events for r in results)),
        f"{seconds:.1f} s",
        f"{sim_s / seconds:.0f}",
    )
    console.print(table)
    if violations:
        from sim.checker import KNOWN_LIMITS

        vt = Table(title="violations by kind (known limits of the design: docs/protocol.md, not failing)")
        vt.add_column("kind")
        vt.add_column("count", justify="right")
        for kind, n in sorted(violations.items()):
            vt.add_row(f"{kind} [known limit]" if kind in KNOWN_LIMITS else kind, str(n))
        console.print(vt)
    exempt: Counter[str] = Counter()
    for r in results:
        exempt.update(r.exempt)
    due = sum(r.due for r in results)
    checked = sum(r.liveness_checked for r in results)
    console.print(f"liveness judged {checked} of {due} due slots ({checked / max(due, 1):.0%})")
    warning = _nothing_checked(due, checked)
    if warning is not None:
        console.print(f"[yellow]{warning.replace('the run', 'the runs')}[/yellow]")
    console.print(
        "exempt (each by its own rule, docs/protocol.md): "
        + (", ".join(f"{k} x{n}" for k, n in sorted(exempt.items())) or "none")
    )
    if reached:
        console.print("reached: " + ", ".join(f"{k} x{n}" for k, n in sorted(reached.items())))
    failing = [r for r in results if not r.ok]
    if failing:
        out.mkdir(parents=True, exist_ok=True)
        console.print(f"[red]{len(failing)} failing seed(s)[/red]:")
        for r in failing:
            sc = explore_scenario(
                r.seed, nodes=nodes, jobs=jobs, hours=hours, wait_replicas=wait_replicas, template=template
            )
            if shrink:
                sc = shrink_run(sc, r.seed, strategy, max_runs=SHRINK_RUNS)
            else:
                from dataclasses import replace

                sc = replace(sc, seed=r.seed, strategy=strategy)
            path = out / f"{sc.name}.toml"
            path.write_text(header + sim.dumps(sc), encoding="utf-8")
            kinds = ", ".join(sorted(r.violations))
            console.print(f"  seed {r.seed}: {kinds}\n    quorum-cron sim replay {path}")
        raise SystemExit(1)


@sim_group.command("replay")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), help="Write a timeline PNG."
)
def replay_cmd(file: Path, plot_path: Path | None) -> None:
    """Replay a scenario file written by explore/shrink (seed inside), or re-check a trace (.jsonl)."""
    import sim

    _writable(plot_path, "--plot")
    console = _console()
    if file.suffix == ".jsonl":
        from sim.trace import incomplete

        try:
            records = sim.read_trace(file)
            missing = incomplete(records)
            if missing is None:
                mutant = sim.loads(records[0]["scenario"], "<trace header>").mutant
                report = sim.check(records)
        except Exception as exc:  # (any shape of a file that is not a trace: one line)
            why = printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 200)
            raise click.BadParameter(
                f"{file} is not a trace written by 'sim run --trace' ({type(exc).__name__}: {why})",
                param_hint="FILE",
            ) from None
        if missing is not None:
            raise click.BadParameter(
                f"{file} is not a trace written by 'sim run --trace' ({missing})",
                param_hint="FILE",
            )
        _print_report(console, report, 0, 0.0, 0, mutant)
        if plot_path is not None:
            from sim.plot import plot_timeline

            plot_timeline(records, plot_path)
        if report.unexpected():
            raise SystemExit(1)
        return
    sc = _load(str(file))
    from sim.scenario import Scenario

    assert isinstance(sc, Scenario)
    if sc.seed is None:
        raise click.BadParameter(
            f"{file} has no 'seed': use 'quorum-cron sim run' for plain scenarios", param_hint="FILE"
        )
    started = time.perf_counter()
    result = sim.run(sc, sc.seed, sc.strategy or "quorum", mutant=sc.mutant)
    _print_report(
        console, result.report, result.events, time.perf_counter() - started, sc.duration_ms, sc.mutant
    )
    console.print(f"trace sha256 {result.trace.sha256()}")
    if plot_path is not None:
        from sim.plot import plot_timeline

        plot_timeline(result.trace.records, plot_path)
    if result.report.unexpected():
        raise SystemExit(1)


SCENARIO_HEADER = """\
# The jobs and cluster of {source}, as a simulator scenario with no faults
# (written by 'quorum-cron sim scenario'; run it with 'quorum-cron sim run FILE').
# Each job runs 50ms..500ms and never fails: set 'run' and 'fail_rate' per job to model its
# command (the command itself does not matter to the simulator).
# Add faults as [[faults]] tables at the end (kinds and fields: docs/simulator.md).
"""

SCENARIO_FOOTER = """
# Add faults here, for example a minority cut off from the store for a minute:
# [[faults]]
# kind = "partition"
# at = "10m"
# for = "1m"
# nodes = ["n1"]
"""


@sim_group.command("scenario")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The agent config whose jobs and cluster to write.",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here (default: stdout).")
@click.option(
    "--hours",
    type=click.FloatRange(min=0.001, max=8784),
    default=1.0,
    show_default=True,
    callback=hours_option,
)
@click.option(
    "--nodes", type=click.IntRange(min=1, max=99), default=None, help="[default: the config's size]"
)
@click.option("--start", callback=start_option, help=START_HELP)
def scenario_cmd(
    config_path: Path, out: Path | None, hours: float, nodes: int | None, start: int | None
) -> None:
    """Write the scenario of an agent config's jobs and cluster (no faults), for 'sim run'."""
    import sim
    from sim.scenario import Scenario

    _writable(out, "--out")
    sc, names = load_template(config_path, hours, nodes, start)
    assert isinstance(sc, Scenario)
    header = SCENARIO_HEADER.format(source=printable(str(config_path), 200))
    header += _nodes_comment(names)
    text = header + "\n" + sim.dumps(sc) + SCENARIO_FOOTER
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}: {len(sc.jobs)} jobs on {sc.nodes} nodes, {hours:g} h", err=True)
