"""A removed node that learns of its removal from a refused vote: one alert, and the right cause.

A node removed while its heartbeats are far apart votes once more under its
old epoch; the job, which a member brought the new record already, refuses
the vote and the core takes the job's record at once. Two follow-ups of the
day-2 audit:

* the refusal said ``not_a_member`` and the next heartbeat's reply, bringing
  the same record, said it again: two alerts for one removal of one node,
  where docs/operations.md promises one per epoch;
* until that heartbeat the health module held the old record, so the node's
  abstentions were counted as the clock's (``cause="clock"``), each with an
  ``abstain`` line, although the cause was the membership.

The agent runs in process on a real redis-server; the tests wait on facts
(metrics, the store's heartbeats), never on time passing.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis

from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.build import agent_job, agent_settings
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.member_reports import MemberReports
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.runtime import Agent
from quorum_cron.config.settings import AUTO, ClusterConfig, JobSpec
from quorum_cron.core.actions import Refused
from quorum_cron.core.model import Configuration, MembershipRecord, VoteRequest
from quorum_cron.store.redis import RedisStore
from tests.agent_inproc import events, run_agent
from tests.polling import until

JOB = JobSpec.create("tick", "@every 1s", command=("true",), starting_deadline_ms=900)


def _cluster(ns: str) -> ClusterConfig:
    # Heartbeats 4 s apart: the removal reaches d through a job's refusal, before its next one.
    return ClusterConfig(
        namespace=ns, size=AUTO, members=("a", "b", "c", "d"), heartbeat_ms=4_000, lease_ms=60_000
    )


def _metric(agent: Agent, name: str, labels: dict[str, str]) -> float:
    return agent.metrics.registry.get_sample_value(name, labels) or 0.0


def _abstained(agent: Agent, cause: str) -> float:
    return _metric(agent, "quorum_cron_abstentions_total", {"job": "tick", "cause": cause})


def _not_a_member(agent: Agent) -> list[str]:
    return [a.message for a in agent.alerts.sent if a.kind == AlertKind.NOT_A_MEMBER]


async def _remove_d_behind_its_back(store: RedisStore, agent: Agent) -> MembershipRecord:
    """Remove d right after one of its heartbeats, bring epoch 3 to the job by b's vote, and wait
    until the job refuses a vote of d; the record d is not a member of is returned."""
    seen: list[int] = []

    def beat() -> bool:
        seen.extend(m.seen_ms for m in store.members() if m.node == "d" and m.seen_ms not in seen)
        return len(seen) > 1

    await until("a second heartbeat of d", beat)
    assert store.change_membership(1, Configuration.of("abc"), "op", "remove d").ok
    done = store.finish_membership(2, "op", "now", force=True)
    assert done.ok and done.membership is not None
    record = done.membership.record
    now = store.time_ms()
    fire = now - now % 1_000
    store.vote(
        [VoteRequest("tick", fire, "b", JOB.spec_hash, 2, 250, 60_000, epoch=3, membership=record.encode())]
    )
    await until(
        "a vote of d refused",
        lambda: _metric(agent, "quorum_cron_votes_total", {"job": "tick", "status": "refused"}) >= 1,
    )
    return record


def test_a_removal_learned_from_a_refused_vote_raises_one_not_a_member_alert(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(redis_client, "once")
    store.init_membership(Configuration.of("abcd"), "a")
    agent = Agent(agent_settings(_cluster("once"), "d"), [agent_job(JOB)], store)

    async def scenario() -> None:
        record = await _remove_d_behind_its_back(store, agent)
        assert len(_not_a_member(agent)) == 1
        # The next heartbeat's reply brings the same record (its code path, called as it does).
        stored = store.membership()
        assert stored is not None and stored.record == record
        agent.health.membership_seen(stored)
        # And a heartbeat of d after the refusal goes under the record it is not a member of.
        await until(
            "a heartbeat of d under epoch 3",
            lambda: any(m.node == "d" and m.epoch == 3 for m in store.members()),
        )

    with caplog.at_level(logging.INFO, logger=EVENT_LOGGER):
        run_agent(agent, scenario)
    messages = _not_a_member(agent)
    assert len(messages) == 1, messages
    assert "d is not a member of epoch 3" in messages[0]
    assert len(events(caplog.records, "not_a_member")) == 1
    # Each kind still counted once: the vote refused, and not a member of the record held.
    for kind in ("vote", "not_member"):
        assert _metric(agent, "quorum_cron_membership_refusals_total", {"kind": kind}) == 1, kind


def test_the_record_held_said_it_first_then_the_refused_vote_in_flight_says_nothing_new() -> None:
    """The other order: a heartbeat's reply brings epoch 3, then a vote sent under epoch 2 comes
    back refused by it. One line and one alert still; the refusal is counted."""

    async def main() -> list[str]:  # (the alert hook delivers on a running loop)
        settings = agent_settings(_cluster("order"), "d")
        alerts = AlertHook("d")
        metrics = Metrics()
        reports = MemberReports(settings, metrics, alerts)
        reports.member(MembershipRecord(3, Configuration.of("abc")), True)
        reports.refused(
            Refused("tick", 5_000, 2, 3, "d votes with membership epoch 2, the job enforces epoch 3")
        )
        assert (
            metrics.registry.get_sample_value("quorum_cron_membership_refusals_total", {"kind": "vote"}) == 1
        )
        return [a.message for a in alerts.sent if a.kind == AlertKind.NOT_A_MEMBER]

    messages = asyncio.run(main())
    assert len(messages) == 1 and messages[0].startswith("node d (epoch 3) is not a member"), messages


def test_abstentions_after_a_refused_vote_are_the_membership_s_at_once(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The core took the job's record with the refusal; the health module (what labels an
    abstention, what the heartbeat says) takes it then too, not at the next heartbeat."""
    store = RedisStore(redis_client, "cause")
    store.init_membership(Configuration.of("abcd"), "a")
    agent = Agent(agent_settings(_cluster("cause"), "d"), [agent_job(JOB)], store)

    async def scenario() -> None:
        await _remove_d_behind_its_back(store, agent)
        record = agent.health.record
        assert record is not None and record.epoch == 3  # (not waiting for a heartbeat's reply)
        assert agent.health.is_refused_member() and agent.health.info()["voting"] == "no"
        await until(
            "an abstained slot", lambda: _abstained(agent, "membership") + _abstained(agent, "clock") >= 1
        )

    with caplog.at_level(logging.INFO, logger=EVENT_LOGGER):
        run_agent(agent, scenario)
    assert _abstained(agent, "clock") == 0 and _abstained(agent, "membership") >= 1
    assert events(caplog.records, "abstain") == []  # the not_a_member line says it, once
