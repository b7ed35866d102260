"""The agent's store worker: actions in emission order, a burst's fenced calls batched.

:class:`~quorum_cron.agent.storeio.StoreWorker` carries the core's actions out
on one thread. Starts, renewals and finishes queued while that thread was
busy leave as one ``Store.fenced`` call (one pipeline on Redis): the scale
benchmark's takeover cascade came from one round trip per start. These tests
hold the thread on a first call so that a burst queues behind it, on the
memory model (the store contract proves it equal to the Redis scripts; the
Redis side of ``fenced`` is in the contract and hostile-store suites).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from quorum_cron.agent.storeio import MAX_FENCED_BATCH, MAX_MISSED_BATCH, VOTE_PART, StoreWorker
from quorum_cron.core.actions import Finish, ReadSlots, RecordMissed, Renew, Start, StoreAction, Vote
from quorum_cron.core.model import (
    FencedRequest,
    MissedRequest,
    SlotState,
    SlotView,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
)
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.memory import MemoryStore

T0 = 1_700_000_000_000


class HeldStore(MemoryStore):
    """The memory model, recording each call it gets and holding the first ``read_slots`` until
    :attr:`release` is set, so the actions submitted meanwhile queue."""

    def __init__(self) -> None:
        super().__init__(lambda: T0 + 100)
        self.calls: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.refuse: set[str] = set()
        """Jobs whose start raises StoreError (a corrupt key of that job)."""
        self.unreachable = False
        self.hold_votes = False
        """Hold the first vote call (as the first read is held) until :attr:`release` is set."""
        self.votes_fail_after = -1
        """Vote calls that succeed before every later one raises StoreUnavailable (-1: never)."""
        self._batch = False

    def vote(self, requests: Sequence[VoteRequest]) -> list[VoteResult]:
        self.calls.append(f"vote x{len(requests)}")
        if self.hold_votes:
            self.entered.set()
            assert self.release.wait(10), "the test never released the store"
        if self.votes_fail_after == 0:
            raise StoreUnavailable("store unreachable (test)")
        self.votes_fail_after -= 1
        return super().vote(requests)

    def read_slots(self, slots: Sequence[tuple[str, int]]) -> list[SlotView]:
        self.calls.append("read_slots")
        self.entered.set()
        assert self.release.wait(10), "the test never released the store"
        return super().read_slots(slots)

    def fenced(self, requests: Sequence[FencedRequest]) -> list[TransitionResult | StoreError]:
        self.calls.append(f"fenced x{len(requests)}")
        if self.unreachable:
            raise StoreUnavailable("store unreachable (test)")
        self._batch = True
        try:
            return super().fenced(requests)
        finally:
            self._batch = False

    def record_missed_many(self, requests: Sequence[MissedRequest]) -> list[SlotView | StoreError]:
        self.calls.append(f"missed x{len(requests)}")
        if self.unreachable:
            raise StoreUnavailable("store unreachable (test)")
        return super().record_missed_many(requests)

    def record_missed(self, job: str, fire_ms: int, deadline_ms: int, reason: str) -> SlotView:
        if job in self.refuse:
            raise StoreError(f"corrupt store: {job}'s ledger is a string (test)")
        return super().record_missed(job, fire_ms, deadline_ms, reason)

    def start(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        if not self._batch:
            self.calls.append("start")
        if job in self.refuse:
            raise StoreError(f"corrupt store: {job}'s slot is a string (test)")
        return super().start(job, fire_ms, node, token, lease_ms)

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
        if not self._batch:
            self.calls.append("finish")
        return super().finish(job, fire_ms, node, token, succeeded, detail, retries, retry_backoff_ms)


def committed(store: MemoryStore, jobs: Sequence[str]) -> dict[str, int]:
    """Commit slot T0 of each job with n1 as executor; each job's token."""
    out = {}
    for job in jobs:
        [res] = MemoryStore.vote(
            store, [VoteRequest(job, T0, "n1", "h", quorum=1, max_skew_ms=1_000, deadline_ms=60_000)]
        )
        assert res.slot.state == SlotState.COMMITTED and res.slot.executor == "n1", res
        out[job] = res.slot.token
    return out


async def _burst(
    store: HeldStore, actions: list[StoreAction], worker: StoreWorker | None = None
) -> list[object]:
    """Submit a held read, then ``actions`` while it is held; every action's outcome, in order."""
    worker = worker if worker is not None else StoreWorker(store, "n1")
    try:
        first = worker.submit(ReadSlots((("held", T0),)))
        assert await asyncio.to_thread(store.entered.wait, 10)
        futures = [worker.submit(a) for a in actions]
        store.release.set()
        await first
        return await asyncio.gather(*futures, return_exceptions=True)
    finally:
        worker.shutdown()


def test_starts_queued_behind_a_call_leave_as_one_batch_in_order() -> None:
    store = HeldStore()
    tokens = committed(store, ["a", "b", "c"])
    starts: list[StoreAction] = [Start(j, T0, tokens[j], 30_000) for j in ("a", "b", "c")]
    finish = Finish("a", T0, tokens["a"], True, "exit 0")
    got = asyncio.run(_burst(store, [*starts, ReadSlots((("a", T0),)), finish]))
    # (a fenced action alone goes as its own one-slot call)
    assert store.calls == ["read_slots", "fenced x3", "read_slots", "finish"], store.calls
    assert [isinstance(r, TransitionResult) and r.ok for r in got[:3]] == [True, True, True]
    assert [r.slot.state for r in got[:3]] == [SlotState.RUNNING] * 3  # type: ignore[attr-defined]
    assert isinstance(got[4], TransitionResult) and got[4].slot.state == SlotState.SUCCEEDED


def test_a_corrupt_job_fails_only_its_own_start_in_a_batch() -> None:
    store = HeldStore()
    tokens = committed(store, ["a", "bad", "c"])
    store.refuse.add("bad")
    got = asyncio.run(_burst(store, [Start(j, T0, tokens[j], 30_000) for j in ("a", "bad", "c")]))
    assert store.calls == ["read_slots", "fenced x3"], store.calls
    assert isinstance(got[1], StoreError) and "corrupt store" in str(got[1])
    assert all(isinstance(r, TransitionResult) and r.ok for r in (got[0], got[2])), got


def test_an_unreachable_store_fails_every_action_of_the_batch_alike() -> None:
    store = HeldStore()
    tokens = committed(store, ["a", "b"])
    store.unreachable = True
    got = asyncio.run(_burst(store, [Start(j, T0, tokens[j], 30_000) for j in ("a", "b")]))
    assert [type(r) for r in got] == [StoreUnavailable, StoreUnavailable]
    assert store.slot("a", T0).state == SlotState.COMMITTED  # (the model applied nothing)


def test_a_batch_holds_at_most_max_fenced_batch_actions() -> None:
    store = HeldStore()
    jobs = [f"j{i}" for i in range(MAX_FENCED_BATCH + 3)]
    tokens = committed(store, jobs)
    got = asyncio.run(_burst(store, [Start(j, T0, tokens[j], 30_000) for j in jobs]))
    assert store.calls == ["read_slots", f"fenced x{MAX_FENCED_BATCH}", "fenced x3"], store.calls
    assert all(isinstance(r, TransitionResult) and r.ok for r in got)


def test_missed_records_queued_behind_a_call_leave_in_batches_in_order_and_apart_from_starts() -> None:
    """A node starting after a minute boundary accounts for that minute's slot of every job: the
    records go as batches of at most MAX_MISSED_BATCH (not a call each, which at 100,000 jobs
    kept the thread busy for minutes), never mixed with the fenced batch after them; a corrupt
    job fails only its own record."""
    store = HeldStore()
    tokens = committed(store, ["s1", "s2"])
    store.refuse.add("j1")
    old = T0 - 120_000
    missed: list[StoreAction] = [
        RecordMissed(f"j{i}", old, 30_000, "nobody voted") for i in range(MAX_MISSED_BATCH + 2)
    ]
    starts: list[StoreAction] = [Start(j, T0, tokens[j], 30_000) for j in ("s1", "s2")]
    got = asyncio.run(_burst(store, [*missed, *starts]))
    assert store.calls == ["read_slots", f"missed x{MAX_MISSED_BATCH}", "missed x2", "fenced x2"], store.calls
    assert isinstance(got[1], StoreError) and "corrupt store" in str(got[1])
    views = got[: len(missed)]
    assert all(isinstance(v, SlotView) and v.state == SlotState.MISSED for i, v in enumerate(views) if i != 1)
    assert [v.job for v in views if isinstance(v, SlotView)] == [
        f"j{i}" for i in range(len(missed)) if i != 1
    ]
    assert all(isinstance(r, TransitionResult) and r.ok for r in got[len(missed) :]), got[len(missed) :]


def test_actions_queued_at_shutdown_are_cancelled_not_sent() -> None:
    async def scenario() -> tuple[list[bool], list[str]]:
        store = HeldStore()
        tokens = committed(store, ["a", "b"])
        worker = StoreWorker(store, "n1")
        first = worker.submit(ReadSlots((("a", T0),)))
        assert await asyncio.to_thread(store.entered.wait, 10)
        queued = [worker.submit(Start(j, T0, tokens[j], 30_000)) for j in ("a", "b")]
        worker.shutdown()
        store.release.set()
        with pytest.raises(asyncio.CancelledError):
            await queued[0]
        with pytest.raises(RuntimeError, match="shut down"):
            worker.submit(Start("a", T0, tokens["a"], 30_000))
        await first  # the call on the wire completes
        return [f.cancelled() for f in queued], store.calls

    cancelled, calls = asyncio.run(scenario())
    assert cancelled == [True, True]
    assert calls == ["read_slots"]


def test_starts_and_renews_are_stamped_when_they_go_on_the_wire_before_their_replies() -> None:
    """The core counts a lease from when its call left (core.wire): the worker reads the clock as
    the batch goes out, after it waited behind the held call, and the core hears it on the loop
    before the batch's replies."""
    store = HeldStore()
    tokens = committed(store, ["a", "b"])
    heard: list[tuple[str, str, int, bool]] = []
    clock = iter(range(1_000, 10_000, 1_000))
    futures: dict[int, asyncio.Future[object]] = {}

    def tell(action: StoreAction, at: int) -> None:
        replied = futures[id(action)].done()
        heard.append((type(action).__name__, action.job, at, replied))  # type: ignore[union-attr]

    async def main() -> list[object]:
        worker = StoreWorker(store, "n1", sent=(lambda: next(clock), tell))
        real_submit = worker.submit

        def submit(action: StoreAction) -> asyncio.Future[object]:
            fut = futures[id(action)] = real_submit(action)
            return fut

        worker.submit = submit  # type: ignore[method-assign]
        starts: list[StoreAction] = [Start(j, T0, tokens[j], 30_000) for j in ("a", "b")]
        renew = Renew("a", T0, tokens["a"], 30_000)
        return await _burst(store, [*starts, renew, Finish("a", T0, tokens["a"], True, "exit 0")], worker)

    got = asyncio.run(main())
    assert all(isinstance(r, TransitionResult) and r.ok for r in got), got
    # One stamp for the batch (a finish sets no lease), read once, heard before any reply landed.
    assert heard == [
        ("Start", "a", 1_000, False),
        ("Start", "b", 1_000, False),
        ("Renew", "a", 1_000, False),
    ], heard


def test_submit_then_hands_each_action_its_outcome_in_order_even_after_a_failing_handler() -> None:
    """The runtime's path (no future per action): a batch's outcomes reach ``then`` in the
    actions' order, on the loop; a handler that raises goes to the loop's exception handler and
    the next actions still get theirs; actions queued at shutdown get a ``CancelledError``."""

    async def scenario() -> tuple[list[tuple[str, str]], list[str], list[str]]:
        store = HeldStore()
        tokens = committed(store, ["a", "b", "c", "d"])
        store.refuse = {"b"}
        worker = StoreWorker(store, "n1")
        loop = asyncio.get_running_loop()
        reported: list[str] = []
        loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx["message"]))
        got: list[tuple[str, str]] = []
        three_in = asyncio.Event()

        def then(action: StoreAction, reply: object, exc: BaseException | None) -> None:
            assert threading.current_thread() is threading.main_thread()
            assert isinstance(action, Start)
            job = action.job
            got.append((job, type(exc).__name__ if exc is not None else type(reply).__name__))
            if len(got) == 3:
                three_in.set()
            if job == "a":
                raise RuntimeError("handler bug")

        first = worker.submit(ReadSlots((("a", T0),)))
        assert await asyncio.to_thread(store.entered.wait, 10)
        for job in ("a", "b", "c"):
            worker.submit_then(Start(job, T0, tokens[job], 30_000), then)
        store.release.set()
        await first
        await asyncio.wait_for(three_in.wait(), 10)
        store.entered.clear()
        store.release.clear()
        held = worker.submit(ReadSlots((("d", T0),)))
        assert await asyncio.to_thread(store.entered.wait, 10)
        worker.submit_then(Start("d", T0, tokens["d"], 30_000), then)
        worker.shutdown()
        store.release.set()
        await held
        return got, reported, store.calls

    got, reported, calls = asyncio.run(scenario())
    assert got == [
        ("a", "TransitionResult"),
        ("b", "StoreError"),
        ("c", "TransitionResult"),
        ("d", "CancelledError"),
    ]
    assert reported == ["handling the reply to Start failed"]
    assert calls == ["read_slots", "fenced x3", "read_slots"]


def _votes(n: int, quorum: int = 2) -> Vote:
    return Vote(
        tuple(
            VoteRequest(f"v{i}", T0, "n1", "h", quorum=quorum, max_skew_ms=1_000, deadline_ms=60_000)
            for i in range(n)
        )
    )


def test_a_long_vote_goes_in_parts_each_answered_at_once_and_starts_queued_meanwhile_go_between() -> None:
    """At 100,000 jobs a node's votes of one minute took tens of seconds; the starts of the slots
    that committed first waited behind all of them, past their start timeout and deadline. The
    fenced actions queued while a part is on the wire go before the next part (in their order,
    ahead of a read queued before them). Each part is answered as it comes back, before those
    starts: the part holding a slot's vote is answered before the start its commit brought, so
    the core never meets a vote's view of a slot it already ran and forgot (a scale run with
    the reply held to the end refused 7,903 such second starts)."""

    async def scenario() -> tuple[list[str], list[tuple[str, int, object]]]:
        store = HeldStore()
        tokens = committed(store, ["s1", "s2"])
        store.hold_votes = True
        worker = StoreWorker(store, "n1")
        answered: list[tuple[str, int, object]] = []
        last = asyncio.get_running_loop().create_future()

        def then(action: StoreAction, reply: object, exc: BaseException | None) -> None:
            if isinstance(action, Vote):
                assert isinstance(reply, list) and exc is None, exc
                assert [r.slot.job for r in reply] == [q.job for q in action.requests]
                answered.append(("Vote", len(action.requests), [q.job for q in action.requests]))
            else:
                answered.append((type(action).__name__, 1, reply))
            if isinstance(action, ReadSlots):
                last.set_result(None)

        try:
            worker.submit_then(_votes(2 * VOTE_PART + 5), then)
            assert await asyncio.to_thread(store.entered.wait, 10)
            worker.submit_then(Start("s1", T0, tokens["s1"], 30_000), then)
            worker.submit_then(ReadSlots((("s1", T0),)), then)
            worker.submit_then(Start("s2", T0, tokens["s2"], 30_000), then)
            store.release.set()
            await asyncio.wait_for(last, 10)
            return store.calls, answered
        finally:
            worker.shutdown()

    calls, answered = asyncio.run(scenario())
    assert calls == [
        f"vote x{VOTE_PART}",
        "fenced x2",
        f"vote x{VOTE_PART}",
        "vote x5",
        "read_slots",
    ], calls
    assert [(kind, n) for kind, n, _ in answered] == [
        ("Vote", VOTE_PART),
        ("Start", 1),
        ("Start", 1),
        ("Vote", VOTE_PART),
        ("Vote", 5),
        ("ReadSlots", 1),
    ], answered
    voted = [job for kind, _, jobs in answered if kind == "Vote" for job in jobs]  # type: ignore[attr-defined]
    assert sorted(voted) == sorted(f"v{i}" for i in range(2 * VOTE_PART + 5))  # (each slot once)
    starts = [reply for kind, _, reply in answered if kind == "Start"]
    assert all(isinstance(r, TransitionResult) and r.ok for r in starts), starts


def test_submit_answers_a_long_vote_whole_in_order() -> None:
    store = HeldStore()
    got = asyncio.run(_burst(store, [_votes(2 * VOTE_PART + 5)]))
    assert store.calls == ["read_slots", f"vote x{VOTE_PART}", f"vote x{VOTE_PART}", "vote x5"], store.calls
    results = got[0]
    assert isinstance(results, list)
    assert [r.slot.job for r in results] == [f"v{i}" for i in range(2 * VOTE_PART + 5)]
    assert all(r.status == VoteStatus.RECORDED for r in results)


def test_a_vote_of_one_part_goes_as_one_call_behind_what_was_queued_before_it() -> None:
    store = HeldStore()
    tokens = committed(store, ["s1"])
    got = asyncio.run(_burst(store, [_votes(VOTE_PART), Start("s1", T0, tokens["s1"], 30_000)]))
    assert store.calls == ["read_slots", f"vote x{VOTE_PART}", "start"], store.calls
    assert isinstance(got[0], list) and len(got[0]) == VOTE_PART


def test_a_failed_part_fails_the_rest_of_the_vote_and_the_parts_before_it_stay_answered() -> None:
    """As a pipeline part failing inside one call: the parts before it landed and were answered;
    the rest of the vote fails as one (the core sends those votes again, and a vote sent twice
    is recorded once)."""

    async def scenario(store: HeldStore) -> list[tuple[list[str], object]]:
        worker = StoreWorker(store, "n1")
        answered: list[tuple[list[str], object]] = []
        done = asyncio.get_running_loop().create_future()

        def then(action: StoreAction, reply: object, exc: BaseException | None) -> None:
            assert isinstance(action, Vote)
            answered.append(([q.job for q in action.requests], exc or reply))
            if exc is not None:
                done.set_result(None)

        try:
            worker.submit_then(_votes(2 * VOTE_PART + 1), then)
            await asyncio.wait_for(done, 10)
            return answered
        finally:
            worker.shutdown()

    store = HeldStore()
    store.votes_fail_after = 1
    answered = asyncio.run(scenario(store))
    assert store.calls == [f"vote x{VOTE_PART}", f"vote x{VOTE_PART}"], store.calls
    [(landed, reply), (rest, error)] = answered
    assert len(landed) == VOTE_PART and len(rest) == VOTE_PART + 1
    assert isinstance(reply, list) and isinstance(error, StoreUnavailable)
    assert {store.slot(job, T0).state for job in landed} == {SlotState.PROPOSED}
    assert {store.slot(job, T0).state for job in rest} == {SlotState.ABSENT}
    futures = HeldStore()
    futures.votes_fail_after = 1
    got = asyncio.run(_burst(futures, [_votes(VOTE_PART + 1)]))
    assert isinstance(got[0], StoreUnavailable)  # (submit: the future gets the error)


def _parts(vote: Vote, node: str) -> list[list[str]]:
    """The jobs of each part a worker of ``node`` sends ``vote`` in."""

    async def scenario() -> list[list[str]]:
        worker = StoreWorker(HeldStore(), node)
        parts: list[list[str]] = []
        done = asyncio.get_running_loop().create_future()

        def then(action: StoreAction, reply: object, exc: BaseException | None) -> None:
            assert isinstance(action, Vote) and exc is None, exc
            parts.append([q.job for q in action.requests])
            if sum(map(len, parts)) == len(vote.requests):
                done.set_result(None)

        try:
            worker.submit_then(vote, then)
            await asyncio.wait_for(done, 10)
            return parts
        finally:
            worker.shutdown()

    return asyncio.run(scenario())


def test_every_node_cuts_a_long_vote_into_the_same_parts_and_each_minute_differently() -> None:
    """All nodes' part k holds the same slots whatever order each declared its jobs in (a slot's
    votes land together, so commits come part by part), and the parts change with the fire time:
    a burst larger than the machine can start before the deadline misses a different draw of jobs
    each minute, not the same tail of the list every minute."""
    n = 2 * VOTE_PART + 5

    def vote(node: str, fire_ms: int, order: list[int]) -> Vote:
        return Vote(
            tuple(
                VoteRequest(f"v{i}", fire_ms, node, "h", quorum=2, max_skew_ms=1_000, deadline_ms=60_000)
                for i in order
            )
        )

    first = _parts(vote("n1", T0, list(range(n))), "n1")
    again = _parts(vote("n2", T0, list(reversed(range(n)))), "n2")
    assert first == again
    assert [len(p) for p in first] == [VOTE_PART, VOTE_PART, 5]
    later = _parts(vote("n1", T0 + 60_000, list(range(n))), "n1")
    overlap = len(set(first[0]) & set(later[0]))
    assert overlap < VOTE_PART // 2, overlap  # (a fresh draw: about VOTE_PART * 1,000 / n)
    assert first[0] != [f"v{i}" for i in range(VOTE_PART)]  # (not the declaration order)
