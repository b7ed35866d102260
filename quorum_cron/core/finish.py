"""The finish buffer of the node core: a run's result on its way to the store, until it lands.

A job process ended: its result (:func:`quorum_cron.core.outcomes.finished`,
fenced by the run's token) is the slot record's ``finish`` part, sent at
once and, after a failure, again at its retry time (a heap of retry times
across the node's slots; an entry whose slot no longer waits for that time
is stale and dropped when it surfaces). At most
:data:`~quorum_cron.core.state.MAX_PENDING_FINISHES` results wait for a
resend: a node cut off from its store for long must not grow without bound.
The bound counts only those: a result whose ``Finish`` is on its way is
never dropped, however many there are (a burst's executor has tens of
thousands queued at 100,000 jobs; they are answered within the burst).
While a result is on its way or held, the slot's phase is ``finishing``,
and a late notice or read of the slot does not start it again
(``RunningSide._ran``).
"""

from __future__ import annotations

from heapq import heappop, heappush

from quorum_cron.core.actions import Action, Failure, Finish, Now
from quorum_cron.core.model import TransitionResult
from quorum_cron.core.outcomes import finished
from quorum_cron.core.run import RunningSide
from quorum_cron.core.slots import Slot
from quorum_cron.core.state import MAX_PENDING_FINISHES, _JobState

__all__ = ["FinishingSide"]


class FinishingSide(RunningSide):
    """Run results → ``Finish`` calls, held and sent again until the store has them."""

    def _record_finish(
        self, js: _JobState, s: Slot, token: int, succeeded: bool, detail: str, out: list[Action]
    ) -> None:
        """The run of slot ``s`` under ``token`` ended: hold its result and send it at once."""
        ran, s.run = s.run, None
        attempt = ran.runs if ran is not None and ran.token == token else 0
        spec = self._definition(js, s.fire_ms)  # (a reload keeps a slot's own definition)
        action = finished(js.job.name, s.fire_ms, token, succeeded, detail, spec, attempt)
        if s.finish is not None and not s.finishing:
            self._held_finishes -= 1  # (a held result replaced: this one is on its way)
        s.finish = action
        s.finishing = True
        out.append(action)

    def _finishes_due(self, now: Now, out: list[Action]) -> None:
        heap = self._finish_heap
        keys: set[tuple[str, int]] = set()
        while heap and heap[0][0] <= now.mono_ms:
            at, key = heappop(heap)
            if self._finish_waits(key, at):
                keys.add(key)
        for key in sorted(keys):
            s = self._slot_of(key)
            assert s is not None and s.finish is not None
            s.finishing = True
            self._held_finishes -= 1
            out.append(s.finish)

    def _slot_of(self, key: tuple[str, int]) -> Slot | None:
        """The record of slot ``(job, fire_ms)``, if the node holds one."""
        js = self._jobs.get(key[0])
        return js.slots.get(key[1]) if js is not None else None

    def _finish_waits(self, key: tuple[str, int], at: int) -> bool:
        """Whether the finish of ``key`` waits to be sent again at ``at`` (else the entry is stale)."""
        s = self._slot_of(key)
        return s is not None and s.finish is not None and not s.finishing and s.finish_retry == at

    def _reply_finish(self, action: Finish, reply: object, now: Now) -> list[Action]:
        assert isinstance(reply, TransitionResult)
        s = self._slot_of((action.job, action.fire_ms))
        if s is not None:
            self._touched.append((self._jobs[action.job], s))
            if s.finish is not None and not s.finishing:
                self._held_finishes -= 1
            s.finishing = False
            s.finish = None
            s.finish_retry = 0
        # A failed run with retries left comes back committed (maybe to us).
        return self._on_view(reply.slot, now, store_ms=reply.now_ms) if reply.ok else []

    def _failed_finish(
        self, action: Finish, now: Now, failure: Failure, reason: str, retry_at: int
    ) -> list[Action]:
        """The ``Finish`` failed: hold the result for a resend at ``retry_at`` or, with
        :data:`~quorum_cron.core.state.MAX_PENDING_FINISHES` already held, drop it (counted in
        ``dropped_finishes``; the slot's lease then runs out and a sweep records it ``lost``)."""
        key = (action.job, action.fire_ms)
        s = self._slot_of(key)
        if s is None or s.finish is None or not s.finishing:
            return []  # (no result of it on its way: an older send's failure)
        s.finishing = False
        if self._held_finishes >= MAX_PENDING_FINISHES:
            s.finish = None
            self.dropped_finishes += 1
            return []
        self._held_finishes += 1
        s.finish_retry = retry_at
        heappush(self._finish_heap, (retry_at, key))
        return []
