"""Operator control and membership in the memory model (``control.lua`` and ``members.lua`` in Redis).

Pause, resume, trigger and their audit entries, and the members hash with
its heartbeats, for :class:`quorum_cron.store.memory.MemoryStore`, which
mixes this in: these calls never touch a slot, so they sit apart from the
protocol's votes, transitions and sweeps in ``memory.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from quorum_cron.model import AuditAction, AuditEntry, HeartbeatResult, JobControl, Member
from quorum_cron.store.memory_records import _Job, _Member

__all__ = ["ControlModel"]


class ControlModel:
    """The control and membership calls of the store contract (the clock and bounds come from the store)."""

    _clock: Callable[[], int]
    _retention_ms: int
    _ledger_maxlen: int
    _audit_maxlen: int
    _trigger_maxlen: int
    _jobs: dict[str, _Job]
    _members: dict[str, _Member]

    def _job(self, name: str) -> _Job:
        job = self._jobs.get(name)
        if job is None:
            job = self._jobs[name] = _Job(
                name=name,
                ledger=deque(maxlen=self._ledger_maxlen), audit=deque(maxlen=self._audit_maxlen)
            )
        return job

    # -- operator control ----------------------------------------------------

    def pause(self, job: str, by: str, reason: str) -> JobControl:
        now = self._clock()
        j = self._job(job)
        cur = j.control
        if not (cur.paused and cur.by == by and cur.reason == reason):
            j.control = JobControl(True, by, now, reason)
            j.audit.append(AuditEntry(job, AuditAction.PAUSE, by, now, reason))
        return j.control

    def resume(self, job: str, by: str) -> JobControl:
        now = self._clock()
        j = self._job(job)
        if j.control.paused:
            j.control = JobControl(False, by, now, "")
            j.audit.append(AuditEntry(job, AuditAction.RESUME, by, now, ""))
        return j.control

    def control(self, job: str) -> JobControl:
        return self._job(job).control

    def trigger(self, job: str, by: str) -> int:
        now = self._clock()
        j = self._job(job)
        kept = sorted({f for f in j.triggers if f >= now - self._retention_ms} | {now})
        j.triggers = kept[-self._trigger_maxlen :]
        j.audit.append(AuditEntry(job, AuditAction.TRIGGER, by, now, str(now)))
        return now

    def triggers(self, job: str, since_ms: int) -> list[int]:
        low = max(since_ms + 1, self._clock() - self._retention_ms)
        return [f for f in self._job(job).triggers if f >= low]

    def audit(self, job: str, limit: int) -> list[AuditEntry]:
        return list(reversed(self._job(job).audit))[: max(limit, 0)]

    # -- membership ----------------------------------------------------------

    def heartbeat(self, node: str, incarnation: str, ttl_ms: int, info: dict[str, str]) -> HeartbeatResult:
        now = self._clock()
        cur = self._members.get(node)
        if cur is not None and cur.incarnation != incarnation and cur.expires_ms > now:
            return HeartbeatResult(ok=False, now_ms=now, holder=cur.incarnation)
        self._members[node] = _Member(incarnation, now, now + ttl_ms, dict(sorted(info.items())))
        return HeartbeatResult(ok=True, now_ms=now)

    def leave(self, node: str, incarnation: str) -> None:
        cur = self._members.get(node)
        if cur is not None and cur.incarnation == incarnation:
            del self._members[node]

    def members(self) -> list[Member]:
        now = self._clock()
        return [
            Member(node=n, incarnation=m.incarnation, seen_ms=m.seen_ms, expires_ms=m.expires_ms, info=m.info)
            for n, m in sorted(self._members.items())
            if m.expires_ms > now
        ]

    def time_ms(self) -> int:
        return self._clock()
