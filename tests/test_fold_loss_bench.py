"""benchmarks/fold_loss.py on a few short seeds: every accepted start of an at-most-once job is
classed folded or by a call, and every lost slot by how it started.

The rates are not asserted (the measurement is the script's output); what is asserted is what
the counts must satisfy whatever the code: vote_lead 0 folds starts that vote_lead 50 (votes
before the fire time) nearly never folds, and each lead's lost slots are the sum of its classes.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.benchmark_module import load_benchmark

probe = load_benchmark("fold_loss.py", "bench_fold_loss")


def test_starts_and_losses_are_classed_by_how_the_slot_started() -> None:
    total: Counter[str] = Counter()
    for seed in range(3):
        counts, failures = probe.count_seed(seed, 0.05)
        assert failures == []
        total.update(counts)
    summary = probe.summarize(total)
    at_fire, ahead = summary["vote_lead_0ms"], summary["vote_lead_50ms"]
    assert at_fire["folded"]["starts"] > 0 and at_fire["call"]["starts"] > 0, at_fire
    assert ahead["folded"]["starts"] < at_fire["folded"]["starts"], (ahead, at_fire)
    for lead in probe.LEADS_MS:
        classed = sum(total[f"{lead} {how} lost"] for how in ("folded", "call", "unstarted"))
        assert classed == total[f"{lead} all lost"], total


def test_bad_arguments_are_refused_before_a_run() -> None:
    with pytest.raises(SystemExit, match="--seeds and --workers must be >= 1"):
        probe.main(["--seeds", "0"])


def test_a_run_whose_core_raises_is_listed_and_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def raising(*args: object, **kwargs: object) -> None:
        raise RuntimeError("slot phase x -> y is not in the lifecycle table")

    monkeypatch.setattr(probe, "run", raising)
    counts, failures = probe.count_seed(7, 0.05)
    assert counts == {}
    assert failures == [
        "7 lead 0: RuntimeError: slot phase x -> y is not in the lifecycle table",
        "7 lead 50: RuntimeError: slot phase x -> y is not in the lifecycle table",
    ]
