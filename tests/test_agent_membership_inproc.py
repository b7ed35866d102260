"""One agent in process on a real redis-server: what it does with the store's membership record.

* it creates the record from its config when the store has none;
* a node that is not a member says so ONCE (one line, one alert
  ``not_a_member``, one count), and never votes;
* a node whose config disagrees with the stored record says so in one line
  (alert ``membership_mismatch``) and does not vote;
* a node hears a new record with its next heartbeat.

Each test waits on facts (alerts raised, heartbeats seen by the store, due
slots passing), never a sleep that hopes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
import redis

from quorum_cron.agent.alerts import AlertKind
from quorum_cron.agent.build import agent_job, agent_settings
from quorum_cron.agent.runtime import Agent
from quorum_cron.config.settings import AUTO, ClusterConfig, JobSpec
from quorum_cron.core.actions import Refused
from quorum_cron.core.membership import MembershipRecord
from quorum_cron.core.model import Configuration, VoteRequest, VoteStatus
from quorum_cron.store.redis import RedisStore
from tests.agent_inproc import run_agent
from tests.polling import until

JOB = JobSpec.create("tick", "@every 1s", command=("true",), starting_deadline_ms=900)


def membership_abstentions(agent: Agent) -> float:
    """Slots of ``tick`` the agent did not vote for because of the membership (its metric)."""
    value = agent.metrics.registry.get_sample_value(
        "quorum_cron_abstentions_total", {"job": "tick", "cause": "membership"}
    )
    return value or 0.0


def refusals(agent: Agent) -> float:
    """Votes of the agent the store refused by membership (its metric; counted once per epoch)."""
    value = agent.metrics.registry.get_sample_value("quorum_cron_membership_refusals_total", {"kind": "vote"})
    return value or 0.0


def cluster(ns: str, *members: str, size: int = AUTO) -> ClusterConfig:
    return ClusterConfig(
        namespace=ns, size=size, members=members, heartbeat_ms=100, lease_ms=1_000, start_timeout_ms=500
    )


def beats_under(store: RedisStore, node: str, epoch: int, count: int) -> Callable[[], bool]:
    """True once the store saw ``count`` more heartbeats of ``node`` under ``epoch`` (from the first call)."""
    seen: list[int] = []

    def check() -> bool:
        for m in store.members():
            if m.node == node and m.epoch == epoch and (not seen or m.seen_ms != seen[-1]):
                seen.append(m.seen_ms)
        return len(seen) > count

    return check


def test_the_first_agent_creates_the_record_from_its_config(redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "first")
    agent = Agent(agent_settings(cluster("first", "a", "b", "c"), "a"), [], store)

    async def scenario() -> None:
        await until("a heartbeat under epoch 1", beats_under(store, "a", 1, 0))

    run_agent(agent, scenario)
    stored = store.membership()
    assert stored is not None and stored.record.epoch == 1
    assert stored.record.current == Configuration.of("abc") and stored.by == "a"
    assert not [
        a for a in agent.alerts.sent if a.kind in (AlertKind.NOT_A_MEMBER, AlertKind.MEMBERSHIP_MISMATCH)
    ]


def test_a_node_that_is_not_a_member_says_so_once_and_never_votes(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(redis_client, "extra")
    store.init_membership(Configuration.of("abc"), "a")
    settings = agent_settings(cluster("extra", "a", "b", "c"), "intruder")
    agent = Agent(settings, [agent_job(JOB)], store)

    async def scenario() -> None:
        await until(
            "the not_a_member alert", lambda: any(a.kind == AlertKind.NOT_A_MEMBER for a in agent.alerts.sent)
        )
        # Three due slots (awaited as the abstentions they make, not as wall time passing) and
        # several heartbeats later, it is still one line, one alert, one count.
        await until("three abstained slots", lambda: membership_abstentions(agent) >= 3)
        await until("two more heartbeats", beats_under(store, "intruder", 1, 2))

    with caplog.at_level(logging.INFO, logger="quorum_cron.agent"):
        run_agent(agent, scenario)
    lines = [r.getMessage() for r in caplog.records if getattr(r, "qc_event", "") == "not_a_member"]
    assert lines == [
        "node intruder (epoch 1) is not a member of the store's epoch 1: a, b, c (quorum 2 of 3): "
        'it does not vote (add it with `quorum-cron members add intruder --reason "..." --config FILE`, '
        "or stop it)"
    ], lines
    # Its clock's verdict does not say "voting" either (it once did, right after the line above).
    trust = [r.getMessage() for r in caplog.records if getattr(r, "qc_event", "") == "trust"]
    assert trust and all(not t.startswith("voting") for t in trust), trust
    assert trust[-1].startswith("not voting (not a member of epoch 1): clock trusted"), trust
    assert [a.kind for a in agent.alerts.sent].count(AlertKind.NOT_A_MEMBER) == 1
    refusals = agent.metrics.registry.get_sample_value(
        "quorum_cron_membership_refusals_total", {"kind": "not_member"}
    )
    assert refusals == 1
    assert agent.metrics.registry.get_sample_value("quorum_cron_member") == 0
    votes = [s for m in agent.metrics.votes.collect() for s in m.samples if s.name.endswith("_total")]
    assert votes == [], votes
    assert membership_abstentions(agent) >= 3


def test_a_config_that_disagrees_with_the_record_does_not_vote(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(redis_client, "drift")
    store.init_membership(Configuration.of("abc"), "a")
    settings = agent_settings(cluster("drift", "a", "b", "d"), "a")
    agent = Agent(settings, [agent_job(JOB)], store)

    async def scenario() -> None:
        await until(
            "the membership_mismatch alert",
            lambda: any(a.kind == AlertKind.MEMBERSHIP_MISMATCH for a in agent.alerts.sent),
        )
        await until("two abstained slots", lambda: membership_abstentions(agent) >= 2)

    with caplog.at_level(logging.INFO, logger="quorum_cron.agent"):
        run_agent(agent, scenario)
    trust = [r.getMessage() for r in caplog.records if getattr(r, "qc_event", "") == "trust"]
    assert trust == [
        "not voting: the config proposes members a, b, d (quorum 2 of 3) but the store enforces "
        "epoch 1: a, b, c (quorum 2 of 3); expected the same (update the config to the store's members, "
        "or change them with `quorum-cron members`)"
    ], trust  # (it said "not voting: not voting: ...")
    (alert,) = [a for a in agent.alerts.sent if a.kind == AlertKind.MEMBERSHIP_MISMATCH]
    assert alert.message == (
        "not voting: the config proposes members a, b, d (quorum 2 of 3) but the store enforces "
        "epoch 1: a, b, c (quorum 2 of 3); expected the same (update the config to the store's members, "
        "or change them with `quorum-cron members`)"
    )
    votes = [s for m in agent.metrics.votes.collect() for s in m.samples if s.name.endswith("_total")]
    assert votes == [], votes


def test_a_node_hears_a_new_record_with_its_next_heartbeat(redis_client: redis.Redis) -> None:
    store = RedisStore(redis_client, "hear")
    agent = Agent(agent_settings(cluster("hear", "a"), "a"), [], store)

    async def scenario() -> None:
        await until("a heartbeat under epoch 1", beats_under(store, "a", 1, 0))
        assert store.change_membership(1, Configuration.of("ab"), "op", "grow").ok
        # a alone is not every new member: the joint epoch 2 stays until b heartbeats.
        await until("a heartbeat under epoch 2", beats_under(store, "a", 2, 0))
        assert agent.core.membership is not None and agent.core.membership.epoch == 2
        assert store.heartbeat("b", "ib", 5_000, {}, epoch=2).ok
        await until("a heartbeat under epoch 3", beats_under(store, "a", 3, 0))

    run_agent(agent, scenario)
    stored = store.membership()
    assert stored is not None and stored.record.epoch == 3 and stored.record.current == Configuration.of("ab")
    assert agent.metrics.registry.get_sample_value("quorum_cron_membership_epoch") == 3


def test_a_newer_record_wakes_the_loop_for_the_votes_it_makes_at_once(redis_client: redis.Redis) -> None:
    """A member that takes a newer record votes again under it for the undecided slots it voted
    for; a job still behind takes the record only from such a vote (docs/protocol.md). The loop
    must run for that now, not at its next timer (up to a heartbeat or a slot away)."""
    store = RedisStore(redis_client, "wake")
    agent = Agent(agent_settings(cluster("wake", size=3), "a"), [], store)

    async def main() -> None:
        agent._wake = wake = asyncio.Event()  # (what run() makes; the loop waits on it)
        agent._on_record(MembershipRecord(2, Configuration.of(["a"], size=3)))
        assert wake.is_set()
        wake.clear()
        agent._on_record(MembershipRecord(2, Configuration.of(["a"], size=3)))  # not newer
        assert not wake.is_set()
        agent._on_record(MembershipRecord(3, Configuration.of(["a", "b"], size=3)))
        assert wake.is_set()

    asyncio.run(main())


def test_a_member_a_change_reached_through_a_job_first_is_not_alerted_as_not_a_member(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """On every change some member brings the new epoch to a job before the others' next heartbeat:
    their next vote, with the older epoch, is refused, and they vote again under the job's record.
    That is routine, not a node out of the cluster: one info line and the count, no ``not_a_member``
    line or alert (which once paged for every member that stays, on every `members add`)."""
    store = RedisStore(redis_client, "routine")
    store.init_membership(Configuration.of("abc"), "a")
    # Heartbeats 4 s apart, the change made right after one: the agent hears epoch 2 from the
    # job's refusal of its next vote (slots every second), not from its next heartbeat.
    slow = ClusterConfig(
        namespace="routine",
        size=AUTO,
        members=("a", "b", "c"),
        heartbeat_ms=4_000,
        lease_ms=60_000,
        start_timeout_ms=500,
    )
    agent = Agent(agent_settings(slow, "a"), [agent_job(JOB)], store)

    async def scenario() -> None:
        await until("a heartbeat after the first", beats_under(store, "a", 1, 1))
        changed = store.change_membership(1, Configuration.of("abcd"), "op", "grow")
        assert changed.ok and changed.membership is not None
        record = changed.membership.record
        # b, a member, already on epoch 2, votes first: the job takes the joint record.
        now = store.time_ms()
        fire = now - now % 1_000
        vote = VoteRequest(
            "tick", fire, "b", JOB.spec_hash, 2, 250, 60_000, epoch=2, membership=record.encode()
        )
        assert store.vote([vote])[0].status in (VoteStatus.RECORDED, VoteStatus.COMMITTED, VoteStatus.DECIDED)
        await until("a vote of a refused", lambda: refusals(agent) >= 1)
        assert agent.core.membership is not None and agent.core.membership.epoch == 2

    with caplog.at_level(logging.INFO, logger="quorum_cron.agent"):
        run_agent(agent, scenario)
    assert [a for a in agent.alerts.sent if a.kind == AlertKind.NOT_A_MEMBER] == []
    assert [r.getMessage() for r in caplog.records if getattr(r, "qc_event", "") == "not_a_member"] == []
    lines = [r.getMessage() for r in caplog.records if "votes again under it" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        "went with epoch 1, the job enforces epoch 2 already: a is a member of it and votes again under it"
    ), lines
    assert refusals(agent) == 1


def test_a_refused_vote_of_a_node_out_of_the_jobs_record_says_so_once_without_repeating_the_epochs(
    redis_client: redis.Redis,
) -> None:
    # A removed node that had not heard of its removal: the store's line names both epochs already
    # (it was said twice: "... the job enforces epoch 3 (node d holds epoch 2, the job enforces epoch 3)").
    agent = Agent(
        agent_settings(cluster("out", "a", "b", "c", "d"), "d"), [], RedisStore(redis_client, "out")
    )
    stale = "d votes with membership epoch 2, the job enforces epoch 3"

    async def main() -> None:  # (the alert hook delivers on the running loop)
        agent.health.reports.refused(Refused("tick", 5_000, 2, 3, stale, member=False))
        agent.health.reports.refused(
            Refused("tick", 6_000, 3, 3, "d is not a member of epoch 3: a, b (quorum 2 of 2)")
        )

    asyncio.run(main())
    messages = [a.message for a in agent.alerts.sent if a.kind == AlertKind.NOT_A_MEMBER]
    assert messages == [
        f"vote for tick@5000 refused by the store: {stale}; d is not a member of epoch 3: it does not vote",
        "vote for tick@6000 refused by the store: d is not a member of epoch 3: a, b (quorum 2 of 2)",
    ]
