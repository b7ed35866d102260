"""Planted protocol bugs: the checker must catch each one within a few seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

import sim
from sim.mutants import MUTANTS

SCENARIO_DIR = Path(sim.__file__).parent / "scenarios"
MAX_SEEDS = 10

CASES = {
    "quorum-n-over-2": ("minority-partition", "commit without a majority"),
    "no-spec-hash": ("rolling-deploy", "commit without a majority"),
    "node-clock-window": ("clock-jump", "vote counted before its window"),
    "unfenced-start": ("executor-paused-at-commit", "slot executed twice"),
    "non-atomic-commit": ("minority-partition", "slot executed twice"),
    "untrusted-votes": ("clock-jump", "vote sent by an untrusted node"),
    "retry-no-backoff": ("retries-and-refusals", "retry started before its backoff ended"),
    "same-executor": ("retries-and-refusals", "executor re-picked while another voter was left"),
    "lease-from-reply": ("majority-partition", "run outlived its lease in the store"),
}


def test_every_mutant_has_a_case() -> None:
    assert set(CASES) == set(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(CASES))
def test_checker_catches_the_mutant(mutant: str) -> None:
    scenario_name, kind = CASES[mutant]
    sc = sim.load(SCENARIO_DIR / f"{scenario_name}.toml")
    for seed in range(MAX_SEEDS):
        caught = sim.run(sc, seed, mutant=mutant).report
        if any(v.kind == kind for v in caught.unexpected()):
            clean = sim.run(sc, seed).report
            if not clean.unexpected():  # the same seed passes with the real protocol
                return
    pytest.fail(f"{mutant} not caught as {kind!r} within {MAX_SEEDS} seeds of {scenario_name}")
