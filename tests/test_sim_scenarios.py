"""Every shipped scenario under the quorum protocol, and the baselines on the same seeds.

The long runs (100 seeds per scenario) are marked ``slow``; CI runs them too.
Nothing is excused: the one known limit (``sim.checker.KNOWN_LIMITS``, a
failover without ``wait_replicas``) has its own scenario under ``limits/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import sim
from sim.checker import FAILOVER_LOSS
from sim.explore import check_seeds

SCENARIO_DIR = Path(sim.__file__).parent / "scenarios"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.toml"))
WORKERS = min(2, os.cpu_count() or 1)


def _unexpected(reports: list[sim.Report]) -> list[str]:
    return [f"seed {r.seed}: {v}" for r in reports for v in r.violations]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_passes_for_quorum_on_a_few_seeds(path: Path) -> None:
    reports = check_seeds(sim.load(path), range(3))
    assert _unexpected(reports) == []
    assert all(r.runs > 0 and r.due > 0 for r in reports)


@pytest.mark.slow
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_passes_for_quorum_on_100_seeds(path: Path) -> None:
    reports = check_seeds(sim.load(path), range(100), workers=WORKERS)
    assert _unexpected(reports) == []
    assert sum(r.liveness_checked for r in reports) > 0


@pytest.mark.parametrize("name", ["executor-paused", "clock-jump"])
@pytest.mark.parametrize("strategy", ["leader", "lock"])
def test_baselines_run_slots_twice_where_quorum_does_not(name: str, strategy: str) -> None:
    sc = sim.load(SCENARIO_DIR / f"{name}.toml")
    baseline = check_seeds(sc, range(10), strategy, workers=WORKERS)
    assert all(r.duplicates > 0 for r in baseline), [r.summary() for r in baseline]
    quorum = check_seeds(sc, range(10), workers=WORKERS)
    assert sum(r.duplicates for r in quorum) == 0
    assert _unexpected(quorum) == []


def test_quorum_never_runs_a_slot_twice_when_its_executor_pauses() -> None:
    reports = check_seeds(sim.load(SCENARIO_DIR / "executor-paused.toml"), range(30), workers=WORKERS)
    assert sum(r.duplicates for r in reports) == 0


def test_majority_partition_misses_slots_but_accounts_for_them() -> None:
    rep = sim.run(sim.load(SCENARIO_DIR / "majority-partition.toml"), 0).report
    assert rep.misses > 0 and rep.duplicates == 0 and rep.unexpected() == []


def test_dst_fall_back_fires_the_repeated_hour_once() -> None:
    result = sim.run(sim.load(SCENARIO_DIR / "dst-fall-back.toml"), 0)
    runs = [r for r in result.trace.records if r["ev"] == "run" and r["job"] == "at-0230"]
    assert len(runs) == 1  # 02:30 CEST only; 02:30 CET (an hour later) is the same wall time
    assert runs[0]["fire"] == 1729989000000  # 2024-10-27T00:30:00Z
    assert result.report.unexpected() == []


def test_whole_cluster_outage_is_accounted_for_and_runs_the_latest_once() -> None:
    result = sim.run(sim.load(SCENARIO_DIR / "whole-cluster-outage.toml"), 0)
    assert result.report.reached["slot accounted for by catch-up after an outage"] > 0
    states = {(r["job"], r["fire"]): r["state"] for r in result.trace.records if r["ev"] == "ledger"}
    outage_end = sim.load(SCENARIO_DIR / "whole-cluster-outage.toml").start_ms + 270_000
    hourly = sorted((f, s) for (j, f), s in states.items() if j == "hourly-ish" and f < outage_end)
    assert [s for _, s in hourly][-1] == "succeeded"  # run-once: the latest missed slot ran
    assert result.report.unexpected() == []


def test_a_failover_without_wait_forgets_slots_and_with_wait_does_not() -> None:
    no_wait = check_seeds(sim.load(SCENARIO_DIR / "limits" / "store-failover-no-wait.toml"), range(4))
    assert all(set(r.by_kind()) == {FAILOVER_LOSS} for r in no_wait)  # exactly the named limit
    assert all(r.reached["failover lost writes"] > 0 for r in no_wait)
    waited = check_seeds(sim.load(SCENARIO_DIR / "store-failover.toml"), range(4))
    assert _unexpected(waited) == []
    assert all(r.reached["write held unacknowledged by WAIT"] > 0 for r in waited)


def test_retries_refusals_and_local_runs_are_simulated_and_checked() -> None:
    """Failed runs are retried under higher tokens after their backoff, the store refuses writes
    for a while, and a run-local job runs alone while the store is unreachable: the checker's
    retry, refusal and local-run rules all see something, and nothing breaks them."""
    result = sim.run(sim.load(SCENARIO_DIR / "retries-and-refusals.toml"), 0)
    rep = result.report
    assert rep.violations == [] and rep.duplicates == 0
    assert rep.retries > 0 and rep.reached["failed run retried"] == rep.retries
    assert rep.reached["write refused by the store"] > 0
    assert rep.local_runs > 0
    ledger = [r for r in result.trace.records if r["ev"] == "ledger"]
    assert any(r["state"] == "retrying" for r in ledger)
    assert any("ran locally on" in r["why"] for r in ledger if r["job"] == "local")
    assert any("could not vote: store refused the vote (OOM" in r["why"] for r in ledger)


@pytest.mark.parametrize("seed", [40006, 0])
def test_a_slot_run_locally_then_assigned_here_is_not_run_again(seed: int) -> None:
    """The simulator adopts a local run as the agent does: the slot the store assigns to a node
    that ran it locally ends under the token, with no second process (``run`` says ``adopted``)."""
    result = sim.run(sim.load(SCENARIO_DIR / "local-run-adopted.toml"), seed)
    assert result.report.violations == [], result.report.summary()
    records = result.trace.records
    adopted = [r for r in records if r["ev"] == "run" and r.get("adopted")]
    assert adopted
    for a in adopted:
        slot = [
            r
            for r in records
            if (r.get("job"), r.get("fire"), r.get("node")) == (a["job"], a["fire"], a["node"])
        ]
        kinds = [(r["ev"], r.get("token")) for r in slot if r["ev"] in ("run_local", "run", "end")]
        assert kinds[0] == ("run_local", None), kinds  # (the side effect began there)
        assert kinds.count(("run", a["token"])) == 1, kinds  # (no second process)
        assert ("end", a["token"]) in kinds, kinds  # (the local run's end, under the token)
