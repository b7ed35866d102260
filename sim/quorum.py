"""The ``quorum`` strategy: the real :class:`~quorum_cron.core.node.NodeCore` on the memory store.

Each node process is a ``NodeCore`` fed virtual time from its host's clocks;
its store actions travel over the simulated link and execute on the store
host's :class:`~quorum_cron.store.memory.MemoryStore` (whose clock is the
store host's clock). When a call commits a slot to another node, the store
host publishes an assignment notice to it, as the Redis agent's pub/sub
channel does. The ``store_factory`` hook lets ``sim.mutants`` swap in a
deliberately broken store.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from quorum_cron.config.schedule import Schedule
from quorum_cron.core.actions import handlers
from quorum_cron.core.model import (
    Configuration,
    MembershipRecord,
    SlotState,
    SlotView,
    TransitionResult,
    VoteResult,
    VoteStatus,
)
from quorum_cron.core.node import (
    Abstain,
    Action,
    CoreJob,
    Failure,
    Finish,
    Kill,
    NodeCore,
    NodeSettings,
    Now,
    ReadHighWater,
    ReadSlots,
    RecordMissed,
    Refused,
    Renew,
    Run,
    RunLocal,
    Start,
    Sweep,
    Vote,
)
from quorum_cron.core.perform import perform
from quorum_cron.core.timers import NEVER, InputBounds, input_bounds
from quorum_cron.store.memory import MemoryStore
from sim.scenario import JobDef
from sim.world import SimNode, World

STORE_DOWN = "a store call got no answer"
"""Why the store is down when a call fails in the simulator (the core's own words for it)."""

WHOLE_LEDGER = 1 << 40
"""The simulated store's ledger length per job: all of it. The checker reads the final ledger
(``finish_trace``) for every slot's end; the default of 10,000 entries per job, an operator's
retention choice, trimmed the first slots of a long run with a frequent job (a 2-second job
passes it in under six hours) and made them look unaccounted for."""

__all__ = ["QuorumProcess", "QuorumStrategy", "base_spec_hash", "make_schedule"]


def make_schedule(job: JobDef) -> Schedule:
    """The job's schedule, through quorum_cron.config.schedule like the agent's."""
    return _parsed(job.cron, job.timezone, job.every_ms, job.name)


@functools.lru_cache(maxsize=4096)
def _parsed(cron: str, timezone: str, every_ms: int, name: str) -> Schedule:
    """One parse per schedule and process, not one per run and caller.

    Why: every run parsed each job's schedule twice (its nodes' jobs and
    the checker's due slots), about 50 µs each: 2 % of the speed
    benchmark's run, more of a short explored seed. A schedule is a pure
    value (its answers depend only on its text), so sharing one between
    runs changes no answer; the explorer and the benchmark run many seeds
    of the same jobs in one process.
    """
    if cron:
        return Schedule.parse(cron, timezone, job=name)
    return Schedule.parse(f"@every {every_ms}ms", job=name)


class MemoSchedule:
    """A schedule that remembers ``next_after`` answers as intervals (schedules are pure).

    ``next_after(a) = t`` means no fire time lies in ``(a, t)``, so every
    ``ms`` in ``[a, t)`` has the same answer. The core asks
    ``next_after(cursor)`` for every job on every wake-up, with a cursor
    that creeps forward; for cron expressions each fresh answer costs a
    croniter walk.
    """

    __slots__ = ("_spans", "schedule")

    MAX_SPANS = 16

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self._spans: list[tuple[int, int]] = []

    def next_after(self, ms: int) -> int:
        for a, t in self._spans:
            if a <= ms < t:
                return t
        t = self.schedule.next_after(ms)
        self._spans.insert(0, (ms, t))
        del self._spans[self.MAX_SPANS :]
        return t

    def fire_times(self, start_ms: int, end_ms: int) -> Iterator[int]:
        """Fire times in ``(start_ms, end_ms]``, by repeated (remembered) ``next_after``."""
        t = self.next_after(start_ms)
        while t <= end_ms:
            yield t
            t = self.next_after(t)


def base_spec_hash(job: JobDef) -> str:
    """A stand-in for ``JobSpec.spec_hash``: the same definition gives the same hash."""
    text = (
        f"{job.name}|{job.every_ms}|{job.cron}|{job.timezone}|{job.timeout_ms}|{job.delivery}|{job.overlap}"
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


StoreFactory = Callable[[World], MemoryStore]

_CAUSES = (
    ("refused by membership", "slot missed: votes refused by membership"),
    ("is not a member of", "slot missed: a non-member abstained"),
    ("store refused the vote", "slot missed: the store refused writes"),
    ("store unreachable", "slot missed: the store was unreachable"),
    ("abstained", "slot missed: clock untrusted"),
)


def _job_record(world: World, job: str) -> dict[str, str]:
    """``{"mr": text}``: the record the store's job enforces, in scenarios that simulate
    membership (sim/faults.py); nothing otherwise, so other traces stay as they were."""
    if not world.uses_membership:
        return {}
    state = world.store.state._jobs.get(job)
    record = state.record if state is not None else None
    return {"mr": record.encode() if record is not None else ""}


def _missed_cause(action: RecordMissed, reason: str) -> str:
    """What a missed record the core wrote says about why (the explorer's "reached" list)."""
    if action.ran_locally:
        return "local run recorded as its slot's missed entry"
    for needle, what in _CAUSES:
        if needle in reason:
            return what
    return "slot accounted for by catch-up after an outage"


class QuorumStrategy:
    """Nodes running the protocol core against the memory model of the Redis scripts."""

    name = "quorum"

    def __init__(
        self,
        store_factory: StoreFactory | None = None,
        quorum: int | None = None,
        exact_wakeups: bool = False,
    ) -> None:
        self._store_factory = store_factory
        self._quorum = quorum
        self._schedules: dict[str, MemoSchedule] = {}
        self._spec_hashes: dict[str, str] = {}
        """Each job's ``base_spec_hash`` (every node boots with every job)."""
        self.exact_wakeups = exact_wakeups
        """Ask the core for its next wakeup after every input (slow; tests compare both modes)."""
        self._executed = handlers(type(self), "_exec_")
        """Store action type → its ``_exec_*`` handler (the call, then its trace)."""

    def make_stores(self, world: World) -> MemoryStore:
        if self._store_factory is not None:
            store = self._store_factory(world)
        else:
            store_clock = world.store.clock
            loop = world.loop
            store = MemoryStore(lambda: store_clock.wall(loop.now), ledger_maxlen=WHOLE_LEDGER)
        first = self.first_record(world)
        if first is not None:
            store.init_membership(first.current, "sim")
        return store

    def first_record(self, world: World) -> MembershipRecord | None:
        """The membership record the cluster starts with: every scenario node, the scenario's quorum
        (epoch 1, as an agent creates it from its config). None — legacy epoch-0 votes and the
        store's highest-quorum floor — when the quorum is below a majority (a strategy override)."""
        n = world.scenario.nodes
        quorum = self._quorum or world.scenario.quorum
        if not n // 2 + 1 <= quorum <= n:
            return None
        if world.scenario.members:  # (a subset: the majority of it; sim/faults.py changes it)
            return MembershipRecord(1, Configuration.of(world.scenario.members))
        return MembershipRecord(1, Configuration.of(world.scenario.node_ids, n, quorum))

    def record_for(self, world: World) -> MembershipRecord | None:
        """What a node holds when its process starts: the store's record, as the agent reads it
        at start (the first record when the store has none, or under a legacy quorum)."""
        first = self.first_record(world)
        if first is None:
            return None
        held = world.store.state.membership() if world.store.state is not None else None
        return held.record if held is not None else first

    def core_jobs(self, world: World, node: SimNode) -> list[CoreJob]:
        jobs = []
        for job in world.scenario.jobs:
            if job.name in node.removed:
                continue
            if job.name not in self._schedules:
                self._schedules[job.name] = MemoSchedule(make_schedule(job))
            spec = self._spec_hashes.get(job.name)
            if spec is None:
                spec = self._spec_hashes[job.name] = base_spec_hash(job)
            if job.name in node.specs:
                spec = hashlib.sha256(f"{spec}|{node.specs[job.name]}".encode()).hexdigest()[:12]
            jobs.append(
                CoreJob(
                    name=job.name,
                    schedule=self._schedules[job.name],
                    spec_hash=spec,
                    deadline_ms=job.deadline_ms,
                    timeout_ms=job.timeout_ms,
                    overlap=job.overlap,
                    delivery=job.delivery,
                    misfire=job.misfire,
                    retries=job.retries,
                    retry_backoff_ms=job.retry_backoff_ms,
                    run_local=job.on_store_unavailable == "run-local",
                )
            )
        return jobs

    def make_process(self, world: World, node: SimNode) -> QuorumProcess:
        s = world.scenario.settings
        settings = NodeSettings(
            node_id=node.id,
            quorum=self._quorum or world.scenario.quorum,
            max_skew_ms=s.max_skew_ms,
            lease_ms=s.lease_ms,
            start_timeout_ms=s.start_timeout_ms,
            retry_ms=s.retry_ms,
            sweep_ms=s.sweep_ms,
            assign_poll_ms=s.assign_poll_ms,
            vote_lead_ms=s.vote_lead_ms,
            incarnation=str(node.incarnation),
        )
        jobs = self.core_jobs(world, node)
        bounds = input_bounds(settings, run_local=any(j.run_local for j in jobs))
        record = self.record_for(world)
        core = NodeCore(settings, jobs, record, report_illegal_step=_IllegalStep(world, node))
        process = QuorumProcess(world, node, core, bounds, self.exact_wakeups)
        process.record = record
        process.notices = s.notices
        return process

    @staticmethod
    def mutates(payload: Any) -> bool:
        return not isinstance(payload, (ReadSlots, ReadHighWater))

    @staticmethod
    def waits(payload: Any) -> bool:
        """The calls ``RedisStore`` follows with ``WAIT`` when ``wait_replicas`` is set.

        Not a sweep: what a node does on a sweep's reply (a start, a renew)
        waits itself, and replication is ordered, so the sweep's writes are
        replicated by the time that call is acknowledged.
        """
        return isinstance(payload, (Vote, Start, Renew, Finish, RecordMissed))

    @staticmethod
    def reply_commits(node: SimNode, reply: Any) -> bool:
        return isinstance(reply, list) and any(
            isinstance(r, VoteResult) and r.status == VoteStatus.COMMITTED for r in reply
        )

    # -- the store side --------------------------------------------------------

    def execute(self, world: World, node: SimNode, action: Any) -> Any:
        """Carry out ``action`` on the store host with :func:`~quorum_cron.core.perform.perform` (the
        agent's mapping), then trace what it did and deliver assignment notices (its ``_exec_*``
        handler: one per store action type, :func:`quorum_cron.core.actions.handlers`)."""
        world.store.caller = node
        handler = self._executed.get(type(action))
        if handler is None:
            raise TypeError(f"not a store action: {action!r}")
        return handler(self, world, node, world.store.state, action)

    # -- one handler per store action type: the call, then its trace -------------

    def _exec_vote(self, world: World, node: SimNode, store: MemoryStore, action: Vote) -> Any:
        results: list[VoteResult] = perform(store, node.id, action)  # type: ignore[assignment]
        t = world.loop.now
        world.trace.emit(
            t,
            "vote",
            node=node.id,
            st=world.store.clock.wall(t),
            slots=[
                # (``_value_``: the plain value, without the ``value`` property's call per slot)
                [r.job, r.fire_ms, vr.status._value_, r.deadline_ms, r.spec_hash]
                for r, vr in zip(action.requests, results, strict=True)
            ],
        )
        for vr in results:
            if vr.status == VoteStatus.COMMITTED:
                self._decided(world, node, vr.slot, "vote")
            elif vr.status == VoteStatus.EARLY:
                world.reached("vote refused as early by store time", node=node.id)
        return results

    def _exec_sweep(self, world: World, node: SimNode, store: MemoryStore, action: Sweep) -> Any:
        reply = perform(store, node.id, action)
        for view in reply.changed:  # type: ignore[attr-defined]
            self._decided(world, node, view, "takeover")
        return reply

    def _exec_start(self, world: World, node: SimNode, store: MemoryStore, action: Start) -> Any:
        res: TransitionResult = perform(store, node.id, action)  # type: ignore[assignment]
        _trace_start(world, node, action.job, action.fire_ms, action.token, res.slot, res.now_ms, res.reason)
        if not res.ok and res.slot.token > action.token:
            world.reached("stale executor refused by the fenced start", node=node.id)
        if res.ok:
            world.on_started(node)
        return res

    def _exec_renew(self, world: World, node: SimNode, store: MemoryStore, action: Renew) -> Any:
        res: TransitionResult = perform(store, node.id, action)  # type: ignore[assignment]
        if res.ok:
            # The checker's evidence of the lease the store now holds (store time).
            world.trace.emit(
                world.loop.now,
                "renew",
                node=node.id,
                job=action.job,
                fire=action.fire_ms,
                token=action.token,
                ok=True,
                st=res.now_ms,
                lease=res.slot.lease_until_ms,
            )
        else:
            self._transition(world, node, "renew", action.job, action.fire_ms, action.token, res)
        return res

    def _exec_finish(self, world: World, node: SimNode, store: MemoryStore, action: Finish) -> Any:
        res: TransitionResult = perform(store, node.id, action)  # type: ignore[assignment]
        self._transition(world, node, "finish", action.job, action.fire_ms, action.token, res)
        if res.ok and res.slot.state == SlotState.COMMITTED:
            world.reached("failed run retried under a new token", job=action.job)
            self._decided(world, node, res.slot, "retry")
        return res

    def _exec_record_missed(
        self, world: World, node: SimNode, store: MemoryStore, action: RecordMissed
    ) -> Any:
        before = store.slot(action.job, action.fire_ms).state
        missed: SlotView = perform(store, node.id, action)  # type: ignore[assignment]
        if missed.state != before:
            world.reached(_missed_cause(action, missed.reason))
            self._decided(world, node, missed, "catch-up")
        return missed

    def _exec_read_slots(self, world: World, node: SimNode, store: MemoryStore, action: ReadSlots) -> Any:
        return perform(store, node.id, action)

    def _exec_read_high_water(
        self, world: World, node: SimNode, store: MemoryStore, action: ReadHighWater
    ) -> Any:
        # (When the store answered: a boot's catch-up starts at the marks of that moment, so the
        # checker judges "a later slot was decided first" against it, not the boot: seed 98304.)
        world.trace.emit(world.loop.now, "high_water", node=node.id)
        return perform(store, node.id, action)

    @staticmethod
    def _transition(
        world: World, node: SimNode, ev: str, job: str, fire_ms: int, token: int, res: TransitionResult
    ) -> None:
        world.trace.emit(
            world.loop.now, ev, node=node.id, job=job, fire=fire_ms, token=token, ok=res.ok, why=res.reason
        )

    @staticmethod
    def _decided(world: World, caller: SimNode, view: SlotView, by: str) -> None:
        t = world.loop.now
        started = view.state == SlotState.RUNNING  # (a start folded into the commit: vote only)
        if view.state != SlotState.COMMITTED and not started:
            world.trace.emit(
                t,
                "decided",
                job=view.job,
                fire=view.fire_ms,
                state=view.state.value,
                why=view.reason,
                by=by,
                **(_job_record(world, view.job) | {"ep": view.epoch} if world.uses_membership else {}),
            )
            return
        world.trace.emit(
            t,
            "commit",
            job=view.job,
            fire=view.fire_ms,
            token=view.token,
            executor=view.executor,
            votes=[list(v) for v in view.votes],
            spec=view.spec_hash,
            st=world.store.clock.wall(t),
            by=by,
            # The record the job enforced at the commit (the checker's membership rule), and the
            # one the slot names as deciding it (DECIDING_EPOCH).
            **_job_record(world, view.job),
            **({"ep": view.epoch} if world.uses_membership else {}),
            # A start folded into the commit (the checker: never before the fire time, by st).
            **({"folded": True} if started else {}),
        )
        executor = world.nodes.get(view.executor)
        if executor is None:
            return
        if by == "takeover":
            world.reached("slot taken over by another executor", job=view.job)
        if started:
            # The committing voter's start, in the same step: traced as its start call's would be.
            _trace_start(world, caller, view.job, view.fire_ms, view.token, view, world.store.clock.wall(t))
            world.on_started(executor)
            return
        world.on_commit(executor)
        if executor is not caller:
            world.notify(executor, view)

    def finish_trace(self, world: World) -> None:
        """Append the store's ledger (the final word on every slot) to the trace."""
        store: MemoryStore = world.store.state
        for job in world.scenario.jobs:
            for e in reversed(store.ledger(job.name, WHOLE_LEDGER)):
                world.trace.emit(
                    world.end_ms,
                    "ledger",
                    job=e.job,
                    fire=e.fire_ms,
                    state=e.state.value,
                    why=e.reason,
                    executor=e.executor,
                    token=e.token,
                    voters=list(e.voters),
                    **({"epoch": e.epoch} if world.uses_membership else {}),
                )


SPIN_FLOOR_MS = 50
"""Wake-up delay used when the core asks for 0 ms right after a tick (a busy loop)."""


class QuorumProcess:
    """One node: a ``NodeCore`` whose actions the world carries out."""

    __slots__ = (
        "_wake_clock",
        "_wake_gen",
        "_wake_target",
        "bounds",
        "core",
        "exact",
        "node",
        "notices",
        "record",
        "spinning",
        "store_up",
        "world",
    )

    def __init__(
        self, world: World, node: SimNode, core: NodeCore, bounds: InputBounds, exact: bool = False
    ) -> None:
        self.world = world
        self.node = node
        self.core = core
        self.bounds = bounds
        """How soon a timer added by an input can fall due (:func:`quorum_cron.core.timers.input_bounds`)."""
        self.exact = exact
        """Ask the core for its next wakeup after every input (tests compare both modes)."""
        self.spinning = False
        self.store_up = True
        """The agent's ``NodeHealth.store_up``: False from a call that got no answer to the next
        reply. Apart from the core's own reachability, which a refusal (an answer) sets back."""
        self.record: MembershipRecord | None = None
        """The membership record the node booted with (set by the strategy)."""
        self.notices = True
        """Whether the node subscribes to its notices (the scenario's ``notices``)."""
        self._wake_gen = -1
        """``node.wake_gen`` of the wake this process last scheduled ..."""
        self._wake_target = 0
        """... and the monotonic reading it is for ..."""
        self._wake_clock: tuple[int, int] = (0, 0)
        """... and the clock's (since, ppm) then: its monotonic → true time mapping."""

    def _scheduled_wake(self) -> int | None:
        """The monotonic reading the node's pending wake is for, if this process scheduled it."""
        node = self.node
        if (
            node.wake_gen == self._wake_gen
            and node.wake_at is not None
            and (node.clock.since, node.clock.ppm) == self._wake_clock
        ):
            return self._wake_target
        return None

    def _wake_in(self, wait: int, now: Now) -> None:
        """``world.wake_in`` unless the pending wake is sure to come no later.

        The true time of a monotonic reading only grows with the reading, so
        a wake for a later reading than the pending one would not be
        scheduled anyway; skipping saves converting it to true time.
        """
        target = now.mono_ms + wait
        scheduled = self._scheduled_wake()
        if scheduled is not None and target >= scheduled:
            return
        node = self.node
        gen = node.wake_gen
        self.world.wake_in(node, wait)
        if node.wake_gen != gen:
            self._wake_gen = node.wake_gen
            self._wake_target = target
            self._wake_clock = (node.clock.since, node.clock.ppm)

    def _now(self) -> Now:
        t = self.world.loop.now
        clock = self.node.clock
        return Now(clock.wall(t), clock.mono(t))

    def _apply(self, actions: Sequence[Action], now: Now, bound: int | None) -> None:
        """Carry out the actions; then make sure the node wakes when the core next needs it.

        ``bound``: no timer the input added falls due sooner than this (mono
        ms), so a wake-up already scheduled that soon makes asking the core
        unnecessary; ``None``: do not reschedule (the caller does).
        """
        world, node = self.world, self.node
        for a in actions:
            kind = type(a)
            if kind is Run:
                assert isinstance(a, Run)
                world.start_run(node, a.job, a.fire_ms, a.token, a.timeout_ms)
            elif kind is Kill:
                assert isinstance(a, Kill)
                world.kill_run(node, a.job, a.fire_ms, a.token, a.reason)
            elif kind is RunLocal:
                assert isinstance(a, RunLocal)
                world.start_local_run(node, a.job, a.fire_ms, a.timeout_ms)
            elif kind is Abstain:
                assert isinstance(a, Abstain)
                world.trace.emit(
                    world.loop.now, "abstain", node=node.id, job=a.job, fire=a.fire_ms, why=a.reason
                )
            elif kind is Refused:
                assert isinstance(a, Refused)
                world.trace.emit(
                    world.loop.now, "refused", node=node.id, job=a.job, fire=a.fire_ms,
                    epoch=a.epoch, store_epoch=a.store_epoch, why=a.reason,
                )  # fmt: skip
                world.reached("vote refused by membership", node=node.id)
            else:
                if kind is Vote and not node.trusted:
                    # The world's own trust verdict, not the core's: the checker's evidence.
                    world.trace.emit(world.loop.now, "untrusted_vote", node=node.id, why=node.trust_why)
                world.send(node, a)
        if bound is None or node.paused or not node.up:
            return
        if not self.exact and node.wake_at is not None:
            if bound >= NEVER:
                return
            scheduled = self._scheduled_wake()
            if scheduled is not None:
                if scheduled <= now.mono_ms + bound:
                    return
            elif node.wake_at <= node.clock.true_after(bound, world.loop.now):
                return
        wait = self.core.next_wakeup(now)
        self._wake_in(SPIN_FLOOR_MS if wait == 0 and self.spinning else wait, now)

    def boot(self) -> None:
        if self.record is not None:
            self.core.set_membership(self.record)  # (a strategy may have replaced the core since)
        if self.notices:
            self.core.notices_subscribed()  # (the agent subscribes before its first vote)
        self.wake()

    def subscribed(self) -> None:
        """Notices are subscribed again after one was lost: the core polls its awaiting slots."""
        if not self.notices:
            return
        self.core.notices_subscribed()
        if not self.node.paused and self.node.up:
            self.world.wake_in(self.node, 0)

    def set_membership(self, record: MembershipRecord) -> None:
        """The node learns a membership record (a heartbeat's reply in the agent): a change wakes it."""
        if self.core.set_membership(record) and not self.node.paused and self.node.up:
            self.world.wake_in(self.node, 0)

    def reload(self) -> None:
        """The config changed (the agent's SIGHUP, ``Agent.replace_jobs``): the job set is swapped
        live. The swap emits no action; the tick it is followed by votes what became due."""
        world, node = self.world, self.node
        strategy = world.strategy
        assert isinstance(strategy, QuorumStrategy)
        changes = self.core.replace_jobs(strategy.core_jobs(world, node), self._now())
        world.trace.emit(
            world.loop.now, "reload", node=node.id, specs=dict(node.specs), removed=sorted(node.removed),
            changed=list(changes.changed), gone=list(changes.removed),
        )  # fmt: skip
        if changes.removed:
            world.reached("job removed by a reload", node=node.id)
        node.wake_at = None
        self.wake()

    def wake(self) -> None:
        now = self._now()
        world, node = self.world, self.node
        actions = self.core.tick(now)
        self._apply(actions, now, None)
        if node.paused or not node.up:
            return
        wait = self.core.next_wakeup(now)
        if wait == 0:
            # The tick just did everything due, yet the core asks to be woken
            # at once: a real agent would spin. Trace it (the checker reports
            # it) and wake a little later so simulated time moves on.
            if not self.spinning:
                self.spinning = True
                world.trace.emit(world.loop.now, "spin", node=node.id)
            wait = SPIN_FLOOR_MS
        else:
            self.spinning = False
        self._wake_in(wait, now)

    def reply(self, payload: Any, reply: Any) -> None:
        now = self._now()
        core = self.core
        # A reply that ends an outage releases the retries held back meanwhile (and gives the
        # node its trust back): due at once.
        bound = self.bounds.reply[type(payload)] if core.store_reachable and self.store_up else 0
        if not self.store_up:
            self._store_back()
        self._apply(core.on_reply(payload, reply, now), now, bound)

    def failure(self, payload: Any, refused: str = "") -> None:
        now = self._now()
        if refused:
            actions = self.core.on_failure(payload, now, Failure.REFUSED, refused)
        else:
            self._store_down()
            actions = self.core.on_failure(payload, now)
        self._apply(actions, now, self.bounds.failure[type(payload)])

    def _store_down(self) -> None:
        """A call got no answer: the agent's ``NodeHealth.store_down``, before the core hears it.

        The agent marks the store down and withdraws its trust (the node
        abstains until the store answers again) before it hands the failure
        to the core (``Runtime._on_store_done``), and wakes its loop; so does
        this, so that the simulator drives the core through the agent's
        order of events. Slots that come due meanwhile are abstained on, and
        voted once trust is back if their deadline has not passed (recorded
        ``missed`` if it has); votes in flight that then fail are held for
        the store to answer, as before.
        """
        if not self.store_up:
            return
        self.store_up = False
        core, node = self.core, self.node
        core.set_store_reachable(False, STORE_DOWN)
        changed = core.trusted
        core.set_trust(False, f"store unreachable ({STORE_DOWN})")
        if changed and not node.paused and node.up:
            self.world.wake_in(node, 0)

    def _store_back(self) -> None:
        """The store answered again: the agent's ``NodeHealth.store_ok``, in its order (trust back to
        the clock guard's verdict, then the store reachable; the agent's ``catch_up`` reads operator
        triggers, which the simulator does not model)."""
        self.store_up = True
        node, core = self.node, self.core
        core.set_trust(node.trusted, node.trust_why)
        core.set_store_reachable(True)

    def notice(self, payload: Any) -> None:
        view: SlotView = payload
        now = self._now()
        self._apply(self.core.on_assigned(view.job, view.fire_ms, view.token, now), now, self.bounds.notice)

    def run_finished(self, job: str, fire_ms: int, token: int, ok: bool, detail: str) -> None:
        now = self._now()
        actions = self.core.on_run_finished(job, fire_ms, token, ok, detail, now)
        self._apply(actions, now, self.bounds.run_finished)

    def set_trust(self, trusted: bool, why: str) -> None:
        """The guard's verdict (every check): a change wakes the node at once.

        An unchanged verdict wakes nothing: the agent's loop reads the verdict
        each time it wakes (``NodeHealth.update_trust``), and is not woken by
        a check (a wake per check was 600 of a 10-minute run's 2,000 ticks).
        """
        core = self.core
        if not self.store_up:
            return  # (untrusted while the store is down; the clock's verdict applies once it is back)
        changed = trusted != core.trusted
        core.set_trust(trusted, why)
        if changed and not self.node.paused:
            self.world.wake_in(self.node, 0)


class _IllegalStep:
    """Traces a phase step the lifecycle table lacks (the checker's ``ILLEGAL_STEP``): the core
    takes it, as the agent's does once it has logged it, and the run goes on."""

    __slots__ = ("node", "world")

    def __init__(self, world: World, node: SimNode) -> None:
        self.world = world
        self.node = node

    def __call__(self, why: str) -> None:
        world = self.world
        world.trace.emit(world.loop.now, "illegal_step", node=self.node.id, why=why)

    def __deepcopy__(self, memo: dict[int, object]) -> _IllegalStep:
        """Itself: where a core reports is not the core's state, and a copy of a core (the tests
        compare one against a full scan) would otherwise copy the whole world with it. A copy
        that took an illegal step reports it into the same trace, under the same node: the
        original takes the same step in the same input, so the run fails either way."""
        return self


def _trace_start(
    world: World, node: SimNode, job: str, fire_ms: int, token: int, slot: SlotView, st: int, why: str = ""
) -> None:
    """The ``start`` record of a start the store handled (accepted unless ``why``): a fenced call's,
    or one folded into the commit of the node's vote."""
    world.trace.emit(
        world.loop.now,
        "start",
        node=node.id,
        job=job,
        fire=fire_ms,
        token=token,
        ok=not why,
        why=why,
        st=st,
        lease=slot.lease_until_ms,
    )
