"""Telling people what the store answered: log events, metrics and alerts — no protocol decisions.

The core decides what a reply means for the protocol; this module only
reports it. Each node counts and alerts on what *it* observed, so summed
over the cluster every slot is counted once: the executor counts its runs'
outcomes, the node whose sweep (or vote, or start-up accounting) ended a
slot counts that miss or loss.

**Job outcome alerts** (``job_failed``, ``job_recovered``) come from the
slot's executor, and only when the store *accepted* its final result: the
finish script takes one result per slot (the current token's, once), so the
alert goes out once per slot cluster-wide, never once per node. A failed run
that will be retried raises nothing (the store answers ``committed``, not
``failed``); the alert is for the slot's last attempt. ``job_recovered`` is
decided by the store in the same step as the success (the cluster's record,
not this node's memory): the finish reply counts the job's slots that ended
failed or lost in a row before it, skipping misses and skips
(``TransitionResult.failures_before``). It used to be read from the ledger
after each success, a read per slot that was 6 % of an executor's CPU at a
burst of 10,000 jobs (issue 27). Each job's ``alert_on`` names
which of ``failed``, ``recovered``, ``missed`` and ``lost`` it alerts on.

**Log lines in proportion to what the operator needs** (issue 27): with
10,000 ``* * * * *`` jobs a line per slot per node is 10,000 lines a minute
that say "as planned". The ``commit`` event is logged at DEBUG: it is logged
by the node whose vote completed the quorum — any of the voters, often not
the executor — and the executor's ``run`` line carries the same facts
(token, votes) anyway. What went as planned is counted instead and said
once a minute by :meth:`Observer.summary` (event ``summary``, INFO: slots
this node committed, started, finished, and what went wrong); what did not
go as planned (a takeover, a refusal, a miss) keeps its own WARNING line,
up to a bound per event and minute (:mod:`.linebudget`).
A message is only formatted when its level is enabled.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Mapping

from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.linebudget import LineBudget
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.spec import AgentJob
from quorum_cron.core.actions import handlers
from quorum_cron.core.node import (
    Abstain,
    Finish,
    ReadHighWater,
    ReadSlots,
    RecordMissed,
    Renew,
    Start,
    StoreAction,
    Sweep,
    Vote,
)
from quorum_cron.redact import redact_text
from quorum_cron.store.base import (
    LedgerEntry,
    SlotState,
    SlotView,
    SweepResult,
    TransitionResult,
    VoteResult,
    VoteStatus,
)

__all__ = ["Observer"]

log = logging.getLogger(EVENT_LOGGER)

MAX_MISMATCHES = 1000
"""Bound on remembered (job, foreign spec hash) pairs: each is alerted once."""

ALERT_OUTPUT_CHARS = 1000
"""A ``job_failed`` alert carries at most the last this many characters of the run's output."""

SUMMARY_INTERVAL_S = 60.0
"""How often the agent logs its ``summary`` line (:meth:`Observer.summary`), in seconds."""

SUMMARY_KEYS = (
    "committed",
    "started",
    "started_at_commit",
    "succeeded",
    "failed",
    "retrying",
    "missed",
    "lost",
    "skipped",
    "takeovers",
    "start_refused",
    "renew_refused",
    "finish_refused",
    "abstained",
    "vote_refused",
)
"""The counts a ``summary`` line carries, in this order (each since the previous line): docs/operations.md.

``abstained`` is every due slot this node did not vote for, whatever the
cause (clock, store, membership: the metric's ``cause`` label tells them
apart); ``vote_refused`` every vote the store refused by membership."""

_EXIT_RE = re.compile(r"(?:^|: )exit (-?\d+)")


def exit_code_of(detail: str) -> str:
    """The exit code a run's ledger detail starts with (``exit 3``), or ``-`` (timeout, signal, callable)."""
    match = _EXIT_RE.search(detail.split("\n", 1)[0])
    return match.group(1) if match else "-"


def output_tail(detail: str, limit: int = ALERT_OUTPUT_CHARS) -> str:
    """The end of a run's captured output (the detail after its first line), at most ``limit`` chars."""
    _, _, rest = detail.partition("\n")
    return rest if len(rest) <= limit else "…" + rest[-(limit - 1) :]


class Observer:
    """Logs, metrics and alerts for one node's store replies, abstentions and peers' definitions."""

    def __init__(
        self,
        node: str,
        jobs: Mapping[str, AgentJob],
        metrics: Metrics,
        alerts: AlertHook,
    ) -> None:
        self.node = node
        self.jobs = jobs
        self.metrics = metrics
        self.alerts = alerts
        self._mismatch_seen: set[tuple[str, str]] = set()
        self._replied = handlers(type(self), "_replied_")
        """Store action type → its ``_replied_*`` handler."""
        self.counts: Counter[str] = Counter()
        """What this node saw since the last ``summary`` line (keys: :data:`SUMMARY_KEYS`)."""
        self.lines = LineBudget()
        """The bound on the lines of what did not go as planned, said in the ``summary`` line."""

    def alerts_on(self, job: str, what: str) -> bool:
        """Whether ``job``'s ``alert_on`` names ``what`` (a job this node does not run: the default)."""
        spec = self.jobs.get(job)
        return spec is None or what in spec.alert_on

    def summary(self, interval_s: float = SUMMARY_INTERVAL_S) -> None:
        """Log what this node saw since the last call as one INFO ``summary`` line, and start over.

        The slots that went as planned log no line of their own on a
        node that only voted for them (``commit`` is DEBUG); this line is
        how an operator still sees a node working. Nothing seen, no line:
        an idle node's log stays quiet (its health shows in heartbeats and
        metrics). Each node says what *it* did: summed over the nodes,
        ``committed`` is the slots decided and ``started`` the runs.
        """
        self.alerts.flush_suppressed()
        counts, self.counts = self.counts, Counter()
        suppressed = self.lines.take_suppressed()
        if not counts and not suppressed:
            return
        fields = {key: counts[key] for key in SUMMARY_KEYS}
        said = ", ".join(f"{n} {key.replace('_', ' ')}" for key, n in fields.items() if n)
        if suppressed:  # (LineBudget: an event's lines past its bound are only counted, and said here)
            lost = f"lines not logged one by one: {', '.join(f'{k} {n}' for k, n in suppressed.items())}"
            said = f"{said}; {lost}" if said else lost
        event(
            log,
            logging.INFO,
            "summary",
            f"last {interval_s:g} s: {said}",
            interval_s=interval_s,
            lines_suppressed=sum(suppressed.values()),
            **fields,
        )

    def reply(self, action: StoreAction, reply: object) -> None:
        """Report what the store answered to ``action`` (its ``_replied_*`` handler below)."""
        self._replied[type(action)](self, action, reply)

    # -- one handler per store action type (quorum_cron.core.actions.handlers) --

    def _replied_vote(self, action: Vote, reply: object) -> None:
        assert isinstance(reply, list)
        for res in reply:
            assert isinstance(res, VoteResult)
            self._vote(res)

    def _replied_start(self, action: Start, reply: object) -> None:
        assert isinstance(reply, TransitionResult)
        if reply.ok:
            self.counts["started"] += 1
        else:
            self._start_refused(action, reply)

    def _replied_renew(self, action: Renew, reply: object) -> None:
        assert isinstance(reply, TransitionResult)
        if not reply.ok:
            self.counts["renew_refused"] += 1
            self.lines.event(
                log,
                logging.WARNING,
                "renew_refused",
                f"lease of {action.job}@{action.fire_ms} token {action.token} refused: {reply.reason}",
                job=action.job,
                slot=action.fire_ms,
                token=action.token,
                reason=reply.reason,
            )

    def _replied_finish(self, action: Finish, reply: object) -> None:
        assert isinstance(reply, TransitionResult)
        self._finish(action, reply)

    def _replied_sweep(self, action: Sweep, reply: object) -> None:
        assert isinstance(reply, SweepResult)
        for view in reply.changed:
            self._swept(view)

    def _replied_record_missed(self, action: RecordMissed, reply: object) -> None:
        assert isinstance(reply, SlotView)
        if reply.state == SlotState.MISSED and reply.reason == action.reason:
            # (not "at start-up": a slot this node could not vote for in time is recorded so too)
            self.missed(reply, "recorded by this node")
            if action.ran_locally:  # a local run, in the ledger as its slot's missed record
                self.metrics.slots.inc((action.job, "local"))
                said = f"{action.job}@{action.fire_ms} recorded: {reply.reason}"
                event(log, logging.INFO, "local_recorded", said, job=action.job, slot=action.fire_ms)

    def _replied_read_slots(self, action: ReadSlots, reply: object) -> None:
        """Nothing to report: the core acts on what a read shows."""

    def _replied_read_high_water(self, action: ReadHighWater, reply: object) -> None:
        """Nothing to report: the core accounts for the slots a mark shows missed."""

    def abstain(self, action: Abstain, cause: str) -> None:
        """This node did not vote for a due slot (``cause``: ``clock``, ``store`` or ``membership``).

        A ``membership`` abstention (not a member of the record held, or a config that disagrees
        with it) is counted but has no line of its own: the health says it once per epoch. It
        used to bypass this method, so a node out of the cluster summed ``abstained`` 0.
        """
        self.metrics.abstentions.inc((action.job, cause))
        self.counts["abstained"] += 1
        if cause == "membership":
            return
        self.lines.event(
            log,
            logging.WARNING,
            "abstain",
            f"not voting for {action.job}@{action.fire_ms}: {action.reason}",
            job=action.job,
            slot=action.fire_ms,
            reason=action.reason,
            cause=cause,
        )

    def missed(self, view: SlotView | LedgerEntry, how: str) -> None:
        """Count and alert a slot this node saw end ``missed``."""
        self.metrics.slots.inc((view.job, "missed"))
        self.counts["missed"] += 1
        if not self.alerts_on(view.job, "missed"):
            return
        self.alerts.raise_(
            AlertKind.SLOT_MISSED,
            f"{view.job}@{view.fire_ms} missed: {view.reason}",
            job=view.job,
            slot=view.fire_ms,
            how=how,
        )

    def mismatch(self, job: str, theirs: str, nodes: str, how: str) -> None:
        """Alert (once per job and foreign hash) that ``nodes`` run another definition of ``job``."""
        mine = self.jobs[job].core.spec_hash
        key = (job, theirs)
        if theirs == mine or key in self._mismatch_seen or len(self._mismatch_seen) >= MAX_MISMATCHES:
            return
        self._mismatch_seen.add(key)
        self.alerts.raise_(
            AlertKind.SPEC_MISMATCH,
            f"job {job!r}: node(s) {nodes} {how} definition {theirs[:12]}, this node {mine[:12]}; "
            f"a slot needs a quorum on ONE definition",
            job=job,
            theirs=theirs,
            ours=mine,
            nodes=nodes,
        )

    # -- per reply -----------------------------------------------------------

    def _vote(self, res: VoteResult) -> None:
        view = res.slot
        self.metrics.votes.inc((view.job, res.status.value))
        spec = self.jobs.get(view.job)
        if spec is not None:
            # (Not our own vote: a slot taken in before a reload carries the job's old hash.)
            mine = spec.core.spec_hash
            others = {h for n, h in view.votes if h != mine and n != self.node}
            for other in sorted(others):  # usually none: every peer votes our definition
                self.mismatch(view.job, other, ",".join(n for n, h in view.votes if h == other), "vote with")
        if res.status in (VoteStatus.COMMITTED, VoteStatus.SKIPPED):
            skipped = view.state == SlotState.SKIPPED
            if skipped:
                # Paused job, or overlap forbid: the vote that decided it counts it.
                self.metrics.slots.inc((view.job, "skipped"))
                self.counts["skipped"] += 1
            else:
                self.counts["committed"] += 1
                if view.state == SlotState.RUNNING:  # our vote committed and started it (a folded start)
                    self.counts["started"] += 1
                    self.counts["started_at_commit"] += 1
            # DEBUG (module docstring): formatted only when someone reads DEBUG.
            level = logging.WARNING if skipped else logging.DEBUG
            say = self.lines.event if skipped else event  # (a skip's line is bounded: LineBudget)
            if log.isEnabledFor(level):
                say(
                    log,
                    level,
                    "skipped" if skipped else "commit",
                    f"{view.job}@{view.fire_ms} {view.state}: "
                    + (view.reason if skipped else f"executor {view.executor or '-'} token {view.token}"),
                    job=view.job,
                    slot=view.fire_ms,
                    state=view.state.value,
                    executor=view.executor,
                    token=view.token,
                    votes=len(view.votes),
                    reason=view.reason,
                )
        elif res.status == VoteStatus.MISSED:
            self.missed(view, "vote after deadline")
        elif res.status == VoteStatus.REFUSED:  # (its line: once per epoch, MemberReports.refused)
            self.counts["vote_refused"] += 1

    def _start_refused(self, action: Start, reply: TransitionResult) -> None:
        view = reply.slot
        if view.state == SlotState.COMMITTED and view.token == action.token and view.not_before_ms:
            # The core starts it again when the store says the backoff is over.
            if not log.isEnabledFor(logging.INFO):
                return
            self.lines.event(
                log,
                logging.INFO,
                "retry_wait",
                f"{action.job}@{action.fire_ms} token {action.token}: {reply.reason}",
                job=action.job,
                slot=action.fire_ms,
                token=action.token,
            )
            return
        self.counts["start_refused"] += 1
        self.lines.event(
            log,
            logging.WARNING,
            "start_refused",
            f"start of {action.job}@{action.fire_ms} token {action.token} refused: {reply.reason}",
            job=action.job,
            slot=action.fire_ms,
            token=action.token,
            reason=reply.reason,
        )

    def _finish(self, action: Finish, reply: TransitionResult) -> None:
        view = reply.slot
        if reply.ok and view.state == SlotState.COMMITTED:
            self.counts["retrying"] += 1
            self.lines.event(
                log,
                logging.WARNING,
                "retrying",
                f"{action.job}@{action.fire_ms} token {action.token} failed; retry as token {view.token} "
                f"on {view.executor}, not before {view.not_before_ms}",
                job=action.job,
                slot=action.fire_ms,
                token=action.token,
                next_token=view.token,
                executor=view.executor,
            )
        elif reply.ok:
            self.metrics.slots.inc((action.job, view.state.value))
            self.counts[view.state.value] += 1
            if log.isEnabledFor(logging.INFO):
                # The line that tells a run's end (``ended`` is at DEBUG for a success): how long
                # the run held the slot, from its start to its result, by the store's clock.
                ran = max(0, view.finished_ms - view.started_ms) if view.started_ms else 0
                event(
                    log,
                    logging.INFO,
                    "finish",
                    f"{action.job}@{action.fire_ms} token {action.token} recorded {view.state}"
                    f"{f' ({ran} ms after its start)' if ran else ''}",
                    job=action.job,
                    slot=action.fire_ms,
                    token=action.token,
                    state=view.state.value,
                    ran_ms=ran,
                )
            self._outcome(action, view, reply.failures_before)
        else:
            self.counts["finish_refused"] += 1
            self.lines.event(
                log,
                logging.WARNING,
                "finish_refused",
                f"result of {action.job}@{action.fire_ms} token {action.token} refused "
                f"(this run is stale): {reply.reason}",
                job=action.job,
                slot=action.fire_ms,
                token=action.token,
                reason=reply.reason,
            )

    def finish_dropped(self, action: Finish, reason: str) -> None:
        """The core dropped this run's result after its ``Finish`` failed: the resend buffer
        (``MAX_PENDING_FINISHES`` results) was full. The slot's lease will run out and a sweep
        will record it ``lost``, although the job ran: an operator must hear it here first."""
        event(
            log,
            logging.ERROR,
            "finish_dropped",
            f"result of {action.job}@{action.fire_ms} token {action.token} dropped: the store did not "
            f"take it ({reason}) and the resend buffer is full",
            job=action.job,
            slot=action.fire_ms,
            token=action.token,
            succeeded=action.succeeded,
        )

    def _outcome(self, action: Finish, view: SlotView, failures_before: int) -> None:
        """This node's result is the slot's final word: timestamps, and the job outcome alerts
        (``failures_before``: the store's count of the job's failed or lost slots in a row before
        this success, ``TransitionResult.failures_before``)."""
        when_s = (view.finished_ms or time.time_ns() // 1_000_000) / 1000
        if view.state == SlotState.SUCCEEDED:
            self.metrics.last_success.set((action.job,), when_s)
            if failures_before and self.alerts_on(action.job, "recovered"):
                self._recovered(action, view, str(failures_before))
        elif view.state == SlotState.FAILED:
            self.metrics.last_failure.set((action.job,), when_s)
            if self.alerts_on(action.job, "failed"):
                detail = view.detail or action.detail
                self.alerts.raise_(
                    AlertKind.JOB_FAILED,
                    f"{action.job}@{action.fire_ms} failed on {self.node} "
                    f"(attempt {max(1, view.runs)}): {detail.split(chr(10), 1)[0]}",
                    job=action.job,
                    slot=action.fire_ms,
                    token=action.token,
                    exit_code=exit_code_of(detail),
                    attempt=max(1, view.runs),
                    output=redact_text(output_tail(detail)),
                )

    def _recovered(self, action: Finish, view: SlotView, failures: str) -> None:
        self.alerts.raise_(
            AlertKind.JOB_RECOVERED,
            f"{action.job}@{action.fire_ms} succeeded on {self.node} after {failures} failed run(s)",
            job=action.job,
            slot=action.fire_ms,
            token=action.token,
            failures=failures,
            attempt=max(1, view.runs),
        )

    def _swept(self, view: SlotView) -> None:
        if view.state == SlotState.MISSED:
            self.missed(view, "sweep")
        elif view.state == SlotState.LOST:
            self.metrics.slots.inc((view.job, "lost"))
            self.counts["lost"] += 1
            if not self.alerts_on(view.job, "lost"):
                return
            self.alerts.raise_(
                AlertKind.SLOT_LOST,
                f"{view.job}@{view.fire_ms} lost: {view.reason}",
                job=view.job,
                slot=view.fire_ms,
                executor=view.executor,
                token=view.token,
            )
        elif view.state == SlotState.COMMITTED:
            self.counts["takeovers"] += 1
            self.lines.event(
                log,
                logging.WARNING,
                "takeover",
                f"{view.job}@{view.fire_ms} reassigned to {view.executor} with token {view.token}",
                job=view.job,
                slot=view.fire_ms,
                executor=view.executor,
                token=view.token,
                attempt=view.attempt,
            )
