"""At-least-once re-runs: only a run under a HIGHER token than every earlier run is a takeover.

Under at-least-once delivery the checker accepts a second run of a slot as a
re-run after a takeover — but only when its token is higher than every
earlier run's: the store hands a slot on only with a new, higher token, so a
second run under the same (or a lower) token is the same grant used twice,
i.e. the slot executed twice. The mutation runner (tests/mutation/) showed
that dropping the token comparison from that branch survived every other
test: these two cases pin it from both sides.
"""

from __future__ import annotations

from tests.test_sim_checker_rules import LATER, _trace, commit, kinds, ran_ok, slot_ev


def test_an_at_least_once_second_run_under_the_same_token_is_a_slot_executed_twice() -> None:
    again = [*ran_ok(at=LATER)[:5], slot_ev("run", "n1", LATER + 900, 1, fire=LATER)]
    assert kinds(_trace(*again, delivery="at-least-once")) == {"slot executed twice": 1}


def test_an_at_least_once_re_run_under_a_higher_token_after_a_takeover_is_accepted() -> None:
    rerun = [*ran_ok(at=LATER)[:5], commit(LATER + 20_000, 2, "n2", by="takeover", fire=LATER)]
    rerun.append(
        slot_ev("start", "n2", LATER + 20_005, 2, fire=LATER, ok=True, why="", st=LATER + 20_005,
                lease=LATER + 35_005)
    )  # fmt: skip
    rerun.append(slot_ev("run", "n2", LATER + 20_006, 2, fire=LATER))
    report_kinds = kinds(_trace(*rerun, delivery="at-least-once"))
    assert "slot executed twice" not in report_kinds
    assert "execution under a stale token" not in report_kinds
