"""What a node hears (quorum_cron/agent/intake.py) in-process: assignment notices and operator triggers.

The intake is wired to a real :class:`NodeCore` and a real
:class:`NodeHealth`; its background reads run as tasks the test awaits, so
every read has finished when a test looks. On the memory store (no
pub/sub: the catch-up reads are the only way triggers arrive, and a
notice is handed in as the listener would) and, for the subscription
itself, on a real redis-server: a trigger made with ``store.trigger`` is
heard and acted on, a bare ``PUBLISH`` of one is ignored.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Coroutine

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from quorum_cron.agent import intake as intake_module
from quorum_cron.agent.alerts import AlertHook
from quorum_cron.agent.health import NodeHealth
from quorum_cron.agent.intake import Intake
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.observe import Observer
from quorum_cron.agent.spec import AgentJob
from quorum_cron.agent.storeio import StoreWorker
from quorum_cron.agent.triggers import MAX_VERIFYING
from quorum_cron.clock.base import ManualClock
from quorum_cron.core.actions import Action, ReadSlots, Start, Vote
from quorum_cron.core.lifecycle import Phase
from quorum_cron.core.model import SlotState, SlotView, VoteResult, VoteStatus
from quorum_cron.core.node import NodeCore, Now
from quorum_cron.errors import StoreError
from quorum_cron.store import keys as store_keys
from quorum_cron.store.base import Notice, Store, Trigger
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.redis import RedisStore
from tests.agent_inproc import T0, OutageStore, Signal, agent_job, events, settings, until
from tests.core_driver import boot


class Node:
    """An :class:`Intake` for node n1 with jobs ``a`` and ``b``; what it dispatches is collected."""

    def __init__(
        self,
        store: Store,
        clock: ManualClock,
        listen: bool = False,
        jobs: list[AgentJob] | None = None,
    ) -> None:
        self.signal = Signal()
        self.clock = clock
        self.store = store
        cfg = settings("n1")
        self.jobs = {j.name: j for j in (jobs if jobs is not None else [agent_job("a"), agent_job("b")])}
        self.core = NodeCore(cfg.node, [j.core for j in self.jobs.values()])
        self.worker = StoreWorker(store, "n1")
        metrics, alerts = Metrics(), AlertHook("n1")
        self.health = NodeHealth(
            cfg,
            self.jobs,
            store,
            self.worker,
            clock=clock,
            metrics=metrics,
            alerts=alerts,
            observer=Observer("n1", self.jobs, metrics, alerts),
            set_trust=lambda trusted, reason: None,
            poke=lambda: None,
        )
        self.dispatched: list[Action] = []
        self.pokes = 0
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = False
        self.intake = Intake(
            cfg,
            self.jobs,
            store,
            self.worker,
            core=self.core,
            clock=clock,
            health=self.health,
            listen=listen,
            dispatch=self.dispatched.extend,
            now=lambda: Now(clock.wall_ms(), clock.monotonic_ms()),
            poke=self._poke,
            background=self._background,
            stopping=lambda: self.stopping,
        )

    def _poke(self) -> None:
        self.pokes += 1
        self.signal.set()

    def _background(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.ensure_future(coro)
        task.add_done_callback(self.signal.set)
        self.tasks.append(task)

    async def settle(self) -> None:
        """Wait until every background read started so far (and any it started) has ended."""
        while not all(t.done() for t in self.tasks):
            await asyncio.gather(*self.tasks)

    def close(self) -> None:
        self.health.trust.close()
        self.worker.shutdown()

    def due(self, job: str, fire_ms: int) -> bool:
        """The core took the slot in: it will vote for it."""
        return self.core.slot_phase(job, fire_ms) is Phase.DUE


@pytest.fixture(autouse=True)
def _events(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)


def _memory() -> tuple[OutageStore, ManualClock]:
    clock = ManualClock(wall_ms=T0, monotonic_ms=0)
    return OutageStore(clock), clock


# -- catch-up reads ------------------------------------------------------------------


def test_start_without_a_subscription_reads_the_audited_triggers_and_hands_them_to_the_core(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock = _memory()
    fire = store.trigger("a", "alice")
    clock.advance(500)  # inside the job's 1 s deadline

    async def main() -> None:
        node = Node(store, clock)
        await node.intake.start(asyncio.get_running_loop())
        await node.settle()
        assert node.due("a", fire) and not node.due("b", fire)
        assert node.pokes == 1
        node.intake.catch_up("again")  # a trigger is handed to the core once
        await node.settle()
        assert node.pokes == 1
        node.close()

    asyncio.run(main())
    [trigger] = events(caplog.records, "trigger")
    assert trigger.getMessage() == f"a@{fire} triggered by an operator (catch-up: start): voting for it"


def test_a_trigger_older_than_its_deadline_or_without_its_audit_entry_is_not_acted_on() -> None:
    clock = ManualClock(wall_ms=T0, monotonic_ms=0)
    store = OutageStore(clock)
    old = store.trigger("a", "alice")
    clock.advance(1_001)  # past job a's deadline
    unaudited = store.trigger("b", "bob")
    for i in range(store_keys.DEFAULT_AUDIT_MAXLEN):
        store.pause("b", "bob", f"{i}")
    assert store.triggers("b", T0) == [unaudited]

    async def main() -> None:
        node = Node(store, clock)
        node.intake.catch_up("test")
        await node.settle()
        assert not node.due("a", old) and not node.due("b", unaudited)
        assert node.pokes == 0
        node.close()

    asyncio.run(main())


def test_catch_ups_asked_for_during_a_read_are_coalesced_into_one_more_round() -> None:
    store, clock = _memory()

    async def main() -> None:
        node = Node(store, clock)
        store.signal = node.signal
        node.intake.catch_up("subscribed")
        node.intake.catch_up("subscribed")  # before the read began: the read will see it all
        store.gate.clear()
        await until(node.signal, lambda: store.count("triggers") == 1, "the first read on the wire")
        node.intake.catch_up("store back")
        node.intake.catch_up("subscribed")
        store.gate.set()
        await node.settle()
        assert len(node.tasks) == 1
        assert store.count("triggers") == 2 * len(node.jobs)  # the first round, and one more for both others
        node.close()

    asyncio.run(main())


def test_no_catch_up_while_stopping_or_without_jobs() -> None:
    store, clock = _memory()

    async def main() -> None:
        node = Node(store, clock)
        node.stopping = True
        node.intake.catch_up("store back")
        idle = Node(store, clock, jobs=[])
        idle.intake.catch_up("store back")
        assert node.tasks == [] and idle.tasks == []
        node.close()
        idle.close()

    asyncio.run(main())
    assert store.count("triggers") == 0


def test_a_catch_up_that_finds_the_store_down_marks_it_down_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock = _memory()
    store.down = "connection refused"

    async def main() -> None:
        node = Node(store, clock)
        node.intake.catch_up("subscribed")
        await node.settle()
        assert not node.health.store_up and node.health.down_reason == "connection refused"
        store.down = ""
        store.broken = StoreError("NOSCRIPT")
        node.intake.catch_up("store back")  # the previous read ended: this one runs
        await node.settle()
        assert len(node.tasks) == 2
        node.close()

    asyncio.run(main())
    messages = [r.getMessage() for r in events(caplog.records, "trigger")]
    assert messages == [
        "cannot read triggers (subscribed): connection refused",
        "cannot read triggers (store back): NOSCRIPT",
    ]


# -- notices ---------------------------------------------------------------------------


def test_an_assignment_notice_goes_to_the_core_which_starts_the_slot() -> None:
    store, clock = _memory()

    async def main() -> None:
        node = Node(store, clock)
        clock.advance(2_000)
        node.intake._on_notice(Notice("a", T0 + 2_000, 5))
        assert node.dispatched == [Start("a", T0 + 2_000, 5, 10_000)] and node.pokes == 1
        node.close()

    asyncio.run(main())


def test_a_trigger_notice_is_acted_on_only_once_verified_in_the_store(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock = _memory()
    real = store.trigger("a", "alice")

    async def main() -> None:
        node = Node(store, clock)
        node.intake._on_notice(Trigger("a", real + 1))  # published by someone, never stored
        node.intake._on_notice(Trigger("a", real))
        node.intake._on_notice(Trigger("a", real))  # being verified: not read twice
        node.intake._on_notice(Trigger("zzz", real))  # not our job: not even read
        await node.settle()
        assert node.due("a", real) and not node.due("a", real + 1)
        assert store.count("triggers") == 2
        node.intake._on_notice(Trigger("a", real))  # already handed to the core: no read
        assert len(node.tasks) == 2
        node.close()

    asyncio.run(main())
    messages = [r.getMessage() for r in events(caplog.records, "trigger")]
    assert f"a@{real + 1}: trigger notice without a stored, audited trigger: ignored" in messages
    assert f"a@{real} triggered by an operator (notice): voting for it" in messages


def test_a_flood_of_trigger_notices_is_checked_a_bounded_number_at_a_time() -> None:
    store, clock = _memory()

    async def main() -> None:
        node = Node(store, clock)
        for i in range(MAX_VERIFYING + 4):
            node.intake._on_notice(Trigger("a", T0 + i))
        assert len(node.tasks) == MAX_VERIFYING
        await node.settle()
        node.intake._on_notice(Trigger("a", T0 + 100))  # the checks ended: room again
        assert len(node.tasks) == MAX_VERIFYING + 1
        await node.settle()
        node.close()

    asyncio.run(main())


def test_a_trigger_that_cannot_be_checked_is_dropped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    store, clock = _memory()
    fire = store.trigger("a", "alice")
    store.down = "connection refused"

    async def main() -> None:
        node = Node(store, clock)
        node.intake._on_notice(Trigger("a", fire))
        await node.settle()
        assert not node.due("a", fire)
        store.down = ""
        node.intake.catch_up("store reachable again")  # the catch-up finds it
        await node.settle()
        assert node.due("a", fire)
        node.close()

    asyncio.run(main())
    assert f"cannot check trigger a@{fire}: connection refused" in [
        r.getMessage() for r in events(caplog.records, "trigger")
    ]


def test_triggers_handed_to_the_core_are_remembered_boundedly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake_module, "MAX_SEEN_TRIGGERS", 1)
    store, clock = _memory()

    async def main() -> None:
        node = Node(store, clock)
        node.intake._on_trigger("a", T0, "test")
        node.intake._on_trigger("a", T0 + 1, "test")  # forgets T0
        node.intake._on_trigger("a", T0, "test")
        assert node.pokes == 3
        node.intake._on_trigger("nope", T0, "test")
        assert node.pokes == 3
        node.close()

    asyncio.run(main())


# -- the subscription, on a real Redis -------------------------------------------------


def test_a_trigger_made_in_the_store_is_heard_and_a_bare_publish_is_not(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(wall_ms=T0, monotonic_ms=0)
    store = RedisStore(redis_client, "inproc", clock=clock.wall_ms)

    async def main() -> None:
        node = Node(store, clock, listen=True)
        await node.intake.start(asyncio.get_running_loop())
        try:
            await until(node.signal, lambda: len(node.tasks) == 1, "the catch-up on subscribing")
            await node.settle()
            fake = T0 + 10
            redis_client.publish(store_keys.trigger_channel("inproc"), f"a\n{fake}")
            await until(node.signal, lambda: len(node.tasks) == 2, "the fake notice being checked")
            await node.settle()
            assert not node.due("a", fake)
            fire = store.trigger("a", "alice")
            await until(node.signal, lambda: node.due("a", fire), "the trigger in the core")
        finally:
            await node.intake.stop()
            node.close()

    asyncio.run(main())
    messages = [r.getMessage() for r in events(caplog.records, "trigger")]
    assert f"a@{T0 + 10}: trigger notice without a stored, audited trigger: ignored" in messages
    assert f"a@{T0} triggered by an operator (notice): voting for it" in messages


def test_a_job_whose_trigger_keys_are_corrupt_does_not_hide_the_other_jobs_triggers(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The catch-up read goes job by job: one job's trigger set (or audit) of the wrong type
    failed the whole read, and every one after it, so no job's trigger made while the node was
    unsubscribed was acted on. Only that job's triggers are left out now, said once."""
    clock = ManualClock(wall_ms=T0, monotonic_ms=0)
    store = RedisStore(redis_client, "inproc", clock=clock.wall_ms)
    redis_client.set(store_keys.job_prefix("inproc", "a") + store_keys.TRIGGERS, "not a zset")
    fire = store.trigger("b", "bob")

    async def main() -> None:
        node = Node(store, clock)
        node.intake.catch_up("subscribed")
        await node.settle()
        assert node.due("b", fire)
        node.intake.catch_up("store back")
        await node.settle()
        node.close()

    asyncio.run(main())
    said = [r.getMessage() for r in events(caplog.records, "trigger") if "cannot read" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("cannot read the triggers of a: "), said
    assert "failed triggers: WRONGTYPE" in said[0]


def test_an_assignment_published_by_the_store_reaches_the_core(redis_client: redis.Redis) -> None:
    clock = ManualClock(wall_ms=T0, monotonic_ms=0)
    store = RedisStore(redis_client, "inproc", clock=clock.wall_ms)

    async def main() -> None:
        node = Node(store, clock, listen=True)
        await node.intake.start(asyncio.get_running_loop())
        try:
            # Subscribed to every channel: the listener asks for a catch-up then.
            await until(node.signal, lambda: len(node.tasks) == 1, "the catch-up on subscribing")
            redis_client.publish(store_keys.assign_channel("inproc", "n1"), f"a\n{T0}\n3")
            await until(node.signal, lambda: node.dispatched != [], "the assignment dispatched")
            assert node.dispatched == [Start("a", T0, 3, 10_000)]
        finally:
            await node.intake.stop()
            node.close()

    asyncio.run(main())


def test_a_subscription_that_cannot_be_made_does_not_hold_the_start(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(intake_module, "LISTENER_READY_S", 0.05)
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # No retries (the agent's client retries once, without backoff): the listener stops at once.
    nowhere = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    clock = ManualClock(wall_ms=T0, monotonic_ms=0)
    store = RedisStore(nowhere, "inproc", clock=clock.wall_ms)

    async def main() -> None:
        node = Node(store, clock, listen=True)
        await asyncio.wait_for(node.intake.start(asyncio.get_running_loop()), 10)
        await node.intake.stop()
        assert node.tasks == []  # never subscribed: no catch-up was asked for by the listener
        node.close()

    asyncio.run(main())
    nowhere.close()
    assert [r.getMessage() for r in events(caplog.records, "notices")] == [
        "notice channels not subscribed yet: polling meanwhile"
    ]


def test_a_subscription_that_comes_back_makes_the_core_poll_the_slots_it_awaits(
    redis_client: redis.Redis,
) -> None:
    """Notices published while the pub/sub connection was down are lost: once the store confirms
    the subscription again, the core reads every slot it awaits at once (issue 27: between
    subscriptions it polls such a slot only as a backstop, before the start timeout)."""
    # The agent's own client settings (one retry): redis-py then reconnects the dropped pub/sub
    # connection and subscribes again by itself, unseen unless the listener counts that round.
    where = redis_client.connection_pool.connection_kwargs
    client = redis.Redis(host=where["host"], port=where["port"], **fail_fast())
    clock = ManualClock(wall_ms=T0, monotonic_ms=0)
    store = RedisStore(client, "inproc", clock=clock.wall_ms)

    async def main() -> None:
        node = Node(store, clock, listen=True, jobs=[agent_job("a", deadline_ms=30_000)])
        core = node.core
        core.set_trust(True)
        await node.intake.start(asyncio.get_running_loop())
        try:
            await until(node.signal, lambda: len(node.tasks) == 1, "the catch-up on subscribing")
            now = Now(clock.wall_ms(), clock.monotonic_ms())
            (vote,) = [a for a in boot(core, now) if isinstance(a, Vote)]
            fires = [r.fire_ms for r in vote.requests]  # (the slots still inside the deadline)
            replies = [
                VoteResult(VoteStatus.RECORDED, SlotView("a", t, SlotState.PROPOSED), now.wall_ms)
                for t in fires
            ]
            assert core.on_reply(vote, replies, now) == []
            assert {core.slot_phase("a", t) for t in fires} == {Phase.AWAITING}
            assert not [a for a in core.tick(now) if isinstance(a, ReadSlots)]
            pokes = node.pokes
            assert redis_client.client_kill_filter(_type="pubsub") >= 1
            await until(node.signal, lambda: len(node.tasks) == 2, "the catch-up on subscribing again")
            assert node.pokes > pokes
            reads = [slot for a in core.tick(now) if isinstance(a, ReadSlots) for slot in a.slots]
            assert sorted(reads) == [("a", t) for t in sorted(fires)]
        finally:
            await node.intake.stop()
            node.close()

    asyncio.run(main())
    client.close()
