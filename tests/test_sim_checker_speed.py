"""The checker's cost (issue 27): what it does once per trace stays once per trace.

The checker is the proof that no slot ran twice, so its speed-ups change no verdict (the
fingerprint of the shipped scenarios' reports, and a field-by-field comparison with the
previous checker, are in the commit that made them). These tests pin the costs that were
paid again and again, and the edges of how they are now paid once.
"""

from __future__ import annotations

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
