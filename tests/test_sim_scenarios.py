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
from sim.checker import FAILOVER_LOSS, JOB_REMOVED, LOCAL_KILLED, REMOVED_UNSWEPT
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
    assert _unexpected(reports) == []


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


def test_a_job_every_node_removed_then_restarted_without_leaves_its_open_slot_the_named_limit() -> None:
    """``limits/removed-job-restarted``: a reload removes a job from every node while one of its
    slots is open (n1 alone voted), then every node restarts: a node sweeps only the jobs it
    defines, so the slot never ends (``REMOVED_UNSWEPT``, a known limit, docs/protocol.md). Without
    the restart, the processes that removed the job sweep it, and the slot ends missed."""
    sc = sim.load(SCENARIO_DIR / "limits" / "removed-job-restarted.toml")
    limited = check_seeds(sc, range(4))
    assert all(r.by_kind() == {REMOVED_UNSWEPT: 1} for r in limited), [r.summary() for r in limited]
    kept_up = check_seeds(sc.with_faults(tuple(f for f in sc.faults if f.kind != "crash")), range(4))
    assert _unexpected(kept_up) == []


def test_slots_only_run_locally_lost_to_a_restart_of_every_node_are_the_named_limit() -> None:
    """``limits/local-runs-lost-to-restart`` (explorer seed 60376): every node runs a 2-second
    job's slots locally through a 5-second cut, for up to a minute each; the next slots commit,
    raising the high-water mark; every node then restarts before those local slots' records land
    (a record goes when its run ends, and after an earlier local slot's). Nothing else is
    reported (``LOCAL_KILLED``, docs/protocol.md)."""
    sc = sim.load(SCENARIO_DIR / "limits" / "local-runs-lost-to-restart.toml")
    reports = check_seeds(sc, range(4))
    assert all(set(r.by_kind()) == {LOCAL_KILLED} for r in reports), [r.summary() for r in reports]
    assert all(r.duplicates == 0 for r in reports)


def test_a_local_run_killed_after_a_late_vote_ended_the_next_slot_is_the_named_limit() -> None:
    """``limits/local-run-killed-after-a-late-vote`` (explorer seed 123058): n3 runs job8's slot
    locally under a loss fault; its late vote for the next slot ends that slot ``missed``, which
    raises the mark as a commit would; a whole-cluster outage then restarts every node before the
    local run's record lands. The checker reads that decision from the vote's reply (the trace's
    only record of it): ``LOCAL_KILLED``, not a slot nobody could vote for."""
    sc = sim.load(SCENARIO_DIR / "limits" / "local-run-killed-after-a-late-vote.toml")
    report = sim.run(sc, sc.seed or 0).report
    assert report.by_kind() == {LOCAL_KILLED: 1}, report.summary()
    assert report.duplicates == 0


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
    assert any("could not vote: store refused the vote (WRONGTYPE" in r["why"] for r in ledger)


def test_live_reloads_redefine_remove_and_restore_jobs_while_the_nodes_run() -> None:
    """``live-reload``: the nodes take a config reload live (``NodeCore.replace_jobs``, the agent's
    SIGHUP). tick is redefined node by node: its slots commit under the old spec hash, then the
    new one, never on a mix. report is removed from n1 and n2 for two minutes: the three others
    run it without them, and both vote again once it is back. tick is then removed from every
    node while n4 and n5 alone had voted for its 6:00 slot: the sweep still ends that slot, and
    nothing of tick is voted or run after it."""
    sc = sim.load(SCENARIO_DIR / "live-reload.toml")
    result = sim.run(sc, 0)
    assert result.report.violations == [], result.report.summary()
    assert result.report.exempt[JOB_REMOVED] > 0
    records = result.trace.records
    at = sc.start_ms

    def s(fire: int) -> int:
        return (fire - at) // 1000

    specs = {s(r["fire"]): r["spec"] for r in records if r["ev"] == "commit" and r["job"] == "tick"}
    old, new = specs[0], specs[350]
    assert old != new
    assert {specs[t] for t in specs if t < 60} == {old} and {specs[t] for t in specs if t >= 150} == {new}
    voters: dict[tuple[str, int], set[str]] = {}
    for r in records:
        if r["ev"] == "vote":
            for job, fire, status, _, _ in r["slots"]:
                if status in ("recorded", "committed"):
                    voters.setdefault((job, s(fire)), set()).add(r["node"])
    ledger = {(r["job"], s(r["fire"])): r for r in records if r["ev"] == "ledger"}
    without = [t for (job, t) in ledger if job == "report" and 190 <= t < 300]  # (210, 240, 270)
    assert len(without) == 3
    for t in without:
        assert ledger[("report", t)]["state"] == "succeeded" and not voters[("report", t)] & {"n1", "n2"}
    assert any(voters[("report", t)] >= {"n1", "n2"} for t in (330, 390, 420))
    assert ledger[("tick", 360)]["state"] == "missed" and voters[("tick", 360)] == {"n4", "n5"}
    assert not [k for k in ledger if k[0] == "tick" and k[1] > 360]
    assert not [k for k in voters if k[0] == "tick" and k[1] > 360]
    ran = [r for r in records if r["ev"] in ("run", "run_local") and r["job"] == "tick"]
    assert ran and not [r for r in ran if s(r["fire"]) > 360]


@pytest.mark.parametrize(
    ("name", "seed", "path"),
    [
        ("local-run-adopted", 2, "ended"),
        ("local-run-adopted-killed", 2, "running"),
        ("local-run-adopted-killed", 213, "killed"),
    ],
)
def test_a_slot_run_locally_then_assigned_here_is_not_run_again(name: str, seed: int, path: str) -> None:
    """The simulator adopts a local run as the agent does (``Executions.start``): the slot the
    store assigns to a node that ran it locally is not run by a second process. A local run that
    ``ended`` is reported under the token at once; one still ``running`` ends under the token; one
    ``killed`` under it reports its end to the core, which sends its result as for any run."""
    result = sim.run(sim.load(SCENARIO_DIR / f"{name}.toml"), seed)
    assert result.report.violations == [], result.report.summary()
    records = result.trace.records
    adopted = [r for r in records if r["ev"] == "run" and r.get("adopted")]
    assert adopted
    for a in adopted:
        token = a["token"]
        slot = [
            r
            for r in records
            if (r.get("job"), r.get("fire"), r.get("node")) == (a["job"], a["fire"], a["node"])
        ]
        kinds = [(r["ev"], r.get("token")) for r in slot if r["ev"] in ("run_local", "run")]
        assert kinds == [("run_local", None), ("run", token)], kinds  # (the side effect began once)
        ends = {t: [r for r in slot if r["ev"] in ("end", "kill") and r["token"] == t] for t in (0, token)}
        if path == "ended":  # (the same outcome, reported at the adoption: no process ran)
            [local_end], [end] = ends[0], ends[token]
            assert local_end["t"] < a["t"] == end["t"] and end["ok"] == local_end["ok"]
        else:  # (one process, which ended once, under the token)
            assert ends[0] == [] and len(ends[token]) == 1 and ends[token][0]["t"] > a["t"]
    if path == "killed":
        killed = [r for r in records if r["ev"] == "kill" and any(r["token"] == a["token"] for a in adopted)]
        assert killed
        k = killed[0]
        finishes = [
            r
            for r in records
            if r["ev"] == "finish"
            and (r["node"], r["job"], r["fire"], r["token"]) == (k["node"], k["job"], k["fire"], k["token"])
        ]
        assert finishes and finishes[0]["t"] >= k["t"]  # (its end reported, its result sent)


@pytest.mark.parametrize("strategy", ["leader", "lock"])
def test_baselines_runs_are_never_taken_for_local_runs(strategy: str) -> None:
    """The baselines start their runs with token 0, as a local run has: none is adopted."""
    result = sim.run(sim.load(SCENARIO_DIR / "clock-jump.toml"), 0, strategy)
    assert result.report.duplicates > 0
    assert not [r for r in result.trace.records if r["ev"] == "run" and r.get("adopted")]


def test_a_run_cut_off_under_drift_ends_inside_the_lease_margin() -> None:
    """lease-margin-under-drift: an at-least-once run cut off from the store, on a node whose
    monotonic clock runs 0.4% slow, is killed before the store's lease ends, and only the margin
    (1% of the lease) kept it inside: the drift took more than a third of it. A mutation audit
    shrank the margin to 1 ms and every other test and exploration passed; here the run outlives
    its lease by ~60 ms."""
    from quorum_cron.core.lease import lease_margin

    scenario = sim.load(SCENARIO_DIR / "lease-margin-under-drift.toml")
    for seed in range(3):
        result = sim.run(scenario, seed)
        assert result.report.violations == [], result.report.summary()
        records = result.trace.records
        (kill,) = [r for r in records if r["ev"] == "kill"]
        assert kill["why"] == "lease ended before a renew was accepted", kill
        granted = [
            r["lease"]
            for r in records
            if r["ev"] in ("start", "renew") and r.get("ok") and r["t"] <= kill["t"]
            and (r["job"], r["fire"], r["token"]) == (kill["job"], kill["fire"], kill["token"])
        ]  # fmt: skip
        left = granted[-1] - kill["t"]  # the store's lease end less the kill, in true time
        assert 0 < left < lease_margin(15_000) * 2 // 3, (seed, left)


def test_a_strangers_record_taken_as_a_jobs_first_is_the_named_limit() -> None:
    """``limits/first-record-from-a-stranger`` (explorer seed 89269): a node in no record the
    namespace held votes first, with a record of its own that lists it, on a job no member had
    voted for yet: the job takes it (no member yet to hold a stranger to; docs/protocol.md, "A
    job's first record"). Reported as its own known limit, not as a foreign record adopted over
    the job's own, which stays a violation (sim/scenarios/membership-forged-record.toml)."""
    from sim.checker import FIRST_RECORD_FORGED, KNOWN_LIMITS

    sc = sim.load(SCENARIO_DIR / "limits" / "first-record-from-a-stranger.toml")
    report = sim.run(sc, sc.seed or 0).report
    assert FIRST_RECORD_FORGED in KNOWN_LIMITS
    assert set(report.by_kind()) == {FIRST_RECORD_FORGED}, report.summary()
    assert report.duplicates == 0
