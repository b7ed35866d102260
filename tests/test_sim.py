"""The simulator's own machinery: determinism, clocks, loop, scenarios, checker, CLI."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

import sim
from quorum_cron.errors import ConfigError
from quorum_cron.sim_cli import sim_group
from sim.checker import check
from sim.clocks import HostClock
from sim.loop import Loop
from sim.rng import Streams
from sim.scenario import DEFAULT_START_MS
from tests.tools import missing

SCENARIOS = sorted((Path(sim.__file__).parent / "scenarios").glob("*.toml"))

SMALL = """
name = "small"
nodes = 3
duration = "3m"

[[jobs]]
name = "tick"
every = "5s"
deadline = "2s"
run = "100ms..1s"

[[jobs]]
name = "slow"
every = "20s"
deadline = "5s"
run = "1s..30s"
delivery = "at-least-once"

[[faults]]
kind = "partition"
at = "30s"
for = "20s"
pick = 1

[[faults]]
kind = "pause"
when = "run"
at = "1m"
for = "20s"
"""


def test_same_seed_gives_a_byte_identical_trace() -> None:
    sc = sim.load(Path(sim.__file__).parent / "scenarios" / "flapping-links.toml")
    first = sim.run(sc, 1234).trace.sha256()
    second = sim.run(sc, 1234).trace.sha256()
    assert first == second
    assert sim.run(sc, 1235).trace.sha256() != first


def test_trace_file_is_sorted_json_lines_and_rechecks_the_same(tmp_path: Path) -> None:
    result = sim.run(sim.loads(SMALL), 3)
    path = tmp_path / "trace.jsonl"
    result.trace.write(path)
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == result.trace.sha256()
    first = data.splitlines()[0].decode()
    assert first.startswith('{"ev":"header"')
    again = check(sim.read_trace(path))
    assert again.by_kind() == result.report.by_kind() and again.runs == result.report.runs


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_checking_with_the_scenario_object_equals_checking_from_the_header(path: Path) -> None:
    """sim.run hands the checker the Scenario it dumped into the header, sparing the parse back;
    the report must be the one the header alone gives (what a saved trace is checked from)."""
    result = sim.run(sim.load(path), 1)
    assert check(result.trace.records) == result.report


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_skipping_wakeups_by_bounds_changes_nothing(path: Path) -> None:
    """The fast path (not asking next_wakeup after every reply) must not change a single event."""
    sc = sim.load(path)
    fast = sim.run(sc, 7)
    exact = sim.run(sc, 7, exact_wakeups=True)
    assert fast.trace.sha256() == exact.trace.sha256()
    assert fast.events <= exact.events


def test_streams_are_independent_and_reproducible() -> None:
    a, b = Streams(5), Streams(5)
    assert [a.fork("network").random() for _ in range(3)] == [b.fork("network").random() for _ in range(3)]
    assert a.fork("network").random() != a.fork("clocks").random()


def test_loop_orders_by_time_then_scheduling_order() -> None:
    loop = Loop(100)
    seen: list[str] = []
    loop.at(200, seen.append, "b")
    loop.at(150, seen.append, "a")
    loop.at(200, seen.append, "c")
    loop.at(50, seen.append, "now")  # the past means now
    loop.run_until(180)
    assert seen == ["now", "a"] and loop.now == 180
    loop.run_until(1000)
    assert seen == ["now", "a", "b", "c"]


def test_clock_offset_drift_jump_and_monotonic() -> None:
    c = HostClock(since=0)
    c.jump(30)
    c.set_drift(0, 1000)  # 1 ms per second fast
    assert c.wall(10_000) == 10_040 and c.mono(10_000) == 10_010
    c.jump(-5_000)
    assert c.wall(10_000) == 5_040 and c.mono(10_000) == 10_010  # monotonic never jumps
    t = c.true_after(1_000, 10_000)
    assert c.mono(t) - c.mono(10_000) >= 1_000 > c.mono(t - 1) - c.mono(10_000)
    assert c.true_at_mono(c.mono(t), 0) == c.true_at_mono(c.mono(t), 9_000) == t  # whenever converted
    assert c.crossing(10_000, 250) is not None
    c.set_strobe(0, 400, 1_000)
    steps = sorted(c.wall(t) - c.wall(t - 1) for t in (1_000, 2_000))  # ±800 swing, plus 1 ms tick and drift
    assert -800 <= steps[0] <= -797 and 801 <= steps[1] <= 803


def test_scenarios_round_trip_through_toml() -> None:
    for path in SCENARIOS:
        sc = sim.load(path)
        assert sim.loads(sim.dumps(sc)) == sc, path.name


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ('[[faults]]\nkind = "partition"\nat = "1m"\nfor = "1m"\nnodes = ["n9"]', "unknown node 'n9'"),
        ('[[faults]]\nkind = "quake"\nat = "1m"', "field 'kind' is 'quake'"),
        ('[[faults]]\nkind = "partition"\nat = "1m"\nnodes = ["n1"]', "field 'for' must be > 0"),
        ('[[faults]]\nkind = "loss"\nat = "1m"\nfor = "1s"\nloss = 2\nnodes = ["n1"]', "probability"),
        ('[[faults]]\nkind = "pause"\nat = "90"\nfor = "1s"\nnodes = ["n1"]', "has no unit"),
        ('[[faults]]\nkind = "reload"\nat = "1m"\njob = "a"\nnodes = ["n1"]', "either 'spec' or remove"),
        (
            '[[faults]]\nkind = "reload"\nat = "1m"\njob = "a"\nspec = "v2"\nremove = true\nnodes = ["n1"]',
            "either 'spec' or remove",
        ),
        ('[[faults]]\nkind = "reload"\nat = "1m"\njob = "b"\nspec = "v2"\nnodes = ["n1"]', "expected 'job'"),
        ('[[faults]]\nkind = "reload"\nat = "1m"\njob = "a"\nremove = true', "expected 'nodes'"),
        (
            '[[faults]]\nkind = "crash"\nat = "1m"\nremove = true\nnodes = ["n1"]',
            "field 'remove' does not apply to kind 'crash'",
        ),
    ],
)
def test_bad_scenarios_are_refused_with_the_field_named(snippet: str, message: str) -> None:
    text = 'name = "x"\nnodes = 3\n[[jobs]]\nname = "a"\nevery = "1s"\n' + snippet
    with pytest.raises(ConfigError, match=message):
        sim.loads(text, "x.toml")


def test_a_job_needs_exactly_one_schedule() -> None:
    with pytest.raises(ConfigError, match="exactly one of 'every' or 'cron'"):
        sim.loads('name = "x"\n[[jobs]]\nname = "a"\nevery = "1s"\ncron = "* * * * *"\n', "x.toml")


@pytest.mark.parametrize(
    ("top", "job", "message"),
    [
        ("nodes = 1000", 'every = "1m"', "field 'nodes' is 1000 (expected an integer from 1 to 99)"),
        ('duration = "0s"', 'every = "1m"', "field 'duration' is '0s' (expected 1s to 366d)"),
        ('duration = "400d"', 'every = "1m"', "field 'duration' is '400d' (expected 1s to 366d)"),
        ("", 'every = "0s"', "field 'every' is '0s' (period must be between 1s and 366d)"),
        ("", 'every = "1ms"', "field 'every' is '1ms' (period must be between 1s and 366d)"),
        ("", 'cron = "61 * * * *"', "61 is out of range for the minute field"),
        ("", 'cron = "* * * * *"\ntimezone = "Mars/X"', "invalid timezone 'Mars/X'"),
    ],
)
def test_bounds_and_schedules_are_checked_when_the_scenario_is_read(top: str, job: str, message: str) -> None:
    """Not as a traceback once the run has begun (a schedule), nor as a run that never ends or one
    that checks nothing (a duration), nor as a list of a thousand node ids."""
    text = f'name = "x"\n{top}\n[[jobs]]\nname = "a"\n{job}\n'
    with pytest.raises(ConfigError) as bad:
        sim.loads(text, "x.toml")
    assert message in str(bad.value) and "\n" not in str(bad.value)


def _trace(*records: dict[str, object]) -> list[dict[str, object]]:
    scenario = sim.dumps(
        sim.loads('name = "t"\nnodes = 3\nduration = "1m"\n[[jobs]]\nname = "a"\nevery = "1h"\n')
    )
    header = {"ev": "header", "t": DEFAULT_START_MS, "scenario": scenario, "seed": 0, "strategy": "quorum"}
    return [header, *records]


def test_checker_flags_a_second_run_and_a_stale_token() -> None:
    t = DEFAULT_START_MS
    rep = check(
        _trace(
            {
                "ev": "commit",
                "t": t,
                "job": "a",
                "fire": t,
                "token": 1,
                "executor": "n1",
                "spec": "h",
                "st": t,
                "by": "vote",
                "votes": [],
            },
            {"ev": "run", "t": t + 5, "node": "n1", "job": "a", "fire": t, "token": 1},
            {
                "ev": "commit",
                "t": t + 9,
                "job": "a",
                "fire": t,
                "token": 2,
                "executor": "n2",
                "spec": "h",
                "st": t,
                "by": "takeover",
                "votes": [],
            },
            {"ev": "run", "t": t + 10, "node": "n1", "job": "a", "fire": t, "token": 1},
        )
    )
    kinds = rep.by_kind()
    assert kinds["commit without a majority"] == 1  # no counted votes behind the first commit
    assert kinds["execution under a stale token"] == 1 and kinds["slot executed twice"] == 1
    assert rep.duplicates == 1


def test_checker_counts_majorities_from_what_nodes_sent() -> None:
    t = DEFAULT_START_MS
    votes = [["a", t, "recorded", 5000, "old"], ["a", t, "recorded", 5000, "new"]]
    rep = check(
        _trace(
            {"ev": "vote", "t": t, "node": "n1", "st": t, "slots": [votes[0]]},
            {"ev": "vote", "t": t, "node": "n2", "st": t, "slots": [votes[1]]},
            {
                "ev": "commit",
                "t": t,
                "job": "a",
                "fire": t,
                "token": 1,
                "executor": "n1",
                "spec": "new",
                "st": t,
                "by": "vote",
                "votes": [["n1", "new"], ["n2", "new"]],
            },
            {"ev": "vote", "t": t, "node": "n3", "st": t - 300, "slots": [["a", t, "recorded", 5000, "new"]]},
        )
    )
    assert rep.by_kind() == {"commit without a majority": 1, "vote counted before its window": 1}


def test_cli_run_trace_plot_and_replay(tmp_path: Path) -> None:
    runner = CliRunner()
    trace = tmp_path / "t.jsonl"
    res = runner.invoke(sim_group, ["run", "minority-partition", "--seed", "2", "--trace", str(trace)])
    assert res.exit_code == 0, res.output
    assert "minority-partition · seed 2 · quorum" in res.output and trace.exists()
    res = runner.invoke(sim_group, ["replay", str(trace)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(sim_group, ["run", "clock-jump", "--strategy", "lock"])
    assert res.exit_code == 1 and "slot executed twice" in res.output
    res = runner.invoke(sim_group, ["run", "no-such-scenario"])
    assert res.exit_code == 2 and "shipped scenarios: clock-jump" in res.output


def test_cli_plot(tmp_path: Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        missing("matplotlib is not installed (the simulator's --plot): pip install matplotlib")
    png = tmp_path / "p.png"
    res = CliRunner().invoke(
        sim_group, ["run", "executor-paused", "--strategy", "leader", "--plot", str(png)]
    )
    assert png.read_bytes()[:4] == b"\x89PNG", res.output


def test_cli_explore_lists_failing_seeds_with_replay_commands(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        sim_group,
        [
            "explore",
            "--seeds",
            "3",
            "--hours",
            "0.05",
            "--strategy",
            "lock",
            "--out",
            str(tmp_path),
            "--no-shrink",
        ],
    )
    assert "3 seeds x 5 nodes x 3 jobs" in res.output
    assert "liveness judged" in res.output and "exempt (each by its own rule" in res.output
    if res.exit_code == 1:
        assert "quorum-cron sim replay" in res.output
        written = sorted(tmp_path.glob("*.toml"))
        assert written and sim.load(written[0]).strategy == "lock"
    else:
        assert res.exit_code == 0, res.output


def test_a_node_whose_store_calls_fail_abstains_until_the_store_answers_as_the_agent_does() -> None:
    """The agent's ``NodeHealth``: a call without an answer marks the store down and withdraws the
    node's trust before the core hears it; a refusal (an answer) says nothing of the outage, and a
    guard verdict meanwhile waits; the next reply gives the node the guard's verdict back."""
    from quorum_cron.core.model import SweepResult
    from quorum_cron.core.node import Sweep
    from sim.runner import make_strategy
    from sim.world import World

    world = World(sim.loads(SMALL), 3, make_strategy("quorum"))
    node = world.nodes["n1"]
    process = world.strategy.make_process(world, node)
    node.process, node.up = process, True
    world.set_trust(node, True, "clock error bound 10 ms")
    core = process.core
    assert core.trusted and process.store_up
    process.failure(Sweep(()))
    assert not core.trusted and not process.store_up and not core.store_reachable
    process.failure(Sweep(()), refused="WRONGTYPE Operation against a key holding the wrong kind of value")
    assert not core.trusted and core.store_reachable  # (the core: an answer; the agent: still down)
    world.set_trust(node, True, "clock error bound 9 ms")
    assert not core.trusted
    process.reply(Sweep(()), SweepResult([]))
    assert core.trusted and process.store_up
    world.set_trust(node, False, "wall clock stepped by 400 ms")
    process.failure(Sweep(()))
    process.reply(Sweep(()), SweepResult([]))
    assert not core.trusted  # (back to the guard's verdict, not to trusted)
