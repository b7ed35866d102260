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
=====================  =======================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from quorum_cron.model import (
    DECIDED_STATES,
    SlotState,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
)
from quorum_cron.store.memory import MemoryStore, _Slot
from sim.quorum import QuorumProcess, QuorumStrategy
from sim.world import SimNode, World

__all__ = ["MUTANTS", "make_mutant"]


def _store_clock(world: World) -> Callable[[], int]:
    clock, loop = world.store.clock, world.loop
    return lambda: clock.wall(loop.now)


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
        super().__init__(_store_clock(world))
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
        super().__init__(_store_clock(world))
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
            job.open.add(req.fire_ms)
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


MUTANTS: dict[str, str] = {
    "quorum-n-over-2": "every node configured with quorum N // 2",
    "no-spec-hash": "the store counts votes whatever their spec hash",
    "node-clock-window": "the store judges the vote window by the voter's clock",
    "unfenced-start": "the store starts a committed slot for any node and token",
    "non-atomic-commit": "quorum checked in one step, commit made unconditionally in a later one",
}


def make_mutant(name: str) -> QuorumStrategy:
    """A quorum strategy with the named rule broken."""
    if name == "quorum-n-over-2":
        return _SmallQuorum()
    if name == "no-spec-hash":
        return QuorumStrategy(store_factory=lambda w: _NoSpecHashStore(_store_clock(w)))
    if name == "node-clock-window":
        return QuorumStrategy(store_factory=_NodeClockWindowStore)
    if name == "unfenced-start":
        return QuorumStrategy(store_factory=lambda w: _UnfencedStartStore(_store_clock(w)))
    if name == "non-atomic-commit":
        return QuorumStrategy(store_factory=_NonAtomicCommitStore)
    raise ValueError(f"unknown mutant {name!r}: expected one of {', '.join(MUTANTS)}")
