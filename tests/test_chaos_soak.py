"""The soak command's report (``chaos/soak.py``): one coverage line per repetition, the
repetitions below full coverage listed with their unrun slots, and a verdict that a total
cannot average away. Run on planted run directories: no root or network needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.run import Options
from chaos.soak import Repetition, parse_seeds, soak, soak_summary

PERIOD_MS = 2000
T0, END = 100_000, 400_000
DUE = list(range(102_000, END + 1, PERIOD_MS))
"""150 slots of one job: one miss leaves 149/150 = 99.3 %, within the checker's 99 % floor."""


def _plant(opts: Options) -> None:
    """A run directory as the harness leaves it; what it holds depends on the seed:
    1 every slot ran, 2 one slot missed (below full coverage, within the floor),
    3 the run could not be carried out, 4 a slot ran twice (a violation)."""
    if opts.seed == 3:
        raise RuntimeError("node n2 exited with 1 at restart")
    d = opts.workdir
    d.mkdir(parents=True)
    o = {"period_ms": PERIOD_MS, "max_skew_ms": 250, "nodes": 5, "jobs": 1, "seed": opts.seed}
    (d / "run.json").write_text(
        json.dumps({"options": o | {"scheduler": "quorum"}, "t0_ms": T0, "end_ms": END, "faults": []})
    )
    slots = [t for t in DUE if not (opts.seed == 2 and t == DUE[40])]
    if opts.seed == 4:
        slots.append(DUE[7])
    (d / "ground-truth.log").write_text(
        "".join(f"job0 {t} n1 {(t + 5) / 1000:.6f} {i + 1}\n" for i, t in enumerate(sorted(slots)))
    )
    tokens = {t: i + 1 for i, t in reversed(list(enumerate(sorted(slots))))}  # a slot's first run
    ledger = [
        {"fire_ms": t, "state": "succeeded", "reason": "exit 0", "executor": "n1", "token": token}
        for t, token in sorted(tokens.items(), reverse=True)
    ]
    if opts.seed == 2:
        missed = "no quorum before the deadline (n1 could not vote)"
        ledger.insert(0, {"fire_ms": DUE[40], "state": "missed", "reason": missed})
    (d / "ledger.json").write_text(json.dumps({"job0": ledger}))


def _soak(tmp_path: Path, seeds: list[int], repeat: int = 1) -> tuple[list[Repetition], list[str]]:
    lines: list[str] = []
    reps = soak(Options(seed=0, seconds=1, workdir=tmp_path), seeds, repeat, echo=lines.append, runner=_plant)
    return reps, lines


def test_one_line_per_repetition_and_the_ones_below_full_coverage_listed(tmp_path: Path) -> None:
    reps, lines = _soak(tmp_path, [1, 2], repeat=2)
    assert [(r.number, r.seed) for r in reps] == [(1, 1), (2, 1), (3, 2), (4, 2)]
    assert len({r.workdir for r in reps}) == 4  # a directory per repetition
    assert len(lines) == 4
    assert (
        lines[0].startswith("rep   1  seed    1")
        and "coverage  150/150" in lines[0]
        and lines[0].endswith(" ok")
    )
    assert "coverage  149/150" in lines[2] and lines[2].endswith("BELOW FULL COVERAGE")
    text, passed = soak_summary(reps)
    assert passed  # within the floor: listed, not failed...
    assert "full coverage in 2, below it in 2, with violations in 0" in text
    assert "598/600 ran" in text
    assert f"job0@{DUE[40]}" in text and "missed: no quorum before the deadline (n1 could not vote)" in text
    assert not soak_summary(reps, full=True)[1]  # ...unless --full


def test_a_violation_or_a_run_not_carried_out_fails_the_soak(tmp_path: Path) -> None:
    reps, lines = _soak(tmp_path, [3, 4])
    assert lines[0] == "rep   1  seed    3  NOT RUN: node n2 exited with 1 at restart"
    assert lines[1].endswith("VIOLATION") and "dup 1" in lines[1]
    text, passed = soak_summary(reps)
    assert not passed
    assert f"duplicate: job0@{DUE[7]} started 2 times" in text
    assert "rep 1 (seed 3) could not be carried out: node n2 exited with 1 at restart" in text


def test_seed_lists() -> None:
    assert parse_seeds("1-3,7,9-10") == [1, 2, 3, 7, 9, 10]
    assert parse_seeds("4") == [4]
    for bad in ("3-1", "x", "1-", "-2"):
        with pytest.raises(ValueError, match=f"seeds '{bad}'"):
            parse_seeds(bad)


def test_an_interrupted_soak_keeps_the_summary_and_json_of_the_repetitions_it_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C in the third repetition of a long soak used to lose the closing block and
    ``--json`` of the two carried out; they are written, then the interrupt goes on (exit 130)."""
    import argparse

    from chaos import __main__ as cli
    from chaos import soak as soak_module

    def carry_out(opts: Options, echo: bool = True) -> None:
        if opts.seed == 5:
            raise KeyboardInterrupt
        _plant(opts)

    monkeypatch.setattr(soak_module, "run", carry_out)
    out = tmp_path / "soak.json"
    args = argparse.Namespace(
        scheduler="quorum", nodes=5, no_replica=False, starting_deadline_ms=1800, start_timeout_ms=500,
        seeds=[1, 2, 5], repeat=1, full=False, json=out, plan=None,
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        cli._soak(args, tmp_path / "runs", 1.0, ("kill",))
    text = capsys.readouterr()
    assert "interrupted after 2 repetition(s)" in text.err
    assert "soak: 2 repetitions, 2 carried out" in text.out, text.out
    assert [d["seed"] for d in json.loads(out.read_text())] == [1, 2]


def test_an_interrupted_run_of_several_seeds_keeps_the_json_of_the_seeds_it_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run --seed 1 --seed 2 --json F`` interrupted in seed 2 wrote no F at all."""
    from chaos import __main__ as cli

    if cli.missing_tools():
        pytest.skip(f"python -m chaos run checks for the harness's tools first: {cli.missing_tools()}")

    def carry_out(opts: Options) -> None:
        if opts.seed == 2:
            raise KeyboardInterrupt
        _plant(opts)

    monkeypatch.setattr(cli, "run", carry_out)
    out = tmp_path / "s.json"
    with pytest.raises(KeyboardInterrupt):
        cli.main(["run", "--seed", "1", "--seed", "2", "--dir", str(tmp_path), "--json", str(out)])
    assert [d["seed"] for d in json.loads(out.read_text())] == [1]
