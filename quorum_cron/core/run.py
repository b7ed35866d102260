"""The running side of the node core: starting, running and fencing the slots this node executes.

A slot committed to this node is started when its fire time (or a retry's
backoff) has come (:mod:`quorum_cron.core.starts`), its start reply turns into
``Run`` unless the lease may already be gone (``_on_start``), a start whose
reply was lost is adopted from a read (``_adopt_start``), the lease is
renewed every lease/3 counted from when the renew was *sent* (``_on_renew``),
and a run the store no longer lets this node hold is killed
(``_drop_stale_run``, ``_lease_check``). Under at-least-once a run is also
killed on a timer at its lease end (``_renewals_due``), counted from when
the last accepted renew (or the start) was sent, less :func:`lease_margin`:
a renew whose reply has not come by then does not keep it alive. ``_on_view`` dispatches whatever
slot state a call revealed.
"""

from __future__ import annotations

from quorum_cron.core.actions import (
    Action,
    Failure,
    Now,
    ReadSlots,
    Renew,
    Run,
    Start,
)
from quorum_cron.core.lease import lease_end, lease_margin
from quorum_cron.core.model import (
    TERMINAL_STATES,
    Delivery,
    Overlap,
    SlotState,
    SlotView,
    TransitionResult,
)
from quorum_cron.core.outcomes import (
    killed_lease_ended,
    killed_lease_expired_unreachable,
    killed_renew_refused,
    killed_stale,
)
from quorum_cron.core.slots import TOKEN_UNKNOWN, Running
from quorum_cron.core.starts import Starts
from quorum_cron.core.state import _JobState
from quorum_cron.core.timers import NEVER

_NEVER = NEVER

__all__ = ["RunningSide", "lease_end", "lease_margin"]


class RunningSide(Starts):
    """Committed slots → starts, runs, renewals, kills."""

    def _renewals_due(self, js: _JobState, order: list[int], now: Now, out: list[Action]) -> None:
        slots = js.slots
        for fire_ms in order:
            s = slots.get(fire_ms)
            r = s.run if s is not None else None
            if r is None:
                continue
            assert s is not None
            if r.lease_until_mono <= now.mono_ms and self._killed_at_lease_end(js):
                # No renew sent since was accepted in time: the lease is over in the store.
                s.run = None
                self._touched.append((js, s))
                self._dirty.add(js.index)
                out.append(killed_lease_ended(js.job.name, fire_ms, r.token))
                continue
            if not r.renewing and r.renew_at_mono <= now.mono_ms:
                r.renewing = True
                r.renew_sent_mono = now.mono_ms
                out.append(Renew(js.job.name, fire_ms, r.token, self.settings.lease_ms))

    def _sweep_when(self, js: _JobState, view: SlotView, now: Now, store_ms: int) -> None:
        """When this node's sweeps should next cover the job for this slot (core.sweeps).

        An ended slot needs no sweep: if it alone set the job's expected sweep, that sweep is
        dropped (``SweepPlan.ended``). Otherwise, with the store's time of the reply, the job is
        swept when the store's sweep could first change the slot, as ``sweep.lua``'s ``due_at``
        reckons it (a proposed slot by this node's own deadline, which its recorded vote
        carried: never later than the store's); without it, at the next sweep.
        """
        state = view.state
        if state in TERMINAL_STATES:
            self._sweeps.ended(js.index, view.fire_ms)
            return
        if not store_ms or state == SlotState.ABSENT:
            self._sweeps.heard.add(js.index)  # (a slot of the job may exist: sweep it until it ends)
            return
        # (Runs for nearly every reply of every voter: plain comparisons, not min/max calls.)
        if state == SlotState.PROPOSED:
            at = view.fire_ms + js.job.deadline_ms
        elif state == SlotState.COMMITTED:
            at = view.committed_ms if view.committed_ms > view.not_before_ms else view.not_before_ms
            at += self.settings.start_timeout_ms
        else:
            at = view.lease_until_ms
        wait = at + 1 - store_ms
        at_mono = now.mono_ms + (wait if wait > 1 else 1)
        self._sweeps.expect(js.index, at_mono, view.fire_ms)
        if not self._sweeping:  # (sooner than planned, but never sooner than min_sweep_gap from now)
            soonest = now.mono_ms + self._min_sweep_gap
            if at_mono > soonest:
                soonest = at_mono
            if soonest < self._next_sweep_mono:
                self._next_sweep_mono = soonest

    def _killed_at_lease_end(self, js: _JobState) -> bool:
        """Whether the job's runs are killed on a timer at their lease end.

        Once the lease ends in the store, the store no longer counts the
        run: under at-least-once it hands the slot to another node, which
        runs it again; under at-most-once it marks the slot ``lost``, after
        which overlap ``forbid`` no longer holds a later slot back (nor does
        ``replace`` reach the run to stop it). So the run is stopped unless
        the job is at-most-once and allows overlap: only then may a run the
        store lost sight of go on (its end is refused by the token).
        """
        job = js.job
        return job.delivery == Delivery.AT_LEAST_ONCE or job.overlap != Overlap.ALLOW

    def _lease_check(self, js: _JobState, fire_ms: int, now: Now) -> list[Action]:
        """Unrenewable lease: another node may run the slot, or a later one, so stop ours."""
        s = js.slots.get(fire_ms)
        r = s.run if s is not None else None
        if r is None or now.mono_ms < r.lease_until_mono or not self._killed_at_lease_end(js):
            return []
        assert s is not None
        s.run = None
        self._touched.append((js, s))
        self._dirty.add(js.index)
        return [killed_lease_expired_unreachable(js.job.name, fire_ms, r.token)]

    def _on_view(
        self,
        view: SlotView,
        now: Now,
        poll_again: bool = False,
        store_ms: int = 0,
        started: int | None = None,
    ) -> list[Action]:
        """React to a slot's state, whichever call revealed it (``store_ms``: the store's time of
        the reply, when it says; 0 when not; ``started``: the reply is this node's committing
        vote's, sent at that monotonic time, -1 when not known)."""
        js = self._jobs.get(view.job)
        if js is None:
            return []
        self._sweep_when(js, view, now, store_ms)
        me = self.settings.node_id
        if view.state == SlotState.COMMITTED:
            self._stop_polling(js, view.fire_ms)
            if view.executor != me:
                s = js.slots.get(view.fire_ms)
                if s is not None and s.start_first is not None and s.start_first[0] == TOKEN_UNKNOWN:
                    self._forget_start(js, view.fire_ms)  # (our failed vote did not start it)
                return []  # (most replies: another voter runs it; _maybe_start would say the same)
            if view.not_before_ms > now.wall_ms:
                self._defer(js, view.fire_ms, view.token, view.not_before_ms)
                return []
            return self._maybe_start(js, view.fire_ms, view.token, view.executor, now)
        if view.state == SlotState.RUNNING and view.executor != me:
            self._stop_polling(js, view.fire_ms)
            self._forget_start(js, view.fire_ms)
            self._drop_stale_run(js, view)
            return []
        if view.state == SlotState.RUNNING:
            self._stop_polling(js, view.fire_ms)
            if started is not None:
                return self._folded_start(js, view, started, now)
            return self._adopt_start(js, view, now)
        if view.state == SlotState.PROPOSED and poll_again and not self._stopping:
            if self._past_proposed(js, view.fire_ms):
                return []  # (a read sent before the commit, answered late: stale)
            if now.wall_ms <= view.fire_ms + js.job.deadline_ms + self.settings.start_timeout_ms:
                self._await_notice(js, view.fire_ms, now)  # (a fallback for a lost notice)
            return []
        self._stop_polling(js, view.fire_ms)
        if view.state in TERMINAL_STATES:
            self._forget_start(js, view.fire_ms)
            return self._drop_stale_run(js, view)
        return []

    def _past_proposed(self, js: _JobState, fire_ms: int) -> bool:
        """Whether this node holds a start, run, confirmation, deferred start or result of the
        slot: it was committed to this node, so a read showing it proposed is older news.

        Polling it then would leave a poll timer on a starting or running slot, and a refused
        renew would turn that run into ``awaiting`` (explorer seed 11, once fewer sweeps moved
        the replies' timing: an illegal step of the lifecycle table).
        """
        s = js.slots.get(fire_ms)
        return s is not None and (
            s.start_token is not None
            or s.run is not None
            or s.confirming is not None
            or s.deferred is not None
            or s.finish is not None
        )

    def _forget_start(self, js: _JobState, fire_ms: int) -> None:
        """The slot's outcome is known: no start of ours is to be adopted from a read any more."""
        s = js.slots.get(fire_ms)
        if s is not None and s.start_first is not None:
            s.start_first = None
            self._touched.append((js, s))

    def _adopt_start(self, js: _JobState, view: SlotView, now: Now) -> list[Action]:
        """The store runs the slot under our start though we never heard it accepted: confirm, then run.

        (The reply to the start was lost, or an earlier send of it landed
        after a later one.) What a read shows is not enough to act on: it
        may be a write no replica acknowledged yet (``wait_replicas``), which
        a failover then loses while another node is given the slot (explorer
        seed 31090), and the lease began when the start arrived, however long
        ago. So a renew of the token confirms it first (:meth:`_confirm`): a
        write like any other, waited for like the start, that gives a fresh
        lease when accepted. A failed confirmation reads the slot again, for
        at most a lease after the start was first sent.
        """
        fire_ms = view.fire_ms
        s = js.slots.get(fire_ms)
        first = s.start_first if s is not None else None
        if first and first[0] == TOKEN_UNKNOWN and view.starter and view.starter == self.settings.incarnation:
            first = (view.token, first[1])  # a vote of ours that failed started it (_vote_failed)
        if (
            s is None
            or first is None
            or first[0] != view.token
            or s.run is not None
            or s.start_token == view.token  # a start (or its confirmation) in flight
            or self._ran(js, fire_ms, view.token)
        ):
            return []
        self._touched.append((js, s))
        s.start_sent = None
        s.start_first = first
        self._dirty.add(js.index)
        if now.mono_ms - first[1] >= self.settings.lease_ms:
            s.start_first = None  # long past: the store decides (lost, or another voter)
            return []
        return self._confirm(js, fire_ms, view.token, now)

    def _folded_start(self, js: _JobState, view: SlotView, sent: int, now: Now) -> list[Action]:
        """This node's vote committed the slot and started it in the same step (docs/protocol.md,
        "A start folded into the commit"): run it, as a start's reply would have it run — even
        while stopping, as the store holds it started. A reply held half a lease (or one whose
        vote's send time is unknown, -1) is confirmed by a renew first, as a late start's is."""
        fire_ms, token = view.fire_ms, view.token
        s = self._slot(js, fire_ms)
        self._dirty.add(js.index)
        if self._holds(js, fire_ms, token):
            # A failover that lost writes hands a token out again (store-failover seed 30): a start
            # of it in flight decides (refused now, it adopts this one), a run of it is the run.
            return []
        if sent < 0 or now.mono_ms - sent >= self.settings.lease_ms // 2:
            s.start_first = (token, sent if sent >= 0 else now.mono_ms)
            return self._confirm(js, fire_ms, token, now)
        s.start_first = None
        return self._run(js, fire_ms, token, sent, view.runs)

    def _drop_stale_run(self, js: _JobState, view: SlotView) -> list[Action]:
        s = js.slots.get(view.fire_ms)
        r = s.run if s is not None else None
        if r is None or (r.token == view.token and view.executor == self.settings.node_id):
            return []
        assert s is not None
        s.run = None
        self._touched.append((js, s))
        self._dirty.add(js.index)
        return [killed_stale(js.job.name, r.token, view)]

    def _on_start(self, action: Start, reply: TransitionResult, now: Now) -> list[Action]:
        js = self._jobs[action.job]
        self._dirty.add(js.index)
        s = self._slot(js, action.fire_ms)
        sent = s.start_sent if s.start_sent is not None else now.mono_ms
        s.start_sent = None
        if s.start_token == action.token:
            s.start_token = None
        if not reply.ok:
            view = reply.slot
            if view.state == SlotState.COMMITTED and view.token == action.token and view.not_before_ms:
                # A retry our clock thought due, the store's not yet: try again then.
                at = max(view.not_before_ms, now.wall_ms) + max(1, self.settings.max_skew_ms // 2)
                self._defer(js, action.fire_ms, action.token, at)
            elif view.state == SlotState.RUNNING and view.executor == self.settings.node_id:
                return self._adopt_start(js, view, now)  # an earlier send of this start landed
            elif (
                view.state == SlotState.COMMITTED
                and view.executor == self.settings.node_id
                and view.token != action.token
            ):
                # Ours under another token than the start's (a forged notice's): the store's, as a read.
                return self._on_view(view, now, store_ms=reply.now_ms)
            elif s.start_first is not None and s.start_first[0] == action.token:
                s.start_first = None
            return []
        if now.mono_ms - sent >= self.settings.lease_ms // 2:
            # The reply was held (a pause, a slow link) for half the lease:
            # the lease, which began after we sent the start, may be gone and
            # the slot taken over, so running now could run it twice. Renew
            # first: the store accepts only while the slot is still ours under
            # this token, and then the lease runs from the renew's send.
            return self._confirm(js, action.fire_ms, action.token, now)
        if s.start_first is not None and s.start_first[0] == action.token:
            s.start_first = None
        return self._run(js, action.fire_ms, action.token, sent, reply.slot.runs)

    def _confirm(self, js: _JobState, fire_ms: int, token: int, now: Now) -> list[Action]:
        """Renew before running a start heard of late or only by a read (docs/protocol.md, "Leases").

        The slot stays ``starting``; ``start_first`` is kept, so that a read
        after a failed confirmation can adopt the start again.
        """
        s = self._slot(js, fire_ms)
        s.start_token = token
        s.confirming = now.mono_ms
        return [Renew(js.job.name, fire_ms, token, self.settings.lease_ms)]

    def _run(self, js: _JobState, fire_ms: int, token: int, lease_from: int, runs: int) -> list[Action]:
        """Run the job under a lease granted to a call sent at ``lease_from`` (monotonic).

        ``runs``: the slot's run count the store's reply showed (this run included), kept
        for the run's result: a failed attempt's retry waits the backoff of that attempt.
        """
        s = self._slot(js, fire_ms)
        if (s.run is not None and s.run.token >= token) or self._ran(js, fire_ms, token):
            return []  # (this token, or a later one, runs or ran here: a node never runs it twice)
        lease = self.settings.lease_ms
        s.run = Running(
            token=token,
            renew_at_mono=lease_from + max(1, lease // 3),
            lease_until_mono=lease_end(lease_from, lease),
            runs=runs,
        )
        return [Run(js.job.name, fire_ms, token, js.job.timeout_ms)]

    def _confirmed(
        self, js: _JobState, action: Renew, reply: TransitionResult | None, now: Now, retry_at: int = 0
    ) -> list[Action]:
        """The outcome of a confirming renew: run, read the slot again, or let it go.

        ``reply`` None: the call failed (not known whether it landed), so the
        slot is read again at ``retry_at`` and a read showing it ours under
        this token is confirmed again (:meth:`_adopt_start`, bounded by a
        lease since the first start). A refusal means the slot is no longer
        ours under this token (taken over, or ended ``lost``): its view is acted
        on as a read's is, so a takeover or retry to this node under a new token,
        whose notice a start in flight held back (``Starts._starting_other``),
        starts; a reply held half a lease again
        leaves it to the store too: a renew that keeps being accepted but
        never heard in time must not hold the slot forever.
        """
        s = self._slot(js, action.fire_ms)
        sent = s.confirming
        assert sent is not None
        s.confirming = None
        if s.start_token == action.token:
            s.start_token = None
        self._dirty.add(js.index)
        if reply is None:
            s.poll_at = retry_at
            return []
        if s.start_first is not None and s.start_first[0] == action.token:
            s.start_first = None
        if not reply.ok:
            # Not ours under this token any more: what is it? (Committed here again under a new
            # token, a retry or takeover whose notice came while this was in flight: start that.)
            return self._on_view(reply.slot, now, store_ms=reply.now_ms)
        if now.mono_ms - sent >= self.settings.lease_ms // 2:
            return []
        return self._run(js, action.fire_ms, action.token, sent, reply.slot.runs)

    def _on_renew(self, action: Renew, reply: TransitionResult, now: Now) -> list[Action]:
        js = self._jobs[action.job]
        s = js.slots.get(action.fire_ms)
        if s is None:
            return []
        if s.confirming is not None:
            return self._confirmed(js, action, reply, now)
        r = s.run
        if r is None or r.token != action.token:
            return []
        self._dirty.add(js.index)
        r.renewing = False
        if reply.ok:
            # The lease was extended after the renew was sent, not when we heard.
            lease = self.settings.lease_ms
            r.renew_at_mono = r.renew_sent_mono + max(1, lease // 3)
            r.lease_until_mono = lease_end(r.renew_sent_mono, lease)
            return self._lease_check(js, action.fire_ms, now)
        s.run = None
        self._touched.append((js, s))
        return [killed_renew_refused(action.job, action.fire_ms, action.token, reply.reason)]

    # -- replies and failures of the running side's calls (core.actions.handlers) --

    def _reply_start(self, action: Start, reply: object, now: Now) -> list[Action]:
        assert isinstance(reply, TransitionResult)
        return self._on_start(action, reply, now)

    def _reply_renew(self, action: Renew, reply: object, now: Now) -> list[Action]:
        assert isinstance(reply, TransitionResult)
        return self._on_renew(action, reply, now)

    def _reply_read_slots(self, action: ReadSlots, reply: object, now: Now) -> list[Action]:
        assert isinstance(reply, list)
        out: list[Action] = []
        for (job, fire_ms), view in zip(action.slots, reply, strict=True):
            assert isinstance(view, SlotView)
            self._stop_polling(self._jobs[job], fire_ms)
            out.extend(self._on_view(view, now, poll_again=True))
        return out

    def _failed_start(
        self, action: Start, now: Now, failure: Failure, reason: str, retry_at: int
    ) -> list[Action]:
        # Not known whether it landed: a read tells, and a repeated
        # start is refused harmlessly if it had.
        js = self._jobs[action.job]
        s = self._slot(js, action.fire_ms)
        if s.start_token == action.token:  # (not a confirmation of another token sent meanwhile)
            s.start_token = None
        s.poll_at = retry_at
        self._dirty.add(js.index)
        return []

    def _failed_renew(
        self, action: Renew, now: Now, failure: Failure, reason: str, retry_at: int
    ) -> list[Action]:
        js = self._jobs[action.job]
        s = js.slots.get(action.fire_ms)
        if s is not None and s.confirming is not None:
            return self._confirmed(js, action, None, now, retry_at)
        r = s.run if s is not None else None
        if r is not None:
            r.renewing = False
            r.renew_at_mono = retry_at
            self._dirty.add(js.index)
            return self._lease_check(js, action.fire_ms, now)
        return []

    def _failed_read_slots(
        self, action: ReadSlots, now: Now, failure: Failure, reason: str, retry_at: int
    ) -> list[Action]:
        self._polls_failed(action, failure, retry_at)
        return []
