"""``--plan FILE``: faults written by hand in a TOML file shaped like the simulator's scenarios.

Checked on files written here (no root or network needed): a good file gives the
faults it says, in the form a run carries out and ``plan`` prints; every mistake is
one line naming the file, the fault, the field, the value and what was expected,
before anything starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.options import Options
from chaos.plan import Fault
from chaos.planfile import PlanFileError, load_plan, schedule_of

ROOT = Path(__file__).resolve().parent.parent

GOOD = """
name = "three faults"
description = "a cut, a lossy pair, a Redis restart"

[[faults]]
kind = "cut-outbound"
at = "10s"
for = "4s"
targets = ["n1"]
aim = true

[[faults]]
kind = "loss"
at = "25s"
for = "5s500ms"
targets = ["n3", "n2"]
percent = 30

[[faults]]
kind = "redis-restart"
at = 40
for = 1.5
"""


def _opts(tmp_path: Path, text: str, *, replica: bool = True) -> Options:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return Options(seed=1, seconds=60, workdir=tmp_path, plan_file=path, replica=replica)


def test_a_plan_file_gives_its_faults(tmp_path: Path) -> None:
    opts = _opts(tmp_path, GOOD)
    assert schedule_of(opts) == [
        Fault(0, "cut-outbound", 10.0, 4.0, ("n1",), {}, True),
        Fault(1, "loss", 25.0, 5.5, ("n2", "n3"), {"percent": 30}),
        Fault(2, "redis-restart", 40.0, 1.5, ()),
    ]


def test_each_kind_takes_its_own_values(tmp_path: Path) -> None:
    text = """
[[faults]]
kind = "latency"
at = "1s"
for = "2s"
targets = ["n2"]
delay_ms = 200
jitter_ms = 50

[[faults]]
kind = "clock-step"
at = "10s"
for = "3s"
targets = ["n4"]
step_ms = -2500

[[faults]]
kind = "partition-majority"
at = "20s"
for = "3s"
targets = ["n1", "n2", "n3"]
"""
    (latency, step, majority) = load_plan(*_path_and_opts(tmp_path, text))
    assert latency.params == {"delay_ms": 200, "jitter_ms": 50}
    assert step.params == {"step_ms": -2500}
    assert majority.targets == ("n1", "n2", "n3")


def _path_and_opts(tmp_path: Path, text: str, *, replica: bool = True) -> tuple[Path, Options]:
    opts = _opts(tmp_path, text, replica=replica)
    assert opts.plan_file is not None
    return opts.plan_file, opts


def _fault(**fields: object) -> str:
    base: dict[str, object] = {"kind": "kill", "at": "5s", "for": "2s", "targets": ["n1"]}
    base.update(fields)
    lines = [f"{k} = {_toml(v)}" for k, v in base.items() if v is not None]
    return "[[faults]]\n" + "\n".join(lines) + "\n"


def _toml(v: object) -> str:
    if isinstance(v, str) and v.startswith("RAW:"):
        return v[4:]
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return str(v)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (_fault(kind="explode"), "fault #0: kind 'explode': expected one of partition-minority"),
        (_fault(at="10"), "fault #0: at: '10' is not a duration (expected e.g."),
        (_fault(at="-5s"), "fault #0: at: '-5s' is not a duration"),
        (_fault(at=-5), "fault #0: at: -5 is not a number of seconds from 0 to 1e9"),
        (_fault(at="RAW:1" + "0" * 20), "fault #0: at: a huge integer is not a number of seconds"),
        (_fault(at="RAW:1" + "0" * 5000), "not a TOML file (Exceeds the limit (4300 digits)"),
        (_fault(**{"for": "0s"}), "fault #0: for '0s': expected a duration above 0"),
        (_fault(**{"for": None}), "fault #0: a fault needs 'for'"),
        (
            _fault(targets=["n9"]),
            "fault #0: targets ['n9']: expected a list of distinct node names from n1 to n5",
        ),
        (_fault(targets=["n1", "n1"]), "targets ['n1', 'n1']: expected a list of distinct node names"),
        (_fault(targets=None), "fault #0: targets None: expected a list of distinct node names"),
        (_fault(kind="redis-restart"), "targets ['n1']: a redis-restart fault hits Redis, expected none"),
        (
            _fault(kind="partition-minority", targets=["n1", "n2", "n3"]),
            "a partition-minority cuts at most 2 of 5 nodes",
        ),
        (
            _fault(kind="partition-majority", targets=["n1"]),
            "a partition-majority cuts at least 3 of 5 nodes",
        ),
        (_fault(kind="loss"), "fault #0: a loss fault needs 'percent'"),
        (_fault(kind="loss", percent=100), "fault #0: percent: 100 is not a whole number from 1 to 99"),
        (
            _fault(kind="latency", delay_ms=100, jitter_ms=200),
            "jitter_ms: 200 is not a whole number from 0 to 100",
        ),
        (_fault(kind="clock-step", step_ms=0), "step_ms 0: expected a clock move other than 0"),
        (
            _fault(percent=30),
            "fault #0: unknown field 'percent' for a kill fault (expected kind, at, for, targets, aim)",
        ),
        (_fault(aim="yes"), "fault #0: aim 'yes': expected true or false"),
        (_fault() + _fault(at="9s"), "fault #1: at 9s: expected 13s or later (fault #0 ends at 7s"),
        (_fault(at="58s"), "fault #0: ends at 60s, and its 3s of recovery overrun the run's 60s"),
        ("", "expected 1 to 10000 [[faults]] tables"),
        ("faults = 3\n", "expected 1 to 10000 [[faults]] tables"),
        ("faults = [3]\n", "fault #0: 3 is not a table of kind, at, for, targets"),
        ("nodes = 5\n" + _fault(), "unknown key 'nodes' (expected name, description, faults)"),
        ("[[faults]\n", "not a TOML file"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "not a TOML file"),
    ],
)
def test_a_mistake_is_one_line_naming_the_value_and_what_was_expected(
    tmp_path: Path, text: str, names: str
) -> None:
    path, opts = _path_and_opts(tmp_path, text)
    with pytest.raises(PlanFileError) as info:
        load_plan(path, opts)
    message = str(info.value)
    assert message.startswith(f"plan {path}") and "\n" not in message, message
    assert names in message, message


def test_promotion_needs_the_replica(tmp_path: Path) -> None:
    path, opts = _path_and_opts(tmp_path, _fault(kind="promotion", targets=None), replica=False)
    with pytest.raises(PlanFileError, match="kind 'promotion' needs the replica"):
        load_plan(path, opts)


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    opts = Options(seed=1, seconds=60, workdir=tmp_path, plan_file=tmp_path / "nope.toml")
    with pytest.raises(PlanFileError, match=r"nope.toml: cannot read it \(No such file or directory\)"):
        schedule_of(opts)


def _chaos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chaos", *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_plan_prints_the_files_faults_and_run_refuses_a_bad_file_before_starting(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    done = _chaos("plan", "--plan", str(good), "--seconds", "60")
    assert done.returncode == 0, done.stderr
    assert [line.split()[2] for line in done.stdout.splitlines()] == ["cut-outbound", "loss", "redis-restart"]
    bad = tmp_path / "bad.toml"
    bad.write_text(_fault(kind="loss", percent=0))
    for cmd in ("run", "soak", "plan"):
        done = _chaos(
            cmd,
            "--plan",
            str(bad),
            "--seconds",
            "60",
            *(["--dir", str(tmp_path / "d")] if cmd != "plan" else []),
        )
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line == f"error: plan {bad}: fault #0: percent: 0 is not a whole number from 1 to 99", line
    assert not (tmp_path / "d").exists()  # nothing started
    done = _chaos("run", "--plan", str(good), "--kinds", "kill")
    assert done.returncode == 2 and "not allowed with argument" in done.stderr, done.stderr
