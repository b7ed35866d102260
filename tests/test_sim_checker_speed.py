"""The checker's cost (issue 27): what it does once per trace stays once per trace.

The checker is the proof that no slot ran twice, so its speed-ups change no verdict (the
fingerprint of the shipped scenarios' reports, and a field-by-field comparison with the
previous checker, are in the commit that made them). These tests pin the costs that were
paid again and again, and the edges of how they are now paid once.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import sim
import sim.checker as checker
from quorum_cron.core.model import MembershipRecord
from sim.checker import check
from tests.test_sim_checker_rules import EPOCH1, JOINT, LATER, MEMBERSHIP, _trace, held, joint_commit, kinds

SCENARIO_DIR = Path(sim.__file__).parent / "scenarios"


def test_a_membership_trace_decodes_each_record_text_at_most_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit of a membership scenario carries the job's record as text, and the checker
    decoded it two or three times a commit (each decode validates every id: most of the cost of
    checking such a trace). A record is immutable and its text names it: one decode a text."""
    result = sim.run(sim.load(SCENARIO_DIR / "membership-partition.toml"), 0)
    records = result.trace.records
    texts = {r[k] for r in records for k in ("mr", "record") if isinstance(r.get(k), str)}
    commits = sum(1 for r in records if r["ev"] == "commit" and "mr" in r)
    assert commits > 2 * len(texts)  # (else the bound below would not tell once from per commit)
    decoded: list[int] = []
    real = MembershipRecord.__post_init__

    def counting(self: MembershipRecord) -> None:
        decoded.append(self.epoch)
        real(self)

    monkeypatch.setattr(MembershipRecord, "__post_init__", counting)
    report = check(records, result.scenario)
    assert report.by_kind() == result.report.by_kind()
    assert len(decoded) <= len(texts), f"{len(decoded)} decodes of {len(texts)} record texts"


@pytest.mark.parametrize("mr", [["1", "3,2,n1,n2,n3"], "1;3,2,n1,n2,n3;", 7])
def test_a_commit_whose_record_is_not_one_is_reported_not_raised(mr: Any) -> None:
    """A trace read from a file may carry anything as a commit's record: one that does not parse,
    or is not text at all (not something a decode can be remembered under), is a violation of
    the membership rule, each time, as before the decodes were remembered."""
    history = (held(LATER - 90_000, EPOCH1), held(LATER - 60_000, JOINT))
    bad = [*joint_commit(("n1", "n2")), *joint_commit(("n1", "n2"), mr, LATER + 60_000, LATER + 60_002)]
    for _ in range(2):  # (the second check meets whatever the first one remembered)
        assert kinds(_trace(*history, *bad, extra=MEMBERSHIP)) == {checker.MEMBERSHIP_FOREIGN: 1}


def test_the_clusters_health_timeline_answers_as_each_nodes_does() -> None:
    """Liveness counts the nodes healthy through each due slot's window from one timeline of the
    whole cluster; on random histories (several records at one time, nodes that have none yet,
    windows before, across and after the changes) it answers as the nodes' own records do."""
    rng = random.Random(27)
    nodes = ("n1", "n2", "n3", "n4", "n5")
    for _ in range(300):
        health = checker._Health()
        t = 0
        for _ in range(rng.randint(0, 25)):
            t += rng.choice((0, 0, 1, 5, 40))
            health.add(rng.choice(nodes), t, rng.random() < 0.6)
        for _ in range(30):
            lo = rng.randint(-10, t + 10)
            hi = lo + rng.choice((0, 1, 3, 20, 100))
            among = rng.choice((None, frozenset(rng.sample(nodes, rng.randint(0, 5)))))
            assert health.stable_healthy(lo, hi, among) == health.per_node(lo, hi, among)


def test_a_health_history_out_of_time_order_is_read_node_by_node() -> None:
    """A hand-made trace may list a node's health out of time order: the timeline of the whole
    cluster assumes order, so such a history is answered by each node's records as before."""
    health = checker._Health()
    for node, t, ok in (("n1", 10, True), ("n2", 5, True), ("n1", 3, False), ("n2", 20, False)):
        health.add(node, t, ok)
    assert health.cluster() is None
    for lo, hi in ((0, 4), (4, 12), (11, 30), (25, 40)):
        assert health.stable_healthy(lo, hi) == health.per_node(lo, hi)
