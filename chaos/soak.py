"""The soak: the harness repeated over seeds, with coverage reported per repetition.

One run of the harness shows one draw of the machine's timing. A coverage
loss that happens in one repetition out of five (a slot left unrun while a
quorum could reach Redis) passes a single CI run four times out of five, so
the soak repeats the harness, seed after seed (each seed ``--repeat`` times),
and prints one line per repetition — never only a total, which would average
a bad repetition away — then the repetitions below full coverage with every
slot that did not run and what its ledger entry says, which is what explains
(or convicts) it.

Judged separately: a *violation* (a duplicate, an unaccounted slot, coverage
under :data:`chaos.check.COVERAGE_MIN`, a crash...) fails the soak (exit 1);
a repetition below full coverage but within the floor is listed with its
slots and, with ``--full``, fails it too.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from chaos.check import Report, check_dir
from chaos.run import Options, run

__all__ = ["Repetition", "parse_seeds", "soak", "soak_line", "soak_summary"]


@dataclass(frozen=True)
class Repetition:
    """One run of the soak: its number, seed, directory, and report (None: it could not be carried out)."""

    number: int
    seed: int
    workdir: Path
    report: Report | None
    wall_s: float
    error: str = ""

    @property
    def full(self) -> bool:
        """Every slot due while a quorum could reach Redis ran."""
        return self.report is not None and self.report.eligible_ran == self.report.eligible


def parse_seeds(text: str) -> list[int]:
    """``"1-5"``, ``"3"`` or ``"1,4,9-11"`` as a list of seeds (one line naming the bad part otherwise)."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"seeds {text!r}: {part!r} is not a number or a range like 1-5") from None
        if first < 0 or last < first:
            raise ValueError(f"seeds {text!r}: {part!r} is not a range of seeds >= 0 like 1-5")
        seeds.extend(range(first, last + 1))
    return seeds


def soak_line(rep: Repetition) -> str:
    """The one line of a repetition: seed, slots, coverage, what would be a violation."""
    head = f"rep {rep.number:>3}  seed {rep.seed:>4}"
    if rep.report is None:
        return f"{head}  NOT RUN: {rep.error}"
    r = rep.report
    verdict = "ok" if r.ok and rep.full else "BELOW FULL COVERAGE" if r.ok else "VIOLATION"
    return (
        f"{head}  due {r.slots_due:>4}  ran {r.ran:>4}  coverage {r.eligible_ran:>4}/{r.eligible:<4} "
        f"({r.coverage:7.2%})  dup {r.duplicates}  unacc {r.unaccounted}  unrec {r.unrecorded}  "
        f"early {r.early}  "
        f"lost-with-executor {r.lost_to_fault}  violations {len(r.violations)}  {rep.wall_s:5.0f} s  "
        f"{verdict}"
    )


def soak_summary(reps: Sequence[Repetition], *, full: bool = False) -> tuple[str, bool]:
    """The closing block (each repetition below full coverage with its unrun slots; any
    violations) and whether the soak passed."""
    done = [r for r in reps if r.report is not None]
    below = [r for r in done if not r.full]
    bad = [r for r in done if r.report is not None and not r.report.ok]
    not_run = [r for r in reps if r.report is None]
    eligible = sum(r.report.eligible for r in done if r.report is not None)
    ran = sum(r.report.eligible_ran for r in done if r.report is not None)
    out = [
        "",
        f"soak: {len(reps)} repetitions, {len(done)} carried out; full coverage in {len(done) - len(below)}, "
        f"below it in {len(below)}, with violations in {len(bad)}; slots due while a quorum could reach "
        f"Redis: {ran}/{eligible} ran",
    ]
    for r in below:
        assert r.report is not None
        out.append(
            f"rep {r.number} (seed {r.seed}, {r.workdir}): {r.report.eligible - r.report.eligible_ran} "
            "slot(s) not run although a quorum could reach Redis:"
        )
        out += [f"  {u}" for u in r.report.uncovered[:50]]
    for r in bad:
        assert r.report is not None
        out.append(f"rep {r.number} (seed {r.seed}, {r.workdir}) violations:")
        out += [f"  {v}" for v in r.report.violations[:50]]
    for r in not_run:
        out.append(f"rep {r.number} (seed {r.seed}) could not be carried out: {r.error}")
    passed = not bad and not not_run and (not full or not below)
    return "\n".join(out), passed


def soak(
    base: Options,
    seeds: Sequence[int],
    repeat: int,
    *,
    echo: Callable[[str], None] = print,
    runner: Callable[[Options], object] | None = None,
    into: list[Repetition] | None = None,
) -> list[Repetition]:
    """Run ``base`` (its seed and workdir replaced) ``repeat`` times per seed; one line per repetition.

    Each repetition is appended to ``into`` (a new list by default) as it ends, so a caller
    interrupted half-way (Ctrl-C, SIGTERM) still holds the repetitions already carried out.
    """
    carry_out = runner or (lambda o: run(o, echo=False))
    reps: list[Repetition] = [] if into is None else into
    number = 0
    for seed in seeds:
        for _ in range(repeat):
            number += 1
            workdir = (
                base.workdir / f"rep{number:03d}-seed{seed}" if repeat > 1 or len(seeds) > 1 else base.workdir
            )
            opts = replace(base, seed=seed, workdir=workdir)
            started = time.monotonic()
            try:
                carry_out(opts)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                rep = Repetition(number, seed, workdir, None, time.monotonic() - started, str(exc))
            else:
                rep = Repetition(number, seed, workdir, check_dir(workdir), time.monotonic() - started)
            reps.append(rep)
            echo(soak_line(rep))
            sys.stdout.flush()
    return reps
