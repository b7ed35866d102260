"""What the node core can say about itself without changing: a slot's phase, and the reference wakeup.

Neither is on the protocol's path. :meth:`Inspection.slot_phase` names what
the node is doing about one slot (:class:`quorum_cron.core.lifecycle.Phase`, the
state the lifecycle table is written in), for status output and for the
tests that check the table against the code. :meth:`Inspection.reference_wakeup`
recomputes :meth:`NodeCore.next_wakeup` from every timer of every job, the
slow way: ``tests/test_core_incremental.py`` checks the incremental timers
against it at every call of whole simulated runs. Kept apart from
``core.py`` so that module holds only the transitions.
"""

from __future__ import annotations

from quorum_cron.core.actions import Now
from quorum_cron.core.lifecycle import Phase
from quorum_cron.core.run import RunningSide
from quorum_cron.core.slots import LOCAL_NO, LOCAL_RUNNING
from quorum_cron.core.timers import NEVER

__all__ = ["Inspection"]


class Inspection(RunningSide):
    """Read-only views of the core's state (mixed into :class:`quorum_cron.core.node.NodeCore`)."""

    def slot_phase(self, job: str, fire_ms: int) -> Phase:
        """What this node is doing about slot ``(job, fire_ms)`` (:mod:`quorum_cron.core.lifecycle`):
        the phase of its record (:mod:`quorum_cron.core.slots`), ``none`` if it holds none."""
        js = self._jobs.get(job)
        s = js.slots.get(fire_ms) if js is not None else None
        return Phase.NONE if s is None else s.phase

    def reference_wakeup(self, now: Now) -> int:
        """:meth:`next_wakeup` computed from scratch from every timer of every job (slow).

        The reference the incremental timers must equal; ``tests/test_core_incremental.py``
        checks it at every call of whole simulated runs.
        """
        cfg = self.settings
        waits = [max(0, self._next_sweep_mono - now.mono_ms)] if not self._sweeping else []
        for js in self._jobs.values():
            if not self._stopping:
                if not js.removed:  # (a job removed by a reload takes in no new slot)
                    nf = js.job.schedule.next_after(js.cursor_ms)
                    waits.append(max(0, nf - cfg.vote_lead_ms - now.wall_ms))
                for p in (slot.vote for slot in js.slots.values() if slot.vote is not None):
                    if p.in_flight:
                        continue
                    if js.job.run_local and not self._reachable and p.local == LOCAL_NO:
                        waits.append(max(0, p.fire_ms - now.wall_ms))
                    if self._may_vote:  # trusted and a member: a non-member abstains like an untrusted node
                        if js.caught_up:
                            waits.append(max(0, p.retry_at_mono - now.mono_ms))
                    elif p.local != LOCAL_RUNNING and js.caught_up:
                        waits.append(max(0, p.fire_ms + p.deadline_ms + cfg.max_skew_ms + 1 - now.wall_ms))
            slots = list(js.slots.values())
            waits.extend(
                max(0, s.poll_at - now.mono_ms) for s in slots if s.poll_at is not None and s.poll_at >= 0
            )
            waits.extend(max(0, s.deferred[1] - now.wall_ms) for s in slots if s.deferred is not None)
            runs = [s.run for s in slots if s.run is not None]
            waits.extend(max(0, r.renew_at_mono - now.mono_ms) for r in runs if not r.renewing)
            if self._killed_at_lease_end(js):
                waits.extend(max(0, r.lease_until_mono - now.mono_ms) for r in runs)
            waits.extend(
                max(0, s.finish_retry - now.mono_ms)
                for s in slots
                if s.finish is not None and not s.finishing
            )
        retry_at = self._retries.next_at(self._reachable)  # (the queue's own rule: tested there)
        if retry_at != NEVER:
            waits.append(max(0, retry_at - now.mono_ms))
        return min(waits) if waits else cfg.sweep_ms
