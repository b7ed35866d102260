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

from quorum_cron.core.actions import Now, RecordMissed
from quorum_cron.core.lifecycle import Phase
from quorum_cron.core.run import RunningSide
from quorum_cron.core.state import LOCAL_NO, LOCAL_RUNNING
from quorum_cron.core.timers import NEVER

__all__ = ["Inspection"]


class Inspection(RunningSide):
    """Read-only views of the core's state (mixed into :class:`quorum_cron.core.node.NodeCore`)."""

    def slot_phase(self, job: str, fire_ms: int) -> Phase:
        """What this node is doing about slot ``(job, fire_ms)`` (:mod:`quorum_cron.core.lifecycle`)."""
        js = self._jobs.get(job)
        if js is None:
            return Phase.NONE
        if fire_ms in js.running:
            return Phase.RUNNING
        if fire_ms in js.starting:
            return Phase.STARTING
        if (job, fire_ms) in self._finishes:
            return Phase.FINISHING
        if fire_ms in js.deferred:
            return Phase.DEFERRED
        p = js.pending.get(fire_ms)
        if p is not None and p.revote:
            return Phase.AWAITING  # (a vote sent again under a newer record: the slot still awaits)
        if p is not None:
            if p.in_flight:
                return Phase.VOTING
            if p.local == LOCAL_RUNNING:
                return Phase.LOCAL
            if p.abstained and not self._may_vote:
                return Phase.ABSTAINED
            return Phase.DUE
        if fire_ms in js.awaiting:
            return Phase.AWAITING
        key = (job, fire_ms)
        if any(isinstance(a, RecordMissed) and (a.job, a.fire_ms) == key for _, a in self._retries.pending()):
            return Phase.MISSED
        return Phase.NONE

    def reference_wakeup(self, now: Now) -> int:
        """:meth:`next_wakeup` computed from scratch from every timer of every job (slow).

        The reference the incremental timers must equal; ``tests/test_core_incremental.py``
        checks it at every call of whole simulated runs.
        """
        s = self.settings
        waits = [max(0, self._next_sweep_mono - now.mono_ms)] if not self._sweeping else []
        for js in self._jobs.values():
            if not self._stopping:
                if not js.removed:  # (a job removed by a reload takes in no new slot)
                    nf = js.job.schedule.next_after(js.cursor_ms)
                    waits.append(max(0, nf - s.vote_lead_ms - now.wall_ms))
                for p in js.pending.values():
                    if p.in_flight:
                        continue
                    if js.job.run_local and not self._reachable and p.local == LOCAL_NO:
                        waits.append(max(0, p.fire_ms - now.wall_ms))
                    if self._may_vote:  # trusted and a member: a non-member abstains like an untrusted node
                        if js.caught_up:
                            waits.append(max(0, p.retry_at_mono - now.mono_ms))
                    elif p.local != LOCAL_RUNNING and js.caught_up:
                        waits.append(max(0, p.fire_ms + p.deadline_ms + s.max_skew_ms + 1 - now.wall_ms))
            waits.extend(max(0, at - now.mono_ms) for at in js.awaiting.values() if at >= 0)
            waits.extend(max(0, at - now.wall_ms) for _, at in js.deferred.values())
            waits.extend(max(0, r.renew_at_mono - now.mono_ms) for r in js.running.values() if not r.renewing)
            if self._killed_at_lease_end(js):
                waits.extend(max(0, r.lease_until_mono - now.mono_ms) for r in js.running.values())
        waits.extend(
            max(0, self._finish_retry_mono.get(k, 0) - now.mono_ms)
            for k in self._finishes
            if k not in self._finishing
        )
        retry_at = self._retries.next_at(self._reachable)  # (the queue's own rule: tested there)
        if retry_at != NEVER:
            waits.append(max(0, retry_at - now.mono_ms))
        return min(waits) if waits else s.sweep_ms
