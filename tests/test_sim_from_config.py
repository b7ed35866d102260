"""The simulator on a user's own config: ``sim explore --config`` and ``sim scenario --config``.

A config's jobs become the simulator's jobs with the same fire times and policies, its cluster the
simulated one, its hosts' clocks disciplined (no base drift: a fault-free run of many hours misses
nothing), from the ``--start`` asked for; what the simulator cannot model is named on stderr, a job
that fires no slot in the simulated time is named with the ``--hours`` that reaches it, and a config
that does not load is refused in one line, exit 2. The written scenario loads and runs clean with
``sim run``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from quorum_cron.cli import main
from quorum_cron.commands.sim_config import from_config, job_def, quiet_jobs
from quorum_cron.commands.sim_options import parse_start
from quorum_cron.config.file import load_config
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.core.model import Delivery, Overlap
from sim.explore import explore, explore_scenario
from sim.quorum import make_schedule
from sim.scenario import DEFAULT_START_MS

SMALL = """\
[cluster]
name = "small"
members = ["web-1", "web-2", "web-3"]

[[jobs]]
name = "tick"
schedule = "@every 10s"
command = ["/bin/true"]
retries = 1
retry_backoff = "1s"

[[jobs]]
name = "minutely"
schedule = "* * * * *"
timezone = "Europe/Berlin"
shell = "echo hi"
delivery = "at-least-once"
overlap = "allow"

[[jobs]]
name = "spread"
schedule = "H/2 * * * *"
command = ["/bin/true"]
misfire = "run-once"
on_store_unavailable = "run-local"
"""


def _cli(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, args, prog_name="quorum-cron")
    return res.exit_code, res.stdout, res.stderr


def _write(tmp_path: Path, text: str, name: str = "cluster.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- the conversion ------------------------------------------------------------------------------

MINUTES = ("*", "*/5", "H", "0", "H/15", "7,37", "30")
HOURS = ("*", "2", "H", "9-17", "*/6")
DOWS = ("*", "MON-FRI", "SUN")
ALIASES = ("@hourly", "@daily", "@weekly", "@every 90s", "@every 5m", "@every 1h")
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe")
NAMES = st.text("abcdefghij-_.0123456789", min_size=1, max_size=12)


@st.composite
def job_specs(draw: st.DrawFn) -> JobSpec:
    if draw(st.booleans()):
        expr = draw(st.sampled_from(ALIASES))
    else:
        minute, hour, dow = (draw(st.sampled_from(field)) for field in (MINUTES, HOURS, DOWS))
        expr = f"{minute} {hour} * * {dow}"
    retries = draw(st.integers(0, 3))
    return JobSpec.create(
        draw(NAMES),
        expr,
        timezone=draw(st.sampled_from(ZONES)),
        command=["/bin/true"],
        timeout_ms=draw(st.sampled_from((1_000, 60_000, 3_600_000))),
        overlap=draw(st.sampled_from(list(Overlap))),
        delivery=draw(st.sampled_from(list(Delivery))),
        misfire=draw(st.sampled_from(("skip", "run-once"))),
        retries=retries,
        retry_backoff_ms=draw(st.sampled_from((0, 1_000, 60_000))),
        on_store_unavailable=draw(st.sampled_from(("skip", "run-local"))),
    )


@st.composite
def configs(draw: st.DrawFn) -> Config:
    specs = draw(st.lists(job_specs(), min_size=1, max_size=4, unique_by=lambda j: j.name))
    size = draw(st.integers(1, 7))
    quorum = draw(st.integers(size // 2 + 1, size))
    members = tuple(f"node-{i}" for i in range(size)) if draw(st.booleans()) else ()
    cluster = ClusterConfig(
        namespace="gen",
        size=size,
        members=members,
        quorum=quorum,
        max_skew_ms=draw(st.sampled_from((1, 250, 900))),
        lease_ms=draw(st.sampled_from((4_000, 15_000))),
        start_timeout_ms=draw(st.sampled_from((100, 5_000))),
        wait_replicas=draw(st.integers(0, 2)),
        clock_check_interval_ms=draw(st.sampled_from((1_000, 60_000))),
    )
    return Config(cluster=cluster, jobs=tuple(specs))


WINDOW_MS = 8 * 86_400_000
"""Over a week and a day: every schedule drawn fires in it, across a weekend."""


@settings(max_examples=40, deadline=None)
@given(configs(), st.integers(0, 365 * 86_400_000))
def test_a_config_converts_to_a_scenario_the_simulator_loads_with_the_same_fire_times(
    config: Config, offset: int
) -> None:
    converted = from_config(config, hours=1.0)
    sc = converted.scenario
    assert sc.nodes == config.cluster.size and sc.faults == ()
    # The scenario file loader, which checks every bound the simulator has, reads it back as is.
    assert sim.loads(sim.dumps(sc)) == sc
    start = DEFAULT_START_MS + offset
    for spec, job in zip(config.jobs, sc.jobs, strict=True):
        assert job.name == spec.name
        assert (job.deadline_ms, job.timeout_ms) == (spec.starting_deadline_ms, spec.timeout_ms)
        assert (job.delivery, job.overlap, job.misfire) == (spec.delivery, spec.overlap, spec.misfire)
        assert (job.retries, job.retry_backoff_ms) == (spec.retries, spec.retry_backoff_ms)
        assert job.on_store_unavailable == spec.on_store_unavailable
        fired = list(make_schedule(job).fire_times(start, start + WINDOW_MS))
        assert fired and fired == list(spec.schedule.fire_times(start, start + WINDOW_MS))
    quorum = config.cluster.quorum
    assert sc.quorum == quorum
    # Explored: the config's jobs on its nodes, whatever the seed draws around them.
    explored = explore_scenario(3, hours=0.5, template=sc, wait_replicas=sc.settings.wait_replicas)
    assert [j.name for j in explored.jobs] == [j.name for j in sc.jobs]
    assert explored.nodes == sc.nodes and explored.settings.max_skew_ms == sc.settings.max_skew_ms
    assert explored.quorum == quorum or explored.members  # a membership plan decides its own
    assert sim.loads(sim.dumps(explored)) == explored  # a failing seed's file replays it


def test_what_the_simulator_cannot_model_is_named_one_line_each() -> None:
    spec = JobSpec.create(
        "nightly",
        "30 2 * * *",
        timezone="Europe/Berlin",
        dst="every",
        command=["/bin/true"],
        retries=3,
        retry_backoff_ms=10_000,
        retry_backoff_max_ms=60_000,
        retry_jitter=0.2,
    )
    _, lost = job_def(spec)
    assert len(lost) == 3
    assert all(line.startswith("job 'nightly': ") for line in lost)
    assert [re.search(r"(dst|retry_backoff_max|retry_jitter) = ", line) is not None for line in lost] == [
        True
    ] * 3
    cluster = ClusterConfig(
        namespace="c",
        size=3,
        heartbeat_ms=5_000,
        clock_check_interval_ms=300_000,
        ntp_servers=("pool.ntp.org",),
        redis_url="redis+cluster://h:1",
    )
    converted = from_config(Config(cluster=cluster, jobs=(spec,)), hours=1.0)
    lines = converted.warnings
    assert len(lines) == 7, lines  # 3 of the job, 4 of the cluster
    assert sum("heartbeat = '5s'" in ln for ln in lines) == 1
    assert sum("clock_check_interval = '5m'" in ln for ln in lines) == 1
    assert converted.scenario.clocks.check_ms == 5_000  # the agent checks its clock every heartbeat
    assert sum("ntp_servers" in ln for ln in lines) == 1
    assert sum("Redis Cluster" in ln for ln in lines) == 1
    # A plain config loses nothing the simulator needs: no line.
    plain = Config(
        cluster=ClusterConfig(namespace="c", size=3), jobs=(JobSpec.create("j", "* * * * *", command=["x"]),)
    )
    assert from_config(plain, hours=1.0).warnings == ()


def test_a_job_that_fires_no_slot_is_named_with_the_hours_that_reach_it() -> None:
    daily = JobSpec.create("daily", "0 3 * * *", command=["/bin/true"])
    often = JobSpec.create("often", "@every 1m", command=["/bin/true"])
    config = Config(cluster=ClusterConfig(namespace="c", size=3), jobs=(daily, often))
    [line] = quiet_jobs(from_config(config, hours=1.0).scenario)
    assert line.startswith("job 'daily' fires no slot in the simulated 1h"), line
    hours = float(line.rpartition("--hours ")[2].partition(",")[0])
    assert quiet_jobs(from_config(config, hours=hours).scenario) == []
    report = sim.run(from_config(config, hours=hours).scenario, 0).report
    assert report.violations == [] and report.liveness_checked > 0


# -- the commands --------------------------------------------------------------------------------


def test_sim_scenario_writes_a_file_that_sim_run_runs_clean(tmp_path: Path) -> None:
    config = _write(tmp_path, SMALL)
    out = tmp_path / "mine.toml"
    code, _, err = _cli(["sim", "scenario", "--config", str(config), "--out", str(out), "--hours", "0.1"])
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    assert "# Nodes: n1 = web-1, n2 = web-2, n3 = web-3" in text and "[[faults]]" in text  # (a comment)
    sc = sim.load(out)
    assert sc.faults == () and sc == from_config(load_config(config), hours=0.1).scenario
    code, stdout, err = _cli(["sim", "run", str(out)])
    assert code == 0, stdout + err
    assert "warning" not in stdout + err
    # Without --out it goes to stdout, the same text.
    code, stdout, _ = _cli(["sim", "scenario", "--config", str(config), "--hours", "0.1"])
    assert code == 0 and stdout == text


def test_sim_explore_with_a_config_runs_its_jobs_and_finds_nothing_failing(tmp_path: Path) -> None:
    config = _write(tmp_path, SMALL)
    code, stdout, err = _cli(
        [
            "sim",
            "explore",
            "--config",
            str(config),
            "--seeds",
            "4",
            "--hours",
            "0.1",
            "--out",
            str(tmp_path / "f"),
        ]
    )
    assert code == 0, stdout + err
    assert "4 seeds x 3 nodes x 3 jobs of" in " ".join(stdout.split())
    assert err == ""  # nothing lost, every job fires
    template = from_config(load_config(config), hours=0.1).scenario
    results = list(explore(range(4), hours=0.1, template=template, wait_replicas=0))
    assert all(r.ok for r in results) and all(r.runs > 0 for r in results)


def test_sim_explore_refuses_a_bad_config_and_jobs_with_config_in_one_line_exit_2(tmp_path: Path) -> None:
    bad = _write(tmp_path, SMALL.replace('name = "small"', 'name = "small"\nquorum = 1'))
    code, stdout, err = _cli(["sim", "explore", "--config", str(bad)])
    assert code == 2 and stdout == ""
    [line] = err.splitlines()
    assert line.startswith("error: ") and "field 'quorum'" in line and "quorum-cron validate" in line
    code, _, err = _cli(["sim", "explore", "--config", str(tmp_path / "missing.toml")])
    assert code == 2 and "missing.toml: no such file" in err and len(err.splitlines()) == 1
    good = _write(tmp_path, SMALL, "good.toml")
    code, _, err = _cli(["sim", "explore", "--config", str(good), "--jobs", "3"])
    assert code == 2 and "--jobs with --config" in err and len(err.splitlines()) == 1


def test_nodes_overrides_the_config_size_and_a_quorum_that_no_longer_fits_is_said(tmp_path: Path) -> None:
    config = _write(tmp_path, SMALL.replace('name = "small"', 'name = "small"\nquorum = 3'))
    code, stdout, err = _cli(["sim", "scenario", "--config", str(config), "--nodes", "5", "--hours", "0.1"])
    assert code == 0
    assert sim.loads(stdout).nodes == 5 and sim.loads(stdout).quorum == 3  # still a majority of 5
    code, stdout, err = _cli(["sim", "scenario", "--config", str(config), "--nodes", "7", "--hours", "0.1"])
    assert code == 0 and sim.loads(stdout).quorum == 4
    assert err.splitlines() == [
        "warning: cluster: quorum = 3 is not a majority of --nodes 7: simulated with quorum 4"
    ]


# -- when the run starts, and its clocks ---------------------------------------------------------

DST_NIGHT = """\
[cluster]
name = "dst"
members = ["web-1", "web-2", "web-3"]

[[jobs]]
name = "nightly"
schedule = "30 2 * * *"
timezone = "Europe/Berlin"
command = ["/bin/true"]

[[jobs]]
name = "quarter"
schedule = "*/15 * * * *"
timezone = "Europe/Berlin"
command = ["/bin/true"]
"""


def test_a_fault_free_run_of_a_config_misses_nothing_in_the_hours_a_daily_job_needs() -> None:
    # (Before: the simulator's default ±50 ppm of undisciplined drift took the clocks past
    # max_skew within hours, and a fault-free run ended slots "missed" for an untrusted clock.)
    config = Config(
        cluster=ClusterConfig(namespace="c", size=3),
        jobs=(JobSpec.create("quarter", "*/15 * * * *", command=["/bin/true"]),),
    )
    sc = from_config(config, hours=6.0).scenario
    for seed in range(3):
        report = sim.run(sc, seed).report
        assert report.violations == [] and report.due >= 20, report
        assert report.misses == 0 and report.runs >= report.due, (seed, report.reached)
    assert sc.clocks.drift_ppm == 0 and sc.clocks.skew_ms > 0  # (offsets, as the explorer draws)


def test_start_begins_the_run_where_asked_and_a_dst_night_runs_clean(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, DST_NIGHT))
    start = parse_start("2026-03-28T23:00:00Z")
    assert start == 1_774_738_800_000
    assert parse_start("2026-03-29T00:00:00+01:00") == start and parse_start("2026-03-28T23:00") == start
    sc = from_config(config, hours=4.0, start_ms=start).scenario
    assert sc.start_ms == start and quiet_jobs(sc) == []  # (the 02:30 job's night is inside)
    report = sim.run(sc, 0).report
    assert report.violations == [] and report.misses == 0 and report.runs >= report.due > 0, report
    # The default start leaves the nightly job out of a 1 h run, and the warning says how to reach it.
    [line] = quiet_jobs(from_config(config, hours=1.0).scenario)
    assert "'nightly'" in line and line.endswith("or a --start shortly before it"), line
    # The explorer keeps the template's start (each seed's faults are drawn from it).
    assert all(explore_scenario(seed, hours=4.0, template=sc).start_ms == start for seed in range(3))


def test_sim_scenario_writes_the_start_and_a_bad_start_is_one_line_exit_2(tmp_path: Path) -> None:
    config = _write(tmp_path, DST_NIGHT)
    code, stdout, err = _cli(
        ["sim", "scenario", "--config", str(config), "--hours", "4", "--start", "2026-03-28T23:00:00Z"]
    )
    assert code == 0 and err == "", err
    assert sim.loads(stdout).start_ms == 1_774_738_800_000
    for bad, expected in (
        ("yesterday", "'yesterday' is not a start time (expected an ISO 8601 date or date-time"),
        ("9500-01-01", "'9500-01-01' is outside the simulator's calendar (expected 1970 to 8999)"),
    ):
        code, stdout, err = _cli(["sim", "scenario", "--config", str(config), "--start", bad])
        assert code == 2 and stdout == "" and len(err.splitlines()) == 1 and expected in err, err
    code, _, err = _cli(["sim", "explore", "--start", "2026-01-01", "--seeds", "1"])
    assert code == 2 and "--start without --config" in err and len(err.splitlines()) == 1, err


def test_a_failing_seed_of_a_config_says_which_member_each_node_is(tmp_path: Path) -> None:
    # (Only `sim scenario` wrote the mapping: a failing seed's file named n1..n3 and left the user
    # to guess which of their servers each was.) The lock baseline runs slots twice on seed 5.
    one_job = '[cluster]\nname = "small"\nmembers = ["web-1", "web-2", "web-3"]\n\n'
    one_job += '[[jobs]]\nname = "tick"\nschedule = "@every 10s"\ncommand = ["/bin/true"]\n'
    config = _write(tmp_path, one_job)
    out = tmp_path / "failing"
    args = ["sim", "explore", "--config", str(config), "--strategy", "lock", "--first-seed", "5"]
    code, stdout, _ = _cli([*args, "--seeds", "1", "--hours", "0.2", "--no-shrink", "--out", str(out)])
    assert code == 1 and "seed 5: slot executed twice" in " ".join(stdout.split()), stdout
    [path] = out.glob("*.toml")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Nodes: n1 = web-1, n2 = web-2, n3 = web-3\n"), text[:200]
    assert sim.load(path).seed == 5


def test_start_is_read_to_the_whole_ms_before_it() -> None:
    # (It was int(timestamp() * 1000): truncated toward zero, so a time in 1969's last ms was
    # taken as the epoch, not refused as outside the simulator's calendar.)
    with pytest.raises(ValueError, match="outside the simulator's calendar"):
        parse_start("1969-12-31T23:59:59.9999Z")
    assert parse_start("1970-01-01T00:00:00.0009Z") == 0
    assert parse_start("2026-03-29T00:30:00.0019+00:00") == 1_774_744_200_001
    assert parse_start("8999-12-31T23:59:59.999999Z") == 221_845_391_999_999
