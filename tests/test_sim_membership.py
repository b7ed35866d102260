"""Membership under the simulator (issue 22 item 5): changes as fault events, the checker's rule, the
planted joint-commit bug, the explorer's plans.

Each shipped membership scenario (``sim/scenarios/membership-*.toml``; tests/test_sim_scenarios.py
runs all of them on three seeds and, slow, on a hundred) is shown here to reach the state it is
about, so a scenario that silently stopped exercising its combination fails.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import sim
from quorum_cron.core.model import MembershipRecord
from quorum_cron.errors import ConfigError
from sim.checker import MEMBERSHIP_QUORUM
from sim.explore import explore, explore_scenario
from sim.gen import RandomChooser, random_membership

SCENARIO_DIR = Path(sim.__file__).parent / "scenarios"
Rec = dict[str, Any]


@cache
def _run(name: str, seed: int = 0, mutant: str | None = None) -> sim.RunResult:
    return sim.run(sim.load(SCENARIO_DIR / f"{name}.toml"), seed, mutant=mutant)


def _records(name: str, ev: str, seed: int = 0) -> list[Rec]:
    return [r for r in _run(name, seed).trace.records if r["ev"] == ev]


def _epoch_changes(name: str) -> list[tuple[int, str]]:
    return [(r["t"], r["record"]) for r in _records(name, "membership")]


def _clean(name: str, seed: int = 0) -> sim.Report:
    report = _run(name, seed).report
    assert report.violations == [] and report.duplicates == 0, report.summary()
    return report


# -- scenarios: the file format ------------------------------------------------------------------

BASE = """
name = "m"
nodes = 4
duration = "2m"
{top}
[[jobs]]
name = "a"
every = "5s"
{faults}
"""


def _load(top: str = "", faults: str = "") -> sim.Scenario:
    return sim.loads(BASE.format(top=top, faults=faults))


def test_members_and_membership_faults_round_trip_through_toml() -> None:
    sc = _load(
        'members = ["n3", "n1", "n2"]',
        '[[faults]]\nkind = "reconfigure"\nat = "30s"\nnodes = ["n1", "n2", "n4"]\n'
        '[[faults]]\nkind = "finish"\nat = "40s"\n'
        '[[faults]]\nkind = "stale_config"\nat = "30s"\nnodes = ["n3"]\n'
        '[[faults]]\nkind = "rogue"\nat = "50s"\nnodes = ["n4"]\n',
    )
    assert sc.members == ("n1", "n2", "n3") and sc.uses_membership
    assert sim.loads(sim.dumps(sc)) == sc
    assert not _load().uses_membership and _load().first_members == ("n1", "n2", "n3", "n4")


@pytest.mark.parametrize(
    ("top", "faults", "message"),
    [
        ('members = ["n1", "n9"]', "", "members names 'n9' (expected ids among n1, n2, n3, n4)"),
        ('members = ["n1", "n2"]\n[settings]\nquorum = 2', "", "quorum with 'members'"),
        ("", '[[faults]]\nkind = "reconfigure"\nat = "1s"\n', "expected 'nodes' (the new member set, by id)"),
    ],
)
def test_bad_membership_input_is_one_clear_line(top: str, faults: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _load(top, faults)


# -- the combinations the issue names, one shipped scenario each -------------------------------------


def test_reconfigure_during_a_partition_waits_for_the_old_majority_and_the_finish_for_the_new() -> None:
    report = _clean("membership-partition")
    assert report.reached["membership finish refused"] == 1
    changes = _epoch_changes("membership-partition")
    assert [MembershipRecord.decode(text).joint for _, text in changes] == [False, True, False]
    joint_from, joint_to = changes[1][0], changes[2][0]
    heal = next(r["t"] for r in _records("membership-partition", "fault") if r["phase"] == "end")
    assert joint_to > heal  # n2 and n3 had to heartbeat under the joint epoch first
    # While joint and n2, n3 cut off, nothing committed: n1, n4, n5 are a majority of the new set only.
    during = [r for r in _records("membership-partition", "commit") if joint_from <= r["t"] < heal]
    assert during == []


def test_a_crash_half_way_through_a_change_keeps_the_joint_state_until_the_new_node_holds_it() -> None:
    report = _clean("membership-crash-mid-change")
    changes = _epoch_changes("membership-crash-mid-change")
    assert len(changes) == 3 and MembershipRecord.decode(changes[1][1]).joint
    n4_boot = next(
        r["t"]
        for r in _records("membership-crash-mid-change", "boot")
        if r["node"] == "n4" and r["t"] > changes[1][0]
    )
    assert changes[2][0] > n4_boot and changes[2][0] - changes[1][0] > 60_000
    joint = [
        r
        for r in _records("membership-crash-mid-change", "commit")
        if changes[1][0] <= r["t"] < changes[2][0]
    ]
    assert joint and report.reached["slot committed under a joint membership"] >= len(
        [r for r in joint if r["by"] == "vote"]
    )


def test_a_removed_node_that_keeps_its_old_config_is_refused_and_never_counted() -> None:
    _clean("membership-removed-node")
    refused = [r for r in _records("membership-removed-node", "refused") if r["node"] == "n4"]
    assert refused and refused[0]["epoch"] == 1 and refused[0]["store_epoch"] == 3
    done = _epoch_changes("membership-removed-node")[-1][0]
    after = [r for r in _records("membership-removed-node", "commit") if r["t"] > done]
    assert after and all("n4" not in [n for n, _ in r["votes"]] for r in after)


def test_an_extra_node_voting_with_a_copy_of_the_config_is_refused_by_the_store() -> None:
    _clean("membership-extra-node")
    refused = [r for r in _records("membership-extra-node", "refused") if r["node"] == "n4"]
    assert refused and "n4 is not a member of epoch 1" in refused[0]["why"]
    votes = [s for r in _records("membership-extra-node", "vote") if r["node"] == "n4" for s in r["slots"]]
    statuses = Counter(status for _, _, status, _, _ in votes)
    assert statuses["refused"] > 0 and not statuses["recorded"] and not statuses["committed"]
    assert all("n4" not in [n for n, _ in r["votes"]] for r in _records("membership-extra-node", "commit"))


def test_a_node_paused_across_a_change_wakes_with_a_stale_epoch_is_refused_then_learns() -> None:
    _clean("membership-stale-epoch")
    refused = [r for r in _records("membership-stale-epoch", "refused") if r["node"] == "n3"]
    assert refused and refused[0]["epoch"] == 1 and refused[0]["store_epoch"] >= 2
    later = [r for r in _records("membership-stale-epoch", "commit") if r["t"] > refused[0]["t"] + 10_000]
    assert any("n3" in [n for n, _ in r["votes"]] for r in later)


def test_the_baselines_ignore_membership_faults() -> None:
    sc = sim.load(SCENARIO_DIR / "membership-partition.toml")
    for strategy in ("leader", "lock"):
        assert sim.run(sc, 0, strategy).report.due > 0


# -- the planted bug -----------------------------------------------------------------------------------


def test_a_store_committing_a_joint_slot_with_the_new_majority_alone_is_caught_on_seed_0() -> None:
    caught = _run("membership-partition", 0, "joint-new-only").report
    assert set(caught.by_kind()) == {MEMBERSHIP_QUORUM}, caught.summary()
    assert "old: 1 of n1, n2, n3" in caught.violations[0].detail
    _clean("membership-partition")


# -- the explorer ----------------------------------------------------------------------------------------


def test_the_generator_draws_membership_plans_last_and_only_for_some_seeds() -> None:
    plans = [s for s in range(30) if explore_scenario(s, hours=0.25).uses_membership]
    assert 5 <= len(plans) <= 20, plans
    for seed in plans[:3]:
        sc = explore_scenario(seed, hours=0.25)
        assert any(f.kind == "reconfigure" for f in sc.faults)
        assert not any(f.kind == "store_failover" or f.lose_state for f in sc.faults)
    import random

    drawn = [
        random_membership(RandomChooser(random.Random(i)), ("n1", "n2", "n3", "n4", "n5"), 3_600_000)
        for i in range(60)
    ]
    kinds = Counter(f.kind for _, faults in drawn for f in faults)
    assert {"reconfigure", "finish", "stale_config", "rogue", "pause", "crash", "partition"} <= set(kinds), (
        kinds
    )


def test_explore_reports_membership_events_under_reached() -> None:
    seed = next(s for s in range(30) if explore_scenario(s, hours=0.1).uses_membership)
    (result,) = explore([seed], hours=0.1)
    assert result.ok, result.violations
    assert result.reached.get("membership change (joint)", 0) >= 1, result.reached
