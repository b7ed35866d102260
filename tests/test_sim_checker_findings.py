"""Findings of the simulator's explorations (sim/findings/README.md), fixed: regressions.

Five were the checker misreading a membership change (``sim/scenarios/checker/``): a voter the
membership removed counted as "left" for a retry, and a node frozen on a record without it
counted as a healthy voter. One was a core bug (``sim/scenarios/bugs/``): of two jobs' votes
refused as stale in one batch, only the first voted again. Seed 639 (2026-12-06) was both: the
store handed a slot back to its rendezvous winner every time, and the checker's cut-off counted
nodes that were no voters of a slot only a voter could end. Each scenario runs at its own seed
and must pass; each test also checks that the story it guards still happens in the trace, so a
change that no longer reaches it shows here instead of passing silently.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

import sim
from quorum_cron.core.model import MembershipRecord
from quorum_cron.store.keys import DEFAULT_LEDGER_MAXLEN

SCENARIOS = Path(sim.__file__).parent / "scenarios"
REPICK = sorted((SCENARIOS / "checker").glob("retry-voter-left-membership-*.toml"))


def _seed(path: Path) -> int:
    return int(path.stem.rsplit("-", 1)[1])


@functools.cache
def _run(path: Path) -> sim.RunResult:
    return sim.run(sim.load(path), _seed(path))


def _back_with_a_removed_voter_left(records: list[dict[str, Any]]) -> int:
    """Retries or takeovers that went back to an earlier executor while an agreeing voter that
    never had the slot was left — every such voter no longer a member of the job's record."""
    executors: dict[tuple[str, int], list[str]] = {}
    found = 0
    for r in records:
        if r["ev"] != "commit":
            continue
        earlier = executors.setdefault((r["job"], r["fire"]), [])
        if r["by"] in ("retry", "takeover") and r["executor"] in earlier and "mr" in r:
            never = [n for n, h in r["votes"] if h == r["spec"] and n not in earlier]
            record = MembershipRecord.decode(r["mr"])
            if never and not any(record.is_member(n) for n in never):
                found += 1
        earlier.append(r["executor"])
    return found


def test_the_repick_scenarios_are_the_four_seeds() -> None:
    assert [_seed(p) for p in REPICK] == [90216, 90479, 90695, 90830]


@pytest.mark.parametrize("path", REPICK, ids=lambda p: p.stem)
def test_a_retry_may_go_back_to_its_executor_once_every_other_voter_left_the_membership(path: Path) -> None:
    result = _run(path)
    assert result.report.violations == [], result.report.summary()
    assert result.report.duplicates == 0


def test_the_repick_scenarios_still_go_back_with_a_removed_voter_left() -> None:
    """The story the checker once misread still happens (in every one, when written)."""
    found = [_back_with_a_removed_voter_left(_run(p).trace.records) for p in REPICK]
    assert sum(found) > 0, found


def test_a_node_frozen_on_a_record_without_it_is_no_healthy_voter() -> None:
    """Seed 90218: n2, under a stale_config fault, learned (by refused votes) the epoch that removed
    it, then the joint record that re-added it never reached it; it abstains as a non-member while
    being one of the record in force. Liveness must not count it; the slots stay judged otherwise."""
    result = sim.run(sim.load(SCENARIOS / "checker" / "stale-node-not-a-voter-90218.toml"), 90218)
    rep = result.report
    assert rep.violations == [], rep.summary()
    abstained = [r for r in result.trace.records if r["ev"] == "abstain" and r["node"] == "n2"]
    assert any("is not a member of epoch 3" in r["why"] for r in abstained)
    assert rep.liveness_share > 0.9, rep.liveness_checked


def test_two_jobs_refused_as_stale_in_one_batch_both_vote_again() -> None:
    """Seed 90501 (core/vote.py, fixed 2026-12-02): n4, frozen on epoch 1, votes for job0 and job1
    in one batch; both are refused (the jobs enforce epoch 2) and the reply teaches n4 epoch 2.
    Only job0 voted again, so with n2 down job1's slot missed the old configuration's quorum
    (n1, n3, n4) and liveness reported it."""
    result = sim.run(sim.load(SCENARIOS / "bugs" / "stale-refusal-second-job-revotes.toml"), 90501)
    assert result.report.violations == [], result.report.summary()
    fire = 1700001630000
    batches = [
        {job for job, f, status, _, _ in r["slots"] if f == fire and status == "refused"}
        for r in result.trace.records
        if r["ev"] == "vote" and r["node"] == "n4"
    ]
    assert {"job0", "job1"} in batches  # (the story: both refused in one batch)
    ran = {r["job"] for r in result.trace.records if r["ev"] == "run" and r["fire"] == fire}
    assert ran == {"job0", "job1"}, ran


def test_an_unfinished_at_least_once_run_goes_round_its_voters_and_is_cut_off_by_the_end() -> None:
    """Seed 639 (fold_loss.py's sweep, 2026-12-06): a rolling partition cuts the five nodes off one
    by one; job1's slot of 27 min, at-least-once, is run by n1 (killed at its lease's end), then
    by n2, whose failed run ends just after n2 is cut off, so its finish waits. From then on only a
    voter can end the slot. The store hands it on at every start timeout while the voters stay cut
    off, and went back to the rendezvous winner every time once each had had it (n1, three times
    in a row); it now goes round them. n2 comes back 5 s before the end, too late to run it: the
    slot is cut off, not "nobody could vote" (it was voted) nor unaccounted (n4 and n5, healthy
    at the end, are no voters of it)."""
    path = SCENARIOS / "checker" / "rerun-needs-a-voter-639.toml"
    result = sim.run(sim.load(path), 639)
    rep = result.report
    assert rep.violations == [], rep.summary()
    assert rep.exempt["cut off"] >= 1
    fire = 1700001660000
    mine = [r for r in result.trace.records if r.get("job") == "job1" and r.get("fire") == fire]
    executors = [r["executor"] for r in mine if r["ev"] == "commit"]
    voters = {n for r in mine if r["ev"] == "commit" for n, _ in r["votes"]}
    assert len(executors) > len(voters) + 1, executors  # (the story: more turns than voters)
    again = executors[len(voters) :]
    assert again == executors[: len(again)], executors  # round again, in the same order
    refused = [r for r in mine if r["ev"] == "finish" and r["node"] == "n2" and not r["ok"]]
    assert refused, "n2's late finish should have been refused (the store had handed the slot on)"


def test_a_run_with_more_slots_than_the_default_ledger_holds_is_judged_whole() -> None:
    """Explorer seed 30001 at 6 h (2026-12-06): a 2-second job wrote more than the store's default
    10,000 ledger entries per job, the oldest were trimmed, and the checker, which reads the final
    ledger, reported the run's first slots unaccounted for. The simulated store keeps the whole
    ledger (``sim.quorum.WHOLE_LEDGER``); here a 1-second job for 2 h 50 min (failed with 199
    such slots before)."""
    result = sim.run(sim.load(SCENARIOS / "checker" / "ledger-longer-than-its-default.toml"), 1)
    assert result.report.violations == [], result.report.summary()
    entries = sum(1 for r in result.trace.records if r["ev"] == "ledger")
    assert entries > DEFAULT_LEDGER_MAXLEN, entries  # (the story: more than the default holds)


def test_a_slot_only_a_cut_off_node_could_record_the_others_lacking_its_job_is_exempt() -> None:
    """A hypothesis example (2026-12-06, ``removed-from-the-rest-cut-off-0``): a reload took job0
    out of n2 and n3 at the start; n1, the only node keeping it, is cut off from the store for
    the run's last three minutes. Nobody can record those slots (the two that can reach the store
    lack the job and never voted; n1 cannot reach it), yet the checker reported them, 73 as
    "nobody could vote" and one n1 had voted for as unaccounted. They are exempt as the job's
    removal, and before the partition the slots are still judged: missed for want of a quorum."""
    from sim.checker import JOB_REMOVED

    path = SCENARIOS / "checker" / "removed-from-the-rest-cut-off-0.toml"
    report = sim.run(sim.load(path), 0).report
    assert report.violations == [], report.summary()
    assert report.exempt[JOB_REMOVED] >= 74, report.exempt
    records = sim.run(sim.load(path), 0).trace.records
    job0 = [r for r in records if r["ev"] == "ledger" and r["job"] == "job0"]
    assert job0 and all(r["state"] == "missed" for r in job0), job0[:3]  # (before the cut: no quorum)


def test_one_node_stepped_back_an_hour_for_good_leaves_the_others_slots_judged() -> None:
    """A user audit (``checker/one-clock-back-for-good``): of five nodes, n1's clock steps back an
    hour at 1 min and stays there. The checker shrank the judged range by the largest end-of-run
    clock error of any node, and the liveness look-back by the size of any step, so it judged no
    slot (due 0, liveness-checked 0, no warning). The four others decide every slot: the range now
    shrinks by the quorum-th best node's error, and a step back never stretches the look-back."""
    path = SCENARIOS / "checker" / "one-clock-back-for-good.toml"
    report = sim.run(sim.load(path), 1).report
    assert report.violations == [], report.summary()
    assert report.due >= 110 and report.liveness_checked >= 100, report.summary()


def test_slots_only_a_node_behind_past_the_end_reaches_the_store_for_are_cut_off() -> None:
    """``checker/behind-node-alone-at-the-end-0``: with the judged range now shrunk by the
    quorum-th best clock's error, the last minutes' slots are judged although n1's clock is 90 s
    behind; only n1 reaches the store then, and it comes to them after the end. Counting n1 as a
    node that could record them reported each as "nobody could vote" (90 over 15 seeds of the
    same story); n1 is judged out of those slots, and they are cut off."""
    path = SCENARIOS / "checker" / "behind-node-alone-at-the-end-0.toml"
    report = sim.run(sim.load(path), 0).report
    assert report.violations == [], report.summary()
    assert report.cut_off > 0 and report.due >= 110, report.summary()


def test_a_restart_whose_high_water_read_came_after_a_later_decision_never_had_a_chance() -> None:
    """Explorer seed 98304 (2026-12-07, ``checker/restart-read-after-a-sweep-98304``): a reload
    takes job0 from every node but n4, which crashes meanwhile. It boots at 217.000 s; a sweep
    decides a later slot at 217.002 s, before n4's high-water read reaches the store, so its
    catch-up starts past the slots of its outage. The checker judged the restart by its boot and
    reported seven slots "nobody could vote for"; it now judges by when the store answered the
    read (the trace's ``high_water`` events), and they are the job's removal."""
    from sim.checker import JOB_REMOVED

    path = SCENARIOS / "checker" / "restart-read-after-a-sweep-98304.toml"
    result = sim.run(sim.load(path), 98304)
    assert result.report.violations == [], result.report.summary()
    assert result.report.exempt[JOB_REMOVED] >= 7, result.report.exempt
    # The story still happens: a decision falls between n4's boot and its first read.
    records = result.trace.records
    boot = max(r["t"] for r in records if r["ev"] == "boot" and r["node"] == "n4")
    read = min(r["t"] for r in records if r["ev"] == "high_water" and r["node"] == "n4" and r["t"] >= boot)
    assert any(r["ev"] == "decided" and boot < r["t"] < read for r in records), (boot, read)


def test_slots_every_node_comes_to_only_after_all_are_cut_off_are_cut_off() -> None:
    """Explorer seed 100095 (2026-12-07, ``checker/behind-and-cut-off-100095``): every clock a
    minute back for good, then rotating partitions cut every node off to the end. The last slots
    before the cut come to the nodes a minute late, when all are cut off. The checker took their
    first chance at the deadline by true time and reported four slots "nobody could vote for";
    it now takes it as late as the least behind node comes to it, and they are cut off."""
    from sim.checker import CUT_OFF

    path = SCENARIOS / "checker" / "behind-and-cut-off-100095.toml"
    result = sim.run(sim.load(path), 100095)
    assert result.report.violations == [], result.report.summary()
    assert result.report.exempt[CUT_OFF] >= 4, result.report.exempt
    # The story still happens: nothing is decided after every node is cut off.
    records = result.trace.records
    cut = max(r["t"] for r in records if r["ev"] == "health" and r["why"] == "partitioned")
    assert not [r for r in records if r["ev"] == "decided" and r["t"] > cut], cut


def test_a_retry_whose_start_a_failover_lost_runs_again_as_the_known_limit() -> None:
    """Explorer seed 105216 (2026-12-07, ``checker/retry-start-lost-by-failover-105216``), with
    ``wait_replicas = 0``: a failover lost the last 2 s of acknowledged writes, among them the start
    of an at-least-once retry under token 581, and the new primary handed token 581 out again.
    The checker reported "retry without a higher token", a store reusing tokens; it is the known
    limit of a failover that lost writes, as a forgotten first start already was."""
    from sim.checker import FAILOVER_LOSS

    path = SCENARIOS / "checker" / "retry-start-lost-by-failover-105216.toml"
    result = sim.run(sim.load(path), 105216)
    kinds = sorted({v.kind for v in result.report.violations})
    assert kinds == [FAILOVER_LOSS], result.report.summary()
    [again] = [v for v in result.report.violations if "lost the start of that retry" in v.detail]
    assert (again.job, again.fire_ms) == ("job2", 1700000916000)
    assert "retry token 581 after tokens [580, 581]" in again.detail  # (the story still happens)
    assert result.report.unexpected() == []  # (a known limit fails no exploration)
