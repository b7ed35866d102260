"""The ``summary`` line of a node the membership keeps from voting: its slots are counted, not 0.

A day-2 audit found a node out of the cluster logging ``abstained=0`` every
minute: its due slots went past the observer (the runtime only bumped a
metric, to keep a line per slot out of the log), and a vote the store
refused by membership was counted in no summary field at all. Now every
due slot a node does not vote for is ``abstained`` whatever the cause, and
every vote the store refused is ``vote_refused``.

The replies fed to the observer are real ones, from the memory model and a
real redis-server; the agents run in process on a real redis-server and the
tests wait on facts (metrics, alerts, heartbeats), never on time passing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.build import agent_job, agent_settings
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.observe import Observer
from quorum_cron.agent.runtime import Agent
from quorum_cron.config.settings import AUTO, ClusterConfig, JobSpec
from quorum_cron.core.actions import Abstain, Vote
from quorum_cron.core.model import Configuration, MembershipRecord, VoteRequest, VoteStatus
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore
from tests.agent_inproc import events, run_agent
from tests.polling import until

T0 = 1_800_000_000_000
ABC = MembershipRecord(1, Configuration.of(["a", "b", "c"]))
JOB = JobSpec.create("tick", "@every 1s", command=("true",), starting_deadline_ms=900)


@pytest.fixture
def stores(redis_client: redis.Redis) -> Iterator[list[Any]]:
    yield [RedisStore(redis_client, "sumref", clock=lambda: T0), MemoryStore(lambda: T0)]


def _summary(records: list[logging.LogRecord]) -> dict[str, Any]:
    [line] = events(records, "summary")
    fields: dict[str, Any] = line.qc_fields  # type: ignore[attr-defined]
    return {k: v for k, v in fields.items() if v and k != "interval_s"} | {"msg": line.getMessage()}


def test_a_vote_the_store_refused_is_counted_in_the_summary(
    stores: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    for store in stores:
        caplog.clear()
        observer = Observer("d", {}, Metrics(), AlertHook("d"))
        req = VoteRequest("tick", T0, "d", "h", 2, 250, 1_000, epoch=1, membership=ABC.encode())
        action = Vote((req,))
        reply = store.vote(action.requests)
        assert [r.status for r in reply] == [VoteStatus.REFUSED], reply
        observer.reply(action, reply)
        observer.summary(60.0)
        assert _summary(caplog.records) == {"vote_refused": 1, "msg": "last 60 s: 1 vote refused"}


def test_a_membership_abstention_is_counted_without_a_line_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    metrics = Metrics()
    observer = Observer("x", {}, metrics, AlertHook("x"))
    for i in range(3):
        observer.abstain(Abstain("tick", T0 + i * 1_000, "not a member of epoch 1"), "membership")
    assert events(caplog.records, "abstain") == []  # (said once per epoch by the health)
    sample = metrics.registry.get_sample_value(
        "quorum_cron_abstentions_total", {"job": "tick", "cause": "membership"}
    )
    assert sample == 3
    observer.summary(60.0)
    assert _summary(caplog.records) == {"abstained": 3, "msg": "last 60 s: 3 abstained"}


def _cluster(ns: str, members: tuple[str, ...], heartbeat_ms: int) -> ClusterConfig:
    return ClusterConfig(
        namespace=ns,
        size=AUTO,
        members=members,
        heartbeat_ms=heartbeat_ms,
        lease_ms=60_000,
        start_timeout_ms=500,
    )


def _abstained(agent: Agent, cause: str = "membership") -> float:
    value = agent.metrics.registry.get_sample_value(
        "quorum_cron_abstentions_total", {"job": "tick", "cause": cause}
    )
    return value or 0.0


def _all_abstained(agent: Agent) -> float:
    """Every abstention the metric counted, whatever its cause."""
    return sum(_abstained(agent, cause) for cause in ("clock", "store", "membership"))


def _summed(records: list[logging.LogRecord], key: str) -> int:
    """``key`` summed over every summary line (the last, at stop, and any whole minute before)."""
    return sum(int(r.qc_fields[key]) for r in events(records, "summary"))  # type: ignore[attr-defined]


def test_a_node_that_is_not_a_member_sums_its_abstentions(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(redis_client, "sumextra")
    store.init_membership(Configuration.of("abc"), "a")
    agent = Agent(agent_settings(_cluster("sumextra", ("a", "b", "c"), 100), "x"), [agent_job(JOB)], store)

    async def scenario() -> None:
        await until("three abstained slots", lambda: _abstained(agent) >= 3)

    with caplog.at_level(logging.INFO, logger=EVENT_LOGGER):
        run_agent(agent, scenario)
    assert _summed(caplog.records, "abstained") == _all_abstained(agent) == _abstained(agent) >= 3
    assert events(caplog.records, "abstain") == []  # one not_a_member line says it, not one per slot


def test_a_removed_node_that_had_not_heard_counts_its_refused_vote(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """d, removed while its heartbeats are 4 s apart, votes under epoch 1; the job already enforces
    epoch 3 (a member brought it): the store refuses the vote, d takes the record and abstains."""
    store = RedisStore(redis_client, "sumout")
    store.init_membership(Configuration.of("abcd"), "a")
    agent = Agent(
        agent_settings(_cluster("sumout", ("a", "b", "c", "d"), 4_000), "d"), [agent_job(JOB)], store
    )

    def votes_of_d() -> float:
        value = agent.metrics.registry.get_sample_value(
            "quorum_cron_votes_total", {"job": "tick", "status": "refused"}
        )
        return value or 0.0

    async def scenario() -> None:
        # (One heartbeat after the first: the change lands well before d's next one.)
        seen: list[int] = []

        def beat() -> bool:
            seen.extend(m.seen_ms for m in store.members() if m.node == "d" and m.seen_ms not in seen)
            return len(seen) > 1

        await until("a second heartbeat of d", beat)
        changed = store.change_membership(1, Configuration.of("abc"), "op", "remove d")
        assert changed.ok
        done = store.finish_membership(2, "op", "now", force=True)
        assert done.ok and done.membership is not None
        record = done.membership.record
        # b's vote brings the record only to an open slot: a vote on a decided one returns before
        # the job's record is looked at. The slot of the current whole second was sometimes already
        # ended missed by d's sweep (its deadline is 900 ms), and d then voted under epoch 1
        # unrefused until its next heartbeat told it. Half a second off d's slots, d never votes
        # or sweeps this one.
        now = store.time_ms()
        fire = now - (now - 500) % 1_000
        vote = VoteRequest(
            "tick", fire, "b", JOB.spec_hash, 2, 250, 60_000, epoch=3, membership=record.encode()
        )
        [brought] = store.vote([vote])
        assert brought.status is VoteStatus.RECORDED, brought
        await until("a vote of d refused", lambda: votes_of_d() >= 1)
        await until("an abstained slot", lambda: _abstained(agent) >= 1)

    with caplog.at_level(logging.INFO, logger=EVENT_LOGGER):
        run_agent(agent, scenario)
    assert _summed(caplog.records, "vote_refused") == votes_of_d() >= 1
    assert _summed(caplog.records, "abstained") == _all_abstained(agent) >= 1
    assert any(a.kind == AlertKind.NOT_A_MEMBER for a in agent.alerts.sent)
