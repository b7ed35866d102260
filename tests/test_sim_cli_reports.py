"""The simulator's command line on what it cannot judge: a trace that is not whole (cut short,
empty, lines missing) is refused with exit 2 (not judged as if the run had stopped there); a
planted mutant is named in the report (and a baseline ``--strategy`` with it refused); a run or
an exploration that checked no slot says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import sim
from quorum_cron.cli import main
from sim.trace import incomplete

BASE = 'name = "x"\nnodes = 3\nduration = "1m"\n'
JOB = '\n[[jobs]]\nname = "a"\nevery = "10s"\n'


# -- the command line ----------------------------------------------------------------------------


def _cli(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, args, prog_name="quorum-cron")
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BASE + 'members = ["n1", "n1", "n2"]\n' + JOB, "members lists 'n1' twice"),
        (BASE + 'mutant = "bogus"\n' + JOB, "field 'mutant' is 'bogus'"),
        (BASE + "start_ms = 253402300780000\n" + '[[jobs]]\nname = "c"\ncron = "* * * * *"\n', "start_ms"),
        (BASE + "[clocks]\ncheck = '0s'\n" + JOB, "field 'check' is '0s'"),
    ],
)
def test_sim_run_refuses_bad_input_in_one_line_with_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    code, _, err = _cli(["sim", "run", str(path)])
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "t.jsonl"
    code, out, err = _cli(["sim", "run", "minority-partition", "--seed", "2", "--trace", str(trace)])
    assert code == 0, (out, err)
    return trace


def test_a_trace_ends_with_a_final_record_counting_the_rest(tmp_path: Path) -> None:
    records = sim.read_trace(_trace(tmp_path))
    assert records[-1]["ev"] == "final" and records[-1]["records"] == len(records) - 1
    assert incomplete(records) is None
    assert incomplete(records[:-1]) is not None and incomplete(records[:5] + records[-1:]) is not None
    assert incomplete([]) == "it holds no records"


@pytest.mark.parametrize(
    ("cut", "expected"),
    [
        (300, "it has no final record: cut short"),
        (0, "it holds no records"),
        (-2, "its final record counts"),  # (a line taken out of the middle)
    ],
)
def test_replay_refuses_a_trace_that_is_not_whole_with_exit_2(
    tmp_path: Path, cut: int, expected: str
) -> None:
    lines = _trace(tmp_path).read_text().splitlines(keepends=True)
    kept = lines[:-2] + lines[-1:] if cut < 0 else lines[:cut]
    part = tmp_path / "cut.jsonl"
    part.write_text("".join(kept))
    code, _, err = _cli(["sim", "replay", str(part)])
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and expected in lines[0], err


def test_a_planted_mutant_is_named_and_a_baseline_strategy_with_it_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(BASE + 'mutant = "quorum-n-over-2"\n' + JOB)
    code, out, err = _cli(["sim", "run", str(path), "--seed", "1", "--trace", str(tmp_path / "m.jsonl")])
    assert (
        code in (0, 1) and "MUTANT quorum-n-over-2 planted: every node configured with quorum N // 2" in out
    )
    code, out, err = _cli(["sim", "replay", str(tmp_path / "m.jsonl")])
    assert "MUTANT quorum-n-over-2 planted" in out, (out, err)
    code, out, err = _cli(["sim", "run", str(path), "--strategy", "leader"])
    assert code == 2 and "mutant 'quorum-n-over-2' is a broken quorum protocol" in err, (out, err)
    code, out, _ = _cli(["sim", "run", "minority-partition", "--seed", "2"])
    assert code == 0 and "MUTANT" not in out


def test_a_run_that_checks_nothing_says_so(tmp_path: Path) -> None:
    path = tmp_path / "h.toml"
    path.write_text('name = "h"\nnodes = 3\nduration = "10m"\n[[jobs]]\nname = "h"\nevery = "1h"\n')
    code, out, _ = _cli(["sim", "run", str(path)])
    assert code == 0 and "warning: no slot was due in the judged part of the run" in out
    code, out, _ = _cli(["sim", "run", "minority-partition", "--seed", "2"])
    assert code == 0 and "warning" not in out


def test_an_exploration_that_checks_nothing_says_so(tmp_path: Path) -> None:
    code, out, err = _cli(["sim", "explore", "--seeds", "2", "--hours", "0.001", "--out", str(tmp_path)])
    assert code == 0, (out, err)
    assert "warning: no slot was due in the judged part of the runs" in " ".join(out.split())
