"""The voting side of the node core: getting each due slot voted, or accounted for when it cannot be.

Fire times come due (``_collect_due``); they are voted in one batch, or
abstained while the clock is not trusted, or run locally (``run-local``)
while the store is unreachable (``_votes_due``); a slot past its deadline
that no vote of this node got counted for is recorded missed with the
reason (worded in :mod:`quorum_cron.core.outcomes`), after the record of any
earlier slot of the job run locally here (``_record_missed``); vote replies go
to the running side (``_on_votes``); and at start-up the slots between the
job's high-water mark and the first one voted are accounted for (``_catch_up``).
"""

from __future__ import annotations

import itertools
from bisect import insort
from collections.abc import Iterable

from quorum_cron.core.actions import (
    NOT_SENT,
    Abstain,
    Action,
    Failure,
    Now,
    RecordMissed,
    Refused,
    RunLocal,
    Vote,
)
from quorum_cron.core.model import (
    SlotState,
    SlotView,
    VoteRequest,
    VoteResult,
    VoteStatus,
)
from quorum_cron.core.outcomes import missed_no_node_alive, missed_not_running, missed_unvoted
from quorum_cron.core.slots import (
    LOCAL_NO,
    LOCAL_OWED,
    LOCAL_RUNNING,
    LOCAL_TOO_LATE,
    TOKEN_UNKNOWN,
    Pending,
    Slot,
)
from quorum_cron.core.state import (
    MAX_CATCHUP_SLOTS,
    MAX_RAN_LOCAL,
    CoreState,
    _JobState,
)
from quorum_cron.core.timers import NEVER

_NEVER = NEVER

PARKED_CHECK_MS = 10_000
"""How often held records are looked at without an event that may let them go (a local run
gone stale), and the local runs of jobs holding none are pruned (:meth:`VotingSide._release_due`)."""

STALE_LOCAL_RUN_MS = 60_000
"""A local run reported no end this long after its timeout (on the monotonic clock, from its
start): the records of later slots stop waiting for its own (:meth:`VotingSide._local_floor`)."""


def _fire_time(action: RecordMissed) -> int:
    return action.fire_ms


__all__ = ["PARKED_CHECK_MS", "STALE_LOCAL_RUN_MS", "VotingSide"]


class VotingSide(CoreState):
    """Due slots → votes, abstentions, local runs, missed records."""

    def _collect_due(self, js: _JobState, now: Now, out: list[Action]) -> None:
        """Make the job's fire times up to ``now`` plus the vote lead pending.

        The tick calls it only when the job's next fire time is that close
        (most visits have nothing new due, and that test is cheaper there).
        """
        wall = now.wall_ms
        floor = wall - js.job.deadline_ms
        # (The job's next fire time, read from its cache without a call when current.)
        nf = js.next_fire_ms if js.next_fire_for == js.cursor_ms else self._next_fire(js)
        # (A cursor behind the floor with no fire time in between is left
        # where it is: moving it would change nothing but the cached fire time.)
        if js.cursor_ms < floor and nf <= floor and js.caught_up:
            # This node slept through slots (a pause, a wall-clock jump): too
            # late to vote for them, but not too late to account for them. Not
            # before its read of the mark: the record would raise it past the boot's
            # catch-up (seed 128010); until then they wait below, as in _votes_due.
            late = itertools.islice(js.job.schedule.fire_times(js.cursor_ms, floor), MAX_CATCHUP_SLOTS)
            me = self.settings.node_id
            for t in late:
                self._record_missed(missed_not_running(js.job, t, me), now, out)
            js.cursor_ms = floor
        horizon = wall + self._lead_ms
        slots, touched = js.slots, self._touched
        while (t := self._next_fire(js)) <= horizon:
            s = slots.get(t)
            if s is None:  # (the common case, inlined: a new record with its vote part)
                # (Not swept yet: the vote's reply, its failure or an abstention says when.)
                s = slots[t] = Slot(t, vote=Pending(fire_ms=t, deadline_ms=js.job.deadline_ms))
            elif s.vote is None:
                s.vote = Pending(fire_ms=t, deadline_ms=js.job.deadline_ms)
            touched.append((js, s))
            js.cursor_ms = t

    def _take_in_due(self, js: _JobState, now: Now) -> None:
        """Take in the fire times of the job's current definition that are due by ``now`` and no
        tick has taken in yet, before a boundary at ``now`` puts them behind the cursor.

        A tick takes a slot in at its vote lead; a swap between the fire time and that tick (no
        vote lead, a loop busy for a moment, a node resuming from a pause, whose queued reload
        comes before its first tick) drew the boundary past the slot, and nobody voted or
        recorded it (explorer seed 60498). The catch-up records of slots slept through wait in
        the retry queue for the next tick: a swap emits no action."""
        out: list[Action] = []
        self._collect_due(js, Now(now.wall_ms - self._lead_ms, now.mono_ms), out)
        for action in out:
            assert isinstance(action, RecordMissed)
            self._retries.add(now.mono_ms, action)
            self._missed_waits(action, 1)

    def _votes_due(
        self, js: _JobState, order: list[int], now: Now, out: list[Action], requests: list[VoteRequest]
    ) -> None:
        """Add to ``requests`` the votes due for the job's due slots (``order``: the job's fire
        times, sorted); other actions to ``out``."""
        slots = js.slots
        wall, mono, skew = now.wall_ms, now.mono_ms, self.settings.max_skew_ms
        for fire_ms in order:
            s = slots.get(fire_ms)
            p = s.vote if s is not None else None
            if p is None:
                continue
            assert s is not None
            if p.revote and not p.in_flight and (wall > fire_ms + p.deadline_ms or not self._may_vote):
                s.vote = None  # (its first vote stands; the slot's poll accounts for it)
                self._touched.append((js, s))
                continue
            if wall > fire_ms + p.deadline_ms + skew:
                if p.local == LOCAL_NO:
                    p.local = LOCAL_TOO_LATE  # too late to run it locally
                if not js.caught_up:
                    # A missed record decides the slot, raising the high-water mark: it waits
                    # for this node's own read of the mark, like a vote (see _catch_up).
                    continue
                if p.local == LOCAL_RUNNING:
                    # Too late to vote; a local run still going: its end says what to record.
                    p.retry_at_mono = _NEVER
                    continue
                if p.in_flight:
                    # Too late to vote, but our vote may still land: its reply
                    # (or failure, then recorded missed below) settles it.
                    continue
                # Too late to vote. If nobody voted either, only this record
                # keeps the slot from ending unaccounted (the store checks the
                # deadline by its own clock and ignores decided slots).
                s.vote = None
                self._touched.append((js, s))
                self._record_missed(self._missed_record(js.job.name, p), now, out)
                continue
            if js.job.run_local and self._local_due(js, p, now):
                p.local = LOCAL_RUNNING
                self._touched.append((js, s))
                self._ran_local[(js.job.name, fire_ms)] = None
                stale_at = mono + js.job.timeout_ms + STALE_LOCAL_RUN_MS  # (monotonic: no wall step)
                self._local_runs.setdefault(js.job.name, {})[fire_ms] = stale_at
                while len(self._ran_local) > MAX_RAN_LOCAL:
                    self._ran_local.popitem(last=False)
                out.append(RunLocal(js.job.name, fire_ms, js.job.timeout_ms))
            if p.in_flight or p.retry_at_mono > mono:
                continue
            if not self._may_vote:
                if not p.abstained:
                    p.abstained = True
                    p.abstain_why = self._abstain_reason()
                    self._sweeps.heard.add(js.index)  # (other nodes' votes may create the slot)
                    self._touched.append((js, s))
                    out.append(Abstain(js.job.name, fire_ms, p.abstain_why))
                continue
            if not js.caught_up:
                continue  # the high-water read's reply marks the job dirty
            p.in_flight = True
            p.sent_mono = mono
            self._touched.append((js, s))
            if p.request is None:
                p.request = self._vote_request(js.job, fire_ms, p.deadline_ms)
            requests.append(p.request)

    def _vote_failed(self, action: Vote, failure: Failure, reason: str, retry_at: int) -> None:
        """A vote call failed: each slot is voted again at ``retry_at``, or, with the store
        unreachable, once it answers (:meth:`~quorum_cron.core.state.CoreState._hold_until_answered`)."""
        if reason.startswith(NOT_SENT):  # (held back by the runtime: the store never saw it)
            why = f"vote {reason}"
        elif failure == Failure.UNREACHABLE:
            why = f"store unreachable ({reason})" if reason else "store unreachable"
        else:
            why = f"store refused the vote ({reason})" if reason else "store refused the vote"
        held = self._hold_until_answered(failure, retry_at)
        for req in action.requests:
            js = self._jobs[req.job]
            self._sweeps.heard.add(js.index)  # (the vote may have landed all the same)
            s = js.slots.get(req.fire_ms)
            p = s.vote if s is not None else None
            if p is not None:
                assert s is not None
                self._touched.append((js, s))
                if req.start_lease_ms and s.start_first is None:
                    # It may have landed and started the slot here: a read showing it running under
                    # this process's tag is then adopted (token unknown: 0), as a lost start's is.
                    s.start_first = (TOKEN_UNKNOWN, p.sent_mono)
                p.in_flight = False
                p.why = why
                self._dirty.add(js.index)
                if held:
                    p.held = True
                    p.retry_at_mono = _NEVER
                    self._held.add(js.index)
                else:
                    p.retry_at_mono = retry_at

    def _record_missed(self, action: RecordMissed, now: Now, out: list[Action]) -> None:
        """Send a missed record, or while the store is unreachable hold it with the retries.

        (Those go one at a time while it is away, and all at once when it
        answers again: a node cut off for an hour must not send a record per
        slot into the void, each costing a connect timeout in the agent.)
        """
        name = action.job
        widened = self._widened.get(name)
        if action.ran_locally or (widened is not None and action.fire_ms in widened):
            self._owed_local.setdefault(name, set()).add(action.fire_ms)  # (owed until it lands)
        gated = name in self._local_runs or name in self._owed_local or widened is not None
        if gated or name in self._parked:
            if gated and action.fire_ms > self._local_floor(name, now):
                # A later slot's record would raise the high-water mark past a slot whose local
                # run has no record yet: should every node then restart, no catch-up would reach
                # it (explorer seed 30004). It waits until that slot's own record has landed.
                insort(self._parked.setdefault(name, []), action, key=_fire_time)
                self._missed_waits(action, 1)
                return
            if name in self._parked:
                self._release_parked(now, out, (name,))  # (earlier ones the floor let go: first)
        if self._reachable:
            out.append(action)
        else:
            self._retries.add(now.mono_ms, action)
            self._missed_waits(action, 1)

    def _local_floor(self, name: str, now: Now) -> int:
        """The job's earliest slot run locally here whose record has not landed (``NEVER``: none).

        Its local run is still going, or ended with the slot still undecided, or its record,
        with the run's outcome, is on its way (:meth:`_record_missed`). A vote of it that
        landed lets it go (the slot was voted: the store accounts for it), and so does a local
        run whose end never came (:data:`STALE_LOCAL_RUN_MS` past its timeout, counted on the
        monotonic clock from its start): a record held back for ever would lose more than it
        guards.
        """
        owed = self._owed_local.get(name)
        floor = min(owed) if owed else _NEVER
        widened = self._widened.get(name)
        if widened:
            js = self._jobs.get(name)
            for fire_ms in list(widened):
                s = js.slots.get(fire_ms) if js is not None else None
                if s is None or s.vote is None or s.vote.local in LOCAL_OWED:
                    # (Voted, recorded: owed above, decided; or run locally: held as a local run,
                    # which lets go if its end never comes.)
                    widened.discard(fire_ms)
                elif fire_ms < floor:
                    floor = fire_ms
            if not widened:
                del self._widened[name]
        runs = self._local_runs.get(name)
        if runs:
            js = self._jobs.get(name)
            for fire_ms, stale_at in list(runs.items()):
                s = js.slots.get(fire_ms) if js is not None else None
                p = s.vote if s is not None else None
                if (
                    p is None
                    or p.local not in LOCAL_OWED
                    or (p.local == LOCAL_RUNNING and now.mono_ms > stale_at)
                ):
                    del runs[fire_ms]  # (recorded, voted, let go, or its end never came)
                elif fire_ms < floor:
                    floor = fire_ms
            if not runs:
                del self._local_runs[name]
        return floor

    def _release_due(self, now: Now, out: list[Action]) -> None:
        """Release the held records of the jobs whose floor may have moved; every
        :data:`PARKED_CHECK_MS`, of every job (a local run gone stale moves it with no event),
        pruning the local runs of jobs that hold none back."""
        if now.mono_ms >= self._parked_check_mono:
            self._parked_check_mono = now.mono_ms + PARKED_CHECK_MS
            for name in list(self._local_runs):
                if name not in self._parked:
                    self._local_floor(name, now)
            names: Iterable[str] = list(self._parked)
        else:
            names = [name for name in self._floor_moved if name in self._parked]
        self._floor_moved.clear()
        self._release_parked(now, out, names)

    def _release_parked(self, now: Now, out: list[Action], names: Iterable[str] | None = None) -> None:
        """Send, in slot order, the parked missed records no slot run locally holds back any more
        (of the jobs ``names``; None: every job with any)."""
        for name in list(self._parked) if names is None else names:
            held = self._parked.get(name)
            if not held or held[0].fire_ms > self._local_floor(name, now):
                continue  # (the common case: the earliest is still held back)
            del self._parked[name]
            for i, action in enumerate(held):
                if action.fire_ms > self._local_floor(name, now):  # (a local one sent just now)
                    self._parked[name] = held[i:]
                    break
                self._missed_waits(action, -1)
                self._record_missed(action, now, out)

    def _reply_record_missed(self, action: RecordMissed, reply: object, now: Now) -> list[Action]:
        assert isinstance(reply, SlotView)
        if reply.state in (SlotState.ABSENT, SlotState.PROPOSED):
            # Store time has not passed the deadline yet: ask again, later each time.
            self._retries.not_yet(action, now.mono_ms)
            self._missed_waits(action, 1)
            return []
        self._retries.answered(action)
        owed = self._owed_local.get(action.job)
        if owed is not None:
            owed.discard(action.fire_ms)  # (decided: the records it held back may go)
            if not owed:
                del self._owed_local[action.job]
        # Decided: news, as any read's (a lost vote's folded start here is adopted: docs/protocol.md).
        out = self._on_view(reply, now)
        if action.job in self._parked:
            self._release_parked(now, out, (action.job,))
        return out

    def _failed_record_missed(
        self, action: RecordMissed, now: Now, failure: Failure, reason: str, retry_at: int
    ) -> list[Action]:
        self._retries.failed(action, now.mono_ms, self._reachable)
        self._missed_waits(action, 1)
        return []

    def _missed_waits(self, action: RecordMissed, count: int) -> None:
        """``count`` more (or fewer) missed records of the slot wait in the retry queue."""
        js = self._jobs.get(action.job)
        if js is not None:
            self._slot(js, action.fire_ms).missed += count

    def _local_due(self, js: _JobState, p: Pending, now: Now) -> bool:
        """``run-local``: only while the store is unreachable, never before the fire time by this
        node's clock, at most once per slot per node."""
        return (
            js.job.run_local
            and not self._reachable
            and p.local == LOCAL_NO
            and not p.in_flight
            and not p.revote  # (voted already: the slot may run elsewhere)
            and now.wall_ms >= p.fire_ms  # (and inside the deadline: _votes_due checks that first)
            and (js.job.name, p.fire_ms) not in self._ran_local
        )

    def _missed_record(self, job: str, p: Pending) -> RecordMissed:
        """The missed record of a slot this node could not get voted (:mod:`quorum_cron.core.outcomes`)."""
        return missed_unvoted(
            job, p, self.settings.node_id, self._may_vote, self._abstain_reason(), self._trust_reason
        )

    def _on_votes(self, action: Vote, results: list[object], now: Now) -> list[Action]:
        out: list[Action] = []
        committed, decided, recorded = VoteStatus.COMMITTED, VoteStatus.DECIDED, VoteStatus.RECORDED
        incarnation = self.settings.incarnation
        for req, res in zip(action.requests, results, strict=True):
            assert isinstance(res, VoteResult)
            js = self._jobs[req.job]
            s = js.slots.get(req.fire_ms)
            p = s.vote if s is not None else None
            if s is not None and p is not None:
                self._touched.append((js, s))
            if res.status == VoteStatus.REFUSED:
                self._on_refused(js.index, req, res, p, out, now)
                continue
            if res.status == VoteStatus.EARLY:
                # Our clock runs ahead of the store's: try again shortly.
                if p is not None:
                    p.in_flight = False
                    p.retry_at_mono = now.mono_ms + max(1, self.settings.max_skew_ms // 2)
                    self._dirty.add(js.index)
                continue
            if p is not None:
                assert s is not None
                s.vote = None
                if p.local in LOCAL_OWED or req.job in self._widened:
                    self._floor_moved.add(req.job)  # (voted: the records it held back may go)
                if not p.in_flight:
                    self._dirty.add(js.index)  # (a vote in flight has no timer: dropping it changes none)
            # This vote committed the slot and started it here (a start folded into the commit): its
            # lease counts from the vote's send. Or an earlier send of it did (a lost reply, a client's
            # retry): the slot shows this process's tag, and a renew confirms it first (send unknown).
            started = None
            if res.status is committed:
                started = p.sent_mono if p is not None else -1
            elif res.status is decided and incarnation and res.slot.starter == incarnation:
                started = -1
            elif (
                res.status is recorded
                and s is not None
                and s.start_first
                and s.start_first[0] == TOKEN_UNKNOWN
            ):
                s.start_first = None  # (an earlier failed send committed nothing: nothing to adopt)
            out.extend(self._on_view(res.slot, now, poll_again=True, store_ms=res.now_ms, started=started))
        return out

    def _on_refused(
        self, index: int, req: VoteRequest, res: VoteResult, p: Pending | None, out: list[Action], now: Now
    ) -> None:
        """The job's membership record refused the vote: report it (once per epoch this node
        held), hold the job's record if it is newer, and vote again under it — or, still refused
        or no longer a member, leave the slot to be accounted for at its deadline.

        A job whose record is older than the vote's takes a newer one only from one of its own
        members (one epoch, one record: docs/protocol.md): a node added by a change is refused
        until a member of the job's record brings the change. That is not news: it is not
        reported, and the vote goes again shortly (as an early one does), until the deadline.
        """
        if 0 < res.epoch < req.epoch and res.record is not None and not res.record.is_member(req.node):
            if p is not None:
                p.in_flight = False
                p.request = None
                p.retry_at_mono = now.mono_ms + max(1, self.settings.max_skew_ms // 2)
                p.why = f"refused by membership: {res.reason}"
                self._dirty.add(index)
            return
        self._sweeps.heard.add(index)  # (the slot may exist: members' votes)
        if req.epoch > self._refused_reported:
            self._refused_reported = req.epoch
            member = res.record is not None and res.record.is_member(req.node)
            out.append(Refused(req.job, req.fire_ms, req.epoch, res.epoch, res.reason, member))
        adopted = res.record is not None and self._adopt(res.record)
        # The node may already hold a record newer than the one this vote carried: another
        # job's refusal in the same pipelined reply adopted it a moment ago. That vote is just
        # as stale, and goes again under the record held (each retry carries a higher epoch, so
        # this ends).
        held = self._record
        newer = adopted or (held is not None and held.epoch > req.epoch)
        if p is None:
            return
        p.in_flight = False
        p.request = None
        self._dirty.add(index)
        if newer:
            p.retry_at_mono = 0  # a member votes again at once, a non-member abstains
        else:
            p.why = f"refused by membership: {res.reason}"
            p.retry_at_mono = _NEVER

    def _catch_up(self, js: _JobState, hwm: int, now: Now) -> list[Action]:
        """Account for slots between the high-water mark and the first one we vote for."""
        if hwm <= 0:
            return []  # a job the store never saw: nothing was due before us
        job = js.job
        missed = list(itertools.islice(job.schedule.fire_times(hwm, js.boot_ms), MAX_CATCHUP_SLOTS))
        if not missed:
            return []
        out: list[Action] = []
        run_once = job.misfire == "run-once" and not self._stopping
        to_record = missed[:-1] if run_once else missed
        out.extend(missed_no_node_alive(job, t) for t in to_record)
        if run_once:
            latest = missed[-1]
            widened = now.wall_ms - latest + job.deadline_ms
            self._slot(js, latest).vote = Pending(fire_ms=latest, deadline_ms=widened)
            # Its record is due only at the widened deadline; a later slot's, due sooner, would
            # raise the high-water mark past it first, and should every node then restart, no
            # catch-up would reach it (explorer seed 62201): they wait behind it.
            self._widened.setdefault(job.name, set()).add(latest)
            self._dirty.add(js.index)
        return out

    # -- the vote's reply and failure (core.actions.handlers) --

    def _reply_vote(self, action: Vote, reply: object, now: Now) -> list[Action]:
        assert isinstance(reply, list)
        return self._on_votes(action, reply, now)

    def _failed_vote(
        self, action: Vote, now: Now, failure: Failure, reason: str, retry_at: int
    ) -> list[Action]:
        self._vote_failed(action, failure, reason, retry_at)
        return []
