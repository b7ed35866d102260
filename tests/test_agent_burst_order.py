"""The order of a long vote's parts (:mod:`quorum_cron.agent.burstorder`), as properties.

What the order is for, each a property over any jobs, fire times and members:
the same on every node whatever order it declared its jobs in; each node's
top-ranked slots (those it would be among the first quorum of voters for)
before the rest; the slots both of two nodes send early, neither would win,
in the same relative order; and a fresh draw for each fire time, so a burst
too large for the machine does not miss the same jobs every minute. And,
over a fixed burst, that nodes sending at one pace leave nearly every slot's
committing vote to the node the commit picks (its start is then folded in).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum_cron.agent.burstorder import burst_order
from quorum_cron.core.membership import Configuration, MembershipRecord
from quorum_cron.core.model import VoteRequest
from quorum_cron.store.rendezvous import rank

T0 = 1_700_000_000_000

_names = st.text(st.characters(codec="utf-8", exclude_characters="\n"), min_size=1, max_size=12)
_jobs = st.lists(_names, min_size=1, max_size=60, unique=True)
_members = st.lists(
    st.sampled_from(["n1", "n2", "n3", "n4", "n5", "node-a", "node-b"]), min_size=1, max_size=5, unique=True
)


def _record(members: list[str]) -> str:
    return MembershipRecord(1, Configuration.of(members)).encode()


def _vote(jobs: list[str], node: str, fire_ms: int, record: str = "") -> tuple[VoteRequest, ...]:
    return tuple(
        VoteRequest(
            job,
            fire_ms,
            node,
            "h",
            quorum=2,
            max_skew_ms=1_000,
            deadline_ms=60_000,
            epoch=1 if record else 0,
            membership=record,
        )
        for job in jobs
    )


def _jobs_of(requests: tuple[VoteRequest, ...]) -> list[str]:
    return [r.job for r in requests]


@given(_jobs, st.randoms(use_true_random=False), st.integers(0, 2**40))
def test_the_order_is_the_same_whatever_order_the_jobs_were_declared_in(
    jobs: list[str], rnd: random.Random, fire_ms: int
) -> None:
    shuffled = list(jobs)
    rnd.shuffle(shuffled)
    assert _jobs_of(burst_order(_vote(jobs, "n1", fire_ms))) == _jobs_of(
        burst_order(_vote(shuffled, "n2", fire_ms))
    )


@given(_jobs, _members, st.integers(0, 2**40), st.data())
def test_a_node_sends_the_slots_it_ranks_among_the_top_quorum_first(
    jobs: list[str], members: list[str], fire_ms: int, data: st.DataObject
) -> None:
    node = data.draw(st.sampled_from(members))
    record = MembershipRecord.decode(_record(members))
    quorum = record.current.quorum
    order = burst_order(_vote(jobs, node, fire_ms, _record(members)))
    assert sorted(_jobs_of(order)) == sorted(jobs)  # (each slot once)
    ranks = [rank(r.job, fire_ms, node, record.members) for r in order]
    early = [k < quorum for k in ranks]
    assert early == sorted(early, reverse=True), ranks  # (every early slot before every late one)


@given(_jobs, _members, st.integers(0, 2**40), st.data())
def test_two_nodes_send_the_slots_both_send_early_in_the_same_relative_order(
    jobs: list[str], members: list[str], fire_ms: int, data: st.DataObject
) -> None:
    a = data.draw(st.sampled_from(members))
    b = data.draw(st.sampled_from(members))
    record = MembershipRecord.decode(_record(members))

    def early(node: str) -> list[str]:
        """The node's top-quorum slots it would not win (those it would win go FOLD_SHIFT later)."""
        return [
            r.job
            for r in burst_order(_vote(jobs, node, fire_ms, _record(members)))
            if 0 < rank(r.job, fire_ms, node, record.members) < record.current.quorum
        ]

    both = set(early(a)) & set(early(b))
    assert [j for j in early(a) if j in both] == [j for j in early(b) if j in both]


def test_nodes_in_step_leave_the_commit_to_the_node_it_picks() -> None:
    """Members sending one burst at one pace (a vote's time is its place in the node's order):
    each slot commits at its quorum-th vote, and that vote is the one of the node the store then
    picks (the rendezvous winner among the voters so far) for nearly every slot, so the commit
    starts it in the same step (docs/protocol.md, "A start folded into the commit"). Without the
    winner's shift it is about one slot in two with three members, one in three with five."""
    jobs = [f"job-{i:05d}" for i in range(2_000)]
    for members in (["n1", "n2", "n3"], ["n1", "n2", "n3", "n4", "n5"]):
        record = MembershipRecord.decode(_record(members))
        place = {
            (r.node, r.job): i
            for node in members
            for i, r in enumerate(burst_order(_vote(jobs, node, T0, _record(members))))
        }
        folded = 0
        for job in jobs:
            first = sorted((place[(n, job)], n) for n in members)[: record.current.quorum]
            winner = min(first, key=lambda v: rank(job, T0, v[1], members))[1]
            folded += first[-1][1] == winner
        assert folded >= 0.95 * len(jobs), (members, folded)


def test_each_fire_time_draws_the_slots_afresh() -> None:
    """Over 2,000 jobs, the first tenth sent for one minute and for the next share about a tenth
    of their slots (a fresh draw), not all of them (a fixed order); neither is the declared order."""
    jobs = [f"job-{i:05d}" for i in range(2_000)]
    first = _jobs_of(burst_order(_vote(jobs, "n1", T0)))[:200]
    later = _jobs_of(burst_order(_vote(jobs, "n1", T0 + 60_000)))[:200]
    assert len(set(first) & set(later)) < 60, len(set(first) & set(later))
    assert first != jobs[:200]


@settings(max_examples=25)
@given(st.lists(_names, min_size=20, max_size=60, unique=True))
def test_a_vote_without_a_record_is_ordered_by_the_slot_hash_alone(jobs: list[str]) -> None:
    """Legacy (epoch-0) votes carry no members to rank against: the hash order alone, which a
    record's node shares for the slots it sends early."""
    plain = _jobs_of(burst_order(_vote(jobs, "n1", T0)))
    one = _jobs_of(burst_order(_vote(jobs, "n1", T0, _record(["n1"]))))
    assert plain == one  # (a lone member ranks first for every slot)
