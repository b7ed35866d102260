"""Mutation testing: plant each listed one-line bug and check that the suite catches it.

``mutants.toml`` (next to this file) lists realistic one-line bugs: the
file, the exact original text, its replacement, and the test(s) that must
fail when the bug is there. For each one this runner copies the source tree
into a scratch directory (once per run: the tree it is started from is
never written to), replaces the original text in the copy, runs the named
tests there with a timeout, and puts the line back. The table it prints
says what happened to each bug:

* ``caught``   — a named test failed (or errored) with the bug in place;
* ``timeout``  — the tests did not finish within the mutant's timeout
  (counted as caught: the bug made them hang);
* ``survived`` — every named test passed with the bug in place;
* ``stale``    — the original text is no longer in the file (the code
  moved on): the list needs updating, the bug was not tried;
* ``broken``   — the named tests fail on the unchanged copy too (the
  baseline), so the run says nothing about this bug; or the original text
  occurs more than once, or pytest could not run the tests.

Exit status: 0 every bug tried was caught; 1 at least one survived; 3 none
survived but some were stale or broken. Usage::

    .venv/bin/python -m tests.mutation.run             # every mutant
    .venv/bin/python -m tests.mutation.run --list      # names, files, tests
    .venv/bin/python -m tests.mutation.run --only web-token-unknown-name-empty-secret

Why a script of its own rather than mutmut or cosmic-ray: those generate
thousands of mechanical operator swaps in Python files only, while the
bugs worth planting here are chosen by hand (an off-by-one at a deadline, a
fence that forgets the token) and a third of them live in the Lua scripts
that run inside Redis, which neither tool can mutate. Each bug also names
the test expected to catch it, so a run takes minutes, not hours, and
the report doubles as the table in docs/testing.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MUTANTS_FILE = HERE / "mutants.toml"
DEFAULT_TIMEOUT_S = 300
_SKIP = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache", "*.egg-info"
)


@dataclass(frozen=True)
class Mutant:
    """One planted bug, as ``mutants.toml`` lists it."""

    name: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    why: str
    timeout_s: int


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    result: str  # caught | timeout | survived | stale | broken
    seconds: float
    detail: str = ""


def _one_line_changed(original: str, replacement: str) -> bool:
    """Whether ``replacement`` differs from ``original`` in exactly one line.

    The original may carry lines of context around the changed one, to make
    it occur once in its file (``set(r, 'lu', ...)`` is both the start's and
    the renew's line in fence.lua).
    """
    a, b = original.split("\n"), replacement.split("\n")
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1


def load_mutants(path: Path = MUTANTS_FILE) -> list[Mutant]:
    """The mutants of ``path``; a malformed entry stops the run with one line naming it."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    out: list[Mutant] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc.get("mutant", []), 1):
        name = raw.get("name", f"#{i}")
        missing = [k for k in ("name", "file", "original", "replacement", "tests", "why") if k not in raw]
        if missing:
            raise SystemExit(f"{path}: mutant {name!r} lacks {', '.join(missing)}")
        if name in seen:
            raise SystemExit(f"{path}: mutant name {name!r} is used twice (expected unique names)")
        if not _one_line_changed(raw["original"], raw["replacement"]):
            raise SystemExit(f"{path}: mutant {name!r} must change exactly one line of its original text")
        seen.add(name)
        out.append(
            Mutant(
                name=name,
                file=raw["file"],
                original=raw["original"],
                replacement=raw["replacement"],
                tests=tuple(raw["tests"]),
                why=raw["why"],
                timeout_s=int(raw.get("timeout_s", DEFAULT_TIMEOUT_S)),
            )
        )
    return out


def _env(tree: Path) -> dict[str, str]:
    """The tests' environment: the copy first on the path, no bytecode, hypothesis derandomized.

    No ``.pyc`` is written: a mutant the same length as its original, made
    within the same second, would otherwise be shadowed by the cached
    bytecode of the unmutated file.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["CI"] = env.get("CI") or "1"  # tests/conftest.py: the "ci" hypothesis profile (derandomize)
    return env


def _check_imports_from(tree: Path) -> None:
    """Refuse to run when the copy's packages are not the ones the tests would import."""
    probe = "import quorum_cron, sim, tests; print(quorum_cron.__file__, sim.__file__, tests.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tree, env=_env(tree), capture_output=True, text=True, check=True
    ).stdout.split()
    wrong = [p for p in out if not Path(p).resolve().is_relative_to(tree.resolve())]
    if wrong:
        raise SystemExit(
            f"the tests would import {wrong[0]}, not the scratch copy {tree}: refusing to mutate"
        )


def _pytest(
    tree: Path, tests: Sequence[str], timeout_s: int, junit: Path | None = None
) -> tuple[int | None, str]:
    """Run ``tests`` in ``tree``: (pytest's exit code or None on timeout, the last lines of output)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    # A mutant stops at its first failure; the baseline runs every test, to name each failing one.
    cmd += ["-x"] if junit is None else [f"--junitxml={junit}"]
    global _CHILD
    proc = _CHILD = subprocess.Popen(
        cmd,
        cwd=tree,
        env=_env(tree),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # pytest and whatever it started (redis-server, agents)
        out, _ = proc.communicate()
        return None, out
    finally:
        _CHILD = None
    return proc.returncode, out


_CHILD: subprocess.Popen[str] | None = None
"""The pytest run in progress (its own process group), ended with the runner."""


def _on_signal(signum: int, _frame: object) -> None:
    """SIGTERM / Ctrl-C: end the tests in progress, then unwind (the file is put back, the copy removed)."""
    if _CHILD is not None and _CHILD.poll() is None:
        os.killpg(_CHILD.pid, signal.SIGKILL)
    raise SystemExit(128 + signum)


def _failed_in(junit: Path) -> set[str]:
    """Node ids (file::name) that failed or errored in a junit report."""
    failed: set[str] = set()
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            path = case.get("classname", "").replace(".", "/")
            failed.add(f"{path}.py::{case.get('name', '')}")
    return failed


def _selects(test: str, failed_id: str) -> bool:
    """Whether the selection ``test`` (a file or a node id) covers the failed node ``failed_id``."""
    return failed_id == test or failed_id.startswith((test + "::", test + "["))


def baseline(tree: Path, mutants: Sequence[Mutant]) -> set[str]:
    """The named tests that fail on the unchanged copy (each is then useless as a judge)."""
    tests = sorted({t for m in mutants for t in m.tests if (tree / t.split("::", 1)[0]).is_file()})
    junit = tree / ".mutation-baseline.xml"
    code, out = _pytest(tree, tests, sum(m.timeout_s for m in mutants), junit)
    if code == 0:
        return set()
    if code is None or not junit.exists():
        raise SystemExit(f"the baseline run of the named tests did not finish:\n{out[-2000:]}")
    failed = _failed_in(junit)
    if not failed:
        print(f"the baseline run of the named tests failed outside any test:\n{out[-2000:]}")
    return failed or {"<collection>"}


def try_mutant(tree: Path, m: Mutant, broken_tests: set[str]) -> Outcome:
    """Plant ``m`` in ``tree``, run its tests, put the file back."""
    path = tree / m.file
    if not path.is_file():
        return Outcome(m, "stale", 0.0, f"{m.file} does not exist")
    text = path.read_text(encoding="utf-8")
    count = text.count(m.original)
    if count == 0:
        return Outcome(m, "stale", 0.0, "original text not found")
    if count > 1:
        return Outcome(m, "broken", 0.0, f"original text occurs {count} times (expected once)")
    missing = [t for t in m.tests if not (tree / t.split("::", 1)[0]).is_file()]
    if missing:
        return Outcome(m, "broken", 0.0, f"no test file {missing[0].split('::', 1)[0]}")
    bad = sorted(f for f in broken_tests if f == "<collection>" or any(_selects(t, f) for t in m.tests))
    if bad:
        return Outcome(m, "broken", 0.0, f"fails unmutated: {', '.join(bad)}")
    started = time.monotonic()
    path.write_text(text.replace(m.original, m.replacement), encoding="utf-8")
    try:
        code, out = _pytest(tree, m.tests, m.timeout_s)
    finally:
        path.write_text(text, encoding="utf-8")
    took = time.monotonic() - started
    if code is None:
        return Outcome(m, "timeout", took, f"no result within {m.timeout_s} s")
    if code == 0:
        return Outcome(m, "survived", took, "every named test passed")
    if code == 1:
        summary = [ln for ln in out.splitlines() if ln.startswith(("FAILED ", "ERROR "))]
        failed = [ln.split(" ", 1)[1].split(" - ", 1)[0] for ln in summary]
        return Outcome(m, "caught", took, failed[0] if failed else "")
    if code == 2 and "error" in out.lower():  # an error during collection or setup: the bug broke an import
        return Outcome(m, "caught", took, "error while collecting the tests")
    return Outcome(m, "broken", took, f"pytest exit {code}: {out.strip().splitlines()[-1:]}")


def _table(outcomes: Iterable[Outcome]) -> str:
    rows = [("mutant", "file", "result", "s", "caught by / detail")]
    rows += [(o.mutant.name, o.mutant.file, o.result, f"{o.seconds:.0f}", o.detail) for o in outcomes]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in rows]
    return "\n".join(lines)


def _markdown(outcomes: Iterable[Outcome]) -> str:
    """The table of docs/testing.md: each bug, what it breaks, and what became of it."""
    rows = ["| mutant | file | the bug | result: caught by |", "|---|---|---|---|"]
    for o in outcomes:
        cell = o.detail.replace("|", "\\|")
        rows.append(f"| `{o.mutant.name}` | `{o.mutant.file}` | {o.mutant.why} | {o.result}: `{cell}` |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.mutation.run", description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--only", action="append", metavar="NAME", help="run only this mutant (repeatable)")
    ap.add_argument(
        "--source", type=Path, default=ROOT, help="the tree to copy and mutate (default: this one)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy (its path is printed)")
    ap.add_argument(
        "--file", type=Path, default=MUTANTS_FILE, help="the list of mutants (default: %(default)s)"
    )
    ap.add_argument(
        "--markdown", action="store_true", help="also print the table as Markdown (docs/testing.md)"
    )
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the named tests unmutated")
    args = ap.parse_args(argv)
    mutants = load_mutants(args.file)
    if args.only:
        unknown = sorted(set(args.only) - {m.name for m in mutants})
        if unknown:
            ap.error(f"no mutant named {unknown[0]!r} in {args.file} (see --list)")
        mutants = [m for m in mutants if m.name in set(args.only)]
    if args.list:
        for m in mutants:
            print(f"{m.name}\t{m.file}\t{' '.join(m.tests)}\n    {m.why}")
        print(f"{len(mutants)} mutants")
        return 0
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    scratch = Path(tempfile.mkdtemp(prefix="qc-mutation-"))
    tree = scratch / "tree"
    try:
        shutil.copytree(args.source.resolve(), tree, ignore=_SKIP, symlinks=True)
        _check_imports_from(tree)
        print(f"mutating a copy of {args.source.resolve()} in {tree}", flush=True)
        broken = set() if args.no_baseline else baseline(tree, mutants)
        if broken:
            print(f"failing unmutated (their mutants are reported broken): {', '.join(sorted(broken))}")
        outcomes = []
        for m in mutants:
            o = try_mutant(tree, m, broken)
            print(f"  {o.result:8} {m.name} ({o.seconds:.0f} s) {o.detail}", flush=True)
            outcomes.append(o)
    finally:
        if args.keep:
            print(f"scratch copy kept: {tree}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(_table(outcomes))
    if args.markdown:
        print("\n" + _markdown(outcomes))
    counts = {
        r: sum(o.result == r for o in outcomes) for r in ("caught", "timeout", "survived", "stale", "broken")
    }
    print("\n" + ", ".join(f"{n} {r}" for r, n in counts.items()) + f" of {len(outcomes)} mutants")
    if counts["survived"]:
        return 1
    return 3 if counts["stale"] or counts["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
