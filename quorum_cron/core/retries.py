"""The node core's retried store calls: missed records and high-water reads that failed.

A node must eventually land every missed record it owes (the slot is
unaccounted for otherwise) and its high-water read of each job (its votes
wait for it). When one fails it goes into this queue, to be sent again:

* while the store *answers* (an error reply: OOM, ``READONLY``), each call
  backs off on its own, ``retry_ms`` doubling up to 16x;
* while the store is *unreachable*, the calls are held and only one at a
  time is sent (the probe); a failed probe doubles the gap before the next
  one. A node cut off for an hour with a hundred per-minute jobs would
  otherwise send thousands of records into the void, each costing a connect
  timeout in the agent;
* when the store answers again (any reply), every held call goes at once,
  in the order they failed (:meth:`RetryQueue.release`);
* a call the store answered with an error goes at once when the store
  answers a call of the same job without one (:meth:`RetryQueue.release_jobs`).
  Backed off to 16x ``retry_ms`` by a refusal that has ended, a missed
  record otherwise waited up to that long while the job's later slots
  committed and raised its high-water mark past the slot: should every node
  then restart (a whole-cluster outage), no catch-up reaches the slot and it
  ends with no ledger entry (explorer seed 104798,
  ``sim/scenarios/bugs/refused-record-below-hwm-104798.toml``). A refusal of
  one job's keys (a corrupt value) is not ended by another job's replies, so
  it keeps its backoff.

Pure: monotonic readings come in as arguments.
"""

from __future__ import annotations

from collections.abc import Iterable
from heapq import heapify, heappop, heappush

from quorum_cron.core.actions import (
    Finish,
    ReadHighWater,
    ReadSlots,
    RecordMissed,
    Renew,
    Start,
    StoreAction,
    Vote,
)
from quorum_cron.core.timers import NEVER

__all__ = ["MAX_RETRY_DOUBLINGS", "Retried", "RetryQueue", "jobs_of"]

MAX_RETRY_DOUBLINGS = 4
"""A failed missed-record or high-water read is retried after ``retry_ms`` doubling up to 16x."""

Retried = ReadHighWater | RecordMissed


class RetryQueue:
    """Failed records and reads, each with the monotonic time it may be sent again."""

    __slots__ = (
        "_failures",
        "_heap",
        "_probe",
        "_probe_at",
        "_probe_failures",
        "_retry_ms",
        "_seq",
        "refused",
    )

    def __init__(self, retry_ms: int) -> None:
        self._retry_ms = retry_ms
        self._heap: list[tuple[int, int, Retried]] = []
        """(retry time, sequence number, action): the sequence keeps the order they failed."""
        self._seq = 0
        self._failures: dict[Retried, int] = {}
        """Consecutive failures of each call (its own backoff doubles, up to a cap)."""
        self._probe: Retried | None = None
        """While the store is unreachable, the one call in flight (the probe)."""
        self._probe_at = 0
        """While the store is unreachable, no call goes before this monotonic time."""
        self._probe_failures = 0
        """Consecutive failed probes of this outage (the gap before the next one doubles)."""
        self.refused: set[str] = set()
        """Jobs with a call waiting that the store answered with an error (see :meth:`release_jobs`)."""

    def __bool__(self) -> bool:
        return bool(self._heap)

    def add(self, at: int, action: Retried) -> None:
        """Send ``action`` at monotonic time ``at`` (or later, while the store is unreachable)."""
        self._seq += 1
        heappush(self._heap, (at, self._seq, action))

    def pending(self) -> list[tuple[int, Retried]]:
        """(retry time, action) of every call waiting, for inspection."""
        return [(at, a) for at, _, a in self._heap]

    def due(self, mono_ms: int, reachable: bool) -> list[Retried]:
        """The calls to send now (reachable: every one whose time came, in the order they
        failed; unreachable: at most one, the probe, once the probe gap is over)."""
        heap = self._heap
        if not heap or heap[0][0] > mono_ms:
            return []
        if not reachable:
            if self._probe is not None or mono_ms < self._probe_at:
                return []
            self._probe = heappop(heap)[2]
            return [self._probe]
        due: list[tuple[int, Retried]] = []
        while heap and heap[0][0] <= mono_ms:
            _, seq, action = heappop(heap)
            due.append((seq, action))
        due.sort(key=lambda e: e[0])
        return [a for _, a in due]

    def next_at(self, reachable: bool) -> int:
        """The monotonic time :meth:`due` next has something (``NEVER``: nothing until an input)."""
        if not self._heap:
            return NEVER
        if reachable:
            return self._heap[0][0]
        if self._probe is not None:
            return NEVER  # its reply or failure comes first
        return max(self._heap[0][0], self._probe_at)

    def answered(self, action: Retried) -> None:
        """The store answered ``action``."""
        if action is self._probe:
            self._probe = None
        self._failures.pop(action, None)

    def failed(self, action: Retried, mono_ms: int, reachable: bool) -> None:
        """``action`` failed at ``mono_ms`` (``reachable``: the store answered with an error)."""
        if reachable:
            self.refused.update(_jobs(action))
        self._back_off(action, mono_ms, reachable)

    def _back_off(self, action: Retried, mono_ms: int, reachable: bool) -> None:
        if action is self._probe:
            self._probe = None
            if not reachable:
                gap = self._retry_ms << min(self._probe_failures, MAX_RETRY_DOUBLINGS)
                self._probe_at = mono_ms + gap
                self._probe_failures += 1
        failures = self._failures.get(action, 0)
        self._failures[action] = failures + 1
        self.add(mono_ms + (self._retry_ms << min(failures, MAX_RETRY_DOUBLINGS)), action)

    def not_yet(self, action: Retried, mono_ms: int) -> None:
        """The store answered that ``action`` came too early (a missed record before the slot's
        deadline by the store's clock): ask again after the same doubling wait as a failure's.

        Why not every ``retry_ms``: a node whose wall clock runs ahead (stepped forward) owes a
        record for every slot of its lead, and each is too early until the store's clock gets
        there. Asked every ``retry_ms``, ten minutes ahead with one 10-second job made 120 calls a
        second (a simulator audit); with 100 such jobs, 100 times that, into the store every node
        shares. Doubling to 16x ``retry_ms`` lands each record at most that much after its time.
        """
        self._back_off(action, mono_ms, reachable=True)  # (not a refusal: no reply releases it)

    def release_jobs(self, jobs: Iterable[str]) -> None:
        """The store answered a call of these jobs without an error: each call of theirs waiting
        after an error reply is due now (see the module docstring). Cheap when none is."""
        hit = self.refused.intersection(jobs)
        if not hit:
            return
        self.refused -= hit
        heap = []
        for at, seq, action in self._heap:
            if not hit.isdisjoint(_jobs(action)):
                at = 0
                self._failures.pop(action, None)
            heap.append((at, seq, action))
        heapify(heap)
        self._heap = heap

    def release(self) -> None:
        """The store answers again: every waiting call is due now, in the order they failed."""
        self._heap = sorted((0, seq, a) for _, seq, a in self._heap)
        self._failures.clear()
        self.refused.clear()
        self._probe_at = self._probe_failures = 0


def _jobs(action: Retried) -> tuple[str, ...]:
    return action.jobs if isinstance(action, ReadHighWater) else (action.job,)


def jobs_of(action: StoreAction) -> Iterable[str]:
    """The jobs a store call is about (a sweep's: none, it covers whatever is due)."""
    if isinstance(action, Vote):
        return (r.job for r in action.requests)
    if isinstance(action, ReadSlots):
        return (job for job, _ in action.slots)
    if isinstance(action, ReadHighWater):
        return action.jobs
    if isinstance(action, RecordMissed | Start | Renew | Finish):
        return (action.job,)
    return ()
