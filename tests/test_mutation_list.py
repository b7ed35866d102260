"""The planted-bug list (tests/mutation/mutants.toml) stays in step with the code it plants into.

The mutation runner reports a mutant whose original text is gone as
``stale`` and does not try it: a bug nobody plants any more is a hole in
the table docs/testing.md prints, found only when someone runs the whole
list (minutes a bug). Eight had gone stale as their code moved between
modules. This check is instant, so the suite says so at the commit that
moves the code.
"""

from __future__ import annotations

from tests.mutation.run import ROOT, load_mutants


def test_every_planted_bug_finds_its_original_text_exactly_once() -> None:
    problems = []
    for m in load_mutants():
        path = ROOT / m.file
        if not path.is_file():
            problems.append(f"{m.name}: {m.file} does not exist")
            continue
        count = path.read_text(encoding="utf-8").count(m.original)
        if count != 1:
            problems.append(f"{m.name}: its original text occurs {count} times in {m.file} (expected once)")
    assert not problems, "\n".join(problems)


def test_every_named_test_file_exists() -> None:
    missing = [
        f"{m.name}: {test}"
        for m in load_mutants()
        for test in m.tests
        if not (ROOT / test.split("::", 1)[0]).is_file()
    ]
    assert not missing, "\n".join(missing)
