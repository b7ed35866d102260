"""Carrying out the core's store actions without blocking the event loop.

Store calls are synchronous redis-py calls. They run on ONE dedicated worker
thread, in the order the core emitted them, so two actions about the same
slot (a start, then its renewals, then its finish) reach the store in order
and the loop keeps waking on time while a call is on the wire. Background
reads (heartbeats, clock probes, status) use a second thread, so a slow
membership call never delays a vote.

The worker carries each action out with :func:`quorum_cron.core.perform.perform`,
the one mapping from an action to its store call (the simulator uses it too).
Consecutive fenced actions (starts, renewals, finishes) queued while the
thread was busy go together, up to :data:`MAX_FENCED_BATCH`, through
:func:`~quorum_cron.core.perform.perform_fenced`: one pipeline instead of a
round trip each. Why: at a minute boundary an executor of thousands of jobs
starts thousands of slots, and one round trip each kept its starts queued
past their start timeout, so other nodes' sweeps took the slots over and the
takeovers cascaded (docs/benchmarks.md, "Scale"). Consecutive missed records
go together the same way (up to :data:`MAX_MISSED_BATCH`, through
:func:`~quorum_cron.core.perform.perform_missed`): a node whose first tick
outlasts a slot's deadline records that slot of every job missed. Each action still gets its
own reply (or its own error) in order; a batch the store could not be
reached for fails every action in it with the same ``StoreUnavailable``,
which the core handles as it does one lost reply.

A tick's ``Vote`` of more than :data:`VOTE_PART` slots goes in parts, and the
fenced actions queued while a part was on the wire go before the next part:
at 100,000 ``* * * * *`` jobs a node's votes of one minute kept its thread
busy for tens of seconds on a slow machine, and the starts of the slots that
committed in the first second waited behind all of them, past their start
timeout and the starting deadline, so the burst ran nothing
(docs/benchmarks.md, "Starts between a burst's votes"). Only fenced actions
move ahead, and only of a vote's remaining parts and what was queued behind
it; among themselves they keep their order. The parts take the slots in the
order :mod:`quorum_cron.agent.burstorder` gives: alike on every node, a new
draw each minute, each node's top-ranked slots first. Each part is answered as soon as
it is back, as a ``Vote`` of its own requests (the core handles a vote's
replies request by request): a slot's executor has voted for it, so the part
holding its vote is answered before the start that the commit notice brought
is carried out, and the core never meets the vote's view of a slot it has
already run and forgotten (which it would start again, to be refused). A part
that fails fails the rest of the vote as one ``Vote``, as a pipeline part
failing inside one call fails that call: votes are idempotent, and the core
sends them again.

Each ``Start``, ``Renew`` and ``Vote`` (each part of one) is stamped when
its call goes on the wire (``sent``: the agent's monotonic clock and
``NodeCore.sent``, told on the loop before the reply): the core counts the
lease from there, not from when it queued the call, so a start that waited
behind a burst's votes — or one folded into a commit of a vote that waited —
runs without a renew first (:mod:`quorum_cron.core.wire`).

On a Redis Cluster whose master lacks a replica (``wait_replicas``), the
votes of the jobs on it are not sent: :attr:`StoreWorker.split` (the agent's
:class:`~quorum_cron.agent.shortmasters.ShortMasters`) answers them at once
with the shortfall as a ``Vote`` of their own, and the rest of the vote goes
as usual; a vote landing where no replica copies it is what ``wait_replicas``
is there to refuse.

A ``Finish`` carries the job's retry policy (the core's ``CoreJob``): the
store decides, in the same atomic step as the result, whether a failed run
is retried under a new token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from quorum_cron.agent.burstorder import burst_order
from quorum_cron.core.model import VoteRequest
from quorum_cron.core.node import RecordMissed, Renew, Start, StoreAction, Vote
from quorum_cron.core.perform import FENCED, perform, perform_fenced, perform_missed
from quorum_cron.errors import StoreError
from quorum_cron.store.base import Store

__all__ = ["MAX_FENCED_BATCH", "MAX_MISSED_BATCH", "VOTE_PART", "StoreWorker", "waited"]

T = TypeVar("T")

MAX_FENCED_BATCH = 256
"""Fenced actions per pipeline at most: a burst's starts leave in a few round trips, while one
batch's replies still come back within milliseconds for the first of them."""
MAX_MISSED_BATCH = 1_000
"""Missed records per batch at most: a node that could not vote for a minute's slots in time (a
first tick of 100,000 jobs on a slow machine) records each job's slot missed, and a call each kept
its store thread busy for minutes; a batch is a few calls of many jobs each, and a vote queued
behind waits one batch."""
VOTE_PART = 1_000
"""Votes per call at most when a tick's vote is split (about half of one pipeline part of
``Store.vote``): small enough that a start waits one part (well under a second on a slow machine,
not a minute's whole burst), large enough that a burst's votes still go in few round trips."""

Then = Callable[[StoreAction, object, BaseException | None], None]
"""``then(action, reply, error)``: an action's outcome, called on the loop (``error`` is a
``CancelledError`` for an action the shutdown dropped)."""
_Item = tuple[StoreAction, Then]
Sent = tuple[Callable[[], int], Callable[[StoreAction, int], None]]
"""``(monotonic_ms, tell)``: how the worker reads the clock, and whom it tells when a start or
renew went on the wire (``tell(action, mono_ms)``, called on the loop)."""
_Settled = tuple[StoreAction, Then, object, BaseException | None]
Split = Callable[[Vote], tuple[Sequence[VoteRequest], list[tuple[Vote, BaseException]]]]
"""``split(vote)``: the requests to send, and the ones held back (as votes of their own, each with
its error)."""


def _settle(done: list[_Settled]) -> None:
    """On the loop: hand each action its outcome, in order; a handler that raises is reported to
    the loop's exception handler (as a future's callback would be) and the others still run."""
    for action, then, reply, exc in done:
        try:
            then(action, reply, exc)
        except Exception as bug:
            asyncio.get_running_loop().call_exception_handler(
                {"message": f"handling the reply to {type(action).__name__} failed", "exception": bug}
            )


def _cancelled(items: list[_Item]) -> list[_Settled]:
    """The outcome of actions the shutdown dropped before they were sent."""
    return [(a, then, None, asyncio.CancelledError()) for a, then in items]


def _into(fut: asyncio.Future[object], action: StoreAction, reply: object, exc: BaseException | None) -> None:
    """:meth:`StoreWorker.submit`'s ``then``: resolve the future (one cancelled meanwhile stays so)."""
    if fut.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        fut.cancel()
    elif exc is None:
        fut.set_result(reply)
    else:
        fut.set_exception(exc)


class _Gather:
    """:meth:`StoreWorker.submit`'s ``then`` for a vote, which may be answered part by part: the
    future gets the whole reply in the vote's own order (or the first error)."""

    __slots__ = ("fut", "got", "vote")

    def __init__(self, fut: asyncio.Future[object], vote: Vote) -> None:
        self.fut, self.vote = fut, vote
        self.got: dict[int, object] = {}

    def __call__(self, action: StoreAction, reply: object, exc: BaseException | None) -> None:
        if exc is not None:
            _into(self.fut, action, None, exc)
            return
        assert isinstance(action, Vote) and isinstance(reply, list)
        self.got.update(zip(map(id, action.requests), reply, strict=True))
        if len(self.got) >= len(self.vote.requests):
            _into(self.fut, self.vote, [self.got[id(r)] for r in self.vote.requests], None)


def _tell_sent(tell: Callable[[StoreAction, int], None], actions: list[StoreAction], at: int) -> None:
    """On the loop, before the calls' replies: the core hears when its starts and renews left."""
    for action in actions:
        tell(action, at)


WAITED: tuple[type, ...] = (Vote, RecordMissed, *FENCED)
"""The store actions whose writes ``WAIT`` covers (``wait_replicas``): votes, starts, renewals,
finishes and missed records. Reads, polls and sweeps are not waited."""


def waited(action: StoreAction) -> bool:
    """True when the store answering ``action`` means its write was replicated as required (a
    reply to a read says nothing about the replicas: :meth:`NodeHealth.store_ok`)."""
    return isinstance(action, WAITED)


_Batch = tuple[Callable[[Store, str, list[StoreAction]], list[object]], int]
_FENCED: _Batch = (perform_fenced, MAX_FENCED_BATCH)
_MISSED: _Batch = (perform_missed, MAX_MISSED_BATCH)


def _kind(action: StoreAction) -> _Batch | None:
    """The batch an action may join, as ``(its call, most per batch)``; ``None``: it goes alone."""
    if isinstance(action, FENCED):
        return _FENCED
    if isinstance(action, RecordMissed):
        return _MISSED
    return None


def _groups(items: list[_Item]) -> list[list[_Item]]:
    """Runs of consecutive fenced actions (at most :data:`MAX_FENCED_BATCH`) and of consecutive
    missed records (at most :data:`MAX_MISSED_BATCH`); any other action alone."""
    out: list[list[_Item]] = []
    last_kind: _Batch | None = None
    for item in items:
        kind = _kind(item[0])
        if kind is not None and kind == last_kind and len(out[-1]) < kind[1]:
            out[-1].append(item)
        else:
            out.append([item])
        last_kind = kind
    return out


class StoreWorker:
    """Two single-thread executors: ``protocol`` (core actions, in order) and ``background``."""

    def __init__(self, store: Store, node: str, *, sent: Sent | None = None) -> None:
        self.store = store
        self.node = node
        self._sent = sent
        self._protocol = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qc-store")
        self._background = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qc-store-bg")
        self._lock = threading.Lock()
        self._queue: deque[_Item] = deque()
        self._draining = False
        self._closed = False
        self.split: Split | None = None
        """Set by the agent's health: which votes go (see the module docstring); None: all."""

    def submit(self, action: StoreAction) -> asyncio.Future[object]:
        """Queue ``action`` on the protocol thread; the future resolves on the running loop.

        Raises ``RuntimeError`` after :meth:`shutdown`.
        """
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.submit_then(action, _Gather(fut, action) if isinstance(action, Vote) else partial(_into, fut))
        return fut

    def submit_then(self, action: StoreAction, then: Then) -> None:
        """Queue ``action`` on the protocol thread; ``then(action, reply, error)`` runs on the loop.

        A vote longer than :data:`VOTE_PART` is answered part by part: ``then`` gets each part
        as a ``Vote`` of its own requests, in order (see the module's docstring).
        What the runtime uses: no future, callback list and partial per action,
        which an executor's burst of thousands of starts and finishes held all
        at once (docs/benchmarks.md, "An executor's memory per run").
        Raises ``RuntimeError`` after :meth:`shutdown`.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:  # (as a shut-down executor refuses work)
                raise RuntimeError("cannot submit a store call after the store worker shut down")
            self._queue.append((action, then))
            start, self._draining = not self._draining, True
        if start:
            self._protocol.submit(self._drain, loop)

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the protocol thread: carry out everything queued, in order, until the queue is empty
        (a long vote in parts, with the fenced actions queued meanwhile between them)."""
        while True:
            with self._lock:
                if not self._queue or self._closed:
                    self._draining = False
                    return
                items = list(self._queue)
                self._queue.clear()
            groups = _groups(items)
            for k, group in enumerate(groups):
                if isinstance(group[0][0], Vote) and len(group[0][0].requests) > VOTE_PART:
                    later = [item for rest in groups[k + 1 :] for item in rest]
                    with self._lock:  # (what came after it waits in the queue, where fenced ones can jump)
                        closed = self._closed
                        if not closed:
                            self._queue.extendleft(reversed(later))
                    if closed:  # (shutdown took the queue just now: these were never in it)
                        self._post(loop, _cancelled([*group, *later]))
                        return
                    if not self._vote_in_parts(loop, group[0]):
                        return
                    break
                if not self._send(loop, group):
                    return

    def _send(self, loop: asyncio.AbstractEventLoop, group: list[_Item]) -> bool:
        """Carry out ``group`` (cancelled instead once shut down: the rest is not sent) and hand
        its outcomes to the loop; ``False`` when the loop closed under us."""
        if self._closed:
            return self._post(loop, _cancelled(group))
        self._stamp(loop, group)
        return self._post(loop, self._carry_out(group))

    @staticmethod
    def _post(loop: asyncio.AbstractEventLoop, done: list[_Settled]) -> bool:
        """Hand ``done`` to the loop; ``False`` when the loop closed under us (shutdown: nobody
        awaits these)."""
        try:
            loop.call_soon_threadsafe(_settle, done)
        except RuntimeError:
            return False
        return True

    def _vote_in_parts(self, loop: asyncio.AbstractEventLoop, item: _Item) -> bool:
        """Carry out a long vote :data:`VOTE_PART` slots at a time, each part answered as a
        ``Vote`` of its own requests as soon as it is back; before each part after the first, the
        fenced actions queued meanwhile. A part that fails (or a shutdown) fails the rest of the
        vote as one ``Vote``: the parts before it landed and were answered. ``False`` when the
        loop closed under us."""
        action, then = item
        assert isinstance(action, Vote)
        requests = burst_order(action.requests)
        held: set[int] = set()  # (requests answered unsent: a later failure does not answer them again)
        for at in range(0, len(requests), VOTE_PART):
            if at:
                self._fenced_first(loop)
            part = Vote(requests[at : at + VOTE_PART])
            if self._closed:
                return self._post(loop, _cancelled([(Vote(requests[at:]), then)]))
            self._stamp(loop, [(part, then)])
            try:
                part, unsent = self._held_back(part, then)
                held.update(id(r) for a, *_ in unsent if isinstance(a, Vote) for r in a.requests)
                if unsent and not self._post(loop, unsent):
                    return False
                if not part.requests:
                    continue
                reply = perform(self.store, self.node, part)
            except Exception as exc:
                rest = Vote(tuple(r for r in requests[at:] if id(r) not in held))
                return self._post(loop, [(rest, then, None, exc)])
            if not self._post(loop, [(part, then, reply, None)]):
                return False
        return True

    def _held_back(self, vote: Vote, then: Then) -> tuple[Vote, list[_Settled]]:
        """``vote`` without the requests :attr:`split` holds back, and their outcomes (errors)."""
        split = self.split
        if split is None:
            return vote, []
        sent, unsent = split(vote)
        if not unsent:
            return vote, []
        return Vote(tuple(sent)), [(v, then, None, exc) for v, exc in unsent]

    def _fenced_first(self, loop: asyncio.AbstractEventLoop) -> None:
        """Carry out the queued fenced actions now, in their order, ahead of everything else queued."""
        with self._lock:
            fenced = [item for item in self._queue if isinstance(item[0], FENCED)]
            if not fenced:
                return
            rest = [item for item in self._queue if not isinstance(item[0], FENCED)]
            self._queue.clear()
            self._queue.extend(rest)
        for group in _groups(fenced):
            if not self._send(loop, group):
                return

    def _stamp(self, loop: asyncio.AbstractEventLoop, group: list[_Item]) -> None:
        """Just before ``group`` goes on the wire: tell the core (queued on the loop ahead of the
        replies) when its starts and renews left."""
        if self._sent is None:
            return
        wire: list[StoreAction] = [action for action, _ in group if isinstance(action, Start | Renew | Vote)]
        if wire:
            clock, tell = self._sent
            with contextlib.suppress(RuntimeError):  # (the loop closed: nobody awaits the replies)
                loop.call_soon_threadsafe(_tell_sent, tell, wire, clock())

    def _carry_out(self, group: list[_Item]) -> list[_Settled]:
        actions = [action for action, _ in group]
        try:
            if len(actions) == 1 and isinstance(actions[0], Vote) and self.split is not None:
                vote, unsent = self._held_back(actions[0], group[0][1])
                if vote.requests:
                    unsent.append((vote, group[0][1], perform(self.store, self.node, vote), None))
                return unsent
            if len(actions) == 1:
                return [(actions[0], group[0][1], perform(self.store, self.node, actions[0]), None)]
            kind = _kind(actions[0])
            assert kind is not None  # (_groups batches only actions of a kind)
            replies = kind[0](self.store, self.node, actions)
        except Exception as exc:  # the whole call failed: every action of it, with the same error
            return [(a, then, None, exc) for a, then in group]
        return [
            (a, then, None, reply) if isinstance(reply, StoreError) else (a, then, reply, None)
            for (a, then), reply in zip(group, replies, strict=True)
        ]

    async def background(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (a store read or heartbeat) on the background thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._background, fn)

    def shutdown(self) -> None:
        """Stop accepting work: a call on the wire finishes, queued ones are cancelled (no waiting)."""
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            self._queue.clear()
        for action, then in queued:
            then(action, None, asyncio.CancelledError())
        self._protocol.shutdown(wait=False, cancel_futures=True)
        self._background.shutdown(wait=False, cancel_futures=True)
