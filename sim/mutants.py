"""Deliberately broken protocol variants, to prove the checker catches what matters.

Each mutant breaks one rule the design depends on; ``tests/test_sim_mutants.py``
asserts that the checker flags each within a bounded number of seeds of a
named scenario. They are test fixtures, never something to run in production.

=====================  =======================================================
mutant                 what is broken
=====================  =======================================================
``quorum-n-over-2``    every node is configured with quorum ``N // 2``
``no-spec-hash``       the store counts votes whatever their spec hash
``node-clock-window``  the store judges the vote window by the voter's clock
``unfenced-start``     the store starts a committed slot for any node/token
``non-atomic-commit``  quorum is checked in one step, the commit made in a
                       later one (a read-then-write race between voters)
``untrusted-votes``    the core votes although its clock is not trusted
``retry-no-backoff``   the store lets a retry start at once, ignoring backoff
``same-executor``      a retry or takeover goes to the executor it had
``lease-from-reply``   the core counts a renewed lease from the renew's reply,
                       not from when it was sent, and kills no run on a
                       timer at its lease end
``never-record-missed`` the core never sends a missed record
``no-catch-up``        a booting core does not account for the slots due
                       since the job's high-water mark
``skip-wrongly``       the store skips every third slot it should commit
``succeeded-early``    the node reports a run succeeded as it starts it
``forget-retry``       the store logs a retry, then forgets the slot
``joint-new-only``     while the job's membership record is joint, the store
                       commits a slot with a majority of the new set alone
``reload-unswept``     a reload that removes a job stops the node's sweep
                       from ending its open slots
``overlap-ignored``    the store commits a slot of an overlap-forbid job
                       while another of its slots runs
``unkilled-at-lease``  the core lets an at-most-once run go on past its
                       lease whatever the job's overlap policy
=====================  =======================================================

The last five break accounting and liveness, not safety: the checker catches
them by the ledger (against what ran), the due-slot and the liveness rules.

``CHECKER_MUTANTS`` break the checker itself (:func:`checker_mutant` plants one
for the length of a ``with`` block): a test that still passes with one planted
checks less than it claims.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import sim.checker
from quorum_cron.core.actions import Action, CoreJob, Now, RecordMissed, Renew, Run
from quorum_cron.core.jobswap import JobChanges
from quorum_cron.core.model import (
    DECIDED_STATES,
    Delivery,
    MembershipRecord,
    Overlap,
    SlotState,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
)
from quorum_cron.core.node import NodeCore
from quorum_cron.core.state import _JobState
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.memory_records import _Job, _Slot
from sim.mutant_names import MUTANTS
from sim.quorum import WHOLE_LEDGER, QuorumProcess, QuorumStrategy
from sim.world import SimNode, World

__all__ = ["CHECKER_MUTANTS", "MUTANTS", "checker_mutant", "make_mutant"]


def _store_clock(world: World) -> Callable[[], int]:
    clock, loop = world.store.clock, world.loop
    return lambda: clock.wall(loop.now)


def _sim_store(cls: type[MemoryStore], world: World) -> MemoryStore:
    """A mutant store as the simulator makes its own: on the world's store clock, the whole ledger."""
    return cls(_store_clock(world), ledger_maxlen=WHOLE_LEDGER)


class _SmallQuorum(QuorumStrategy):
    def make_process(self, world: World, node: SimNode) -> QuorumProcess:
        self._quorum = max(1, world.scenario.nodes // 2)
        return super().make_process(world, node)


class _NoSpecHashStore(MemoryStore):
    def _vote_one(self, req: VoteRequest, now: int) -> VoteResult:
        rec = self._jobs[req.job].slots.get(req.fire_ms) if req.job in self._jobs else None
        if rec is not None and rec.state == SlotState.PROPOSED:
            rec.votes = dict.fromkeys(rec.votes, req.spec_hash)  # forgets who voted for what
        return super()._vote_one(req, now)


class _NodeClockWindowStore(MemoryStore):
    def __init__(self, world: World) -> None:
        super().__init__(_store_clock(world), ledger_maxlen=WHOLE_LEDGER)
        self._world = world

    def vote(self, requests: Sequence[VoteRequest]) -> list[VoteResult]:
        caller = self._world.store.caller
        if caller is None:
            return super().vote(requests)
        now = caller.clock.wall(self._world.loop.now)  # the voter's clock, not the store's
        return [self._vote_one(r, now) for r in requests]


class _UnfencedStartStore(MemoryStore):
    def start(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        now = self._clock()
        rec = self._jobs[job].slots.get(fire_ms) if job in self._jobs else None
        if rec is None or rec.state not in (SlotState.COMMITTED, SlotState.RUNNING):
            return super().start(job, fire_ms, node, token, lease_ms)
        rec.state, rec.executor, rec.runs = SlotState.RUNNING, node, rec.runs + 1
        rec.started_ms, rec.lease_until_ms = now, now + lease_ms
        return TransitionResult(True, self._view(job, fire_ms, rec), now)


class _NonAtomicCommitStore(MemoryStore):
    """Counts the quorum in the vote call, commits in a second step a few ms later, unconditionally."""

    def __init__(self, world: World) -> None:
        super().__init__(_store_clock(world), ledger_maxlen=WHOLE_LEDGER)
        self._world = world
        self._rng = world.streams.fork("mutant")

    def _vote_one(self, req: VoteRequest, now: int) -> VoteResult:
        job = self._job(req.job)
        rec = self._get(job, req.fire_ms, now)
        decided = rec is not None and rec.state in DECIDED_STATES
        if decided or not req.fire_ms - req.max_skew_ms <= now <= req.fire_ms + req.deadline_ms:
            return super()._vote_one(req, now)  # decided, early and late votes as usual
        if rec is None:
            rec = job.slots[req.fire_ms] = _Slot(fire_ms=req.fire_ms)
            self._open_slot(job, req.fire_ms)
        rec.votes[req.node] = req.spec_hash
        self._touch(rec, now)
        job.quorum = max(job.quorum, req.quorum)
        if sum(1 for h in rec.votes.values() if h == req.spec_hash) >= job.quorum:
            self._world.loop.at(self._world.loop.now + self._rng.randint(1, 40), self._commit, req)
        return VoteResult(VoteStatus.RECORDED, self._view(req.job, req.fire_ms, rec), now)

    def _commit(self, req: VoteRequest) -> None:
        now = self._clock()
        job = self._job(req.job)
        rec = self._get(job, req.fire_ms, now)
        if rec is None:
            return
        rec.state = SlotState.PROPOSED  # the second step does not look at what happened meanwhile
        rec.spec_hash, rec.deadline_ms, rec.runs = req.spec_hash, req.deadline_ms, 0
        if self._assign(req.job, job, rec, now):
            view = self._view(req.job, req.fire_ms, rec)
            world = self._world
            QuorumStrategy._decided(world, world.nodes[req.node], view, "vote")
            executor = world.nodes.get(view.executor)
            if executor is not None and executor.id == req.node:
                world.notify(executor, view)


class _TrustingCore(NodeCore):
    def set_trust(self, trusted: bool, reason: str = "") -> None:
        super().set_trust(True, reason)


class _UntrustedVotes(QuorumStrategy):
    def make_process(self, world: World, node: SimNode) -> QuorumProcess:
        process = super().make_process(world, node)
        process.core = _TrustingCore(
            process.core.settings,
            self.core_jobs(world, node),
            report_illegal_step=process.core._report_illegal_step,
        )
        return process


class _LeaseFromReplyCore(NodeCore):
    def _killed_at_lease_end(self, js: _JobState) -> bool:
        return False

    def _on_renew(self, action: Renew, reply: TransitionResult, now: Now) -> list[Action]:
        s = self._jobs[action.job].slots.get(action.fire_ms)
        r = s.run if s is not None else None
        if r is not None and r.token == action.token and reply.ok:
            r.renew_sent_mono = now.mono_ms  # as if the lease began when the reply came
        return super()._on_renew(action, reply, now)


class _LeaseFromReply(QuorumStrategy):
    def make_process(self, world: World, node: SimNode) -> QuorumProcess:
        process = super().make_process(world, node)
        process.core = _LeaseFromReplyCore(
            process.core.settings,
            self.core_jobs(world, node),
            report_illegal_step=process.core._report_illegal_step,
        )
        return process


class _NoBackoffStore(MemoryStore):
    def finish(
        self,
        job: str,
        fire_ms: int,
        node: str,
        token: int,
        succeeded: bool,
        detail: str,
        retries: int = 0,
        retry_backoff_ms: int = 0,
    ) -> TransitionResult:
        return super().finish(job, fire_ms, node, token, succeeded, detail, retries, 0)


class _SameExecutorStore(MemoryStore):
    def _assign(self, name: str, job: _Job, rec: _Slot, now: int, vote: VoteRequest | None = None) -> bool:
        previous = rec.executor
        if not super()._assign(name, job, rec, now, vote):
            return False
        if previous and rec.votes.get(previous) == rec.spec_hash:
            rec.executor = previous  # the token is new, the executor is not
            rec.assigned[-1] = previous
        return True


class _NeverMissedCore(NodeCore):
    def _record_missed(self, action: RecordMissed, now: Now, out: list[Action]) -> None:
        return  # the slot it could not vote for is left for someone else (nobody)

    def _catch_up(self, js: _JobState, hwm: int, now: Now) -> list[Action]:
        return [a for a in super()._catch_up(js, hwm, now) if not isinstance(a, RecordMissed)]


class _ReloadUnsweptCore(NodeCore):
    def replace_jobs(self, jobs: Sequence[CoreJob], now: Now) -> JobChanges:
        changes = super().replace_jobs(jobs, now)
        # (The real core keeps a removed job in the sweep until its open slots end; this one
        # keeps its place, index i being job i, under a deadline no slot reaches.)
        self._sweeps.reset(
            replace(p, deadline_ms=10**15, start_timeout_ms=10**15) if self._jobs[p.job].removed else p
            for p in self._sweep_params()
        )
        return changes


class _NoCatchUpCore(NodeCore):
    def _catch_up(self, js: _JobState, hwm: int, now: Now) -> list[Action]:
        return []


class _CoreMutant(QuorumStrategy):
    """The real strategy, with each node's core of class ``core_class``."""

    def __init__(self, core_class: type[NodeCore]) -> None:
        super().__init__()
        self._core_class = core_class

    def make_process(self, world: World, node: SimNode) -> QuorumProcess:
        process = super().make_process(world, node)
        process.core = self._core_class(
            process.core.settings,
            self.core_jobs(world, node),
            report_illegal_step=process.core._report_illegal_step,
        )
        return process


class _OverlapIgnoredStore(MemoryStore):
    """Every vote is judged as if its job allowed overlap."""

    def _vote_one(self, req: VoteRequest, now: int) -> VoteResult:
        return super()._vote_one(replace(req, overlap=Overlap.ALLOW), now)


class _UnkilledAtLeaseCore(NodeCore):
    """Only at-least-once runs are stopped at their lease end (the rule before overlap counted)."""

    def _killed_at_lease_end(self, js: _JobState) -> bool:
        return js.job.delivery == Delivery.AT_LEAST_ONCE


class _SkipWronglyStore(MemoryStore):
    """Every third slot that reaches quorum is skipped, for no reason the design has."""

    def _assign(self, name: str, job: _Job, rec: _Slot, now: int, vote: VoteRequest | None = None) -> bool:
        if rec.state == SlotState.PROPOSED and (rec.fire_ms // 1000) % 3 == 0:
            self._end(name, job, rec, SlotState.SKIPPED, "skipped", now)
            return True
        return super()._assign(name, job, rec, now, vote)


class _ForgetRetryStore(MemoryStore):
    """A failed run with retries left is logged ``retrying``, then the slot is dropped."""

    def _assign(self, name: str, job: _Job, rec: _Slot, now: int, vote: VoteRequest | None = None) -> bool:
        if rec.state == SlotState.RUNNING and rec.not_before_ms:
            rec.state = SlotState.FAILED  # (no ledger entry: the retry is forgotten)
            self._close_slot(job, rec.fire_ms)
            return True
        return super()._assign(name, job, rec, now, vote)


class _NewOnlyRecord(MembershipRecord):
    """A joint record whose commit rule forgot the old configuration."""

    __slots__ = ()

    def commits(self, voters: Collection[str]) -> bool:
        return self.current.reached(voters)


class _JointNewOnlyStore(MemoryStore):
    """The memory model's commit rule mutated: a joint slot commits with the new majority only."""

    def _vote_one(self, req: VoteRequest, now: int) -> VoteResult:
        job = self._jobs.get(req.job)
        record = job.record if job is not None else None
        if job is None or record is None or record.old is None:
            return super()._vote_one(req, now)
        job.record = _NewOnlyRecord(record.epoch, record.current, record.old)
        try:
            return super()._vote_one(req, now)
        finally:
            if isinstance(job.record, _NewOnlyRecord):
                job.record = record


class _SucceededEarlyProcess(QuorumProcess):
    __slots__ = ()

    def _apply(self, actions: Sequence[Action], now: Now, bound: int | None) -> None:
        super()._apply(actions, now, bound)
        for a in actions:
            if isinstance(a, Run):  # reports the run's success as it starts it
                self.run_finished(a.job, a.fire_ms, a.token, True, "exit 0")


class _SucceededEarly(QuorumStrategy):
    def make_process(self, world: World, node: SimNode) -> QuorumProcess:
        process = super().make_process(world, node)
        process.__class__ = _SucceededEarlyProcess
        return process


CHECKER_MUTANTS: dict[str, str] = {
    "lenient-cut-off": "the cut-off exemption also excuses slots whose nodes could reach the store "
    "but whose clocks were untrusted (they must record 'missed: clock untrusted')",
}


@contextmanager
def checker_mutant(name: str) -> Iterator[None]:
    """Plant the named checker mutant for the length of the ``with`` block (tests only)."""
    if name not in CHECKER_MUTANTS:
        raise ValueError(f"unknown checker mutant {name!r}: expected one of {', '.join(CHECKER_MUTANTS)}")
    real = sim.checker._could_record
    sim.checker._could_record = lambda health, reach: health
    try:
        yield
    finally:
        sim.checker._could_record = real


def make_mutant(name: str) -> QuorumStrategy:
    """A quorum strategy with the named rule broken."""
    if name == "quorum-n-over-2":
        return _SmallQuorum()
    if name == "no-spec-hash":
        return QuorumStrategy(store_factory=lambda w: _sim_store(_NoSpecHashStore, w))
    if name == "node-clock-window":
        return QuorumStrategy(store_factory=_NodeClockWindowStore)
    if name == "unfenced-start":
        return QuorumStrategy(store_factory=lambda w: _sim_store(_UnfencedStartStore, w))
    if name == "non-atomic-commit":
        return QuorumStrategy(store_factory=_NonAtomicCommitStore)
    if name == "untrusted-votes":
        return _UntrustedVotes()
    if name == "retry-no-backoff":
        return QuorumStrategy(store_factory=lambda w: _sim_store(_NoBackoffStore, w))
    if name == "same-executor":
        return QuorumStrategy(store_factory=lambda w: _sim_store(_SameExecutorStore, w))
    if name == "lease-from-reply":
        return _LeaseFromReply()
    if name == "never-record-missed":
        return _CoreMutant(_NeverMissedCore)
    if name == "no-catch-up":
        return _CoreMutant(_NoCatchUpCore)
    if name == "skip-wrongly":
        return QuorumStrategy(store_factory=lambda w: _sim_store(_SkipWronglyStore, w))
    if name == "succeeded-early":
        return _SucceededEarly()
    if name == "forget-retry":
        return QuorumStrategy(store_factory=lambda w: _sim_store(_ForgetRetryStore, w))
    if name == "reload-unswept":
        return _CoreMutant(_ReloadUnsweptCore)
    if name == "joint-new-only":
        return QuorumStrategy(store_factory=lambda w: _sim_store(_JointNewOnlyStore, w))
    if name == "overlap-ignored":
        return QuorumStrategy(store_factory=lambda w: _sim_store(_OverlapIgnoredStore, w))
    if name == "unkilled-at-lease":
        return _CoreMutant(_UnkilledAtLeaseCore)
    raise ValueError(f"unknown mutant {name!r}: expected one of {', '.join(MUTANTS)}")
