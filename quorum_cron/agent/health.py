"""Whether this node may vote: store health, clock trust and membership, wired together.

* **store health**: a failed call marks the store down; while down the node
  does not vote (trust is withdrawn, so due slots are *abstained*, and
  logged as such) and the health loop probes with jittered exponential
  backoff. Any successful call — a probe, or one of the core's retried
  starts, renewals or results — brings the node back at once, which matters
  for a start racing its deadline right after Redis returns;
* **write replication** (``wait_replicas``, :mod:`.replication`): a write
  fewer replicas acknowledged is a state of its own, said once and ended
  only by a replicated write; while it lasts the health loop probes with one
  (``init_membership``: it creates nothing where a record exists). On a
  Redis Cluster a shortfall names its master and is that master's state:
  only the jobs on it are not voted (:mod:`.shortmasters`);
* **clock trust** (:mod:`.clocktrust`), re-checked on every heartbeat; the
  verdict (with the measured offset) goes into the heartbeat's info, which
  is what ``quorum-cron status`` shows;
* **membership** (:mod:`.membership`): heartbeats, duplicate-id refusal,
  quorum health and its alerts, and peers announcing another definition of
  a job;
* **the membership record**: created from the config at first contact if
  the store has none; every heartbeat reply carries the store's record, and
  a newer one goes to the core (``on_record``); one the core took from a
  job that refused a vote comes back here at once (:meth:`NodeHealth.refused`).
  A node whose config disagrees with the record at start does not vote (one
  line, alert ``membership_mismatch``) until a record it agrees with arrives; a node
  that is not a member of the record it holds says so once per epoch, as
  does a vote the store refused (:mod:`.member_reports`).

The core hears two things from here: ``set_trust(trusted, reason)`` and
``on_record(record)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
from collections.abc import Callable, Mapping
from functools import partial
from typing import TypeVar

from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.clocktrust import ClockTrust
from quorum_cron.agent.jobtables import JobTableSync
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.member_reports import MemberReports
from quorum_cron.agent.membership import (
    Membership,
    NodeIdTaken,
    QuorumHealth,
    config_disagreement,
    record_health,
)
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.observe import Observer
from quorum_cron.agent.replication import Replication, probe_write, shortfall
from quorum_cron.agent.shortmasters import ShortMasters
from quorum_cron.agent.spec import AgentJob, AgentSettings
from quorum_cron.agent.storeio import StoreWorker
from quorum_cron.clock.base import Clock
from quorum_cron.core import model
from quorum_cron.core.actions import Refused
from quorum_cron.core.model import MembershipRecord
from quorum_cron.errors import StoreError, StoreOutOfMemory, StoreRefusing, StoreUnavailable
from quorum_cron.store.base import Member, Store

__all__ = ["BACKOFF_MAX_MS", "BACKOFF_MIN_MS", "NodeHealth"]

T = TypeVar("T")

log = logging.getLogger(EVENT_LOGGER)

BACKOFF_MIN_MS = 100
BACKOFF_MAX_MS = 1_000
SEAT_FILLING_BEAT_MS = 250
"""The heartbeat interval (if shorter than ``heartbeat``) while the record this node holds has
open seats, in its first two heartbeat TTLs: see :meth:`NodeHealth.beat_interval_ms`."""


class NodeHealth:
    """Store up/down, clock trust and quorum health of one node; runs its heartbeat loop."""

    def __init__(
        self,
        settings: AgentSettings,
        jobs: Mapping[str, AgentJob],
        store: Store,
        worker: StoreWorker,
        *,
        clock: Clock,
        metrics: Metrics,
        alerts: AlertHook,
        observer: Observer,
        set_trust: Callable[[bool, str], None],
        poke: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.node = settings.node_id
        self.jobs = jobs
        self.tables = JobTableSync(settings.node_id, jobs)
        """This node's job table beside its heartbeat; the peers' read when their digest moves."""
        self._table_error = ""
        self.store = store
        self.worker = worker
        self.clock = clock
        self.metrics = metrics
        self.alerts = alerts
        self.observer = observer
        self._set_trust = set_trust
        self._poke = poke
        self.trust = ClockTrust(
            clock,
            max_skew_ms=settings.node.max_skew_ms,
            ntp_servers=settings.ntp_servers,
            ntp_unreachable=settings.ntp_unreachable,
            check_interval_ms=settings.clock_check_interval_ms,
        )
        incarnation = settings.node.incarnation or None  # (the runtime's: its votes tag the starts they fold)
        self.membership = Membership(store, self.node, settings.heartbeat_ttl_ms, incarnation)
        self.store_up = True
        self._oom = self._writes_refused = False  # (writes refused: held down, see store_down)
        self._oom_hold_until = 0
        self._down_reason = ""
        self.replication = Replication(clock.monotonic_ms, 2 * settings.heartbeat_ms)
        self.masters = ShortMasters(store, clock.monotonic_ms, 2 * settings.heartbeat_ms, alerts)
        worker.split, self.masters.on_change = self.masters.split, poke  # (its jobs' votes: held back)
        self.masters.on_count = metrics.masters_unreplicated.set
        self.on_store_back: Callable[[], None] = lambda: None
        """Called when the store answers again after an outage (the runtime catches up)."""
        self.on_store_down: Callable[[str], None] = lambda reason: None
        """Called when the store stops answering, with the reason (the runtime tells the core)."""
        self._probe_now = asyncio.Event()
        self._trusted: bool | None = None
        self._clock_ok: bool | None = None
        self._quorum_ok: bool | None = None
        self.voting_stopped = False
        self._quiet_until_mono = clock.monotonic_ms() + 2 * settings.heartbeat_ttl_ms
        """No quorum_lost alert before this, unless a quorum was seen: peers may still be starting."""
        self._tables_quiet_until = 0
        """No peer's job table compared before this: a reload's peers publish theirs meanwhile."""
        self.record: MembershipRecord | None = None
        """The newest membership record this node has seen (None: none yet)."""
        self.on_record: Callable[[MembershipRecord], None] = lambda record: None
        """Called with each newer record (the runtime hands it to the core)."""
        self.membership_problem: str | None = None
        """Set when this node's config disagreed with the record at start: it does not vote."""
        self._joined = False
        self.reports = MemberReports(settings, metrics, alerts)

    # -- store up and down ---------------------------------------------------

    def store_down(self, reason: str) -> None:
        if self.masters.down(reason):
            return  # a cluster master's shortfall: its jobs', not the node's (.shortmasters)
        short = shortfall(reason)
        if short is not None:
            # Writes fall short of wait_replicas: one state until a write is replicated (store_ok).
            if not self.replication.began(short):
                return  # said when it began
            if not self.store_up:  # (down already, for another outage: say what it is now, once)
                self.metrics.store_up.set(0)
                event(log, logging.WARNING, "store", f"store writes not replicated: {short}; not voting")
                self.update_trust()
                return
        self._down_reason = reason
        oom = reason.startswith(StoreOutOfMemory.PREFIX)
        self._writes_refused = oom or StoreRefusing.WRITES in reason
        if self._writes_refused:
            # Reads succeed while Redis refuses writes (OOM, MISCONF, READONLY): unheld, every read
            # declared the store back and every write down again, an alert a second.
            self._oom_hold_until = self.clock.monotonic_ms() + 2 * self.settings.heartbeat_ms
        if oom != self._oom:
            # Out of memory is its own state: reported once when it begins
            # (and again if the outage turns into another kind, or back).
            self._oom = oom
            self.metrics.store_oom.set(1 if oom else 0)
            if oom and self.store_up is False:
                self.alerts.raise_(AlertKind.STORE_OOM, f"store {reason}; not voting")
        if not self.store_up:
            return
        self.store_up = False
        self.on_store_down(reason)
        self.metrics.store_up.set(0)
        if oom:
            self.alerts.raise_(
                AlertKind.STORE_OOM,
                f"store {reason}; not voting (free memory or raise maxmemory; see docs/operations.md)",
            )
        elif self.replication.short:
            self.alerts.raise_(
                AlertKind.STORE_UNAVAILABLE,
                f"store writes not replicated: {self.replication.short}; not voting until a write is "
                f"(a replica is missing or behind: see docs/operations.md, wait_replicas)",
            )
        else:
            self.alerts.raise_(AlertKind.STORE_UNAVAILABLE, f"store unreachable: {reason}; not voting")
        self.update_trust()
        self._probe_now.set()
        self._poke()

    @property
    def unreplicated(self) -> str:
        """The ``WAIT`` shortfall while writes are not replicated as required ("" otherwise)."""
        return self.replication.short

    @property
    def down_reason(self) -> str:
        """Why the store was last marked down."""
        return self._down_reason

    def store_ok(self, replicated: bool = False) -> None:
        """A store call succeeded; ``replicated``: it was a write ``WAIT`` covered (a vote, a
        fenced transition, a missed record, the health loop's probe), the only kind that ends a
        replication shortfall (reads and heartbeats need no replica)."""
        back = "store reachable again"
        short = self.replication.short
        if short:
            if not self.replication.ends(replicated):
                return
            back = f"store writes replicated again (after {short})"
        if self._writes_refused and self.clock.monotonic_ms() < self._oom_hold_until:
            return  # writes refused until none has been for a while (see store_down)
        self._writes_refused = False
        self.metrics.store_up.set(1)
        if self._oom:
            self._oom = False
            self.metrics.store_oom.set(0)
        if self.store_up:
            return
        self.store_up = True
        event(log, logging.INFO, "store", back)
        self.update_trust()
        self.on_store_back()
        self._poke()

    # -- trust ---------------------------------------------------------------

    def update_trust(self) -> None:
        """Tell the core whether it may vote: the clock verdict, unless the store is down."""
        verdict = self.trust.verdict()
        if verdict.offset_ms is not None:
            self.metrics.clock_offset.set(verdict.offset_ms / 1000)
        if self._clock_ok is not verdict.trusted and self.store_up:
            if not verdict.trusted:
                self.alerts.raise_(
                    AlertKind.CLOCK_ABSTAIN,
                    f"{verdict}; this node abstains",
                    offset_ms=f"{verdict.offset_ms:.0f}" if verdict.offset_ms is not None else "unknown",
                )
            elif self._clock_ok is False:
                self.alerts.raise_(AlertKind.CLOCK_TRUSTED, str(verdict))
            self._clock_ok = verdict.trusted
        if not self.store_up:
            trusted, reason = False, f"store unreachable ({self._down_reason})"
            if self.replication.short:
                trusted, reason = False, f"store writes not replicated: {self.replication.short}"
        elif self.membership_problem is not None:
            # (It reads "not voting: ...", as the trust line's head does: said once.)
            trusted, reason = False, self.membership_problem.removeprefix("not voting: ")
        else:
            trusted, reason = verdict.trusted, str(verdict)
        self.metrics.clock_trusted.set(1 if trusted else 0)
        if trusted != self._trusted:
            self._trusted = trusted
            fields: dict[str, object] = {"trusted": trusted}
            if verdict.offset_ms is not None:
                fields["offset_ms"] = round(verdict.offset_ms, 1)
            head = "voting" if trusted else "not voting"
            if trusted and self.record is not None and not self.record.is_member(self.node):
                # (The clock's verdict alone: a node outside the record abstains all the same.)
                head = f"not voting (not a member of epoch {self.record.epoch})"
            event(log, logging.INFO if trusted else logging.WARNING, "trust", f"{head}: {reason}", **fields)
        self._set_trust(trusted, reason)

    def jobs_changed(self) -> None:
        """The job table was replaced (a reload): write it anew, compare peers anew, two heartbeats
        on (peers reloaded at once publish theirs meanwhile: no spec_mismatch about their old ones)."""
        self.tables.changed()
        self._tables_quiet_until = self.clock.monotonic_ms() + 2 * self.settings.heartbeat_ms

    def info(self) -> dict[str, str]:
        """The heartbeat's info: host, job definitions, voting, clock verdict (``status`` shows it)."""
        verdict = self.trust.verdict()  # (read afresh: it may distrust a clock the loop trusts yet)
        stopped = self.voting_stopped or not self._trusted or not verdict.trusted or self.is_refused_member()
        return {
            "host": socket.gethostname(),
            "jobs_digest": self.tables.digest,
            "voting": "no" if stopped else "yes",
            **verdict.as_info(),
            **self.settings.info,
        }

    # -- membership ----------------------------------------------------------

    async def first_contact(self, stopping: Callable[[], bool]) -> bool:
        """First heartbeat (raises :class:`NodeIdTaken`) and clock check; retried while the store is down.

        Returns False when asked to stop before the store answered.
        """
        backoff = BACKOFF_MIN_MS
        waited = False
        while True:
            try:
                proposed = self.settings.membership
                if proposed is not None:
                    self.membership_seen(
                        await self.worker.background(partial(self.store.init_membership, proposed, self.node))
                    )
                try:
                    await self._beat()
                except NodeIdTaken as exc:  # (a killed process's entry is waited out, once)
                    ask = partial(self.membership.wait_out, exc)
                    wait_ms = None if waited else await self.worker.background(ask)
                    if wait_ms is None:
                        raise
                    waited = True
                    await asyncio.sleep(wait_ms / 1000)
                    continue
                await self.trust.check(self.store.time_ms, self.worker.background)
                self.store_ok(replicated=proposed is not None)  # (init_membership: a replicated write)
                break
            except StoreUnavailable as exc:
                # A node may start before Redis: keep trying, say so once.
                self.store_down(str(exc))
                if stopping():
                    return False
                await asyncio.sleep(backoff * (0.5 + random.random()) / 1000)
                backoff = min(BACKOFF_MAX_MS, backoff * 2)
        self._joined = True
        # A config that disagrees with the stored record means this node does not vote.
        self.membership_problem = self.reports.config_problem(self.record)
        self.reports.member(self.record, self.membership_problem is None)
        self.update_trust()
        return True

    async def _beat(self) -> None:
        # The table goes before the heartbeat that names it by digest.
        publish = partial(self.store.publish_jobs, self.node, self.tables.table)
        if self.tables.publish_due() and await self._table_call(publish):
            self.tables.published()
        epoch = self.record.epoch if self.record is not None else 0
        result = await self.worker.background(partial(self.membership.beat, self.info(), epoch))
        if result.membership is not None:
            self.membership_seen(result.membership)

    async def _table_call(self, call: Callable[[], T]) -> tuple[T] | None:
        """A job-table write or read, best-effort: its result (a 1-tuple), or None if the store
        refused it (a corrupt key costs the peers' definition check, never the heartbeat; said
        once per distinct error). An unreachable store raises, as for the heartbeat itself."""
        try:
            return (await self.worker.background(call),)
        except StoreUnavailable:
            raise
        except StoreError as exc:
            if str(exc) != self._table_error:
                self._table_error = str(exc)
                event(log, logging.WARNING, "membership", f"job table not exchanged: {exc}")
            return None

    def beat_interval_ms(self) -> int:
        """``heartbeat``; :data:`SEAT_FILLING_BEAT_MS` while seats are still filling as the node starts.

        Why: each node that fills a seat makes a new epoch, and a job takes a
        newer record only from a vote of one of its members (docs/protocol.md,
        "One epoch, one record"), who learn of it from their heartbeat replies.
        When a cluster first starts, its first nodes' slots waited up to a
        whole heartbeat for each later node's seat (CI saw a slot start 1.95 s
        late, and the job's next two skipped as overlapping). Only while the
        record held has open seats, and only in the node's first two heartbeat
        TTLs, as peers may still be starting: a cluster that runs with a seat
        open for good heartbeats at its usual pace.
        """
        record = self.record
        if (
            record is not None
            and record.current.open_seats
            and self.clock.monotonic_ms() < self._quiet_until_mono
        ):
            return min(self.settings.heartbeat_ms, SEAT_FILLING_BEAT_MS)
        return self.settings.heartbeat_ms

    async def loop(self, on_id_taken: Callable[[NodeIdTaken], None]) -> None:
        """Heartbeat and clock check every ``heartbeat_ms``; while the store is down, probe with backoff."""
        backoff = BACKOFF_MIN_MS
        while True:
            try:
                await self._beat()
                await self.trust.check(self.store.time_ms, self.worker.background)
                members = await self.worker.background(self.membership.members)
                read = self.tables.to_read(members)  # (peers whose job table changed: rarely any)
                got = await self._table_call(partial(self.store.published_jobs, read)) if read else None
                tables = got[0] if got else {}
                self.store_ok()
                if self.replication.short:
                    proposed, background = self.settings.membership, self.worker.background
                    stored = await probe_write(proposed, self.node, self.store, background)
                    self.store_ok(replicated=True)
                    if stored is not None:
                        self.membership_seen(stored)
                await self.masters.probe(self.worker.background)
                backoff = BACKOFF_MIN_MS
                self.observe_members(members, tables)
                self.update_trust()
                wait_ms = self.beat_interval_ms()
            except NodeIdTaken as exc:
                on_id_taken(exc)
                return
            except StoreError as exc:
                if isinstance(exc, StoreUnavailable):
                    self.store_down(str(exc))
                else:
                    event(log, logging.ERROR, "membership", f"heartbeat failed: {exc}")
                wait_ms = int(backoff * (0.5 + random.random()))
                backoff = min(BACKOFF_MAX_MS, backoff * 2)
            except Exception:
                # Never let the heartbeat die (it would leave a node that
                # reports itself up but never votes again): log, back off, retry.
                log.exception("heartbeat loop: unexpected error (retrying)")
                wait_ms = int(backoff * (0.5 + random.random()))
                backoff = min(BACKOFF_MAX_MS, backoff * 2)
            self._probe_now.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._probe_now.wait(), wait_ms / 1000)

    async def leave(self) -> None:
        with contextlib.suppress(StoreError, RuntimeError, TimeoutError):
            await asyncio.wait_for(self.worker.background(self.membership.leave), 2.0)
        self.trust.close()

    def observe_members(self, live: list[Member], tables: Mapping[str, str] | None = None) -> None:
        """Quorum health alerts (once per change) and peers running another definition of a job
        (``tables``: the published job tables of :meth:`JobTableSync.to_read`'s peers)."""
        if self.record is not None:
            health = record_health(self.record, live)
        else:
            health = QuorumHealth(len(live), self.settings.size, self.settings.node.quorum)
        self.metrics.members_alive.set(health.alive)
        if not health.ok and self._quorum_ok is None and self.clock.monotonic_ms() < self._quiet_until_mono:
            return  # a cluster starting up: the others are still joining
        if self._quorum_ok is not health.ok:
            if not health.ok:
                self.alerts.raise_(AlertKind.QUORUM_LOST, f"quorum lost: {health}", alive=health.alive)
            elif self._quorum_ok is False:
                self.alerts.raise_(
                    AlertKind.QUORUM_RESTORED, f"quorum restored: {health}", alive=health.alive
                )
            self._quorum_ok = health.ok
        if self.clock.monotonic_ms() < self._tables_quiet_until:
            return
        for node, listed in self.tables.to_compare(live, tables or {}):  # (the ones changed since compared)
            for item in filter(None, listed.split(",")):
                name, _, spec = item.partition("=")
                if name in self.jobs:
                    self.observer.mismatch(name, spec, node, "run")

    # -- the membership record -------------------------------------------------

    def membership_seen(self, stored: model.Membership) -> None:
        """A record read from the store (creation, heartbeat reply): adopt it if newer, report it."""
        self._adopt(stored.record, f" (by {stored.by}: {stored.reason})")

    def _adopt(self, record: MembershipRecord, how: str) -> None:
        if self.record is not None and record.epoch <= self.record.epoch:
            return
        first = self.record is None
        self.record = record
        self.on_record(record)
        self.metrics.membership_epoch.set(record.epoch)
        self.reports.adopted(record, "" if first else how)
        if not self._joined:
            return
        proposed = self.settings.membership
        if (
            self.membership_problem is not None
            and proposed is not None
            and config_disagreement(proposed, record) is None
        ):
            self.membership_problem = None
            event(log, logging.INFO, "membership", f"the config agrees with epoch {record.epoch}: voting")
        self.reports.member(self.record, self.membership_problem is None)
        self.update_trust()

    def is_refused_member(self) -> bool:
        """True while this node holds a record it is not a member of (its abstentions are not news)."""
        return self.record is not None and not self.record.is_member(self.node)

    def refused(self, action: Refused, record: MembershipRecord | None = None) -> None:
        """The store refused a vote: said once per epoch (:class:`~.member_reports.MemberReports`).

        ``record``: the one the core holds since (it takes the job's newer record at once). Held
        here at once too: until the next heartbeat's reply the node's abstentions were counted as
        the clock's, each with an ``abstain`` line, and its heartbeats went under the old epoch.
        """
        self.reports.refused(action)
        if record is not None:
            self._adopt(record, f" (from job {action.job}'s record, which refused a vote)")
