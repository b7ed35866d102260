"""Scenario and trace input the simulator refuses in one line, before a run (an audit's findings).

Each value here once hung a run (``[clocks] check = "0s"``, a drift of 100,000,000 ppm), raised a
traceback (duplicate members, a start past the year 9999, an unknown mutant, an empty trace),
or was simulated although the agent refuses it and then reported as a protocol violation
(a lease of 0 s, a quorum below a majority), or was silently ignored (a field that does not
apply to a fault's kind). Bad input exits 2, a violation 1 (docs/simulator.md).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from quorum_cron.config.durations import format_duration
from quorum_cron.errors import ConfigError
from sim.explore import explore_scenario
from sim.scenario import BOUNDS, MAX_PPM, MAX_START_MS

BASE = 'name = "x"\nnodes = 3\nduration = "1m"\n'
JOB = '\n[[jobs]]\nname = "a"\nevery = "10s"\n'


def _refused(text: str) -> str:
    with pytest.raises(ConfigError) as bad:
        sim.loads(text, "x.toml")
    message = str(bad.value)
    assert "\n" not in message and message.startswith("x.toml"), message
    return message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BASE + "seed = " + "1" * 5000 + "\n" + JOB, "a number too long to read"),
        (BASE + "x = " + "[" * 50_000 + "]" * 50_000 + "\n" + JOB, "nested too deeply"),
    ],
    ids=["huge-integer", "deep-nesting"],
)
def test_an_unreadable_scenario_file_is_one_line(text: str, expected: str) -> None:
    """tomllib raised ValueError (an integer past 4,300 digits) and RecursionError (deep nesting)
    past the TOMLDecodeError the reader caught: tracebacks from ``sim run FILE``."""
    assert expected in _refused(text)


@pytest.mark.parametrize(
    ("top", "tail", "expected"),
    [
        # 1. hangs and a ValueError from the clocks
        ("[clocks]\ncheck = '0s'", "", "[clocks]: field 'check' is '0s' (expected 1s to 1d)"),
        ("[clocks]\ndrift = 2000000", "", "field 'drift' is 2000000 (expected an integer from 0 to 100000)"),
        (
            "",
            '[[faults]]\nkind = "clock_drift"\nat = "10s"\nppm = 100000000\nnodes = ["n1"]',
            "field 'ppm' is 100000000 (expected an integer from -100000 to 100000)",
        ),
        (
            "",
            '[[faults]]\nkind = "flap"\nat = "10s"\nfor = "10s"\nperiod = "1ms"\nnodes = ["n1"]',
            "field 'period' is '1ms' (expected 100ms to 1d (or 0s))",
        ),
        ("[settings]\nretry = '0s'", "", "field 'retry' is '0s' (expected 10ms to 1h)"),
        ("[settings]\nsweep = '0s'", "", "field 'sweep' is '0s'"),
        ("[settings]\nassign_poll = '0s'", "", "field 'assign_poll' is '0s'"),
        ("[network]\ndelay = '1ms..2h'", "", "'1ms..2h' is out of range (expected durations from 0s to 1h)"),
        (
            "",
            '[[faults]]\nkind = "clock_jump"\nat = "10s"\nby = "2h"\nnodes = ["n1"]',
            "field 'by' is '2h' (expected -1h to 1h)",
        ),
        # 2. tracebacks
        ('members = ["n1", "n1", "n2"]', "", "members lists 'n1' twice (expected distinct node ids)"),
        ("start_ms = 253402300780000", "", "field 'start_ms' is 253402300780000 (expected an integer from 0"),
        ('mutant = "bogus"', "", "field 'mutant' is 'bogus' (expected one of quorum-n-over-2,"),
        (
            'mutant = "quorum-n-over-2"\nstrategy = "leader"',
            "",
            "field 'strategy' is 'leader' with mutant = 'quorum-n-over-2'",
        ),
        # 4. settings the agent refuses
        ("[settings]\nlease = '0s'", "", "field 'lease' is '0s' (expected 1s to 1d)"),
        ("[settings]\nlease = '10ms'", "", "field 'lease' is '10ms' (expected 1s to 1d)"),
        (
            "[settings]\nmax_skew = '0s'\nvote_lead = '0s'",
            "",
            "field 'max_skew' is '0s' (expected 1ms to 1m)",
        ),
        ("[settings]\nstart_timeout = '0s'", "", "field 'start_timeout' is '0s' (expected 100ms to 1h)"),
        (
            "[settings]\nwait_replicas = 1000",
            "",
            "field 'wait_replicas' is 1000 (expected an integer from 0 to 16)",
        ),
        ("[settings]\nquorum = 1", "", "quorum = 1 is not a majority of nodes = 3 (expected 2 to 3"),
        ("[network]\ntimeout = '0s'", "", "[network]: field 'timeout' is '0s' (expected 1ms to 1h)"),
        ("[network]\ntimeout = '15ms'", "", "timeout = '15ms' is not longer than a round trip"),
    ],
)
def test_a_value_that_hangs_crashes_or_the_agent_refuses_is_one_line(
    top: str, tail: str, expected: str
) -> None:
    text = BASE + top + "\n" + JOB + "\n" + tail  # (a table's keys end at [[jobs]])
    assert expected in _refused(text)


@pytest.mark.parametrize(
    ("job", "fault", "expected"),
    [
        # 3. a failover whose replica snapshot would come after it
        (
            "",
            'kind = "store_failover"\nat = "10s"\nby = "-5s"',
            "field 'by' is '-5s' (expected the writes lost",
        ),
        # 7. a fault that never happens
        (
            "",
            'kind = "partition"\nat = "10h"\nfor = "10s"\nnodes = ["n1"]',
            "field 'at' is '10h' (expected a time",
        ),
        ("", 'kind = "partition"\nat = "1m"\nfor = "10s"\nnodes = ["n1"]', "field 'at' is '1m'"),
        # 8. fields that do not apply to the kind, or without which it does nothing
        (
            "",
            'kind = "crash"\nat = "10s"\nnodes = ["n1"]\nloss = 0.5',
            "field 'loss' does not apply to kind 'crash'",
        ),
        (
            "",
            'kind = "crash"\nat = "10s"\nnodes = ["n1"]\nwhen = "run"',
            "field 'when' does not apply to kind 'crash'",
        ),
        (
            "",
            'kind = "crash"\nat = "10s"\nnodes = ["n1"]\nby = "3s"',
            "field 'by' does not apply to kind 'crash'",
        ),
        ("", 'kind = "outage"\nat = "10s"\nnodes = ["n1"]', "field 'nodes' does not apply to kind 'outage'"),
        (
            "",
            'kind = "pause"\nat = "10s"\nfor = "5s"\nwhen = "run"\nnodes = ["n1"]',
            "field 'when' with nodes (a pause with 'when' pauses the next node",
        ),
        (
            "",
            'kind = "partition"\nat = "10s"\nfor = "5s"\npick = 1\nnodes = ["n1"]',
            "both 'nodes' and 'pick'",
        ),
        (
            "",
            'kind = "clock_jump"\nat = "10s"\nnodes = ["n1"]',
            "field 'by' is missing (kind 'clock_jump' does",
        ),
        ("", 'kind = "clock_jump"\nat = "10s"\nby = "0s"\nnodes = ["n1"]', "a clock_jump by 0s does nothing"),
        ("", 'kind = "clock_drift"\nat = "10s"\nnodes = ["n1"]', "field 'ppm' is missing"),
        (
            "",
            'kind = "crash"\nat = "10s"\nnodes = ["n1", "n1"]',
            "field 'nodes' is ['n1', 'n1'] (expected each",
        ),
        ('timezone = "Mars/Olympus"', "", "field 'timezone' applies to a cron job only"),
        ('timezone = "UTC"', "", "field 'timezone' applies to a cron job only"),
        # 9. the empty choice named
        (
            "",
            'kind = "pause"\nat = "10s"\nfor = "5s"\nwhen = "later"',
            'expected one of "" (none), run, commit',
        ),
        # (the agent's job bounds)
        ('timeout = "0s"', "", "field 'timeout' is '0s' (expected 1s to 30d)"),
        ("retries = 101", "", "field 'retries' is 101 (expected an integer from 0 to 100)"),
    ],
)
def test_a_fault_or_job_field_that_cannot_apply_is_one_line(job: str, fault: str, expected: str) -> None:
    text = BASE + JOB + job + "\n" + (f"\n[[faults]]\n{fault}\n" if fault else "")
    assert expected in _refused(text)


def test_a_negative_integer_by_is_that_many_seconds_back() -> None:
    fault = '[[faults]]\nkind = "clock_jump"\nat = "10s"\nby = -30\nnodes = ["n1"]\n'
    sc = sim.loads(BASE + JOB + fault)
    assert sc.faults[0].by_ms == -30_000


DURATION_KEYS = [
    ("clocks", "check"),
    ("clocks", "skew"),
    ("settings", "max_skew"),
    ("settings", "lease"),
    ("settings", "start_timeout"),
    ("settings", "retry"),
    ("settings", "sweep"),
    ("settings", "assign_poll"),
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(DURATION_KEYS), st.integers(min_value=0, max_value=400 * 86_400_000))
def test_every_duration_is_taken_within_its_bounds_and_refused_in_one_line_outside(
    place: tuple[str, str], ms: int
) -> None:
    table, key = place
    bounds = BOUNDS["skew" if key == "skew" else key]
    extra = "\nvote_lead = '0s'" if key == "max_skew" else ""
    text = f"{BASE}\n[{table}]\n{key} = '{format_duration(ms)}'{extra}\n{JOB}"
    if bounds[0] <= ms <= bounds[1]:
        sim.loads(text, "x.toml")
    else:
        assert f"field '{key}' is '{format_duration(ms)}'" in _refused(text)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_a_drift_is_taken_within_ten_percent_and_refused_outside(ppm: int) -> None:
    text = f'{BASE}{JOB}\n[[faults]]\nkind = "clock_drift"\nat = "1s"\nppm = {ppm}\nnodes = ["n1"]\n'
    if ppm == 0:
        assert "does nothing" in _refused(text)
    elif -MAX_PPM <= ppm <= MAX_PPM:
        assert sim.loads(text).faults[0].ppm == ppm
    else:
        assert f"field 'ppm' is {ppm}" in _refused(text)


def test_the_bounds_end_in_a_finite_run() -> None:
    """The fastest clock check, the shortest flap period and the widest drifts still end."""
    text = (
        'name = "edge"\nnodes = 3\nduration = "1m"\n'
        f"start_ms = {MAX_START_MS}\n[clocks]\ncheck = '1s'\ndrift = {MAX_PPM}\n"
        '[settings]\nretry = "10ms"\nsweep = "10ms"\nassign_poll = "10ms"\n'
        '[[jobs]]\nname = "a"\ncron = "* * * * *"\n[[jobs]]\nname = "b"\nevery = "5s"\n'
        '[[faults]]\nkind = "flap"\nat = "5s"\nfor = "20s"\nperiod = "100ms"\nnodes = ["n1"]\n'
        f'[[faults]]\nkind = "clock_drift"\nat = "10s"\nppm = {-MAX_PPM}\nnodes = ["n2"]\n'
        f'[[faults]]\nkind = "clock_drift"\nat = "10s"\nppm = {MAX_PPM}\nnodes = ["n3"]\n'
    )
    result = sim.run(sim.loads(text), 1)
    assert result.report.runs > 0


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_explored_scenarios_pass_the_same_checks_when_written_and_read(seed: int) -> None:
    """A failing seed is written as a file for ``sim replay``: the file must load."""
    sc = explore_scenario(seed, hours=0.5)
    assert sim.loads(sim.dumps(sc)) == sc


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
def test_dumps_escapes_what_toml_needs_escaped(text: str) -> None:
    from dataclasses import replace

    sc = sim.loads(BASE + JOB)
    named = replace(sc, name=text, description=text)
    assert sim.loads(sim.dumps(named)) == named
