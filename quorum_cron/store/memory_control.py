"""Operator control and membership in the memory model (``control.lua`` and ``members.lua`` in Redis).

Pause, resume, trigger and their audit entries, the members hash with
its heartbeats, and the ports beside the slot protocol (notices, the alerts
journal: :mod:`.memory_ports`), for :class:`quorum_cron.store.memory.MemoryStore`, which
mixes this in: these calls never touch a slot, so they sit apart from the
protocol's votes, transitions and sweeps in ``memory.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from quorum_cron.core.membership import MAX_EPOCH, epoch_bound_refusal
from quorum_cron.core.model import (
    AuditAction,
    AuditEntry,
    Configuration,
    HeartbeatResult,
    JobControl,
    Member,
    Membership,
    MembershipChange,
    MembershipRecord,
)
from quorum_cron.store.memory_ports import MemoryAlerts, MemoryListening, MemoryNotices
from quorum_cron.store.memory_records import _Job, _Member
from quorum_cron.store.ports import AlertPage, DeliverNotice, StoredAlert

__all__ = ["ControlModel", "change_refusal", "same_refusal", "waiting_refusal"]


def change_refusal(ms: Membership | None, expect_epoch: int, *, joint: bool) -> str:
    """Why a change (``joint=False``: start one) or a finish (``joint=True``) of the stored
    record is refused, or "" (the same wording from control.lua's replies)."""
    if ms is None:
        return "no membership record yet (a node creates it from its config when it starts)"
    rec = ms.record
    if rec.epoch != expect_epoch:
        return f"the membership is at epoch {rec.epoch}, not {expect_epoch} (changed meanwhile: look again)"
    if joint and rec.old is None:
        return f"epoch {rec.epoch} is not a joint configuration: nothing to finish"
    if not joint and rec.old is not None:
        return f"epoch {rec.epoch} is a change in progress: finish it first"
    return ""


def same_refusal(current: Configuration) -> str:
    return f"the members are already {current.describe()}"


def waiting_refusal(lagging: list[str], epoch: int) -> str:
    return f"waiting for {', '.join(lagging)} to heartbeat under epoch {epoch} (or force it)"


class ControlModel:
    """The control and membership calls of the store contract (the clock and bounds come from the store)."""

    _clock: Callable[[], int]
    _retention_ms: int
    _ledger_maxlen: int
    _audit_maxlen: int
    _trigger_maxlen: int
    _jobs: dict[str, _Job]
    _members: dict[str, _Member]
    _membership: Membership | None
    _membership_log: deque[Membership]
    _notices: MemoryNotices
    _alerts: MemoryAlerts
    _job_tables: dict[str, str]

    def _job(self, name: str) -> _Job:
        job = self._jobs.get(name)
        if job is None:
            job = self._jobs[name] = _Job(
                name=name, ledger=deque(maxlen=self._ledger_maxlen), audit=deque(maxlen=self._audit_maxlen)
            )
        return job

    # -- operator control ----------------------------------------------------

    def pause(self, job: str, by: str, reason: str) -> JobControl:
        now = self._clock()
        j = self._job(job)
        cur = j.control
        if not (cur.paused and cur.by == by and cur.reason == reason):
            j.control = JobControl(True, by, now, reason)
            j.audit_seq += 1
            j.audit.append(AuditEntry(job, AuditAction.PAUSE, by, now, reason))
            return replace(j.control, changed=True)
        return j.control

    def resume(self, job: str, by: str) -> JobControl:
        now = self._clock()
        j = self._job(job)
        if j.control.paused:
            j.control = JobControl(False, by, now, "")
            j.audit_seq += 1
            j.audit.append(AuditEntry(job, AuditAction.RESUME, by, now, ""))
            return replace(j.control, changed=True)
        return j.control

    def control(self, job: str) -> JobControl:
        return self._job(job).control

    def trigger(self, job: str, by: str) -> int:
        now = self._clock()
        j = self._job(job)
        kept = sorted({f for f in j.triggers if f >= now - self._retention_ms} | {now})
        j.triggers = kept[-self._trigger_maxlen :]
        j.audit_seq += 1
        j.audit.append(AuditEntry(job, AuditAction.TRIGGER, by, now, str(now)))
        self._notices.triggered(job, now)
        return now

    def triggers(self, job: str, since_ms: int) -> list[int]:
        low = max(since_ms + 1, self._clock() - self._retention_ms)
        return [f for f in self._job(job).triggers if f >= low]

    def audit(self, job: str, limit: int) -> list[AuditEntry]:
        return list(reversed(self._job(job).audit))[: max(limit, 0)]

    # -- membership ----------------------------------------------------------

    def heartbeat(
        self, node: str, incarnation: str, ttl_ms: int, info: dict[str, str], epoch: int = 0
    ) -> HeartbeatResult:
        now = self._clock()
        cur = self._members.get(node)
        if cur is not None and cur.incarnation != incarnation and cur.expires_ms > now:
            return HeartbeatResult(ok=False, now_ms=now, holder=cur.incarnation, membership=self._membership)
        self._members[node] = _Member(incarnation, now, now + ttl_ms, dict(sorted(info.items())), epoch)
        ms = self._membership
        if ms is not None and ms.record.epoch < MAX_EPOCH:
            rec = ms.record
            if rec.old is None and rec.current.open_seats and not rec.current.has(node):
                # "size = N": the first N distinct ids to register fill the seats, one epoch each.
                cfg = rec.current
                filled = Configuration.of((*cfg.members, node), cfg.size, cfg.quorum)
                self._set_membership(
                    MembershipRecord(rec.epoch + 1, filled), now, node, f"seat filled by {node}"
                )
            elif rec.old is not None and epoch >= rec.epoch and not self._lagging(rec, now):
                why = f"every member of epoch {rec.epoch} holds it"
                self._set_membership(MembershipRecord(rec.epoch + 1, rec.current), now, node, why)
        return HeartbeatResult(ok=True, now_ms=now, membership=self._membership)

    def leave(self, node: str, incarnation: str) -> None:
        cur = self._members.get(node)
        if cur is not None and cur.incarnation == incarnation:
            del self._members[node]

    def members(self) -> list[Member]:
        now = self._clock()
        return [
            Member(n, m.incarnation, m.seen_ms, m.expires_ms, m.info, m.epoch)
            for n, m in sorted(self._members.items())
            if m.expires_ms > now
        ]

    # -- the membership record ----------------------------------------------

    def _lagging(self, rec: MembershipRecord, now: int) -> list[str]:
        """Members of ``rec.current`` without a live heartbeat sent under ``rec.epoch`` (or later), sorted."""
        have = self._members
        return [
            n
            for n in rec.current.members
            if n not in have or have[n].epoch < rec.epoch or have[n].expires_ms <= now
        ]

    def _set_membership(self, rec: MembershipRecord, now: int, by: str, reason: str) -> Membership:
        ms = self._membership = Membership(rec, now, by, reason)
        self._membership_log.append(ms)
        return ms

    def membership(self) -> Membership | None:
        return self._membership

    def init_membership(self, current: Configuration, by: str) -> Membership:
        if self._membership is None:
            return self._set_membership(
                MembershipRecord(1, current), self._clock(), by, "created from the config"
            )
        return self._membership

    def change_membership(
        self, expect_epoch: int, current: Configuration, by: str, reason: str
    ) -> MembershipChange:
        ms = self._membership
        why = change_refusal(ms, expect_epoch, joint=False) or epoch_bound_refusal(ms)
        if ms is not None and not why and current == ms.record.current:
            why = same_refusal(current)
        if why:
            return MembershipChange(False, ms, why)
        assert ms is not None
        rec = MembershipRecord(expect_epoch + 1, current, ms.record.current)
        return MembershipChange(True, self._set_membership(rec, self._clock(), by, reason))

    def finish_membership(
        self, expect_epoch: int, by: str, reason: str, force: bool = False
    ) -> MembershipChange:
        ms = self._membership
        why = change_refusal(ms, expect_epoch, joint=True) or epoch_bound_refusal(ms)
        now = self._clock()
        if ms is not None and not why and not force:
            lagging = self._lagging(ms.record, now)
            if lagging:
                why = (
                    f"waiting for {', '.join(lagging)} to heartbeat under epoch {expect_epoch} (or force it)"
                )
        if why:
            return MembershipChange(False, ms, why)
        assert ms is not None
        rec = MembershipRecord(expect_epoch + 1, ms.record.current)
        return MembershipChange(True, self._set_membership(rec, now, by, reason))

    def membership_log(self, limit: int) -> list[Membership]:
        return list(reversed(self._membership_log))[: max(limit, 0)]

    def time_ms(self) -> int:
        return self._clock()

    # -- notices and the alerts journal --------------------------------------

    def listen_notices(
        self,
        node: str,
        jobs: Sequence[str],
        deliver: DeliverNotice,
        on_subscribed: Callable[[], None] | None = None,
    ) -> MemoryListening:
        return self._notices.listen(node, jobs, deliver, on_subscribed)

    def publish_jobs(self, node: str, table: str) -> None:
        self._job_tables[node] = table

    def published_jobs(self, nodes: Sequence[str]) -> dict[str, str]:
        return {n: self._job_tables[n] for n in nodes if n in self._job_tables}

    def add_alert(self, alert: StoredAlert) -> None:
        self._alerts.add(alert, self._clock())

    def alerts(self, limit: int) -> AlertPage:
        return self._alerts.newest(limit)
