"""Explorer seed 90437 as a regression: a stranger's record never becomes a job's (one epoch, one record).

``sim/scenarios/membership-forged-record.toml`` (shrunk from the 1,000-seed
exploration of 2026-12-02): n1, n2, n3 shrink to n1, n3; n4, never a member,
then votes with a record of its own making at the namespace's epoch. job2
still enforced epoch 1 and adopted it, so the checker saw a commit under
``3;3,2,n1,n3,n4`` while the cluster's epoch 3 was ``3;2,2,n1,n3``. A job
now takes a newer record only from one of its members (docs/protocol.md,
"One epoch, one record"). test_sim_scenarios.py runs the file on seeds 0-2
too; seed 90437 is the one that failed.
"""

from __future__ import annotations

from pathlib import Path

import sim

SCENARIO = Path(sim.__file__).parent / "scenarios" / "membership-forged-record.toml"
SEED = 90437


def test_a_record_made_by_a_node_outside_the_job_is_never_adopted() -> None:
    scenario = sim.load(SCENARIO)
    assert scenario.seed == SEED
    result = sim.run(scenario, SEED)
    report = result.report
    assert report.violations == [] and report.duplicates == 0, report.summary()
    records = result.trace.records
    namespace = {r["epoch"]: r["record"] for r in records if r["ev"] == "membership"}
    assert namespace[3] == "3;2,2,n1,n3"  # the shrink finished: the epoch n4 forges at
    refused = [r for r in records if r["ev"] == "refused" and r["node"] == "n4"]
    assert refused and "n4 is not a member of epoch 3" in refused[0]["why"], refused[:1]
    commits = [r for r in records if r["ev"] == "commit" and r["t"] > refused[0]["t"]]
    assert commits and all("n4" not in [n for n, _ in r["votes"]] for r in commits)
