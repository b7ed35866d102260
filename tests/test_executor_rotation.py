"""The executor a takeover or a retry picks (``store/memory_records.choose_executor``), as a property.

The contract suite proves the Redis scripts' ``choose`` equal to this model on the slots its
walks build; here the model's rule itself is held over any voters, votes, membership record and
history of assignments: the executor is always an agreeing voter that is a member, a voter never
assigned goes first, and from then on no such voter waits more than one round of them, so a
slot never waits on one voter that stays down while another is up (seed 639,
sim/findings/README.md).
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import example, given

from quorum_cron.core.model import Configuration, MembershipRecord
from quorum_cron.store.memory_records import _Job, _Slot, choose_executor
from quorum_cron.store.rendezvous import pick_executor

POOL = ("n1", "n2", "n3", "n4", "n5", "n6", "n7")


@st.composite
def slots(draw: st.DrawFn) -> tuple[_Job, _Slot, list[str]]:
    """A job (with or without a membership record), a committed slot's votes and history of
    assignments, and the voters that may execute it (agreeing members)."""
    voters = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=7, unique=True))
    votes = {n: draw(st.sampled_from(("h", "h", "other"))) for n in voters}
    members = draw(st.none() | st.lists(st.sampled_from(POOL), min_size=1, max_size=7, unique=True))
    old = draw(st.none() | st.lists(st.sampled_from(POOL), min_size=1, max_size=7, unique=True))
    record = None
    if members is not None:  # (while joint, a member of either configuration may execute)
        record = MembershipRecord(
            2, Configuration.of(members), None if old is None else Configuration.of(old)
        )
    assigned = draw(st.lists(st.sampled_from(POOL), max_size=8))
    fire = draw(st.integers(0, 2**40))
    job = _Job(name=draw(st.sampled_from(("alpha", "beta", "a job"))), record=record)
    rec = _Slot(fire_ms=fire, votes=votes, spec_hash="h", assigned=assigned)
    eligible = [n for n, h in votes.items() if h == "h" and (record is None or record.is_member(n))]
    return job, rec, eligible


def _case(assigned: list[str]) -> tuple[_Job, _Slot, list[str]]:
    """Three agreeing voters, no record, and a history of ``assigned``."""
    votes = {"n1": "h", "n2": "h", "n3": "h", "n4": "other"}
    return (
        _Job(name="alpha"),
        _Slot(fire_ms=60_000, votes=votes, spec_hash="h", assigned=assigned),
        ["n1", "n2", "n3"],
    )


# Every voter assigned, newest first in id order and last in rendezvous order; one never assigned.
@example(_case(["n3", "n2", "n1"]))
@example(_case(["n1", "n2", "n3", "n1"]))
@example(_case(["n2", "n4", "n2"]))
@given(slots())
def test_no_eligible_voter_waits_more_than_one_round(case: tuple[_Job, _Slot, list[str]]) -> None:
    job, rec, eligible = case
    history = list(rec.assigned)
    fresh = [n for n in eligible if n not in history]
    chosen: list[str] = []
    for _ in range(3 * len(eligible) + 1):
        executor, why = choose_executor(job.name, job, rec)
        if not eligible:
            assert executor == "" and why.startswith("no agreeing voter"), (executor, why)
            return
        assert executor in eligible and why == "", (executor, eligible)
        chosen.append(executor)
        rec.assigned.append(executor)
    # Voters never assigned go first, in rendezvous order among themselves.
    left = list(fresh)
    for executor in chosen[: len(fresh)]:
        assert executor == pick_executor(job.name, rec.fire_ms, left)
        left.remove(executor)
    # Then the one whose last assignment is the oldest, the drawn history included.
    if len(chosen) > len(fresh):
        before = history + chosen[: len(fresh)]
        last = {n: i for i, n in enumerate(before)}
        assert chosen[len(fresh)] == min(eligible, key=last.__getitem__), (before, chosen)
    # Then round and round: every window of one round holds each eligible voter once.
    size = len(eligible)
    for i in range(len(chosen) - size + 1):
        assert sorted(chosen[i : i + size]) == sorted(eligible), (i, chosen, eligible)


@given(slots())
def test_a_commit_goes_to_the_rendezvous_winner(case: tuple[_Job, _Slot, list[str]]) -> None:
    """No assignment yet (a commit): the winner among the agreeing members, as before rotation."""
    job, rec, eligible = case
    rec.assigned = []
    executor, _ = choose_executor(job.name, job, rec)
    assert executor == (pick_executor(job.name, rec.fire_ms, eligible) or "")
