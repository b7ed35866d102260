"""The store contract: the ``Store`` protocol (values it exchanges: :mod:`quorum_cron.core.model`,
and for the ports beside the slot protocol — notices, alerts — :mod:`quorum_cron.store.ports`).

A store holds votes, slot states, fencing tokens, membership and the ledger —
never job definitions. Every state-changing operation is ONE atomic step on
the store (one Lua script call on Redis, one method call on the memory model)
and reads the store's own clock, never the caller's; the caller's clock only
decides *when* to call.

Slot life cycle (the full table with reasons is in ``docs/protocol.md``)::

    absent ──vote──▶ proposed ──quorum──▶ committed ──start──▶ running
       │                │  │                 │  ▲               │  │
       │                │  └─overlap forbid─▶ skipped            │  │
       └──deadline──────┴──deadline────▶ missed │  │             │  │
                                  start timeout └──┘ (new token)  │  │
                                                  finish ─────────┘  │
                             succeeded / failed ◀─┘                  │
                 lease expired: at-most-once → lost, at-least-once → committed

    running ──finish(failed, retries left)──▶ committed (new token, not before
             now + backoff; ledger entry with the non-terminal state retrying)
    paused job: a vote for an undecided slot ends it skipped ("paused by ...")

Every operation is idempotent in effect: a vote repeated by the same node
overwrites its earlier vote; a start, renew or finish repeated with the same
token after it succeeded is refused without changing anything. That is what
lets a node retry after a lost reply.

Times are integer milliseconds since the Unix epoch (UTC), durations integer ms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

# The values a store exchanges live in the model (the pure parts import them
# from there); they are re-exported here for the store implementations.
from quorum_cron.core.model import (
    DECIDED_STATES,
    TERMINAL_STATES,
    AuditAction,
    AuditEntry,
    Configuration,
    Delivery,
    FencedRequest,
    HeartbeatResult,
    JobControl,
    LedgerEntry,
    Member,
    Membership,
    MembershipChange,
    MembershipRecord,
    MissedRequest,
    Overlap,
    SlotState,
    SlotView,
    SweepParams,
    SweepResult,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
)
from quorum_cron.errors import StoreError
from quorum_cron.store.ports import (
    ALERTS_MAXLEN,
    MAX_REASON,
    AlertPage,
    DeliverNotice,
    JobTables,
    MissedRecords,
    Notice,
    NoticeListening,
    StoredAlert,
    Trigger,
)

__all__ = [
    "ALERTS_MAXLEN",
    "DECIDED_STATES",
    "MAX_REASON",
    "TERMINAL_STATES",
    "AlertPage",
    "AuditAction",
    "AuditEntry",
    "Configuration",
    "Delivery",
    "FencedRequest",
    "HeartbeatResult",
    "JobControl",
    "LedgerEntry",
    "Member",
    "Membership",
    "MembershipChange",
    "MembershipRecord",
    "MissedRecords",
    "MissedRequest",
    "Notice",
    "NoticeListening",
    "ObservedStore",
    "Overlap",
    "SlotState",
    "SlotView",
    "Store",
    "StoredAlert",
    "SweepParams",
    "SweepResult",
    "TransitionResult",
    "Trigger",
    "VoteRequest",
    "VoteResult",
    "VoteStatus",
]


@runtime_checkable
class Store(JobTables, MissedRecords, Protocol):
    """The operations every store offers, each atomic on the store (and :class:`JobTables`').

    Raises: every method may raise :class:`~quorum_cron.errors.StoreUnavailable` when the
    store cannot be reached (the effect of that call is then unknown; retrying is safe) and
    :class:`~quorum_cron.errors.StoreError` on a reply the protocol does not allow.
    """

    def vote(self, requests: Sequence[VoteRequest]) -> list[VoteResult]:
        """Record votes and commit every slot that reaches quorum.

        Per request, atomically and in order, with ``now`` the store's time:

        1. a slot in a :data:`DECIDED_STATES` state is returned unchanged
           (``DECIDED``);
        2. ``now < fire_ms - max_skew_ms``: refused (``EARLY``), not stored;
        2a. membership (see ``docs/protocol.md``, "Membership and
           reconfiguration"): a vote whose ``epoch`` is newer than the
           job's record makes the job adopt the vote's record (a job only
           moves forward; the legacy floor goes); then a vote with an older
           epoch than the job's (epoch 0 included, once the job has a
           record), or from a node outside the record's ``current`` or
           ``old``, is refused (``REFUSED``, not stored; the result carries
           the job's epoch, record and a reason). An epoch-0 vote on a job
           without a record keeps the legacy rule (step 5);
        2b. the job is paused (:meth:`pause`): the vote is stored and the
           slot becomes ``skipped``, reason ``paused by <by>: <reason>``, with
           a ledger entry (``SKIPPED``) — a paused job commits nothing;
        3. ``now > fire_ms + D`` and no quorum yet: the slot becomes
           ``missed`` with a ledger entry (``MISSED``); ``D``, the slot's
           deadline, is the largest ``deadline_ms`` of this request and of the
           votes stored for the slot before (a node catching up after an
           outage widens its own, and the slot keeps it for everybody);
        4. the vote is stored (one per node; a repeat overwrites), and ``D``
           with it;
        5. when the nodes that voted with this request's spec hash hold a
           quorum of the job's record (of ``current`` and, while joint, of
           ``old``; votes of other nodes stored earlier do not count) — or,
           on a job without a record, ``Q`` of them, ``Q`` the highest quorum
           any epoch-0 vote sent for this job — the slot commits: state
           ``committed``, executor = the rendezvous-hash winner among those
           voters, token = next value of the job's counter, ``committed_ms = now``, starting deadline ``D``
           (``COMMITTED``); the executor is
           notified (Redis: ``PUBLISH`` on its assignment channel). With overlap
           ``forbid`` and another slot of the job committed or running, it
           becomes ``skipped`` instead; with ``replace`` the other active
           slots are ended first (``skipped`` if not started, ``failed``
           if running, reason naming the new slot).
        6. a request with ``start_lease_ms`` > 0 whose own node is the executor
           chosen in step 5, with ``now >= fire_ms``, starts the slot in the
           same step as :meth:`start` would (``running``, ``runs`` 1, lease
           ``now + start_lease_ms``, ``starter`` its ``incarnation``), and no
           notice is published: the reply tells the executor (``COMMITTED``,
           the slot ``running``; docs/protocol.md, "A start folded into the
           commit").

        Results are in request order. Requests for different jobs are
        independent; no order across jobs is promised.
        """
        ...

    def start(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        """Fenced ``committed → running``: only for the slot's executor with its current token.

        Sets ``started_ms = now``, ``lease_until_ms = now + lease_ms`` and
        counts the run (``runs``). Refused (``ok=False``, reason says why,
        nothing changed) when the state is not ``committed``, the token is
        not the slot's current token, the node is not the executor, the slot
        never ran and its starting deadline passed (``starting deadline
        passed``), or a retry is not due yet (``retry not due before <ms>``).
        A slot that already ran (retry, at-least-once re-run) ignores the
        starting deadline.
        """
        ...

    def renew(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        """Extend a running slot's lease to ``now + lease_ms`` (fenced like start).

        Refused when the slot is not ``running`` under this node and token —
        for instance after a takeover, or after ``replace`` ended it; the
        executor should then stop the job.
        """
        ...

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
        """``running → succeeded | failed`` (fenced like start) with a ledger entry.

        ``detail`` (exit code, output tail) is stored as given; callers bound it.

        Retries: when the run failed, the slot has been started fewer than
        ``1 + retries`` times (``SlotView.runs``) and the job is not paused,
        the slot does not end. A ledger entry with the non-terminal state
        ``retrying`` is written (reason ``attempt <runs> of <1 + retries>
        failed; retry after <backoff> ms``) and the slot goes back to
        ``committed`` with a new, higher token, the next executor (chosen as
        in a sweep takeover), ``committed_ms = now`` and ``not_before_ms =
        now + retry_backoff_ms``; the new executor is notified like any
        assignment. A success, or the last allowed failure, ends the slot
        normally. A paused job is not retried (reason ``job failed; no retry:
        paused by <by>``). A success reports ``failures_before``: the job's
        slots that ended failed or lost in a row before it (the store counts).
        """
        ...

    def fenced(self, requests: Sequence[FencedRequest]) -> list[TransitionResult | StoreError]:
        """Several fenced transitions in one round trip: each request is exactly the
        :meth:`start`, :meth:`renew` or :meth:`finish` its ``op`` names, with its arguments.

        Why: at a minute boundary an executor of thousands of jobs starts thousands
        of slots; one round trip each queued starts past their start timeout, and
        the takeovers cascaded (docs/benchmarks.md, "Scale"). Each request is
        its own atomic step, in request order; nothing is atomic across them.

        Results are in request order. A request the store answered with an
        error (a corrupt key of its job) gets that :class:`StoreError` in its
        place: one job's bad value does not fail the others. Raises
        :class:`~quorum_cron.errors.StoreUnavailable` when the store could not
        be reached or did not replicate as required: then any of the requests
        may have taken effect, as with a lost reply, and retrying is safe.
        """
        ...

    def sweep(self, params: Sequence[SweepParams]) -> SweepResult:
        """Enforce deadlines on every undecided or active slot of the given jobs.

        Per job, atomically, with ``now`` the store's time:

        * ``proposed`` with ``now > fire_ms + max(deadline_ms, D)`` →
          ``missed``, ``D`` the largest deadline its votes carried (see
          :meth:`vote`);
        * ``committed`` with ``now > max(committed_ms, not_before_ms) + start_timeout_ms`` →
          re-assigned to the rendezvous winner among the voters not assigned
          yet (else the least recently assigned one), new token,
          ``committed_ms = now``, executor notified — the slot never
          started (in this attempt), so this is safe under at-most-once; a
          slot that never started at all and is past its starting deadline
          becomes ``missed`` instead;
        * ``running`` with ``now > lease_until_ms`` → ``lost`` under
          at-most-once; under at-least-once re-assigned like above.

        Returns the slots it changed, by job then fire time, and per swept job with a slot
        still open (``open_due``) how long (store time) until the first instant at which
        one of the rules above could apply to one of its open slots as
        they stand after the sweep — ``fire_ms + max(deadline_ms, D) + 1``
        for a proposed slot, ``max(committed_ms, not_before_ms) +
        start_timeout_ms + 1`` for a committed one, ``lease_until_ms + 1``
        for a running one — minus ``now`` (at least 1). A node sweeps that
        job again then (or after ``sweep_ms``, whichever is later), not
        every ``sweep_ms`` while nothing can be due.
        """
        ...

    def high_waters(self, jobs: Sequence[str]) -> list[int]:
        """Each job's high-water mark, in the order given: the latest fire time of the job that
        reached a decided state, or 0. Read-only.

        One call for every job: a node reads each job's mark when it boots
        (its catch-up starts there); on Redis, one pipelined round trip per
        500 jobs. A corrupt mark reads as 0 and is reported.
        """
        ...

    def slot(self, job: str, fire_ms: int) -> SlotView:
        """Read one slot (``ABSENT`` when unknown). Read-only."""
        ...

    def read_slots(self, slots: Sequence[tuple[str, int]]) -> list[SlotView]:
        """Read each ``(job, fire_ms)`` as :meth:`slot` would, in the order given. Read-only.

        One call for many slots (a node's polls of every slot it awaits: one
        pipeline on Redis); each read stands alone, they are not one snapshot.
        """
        ...

    def slots(self, job: str, from_ms: int, to_ms: int) -> list[SlotView]:
        """Read the job's known slots with ``from_ms <= fire_ms <= to_ms``, by fire time."""
        ...

    def ledger(self, job: str, limit: int) -> list[LedgerEntry]:
        """The job's latest ``limit`` ledger entries, newest first."""
        ...

    def heartbeat(
        self, node: str, incarnation: str, ttl_ms: int, info: dict[str, str], epoch: int = 0
    ) -> HeartbeatResult:
        """Announce that ``node`` (process ``incarnation``, holding ``epoch``) is alive for ``ttl_ms``.

        Refused when a *different* incarnation of the same node id holds an
        unexpired heartbeat: a second process with the same id must not run.
        The reply carries the namespace's membership record, so every node
        learns a change within one heartbeat. An accepted heartbeat also
        moves the record, atomically: in "size = N" mode (open seats, not
        joint) a node that is not a member fills a seat (epoch + 1, by the
        node, reason ``seat filled by <node>``); while joint, when ``epoch``
        is the record's and every member of ``current`` has a live heartbeat
        sent under it (this one included), the change finishes (epoch + 1,
        ``current`` only, reason ``every member of epoch <e> holds it``).
        """
        ...

    def leave(self, node: str, incarnation: str) -> None:
        """Drop the node's membership if ``incarnation`` still holds it (clean shutdown)."""
        ...

    def members(self) -> list[Member]:
        """Every node with an unexpired heartbeat, by node id (members of the record or not)."""
        ...

    def membership(self) -> Membership | None:
        """The namespace's membership record (None: none yet). Read-only."""
        ...

    def init_membership(self, current: Configuration, by: str) -> Membership:
        """Create the record (epoch 1, reason ``created from the config``) if there is none;
        return what is stored either way (a node compares it with its config)."""
        ...

    def change_membership(
        self, expect_epoch: int, current: Configuration, by: str, reason: str
    ) -> MembershipChange:
        """Start a change: the stored record must be at ``expect_epoch`` and not joint; it becomes
        joint (``old`` = its ``current``, ``current`` = the given one) at ``expect_epoch + 1``.

        Audited (:meth:`membership_log`). Refused, with one line and nothing
        changed, when there is no record, its epoch differs (someone changed
        it meanwhile), a change is in progress, or nothing would change.
        """
        ...

    def finish_membership(
        self, expect_epoch: int, by: str, reason: str, force: bool = False
    ) -> MembershipChange:
        """Leave the joint state: the stored record must be the joint one at ``expect_epoch``; it
        becomes its ``current`` alone at ``expect_epoch + 1`` (audited).

        Without ``force``, refused (naming who) until every member of
        ``current`` has a live heartbeat sent under ``expect_epoch``; the
        heartbeat itself finishes it then. ``force`` finishes anyway: nodes
        still on an older epoch are refused by every job that a newer vote
        touched, but can still commit on a job none did (docs/protocol.md).
        """
        ...

    def membership_log(self, limit: int) -> list[Membership]:
        """The latest ``limit`` records the namespace held, newest first (bounded like a job's audit)."""
        ...

    def time_ms(self) -> int:
        """The store's clock (Redis ``TIME``), for the node's skew cross-check."""
        ...

    def pause(self, job: str, by: str, reason: str) -> JobControl:
        """Pause the job: until resumed, a vote for any undecided slot of it ends that slot ``skipped``.

        Slots already committed or running are not touched (their runs go
        on; failed runs are not retried). Recorded in the job's audit with
        ``by`` and store time. Pausing again with the same ``by`` and
        ``reason`` changes nothing (a retry after a lost reply); otherwise
        the new pause replaces it. Returns the control after (``changed``: by this call).
        """
        ...

    def resume(self, job: str, by: str) -> JobControl:
        """End the job's pause (audited); ``changed`` if this call did. Not paused: nothing changes."""
        ...

    def control(self, job: str) -> JobControl:
        """The job's pause state. Read-only."""
        ...

    def trigger(self, job: str, by: str) -> int:
        """An operator asks the cluster to run ``job`` now; returns the trigger's fire time.

        The request carries only the job name and who asked — the nodes run
        their own definition of the job, nothing comes from the store. The
        fire time is store time (ms). It is kept in the job's trigger set
        (trimmed: older than the retention, or beyond the newest
        ``trigger_maxlen``), audited, and announced to every node (Redis:
        ``PUBLISH`` on the trigger channel). Nodes then vote for the slot
        ``(job, fire_ms)`` like any other. Not idempotent: each call is a
        trigger (two calls in the same millisecond name the same slot).
        """
        ...

    def triggers(self, job: str, since_ms: int) -> list[int]:
        """Fire times of the job's kept triggers with ``fire_ms > since_ms``, ascending. Read-only.

        Triggers older than the retention are not reported.
        """
        ...

    def audit(self, job: str, limit: int) -> list[AuditEntry]:
        """The job's latest ``limit`` operator actions, newest first (bounded per job)."""
        ...

    # -- ports beside the slot protocol: notices and the alerts journal -------

    def listen_notices(
        self,
        node: str,
        jobs: Sequence[str],
        deliver: DeliverNotice,
        on_subscribed: Callable[[], None] | None = None,
    ) -> NoticeListening:
        """A subscription (not started) to ``node``'s assignment notices and the operator triggers.

        ``deliver`` gets each well-formed :class:`Notice` (a slot of ``jobs``
        assigned to ``node``: a commit, a takeover, a retry) and
        :class:`Trigger` (:meth:`trigger`); ``on_subscribed`` runs each time
        the subscription is (re-)established, so the caller can catch up with
        what it missed. Notices are hints, at most once: the fenced start and
        :meth:`triggers` decide. Redis: pub/sub (sharded per job on a
        cluster), read on a daemon thread that re-subscribes with backoff,
        ``deliver`` called on that thread. The model: delivered inside the
        store call that publishes it, on the caller's thread, in order.
        """
        ...

    def add_alert(self, alert: StoredAlert) -> None:
        """Keep ``alert`` in the namespace's journal, dropping the oldest beyond :data:`ALERTS_MAXLEN`.

        Stored as given (the agent bounds and scrubs it first); ``alert.id``
        is ignored, the store gives the id.
        """
        ...

    def alerts(self, limit: int) -> AlertPage:
        """The newest ``limit`` alerts of the journal, newest first, each with its store id. Read-only.

        An entry that is not what :meth:`add_alert` writes is skipped and
        counted (``AlertPage.skipped``), never returned.
        """
        ...


@runtime_checkable
class ObservedStore(Store, Protocol):
    """A store with the reads the faces make across jobs (the web face, ``history``).

    Read-only, like :meth:`Store.ledger`; stream ids are opaque strings the
    store returned before, compared only by the store.
    """

    def follow_cursor(self) -> str:
        """A starting point for :meth:`follow`: entries written from now on are new."""
        ...

    def follow(
        self, jobs: Sequence[str], cursor: dict[str, str], start: str, block_ms: int
    ) -> list[LedgerEntry | AuditEntry]:
        """Ledger and audit entries of ``jobs`` newer than ``cursor`` (advanced in place), waiting
        up to ``block_ms`` for one on Redis (the model never waits)."""
        ...

    def ledgers(self, jobs: Sequence[str], limit: int) -> list[list[LedgerEntry]]:
        """:meth:`Store.ledger` of many jobs, in job order."""
        ...

    def ledger_tails(
        self, jobs: Sequence[str], limit: int, after: Mapping[str, str]
    ) -> list[tuple[str, list[LedgerEntry], JobControl]]:
        """Per job: the newest ledger id, the entries newer than ``after[job]`` (newest first, at most
        ``limit``), the control."""
        ...

    def server_info(self) -> dict[str, str]:
        """What an operator wants to know about the server (the model: what it is)."""
        ...

    def close(self) -> None:
        """Release connections (the model: nothing)."""
        ...
