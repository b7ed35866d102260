"""Polls: how a node that voted for a slot learns it was assigned the slot when no notice came.

The chosen executor learns of a commit from an assignment notice
(docs/protocol.md). A poll (``ReadSlots``) is the fallback for a lost one,
and what it costs depends on whether the node is subscribed to its notices:

* **not subscribed** (notices off, or the subscription not confirmed yet):
  a slot still ``proposed`` is read every ``assign_poll_ms``;
* **subscribed** (:meth:`NodeCore.notices_subscribed`): pub/sub loses a
  notice only with its connection, and the agent tells the core each time
  the store confirms the subscription again; the core then reads every
  slot it awaits at once (:meth:`Polls._poll_awaiting_now`). Between
  those, a slot still proposed is *parked*: kept, so that a returning
  subscription reads it, and forgotten without a read once
  ``start_timeout - assign_poll`` has passed. Most such slots were
  committed to another voter, whose notice this node never gets: at
  10,000 jobs every second slot was read once only to learn that
  (issue 27). A notice lost unseen costs the start timeout, after which a
  sweep hands the slot to a voter (with a notice): latency, never safety.
"""

from __future__ import annotations

from quorum_cron.core.actions import Failure, Now, ReadSlots
from quorum_cron.core.slots import HELD, IN_FLIGHT
from quorum_cron.core.state import CoreState, _JobState

__all__ = ["Polls"]


class Polls(CoreState):
    """Poll timers of the slots this node voted for and awaits (see the module docstring)."""

    def _await_notice(self, js: _JobState, fire_ms: int, now: Now) -> None:
        """The slot is still proposed: wait for its notice, polling (or parked) as above."""
        s = self._slot(js, fire_ms)
        s.poll_at = now.mono_ms + self._poll_gap(js.job.deadline_ms)
        s.parked = self._notices_live
        self._dirty.add(js.index)

    def _poll_gap(self, deadline_ms: int) -> int:
        """How long a slot still proposed waits for its notice before it is polled (or, parked,
        forgotten): ``assign_poll_ms`` without a subscription; with one, until ``assign_poll_ms``
        before the start timeout (counted from the commit, which is no earlier than this vote)
        would hand the slot to another voter. Always within half the deadline."""
        s = self.settings
        gap = s.assign_poll_ms
        if self._notices_live:
            gap = max(gap, s.start_timeout_ms - s.assign_poll_ms)
        return max(10, min(gap, deadline_ms // 2))

    def _poll_awaiting_now(self) -> None:
        """Every slot awaiting its assignment on a poll timer is polled at the next tick."""
        for js in self._jobs.values():
            for s in js.slots.values():
                at = s.poll_at
                if at is not None and at > 0:  # (a timer: IN_FLIGHT and HELD are none)
                    s.poll_at = 0
                    s.parked = False
                    self._dirty.add(js.index)

    def _polls_due(self, js: _JobState, order: list[int], now: Now, reads: list[tuple[str, int]]) -> None:
        """Add the job's slots whose poll is due to ``reads`` (the tick sends them in one call)."""
        slots = js.slots
        for fire_ms in order:
            s = slots.get(fire_ms)
            if s is None:
                continue
            at = s.poll_at
            if at is not None and 0 <= at <= now.mono_ms:
                if s.parked:  # (subscribed: no notice came, so the slot is not ours)
                    if s.vote is None and fire_ms > js.parked_out_ms:
                        js.parked_out_ms = fire_ms  # (a newer membership record votes it again)
                    self._stop_polling(js, fire_ms)
                    continue
                s.poll_at = IN_FLIGHT
                reads.append((js.job.name, fire_ms))

    def _stop_polling(self, js: _JobState, fire_ms: int) -> None:
        s = js.slots.get(fire_ms)
        if s is None:
            return
        at = s.poll_at
        s.parked = False
        if at is not None:
            s.poll_at = None
            self._touched.append((js, s))
            if at >= 0:  # (IN_FLIGHT and HELD are no timer)
                self._dirty.add(js.index)
        p = s.vote
        if p is not None and p.revote:  # (decided, or no longer proposed: nothing to bring it)
            s.vote = None
            self._touched.append((js, s))
            self._dirty.add(js.index)

    def _polls_failed(self, action: ReadSlots, failure: Failure, retry_at: int) -> None:
        """A poll call failed: each slot is polled again at ``retry_at``, or, with the store
        unreachable, once it answers (:meth:`~quorum_cron.core.state.CoreState._hold_until_answered`)."""
        held = self._hold_until_answered(failure, retry_at)
        for job, fire_ms in action.slots:
            js = self._jobs[job]
            s = js.slots.get(fire_ms)
            if s is not None and s.poll_at is not None:
                if held:
                    s.poll_at = HELD  # (no timer, as IN_FLIGHT was: the job's timers stand)
                    self._held.add(js.index)
                else:
                    s.poll_at = retry_at
                    self._dirty.add(js.index)
