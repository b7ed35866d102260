"""MemoryStore: the Python model of the Redis scripts.

This is not a mock. It implements the store contract of
:mod:`quorum_cron.store.base` with the same rules, in the same order, as the
Lua scripts in :mod:`quorum_cron.store.scripts`, and the contract suite
(``tests/test_store_contract.py``) drives both with the same generated
operations and demands identical replies. The simulator and the unit tests
use it because it is deterministic and fast: its time is an injected clock
(``Callable[[], int]`` returning epoch milliseconds), it draws no random
numbers, and it iterates only over sorted keys.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from quorum_cron.core.model import (
    DECIDED_STATES,
    Delivery,
    LedgerEntry,
    Overlap,
    SlotState,
    SlotView,
    SweepParams,
    SweepResult,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
    refusal_reason,
)
from quorum_cron.store import keys as defaults
from quorum_cron.store.memory_control import ControlModel
from quorum_cron.store.memory_fenced import FencedInTurn, MissedInTurn
from quorum_cron.store.memory_observe import ObservationModel
from quorum_cron.store.memory_ports import MemoryAlerts, MemoryNotices
from quorum_cron.store.memory_records import _Job, _Slot, adopt_record, choose_executor, log_entry

__all__ = ["MemoryStore"]


class MemoryStore(ControlModel, ObservationModel, FencedInTurn, MissedInTurn):
    """The store contract in memory, on an injected clock.

    ``clock`` returns the store's time in epoch ms: in the simulator it is the
    store process's virtual clock, in tests a controllable counter.
    """

    def __init__(
        self,
        clock: Callable[[], int],
        *,
        retention_ms: int = defaults.DEFAULT_RETENTION_MS,
        ledger_maxlen: int = defaults.DEFAULT_LEDGER_MAXLEN,
        audit_maxlen: int = defaults.DEFAULT_AUDIT_MAXLEN,
        trigger_maxlen: int = defaults.DEFAULT_TRIGGER_MAXLEN,
    ) -> None:
        self._clock = clock
        self._retention_ms = retention_ms
        self._ledger_maxlen = ledger_maxlen
        self._audit_maxlen = audit_maxlen
        self._trigger_maxlen = trigger_maxlen
        self._jobs = {}
        self._members = {}
        self._membership = None
        self._membership_log = deque(maxlen=audit_maxlen)
        self._open_jobs: dict[str, None] = {}
        """The jobs with a slot not yet ended: a sweep looks only at them."""
        self._notices, self._alerts, self._job_tables = MemoryNotices(), MemoryAlerts(), {}
        self._sweep_index: dict[int, tuple[Sequence[SweepParams], dict[str, list[int]]]] = {}
        """Sweep parameter lists seen (by identity, the list kept alive) → each job's positions in it."""

    def __repr__(self) -> str:
        return f"MemoryStore(jobs={len(self._jobs)}, members={len(self._members)})"

    # -- helpers -------------------------------------------------------------

    def _get(self, job: _Job, fire_ms: int, now: int) -> _Slot | None:
        """The slot record, or None when absent or past retention (Redis: key TTL)."""
        rec = job.slots.get(fire_ms)
        if rec is not None and rec.expires_ms <= now:
            del job.slots[fire_ms]
            self._close_slot(job, fire_ms)
            return None
        return rec

    def _open_slot(self, job: _Job, fire_ms: int) -> None:
        """Note a slot not yet ended (Redis: a member of the job's sorted set of open slots)."""
        job.open.add(fire_ms)
        self._open_jobs[job.name] = None

    def _close_slot(self, job: _Job, fire_ms: int) -> None:
        job.open.discard(fire_ms)
        if not job.open:
            self._open_jobs.pop(job.name, None)

    def _touch(self, rec: _Slot, now: int) -> None:
        rec.expires_ms = now + self._retention_ms

    @staticmethod
    def _view(name: str, fire_ms: int, rec: _Slot | None) -> SlotView:
        if rec is None:
            return SlotView(name, fire_ms, SlotState.ABSENT)
        return SlotView(  # (positional, in field order: built on every reply)
            name,
            fire_ms,
            rec.state,
            tuple(sorted(rec.votes.items())),
            rec.spec_hash,
            rec.executor,
            rec.token,
            len(rec.assigned),
            rec.reason,
            rec.committed_ms,
            rec.started_ms,
            rec.lease_until_ms,
            rec.finished_ms,
            rec.detail,
            rec.not_before_ms,
            rec.runs,
            rec.starter,
            rec.epoch,
        )

    def _end(self, name: str, job: _Job, rec: _Slot, state: SlotState, reason: str, now: int) -> int:
        """Move a slot to a terminal state and write its ledger entry; the streak ``_Job.ended`` says."""
        rec.state = state
        rec.reason = reason
        rec.finished_ms = now
        rec.lease_until_ms = 0
        rec.starter = ""
        self._touch(rec, now)
        self._close_slot(job, rec.fire_ms)
        job.hwm = max(job.hwm, rec.fire_ms)
        log_entry(name, job, rec, state, reason, now)
        return job.ended(state)

    def _assign(self, name: str, job: _Job, rec: _Slot, now: int, vote: VoteRequest | None = None) -> bool:
        """Give the slot to the next executor (``choose_executor``) and publish the assignment notice,
        like Redis (heard only through ``listen_notices``); False, changing nothing, if none may.
        Or start it at once, unannounced: the committing ``vote``'s node is chosen and asked to."""
        chosen = choose_executor(name, job, rec)[0]
        if not chosen:
            return False
        job.token += 1
        rec.state = SlotState.COMMITTED
        rec.executor = chosen
        rec.assigned.append(chosen)
        rec.token = job.token
        rec.committed_ms = now
        rec.started_ms = 0
        rec.lease_until_ms = 0
        rec.starter = ""
        self._touch(rec, now)
        self._open_slot(job, rec.fire_ms)
        if vote is not None and vote.start_lease_ms > 0 and chosen == vote.node and now >= rec.fire_ms:
            rec.state = SlotState.RUNNING
            rec.runs += 1
            rec.started_ms = now
            rec.lease_until_ms = now + vote.start_lease_ms
            rec.starter = vote.incarnation
            return True
        self._notices.assigned(name, rec.fire_ms, rec.token, chosen)
        return True

    # -- votes ---------------------------------------------------------------

    def vote(self, requests: Sequence[VoteRequest]) -> list[VoteResult]:
        now = self._clock()
        vote_one = self._vote_one
        return [vote_one(req, now) for req in requests]

    def _vote_one(self, req: VoteRequest, now: int) -> VoteResult:
        # (Runs five times per slot in the simulator: written for speed, in vote.lua's order.)
        name, fire_ms = req.job, req.fire_ms
        job = self._jobs.get(name) or self._job(name)
        rec = self._get(job, fire_ms, now)
        if rec is not None and rec.state in DECIDED_STATES:
            return VoteResult(VoteStatus.DECIDED, self._view(name, fire_ms, rec), now)
        if now < fire_ms - req.max_skew_ms:
            return VoteResult(VoteStatus.EARLY, self._view(name, fire_ms, rec), now)
        # Membership (undecided slots only: a decided vote never pays for it).
        record = job.record
        if req.epoch or record is not None:
            if req.epoch > (record.epoch if record else 0) and (not record or record.is_member(req.node)):
                # A member's newer record (a stranger's may be one the namespace never held: one
                # epoch, one record): the job adopts it (only ever forward), drops the legacy floor.
                record = job.record = adopt_record(req)
                job.quorum = 0
            if record is None or req.epoch < record.epoch or not record.is_member(req.node):
                why = refusal_reason(req.node, req.epoch, record)
                view = self._view(name, fire_ms, rec)
                return VoteResult(VoteStatus.REFUSED, view, now, record.epoch if record else 0, record, why)
        if rec is None:
            rec = _Slot(fire_ms=fire_ms, deadline_ms=req.deadline_ms)
            job.slots[fire_ms] = rec
            self._open_slot(job, fire_ms)
        votes = rec.votes
        if job.control.paused:
            votes[req.node] = req.spec_hash
            reason = f"paused by {job.control.by}" + (f": {job.control.reason}" if job.control.reason else "")
            self._end(name, job, rec, SlotState.SKIPPED, reason, now)
            return VoteResult(VoteStatus.SKIPPED, self._view(name, fire_ms, rec), now)
        # A proposed slot keeps the largest deadline any of its votes carried
        # (a node catching up after an outage widens its own).
        if req.deadline_ms > rec.deadline_ms:
            rec.deadline_ms = req.deadline_ms
        if now > fire_ms + rec.deadline_ms:
            self._end(name, job, rec, SlotState.MISSED, "deadline passed before quorum", now)
            return VoteResult(VoteStatus.MISSED, self._view(name, fire_ms, rec), now)
        votes[req.node] = req.spec_hash
        rec.expires_ms = now + self._retention_ms  # (_touch)
        if record is None:  # (a job only legacy votes touched: the highest quorum any sent)
            if req.quorum > job.quorum:
                job.quorum = req.quorum
            if list(votes.values()).count(req.spec_hash) < job.quorum:
                return VoteResult(VoteStatus.RECORDED, self._view(name, fire_ms, rec), now)
        elif not record.commits([n for n, h in votes.items() if h == req.spec_hash]):
            return VoteResult(VoteStatus.RECORDED, self._view(name, fire_ms, rec), now)
        # Quorum reached: decide the slot in this same step.
        rec.spec_hash = req.spec_hash  # deadline_ms: the largest any vote carried (above)
        rec.epoch = record.epoch if record is not None else 0
        job.hwm = max(job.hwm, fire_ms)
        opened = job.open
        active = (
            [
                f
                for f in sorted(opened)
                if f != fire_ms
                and (other := self._get(job, f, now)) is not None
                and other.state in (SlotState.COMMITTED, SlotState.RUNNING)
            ]
            if len(opened) > 1 or fire_ms not in opened
            else []  # (most commits: this slot is the job's only open one)
        )
        if active and req.overlap == Overlap.FORBID:
            first = self._get(job, active[0], now)  # (the Lua script's wording: which state holds this one)
            held = "committed, not started yet"  # (a failed run awaiting its retry: committed, runs >= 1)
            if first is not None and first.state == SlotState.RUNNING:
                held = "running"
            elif first is not None and first.runs > 0:
                held = "committed for a retry, not started yet"
            reason = f"overlap forbidden: slot {active[0]} {held}"
            self._end(name, job, rec, SlotState.SKIPPED, reason, now)
            return VoteResult(VoteStatus.COMMITTED, self._view(name, fire_ms, rec), now)
        if active and req.overlap == Overlap.REPLACE:
            for f in active:
                other = job.slots[f]
                ended = SlotState.FAILED if other.state == SlotState.RUNNING else SlotState.SKIPPED
                self._end(name, job, other, ended, f"replaced by slot {fire_ms}", now)
        self._assign(name, job, rec, now, req)
        return VoteResult(VoteStatus.COMMITTED, self._view(name, fire_ms, rec), now)

    # -- fenced transitions --------------------------------------------------

    def _fenced(
        self, job_name: str, fire_ms: int, node: str, token: int, want: SlotState
    ) -> tuple[_Job, _Slot | None, int, str]:
        now = self._clock()
        job = self._job(job_name)
        rec = self._get(job, fire_ms, now)
        if rec is None:
            return job, rec, now, "unknown slot"
        if rec.state != want:
            return job, rec, now, f"slot is {rec.state}, not {want}"
        if rec.token != token:
            return job, rec, now, f"stale token {token}, current is {rec.token}"
        if rec.executor != node:
            return job, rec, now, f"executor is {rec.executor!r}, not {node!r}"
        return job, rec, now, ""

    def start(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        _, rec, now, why = self._fenced(job, fire_ms, node, token, SlotState.COMMITTED)
        if rec is not None and not why:
            if not rec.runs and now > fire_ms + rec.deadline_ms:
                why = "starting deadline passed"
            elif now < rec.not_before_ms:
                why = f"retry not due before {rec.not_before_ms}"
        if rec is None or why:
            return TransitionResult(False, self._view(job, fire_ms, rec), now, why)
        rec.state = SlotState.RUNNING
        rec.runs += 1
        rec.started_ms = now
        rec.lease_until_ms = now + lease_ms
        self._touch(rec, now)
        return TransitionResult(True, self._view(job, fire_ms, rec), now)

    def renew(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        _, rec, now, why = self._fenced(job, fire_ms, node, token, SlotState.RUNNING)
        if rec is None or why:
            return TransitionResult(False, self._view(job, fire_ms, rec), now, why)
        rec.lease_until_ms = now + lease_ms
        self._touch(rec, now)
        return TransitionResult(True, self._view(job, fire_ms, rec), now)

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
        j, rec, now, why = self._fenced(job, fire_ms, node, token, SlotState.RUNNING)
        if rec is None or why:
            return TransitionResult(False, self._view(job, fire_ms, rec), now, why)
        rec.detail = detail
        if succeeded:
            before = self._end(job, j, rec, SlotState.SUCCEEDED, "exit 0", now)
            return TransitionResult(True, self._view(job, fire_ms, rec), now, "", before)
        if rec.runs >= 1 + retries:
            self._end(job, j, rec, SlotState.FAILED, "job failed", now)
        elif j.control.paused:
            reason = f"job failed; no retry: paused by {j.control.by}"
            self._end(job, j, rec, SlotState.FAILED, reason, now)
        elif not (nobody := choose_executor(job, j, rec))[0]:
            # (fence.lua chooses before it writes: no member voter left, this failure is the last)
            self._end(job, j, rec, SlotState.FAILED, f"job failed; no retry: {nobody[1]}", now)
        else:
            backoff = max(retry_backoff_ms, 0)
            reason = f"attempt {rec.runs} of {1 + retries} failed; retry after {backoff} ms"
            log_entry(job, j, rec, SlotState.RETRYING, reason, now)
            rec.reason = reason
            rec.not_before_ms = now + backoff
            self._assign(job, j, rec, now)
        return TransitionResult(True, self._view(job, fire_ms, rec), now)

    # -- deadlines -----------------------------------------------------------

    def sweep(self, params: Sequence[SweepParams]) -> SweepResult:
        now = self._clock()
        changed: list[SlotView] = []
        still_open: dict[str, int] = {}
        for p in self._sweep_due(params):
            job = self._jobs.get(p.job)
            if job is None or not job.open:
                continue  # (the common case: nothing to sweep, nothing to create)
            for fire_ms in sorted(job.open):
                rec = self._get(job, fire_ms, now)
                if rec is None:
                    continue
                if self._sweep_one(p, job, rec, now):
                    changed.append(self._view(p.job, fire_ms, rec))
                at = self._sweep_due_at(p, rec)
                if at:
                    left = max(1, at - now)
                    still_open[p.job] = min(still_open.get(p.job, left), left)
        return SweepResult(changed, still_open)

    @staticmethod
    def _sweep_due_at(p: SweepParams, rec: _Slot) -> int:
        """The first store time at which :meth:`_sweep_one` would change ``rec`` (0: never, it ended)."""
        if rec.state == SlotState.PROPOSED:
            return rec.fire_ms + max(rec.deadline_ms, p.deadline_ms) + 1
        if rec.state == SlotState.COMMITTED:
            return max(rec.committed_ms, rec.not_before_ms) + p.start_timeout_ms + 1
        if rec.state == SlotState.RUNNING:
            return rec.lease_until_ms + 1
        return 0

    def _sweep_due(self, params: Sequence[SweepParams]) -> Sequence[SweepParams]:
        """The entries of ``params`` whose job has an open slot, in the order given (as Redis sweeps them).

        Only a speed-up for the simulator's full sweeps (every job, while few have a slot
        open): jobs with none are skipped unseen; each node's list is indexed once.
        """
        open_jobs = self._open_jobs
        if not open_jobs:
            return ()
        if 4 * len(open_jobs) >= len(params):
            return params
        cached = self._sweep_index.get(id(params))
        if cached is None or cached[0] is not params:
            index: dict[str, list[int]] = {}
            for i, p in enumerate(params):
                index.setdefault(p.job, []).append(i)
            if len(self._sweep_index) >= 64:
                self._sweep_index.clear()
            cached = self._sweep_index[id(params)] = (params, index)
        index = cached[1]
        return [params[i] for i in sorted(i for name in open_jobs for i in index.get(name, ()))]

    def _take_over(self, name: str, job: _Job, rec: _Slot, now: int) -> bool:
        """A takeover (sweep.lua's take_over): the next member voter, else the slot ends (_job.lua's
        unassignable): missed if it never started, failed if awaiting a retry, else lost."""
        if self._assign(name, job, rec, now):
            return True
        failed = rec.state == SlotState.COMMITTED and rec.not_before_ms > 0
        state = SlotState.MISSED if not rec.runs else SlotState.FAILED if failed else SlotState.LOST
        self._end(name, job, rec, state, choose_executor(name, job, rec)[1], now)
        return True

    def _sweep_one(self, p: SweepParams, job: _Job, rec: _Slot, now: int) -> bool:
        if rec.state == SlotState.PROPOSED:
            if now > rec.fire_ms + max(rec.deadline_ms, p.deadline_ms):
                self._end(p.job, job, rec, SlotState.MISSED, "deadline passed before quorum", now)
                return True
            return False
        if rec.state == SlotState.COMMITTED:
            if now <= max(rec.committed_ms, rec.not_before_ms) + p.start_timeout_ms:
                return False
            if not rec.runs and now > rec.fire_ms + rec.deadline_ms:
                reason = f"not started before deadline by {','.join(rec.assigned)}"
                self._end(p.job, job, rec, SlotState.MISSED, reason, now)
                return True
            return self._take_over(p.job, job, rec, now)
        if rec.state == SlotState.RUNNING and now > rec.lease_until_ms:
            if p.delivery == Delivery.AT_LEAST_ONCE:
                return self._take_over(p.job, job, rec, now)
            self._end(p.job, job, rec, SlotState.LOST, f"lease of {rec.executor} expired mid-run", now)
            return True
        return False

    def record_missed(self, job: str, fire_ms: int, deadline_ms: int, reason: str) -> SlotView:
        now = self._clock()
        j = self._job(job)
        rec = self._get(j, fire_ms, now)
        if rec is not None and rec.state == SlotState.PROPOSED:
            deadline_ms = max(deadline_ms, rec.deadline_ms)
        if (rec is None or rec.state == SlotState.PROPOSED) and now > fire_ms + deadline_ms:
            if rec is None:
                rec = j.slots[fire_ms] = _Slot(fire_ms=fire_ms)
            self._end(job, j, rec, SlotState.MISSED, reason, now)
        return self._view(job, fire_ms, rec)

    # -- reads ---------------------------------------------------------------

    def high_waters(self, jobs: Sequence[str]) -> list[int]:
        return [self._job(job).hwm for job in jobs]

    def slot(self, job: str, fire_ms: int) -> SlotView:
        return self._view(job, fire_ms, self._get(self._job(job), fire_ms, self._clock()))

    def read_slots(self, slots: Sequence[tuple[str, int]]) -> list[SlotView]:
        now = self._clock()
        return [self._view(job, fire_ms, self._get(self._job(job), fire_ms, now)) for job, fire_ms in slots]

    def slots(self, job: str, from_ms: int, to_ms: int) -> list[SlotView]:
        now = self._clock()
        j = self._job(job)
        out = []
        for fire_ms in sorted(j.slots):
            if from_ms <= fire_ms <= to_ms:
                rec = self._get(j, fire_ms, now)
                if rec is not None:
                    out.append(self._view(job, fire_ms, rec))
        return out

    def ledger(self, job: str, limit: int) -> list[LedgerEntry]:
        entries = self._job(job).ledger
        return list(reversed(entries))[: max(limit, 0)]

    # -- simulator hooks -----------------------------------------------------

    def snapshot(self) -> MemoryStore:
        """A deep copy, for the simulator's store failover that loses writes."""
        copy = MemoryStore(
            self._clock,
            retention_ms=self._retention_ms,
            ledger_maxlen=self._ledger_maxlen,
            audit_maxlen=self._audit_maxlen,
            trigger_maxlen=self._trigger_maxlen,
        )
        for name, job in self._jobs.items():
            slots = {
                f: replace(r, votes=dict(r.votes), assigned=list(r.assigned)) for f, r in job.slots.items()
            }
            copy._jobs[name] = _Job(
                name=name,
                slots=slots,
                open=set(job.open),
                token=job.token,
                quorum=job.quorum,
                record=job.record,
                hwm=job.hwm,
                ledger=deque(job.ledger, maxlen=self._ledger_maxlen),
                ledger_seq=job.ledger_seq,
                audit_seq=job.audit_seq,
                control=job.control,
                triggers=list(job.triggers),
                audit=deque(job.audit, maxlen=self._audit_maxlen),
            )
        copy._members = {n: replace(m, info=dict(m.info)) for n, m in self._members.items()}
        copy._membership = self._membership
        copy._membership_log = deque(self._membership_log, maxlen=self._audit_maxlen)
        copy._open_jobs = dict(self._open_jobs)
        return copy
