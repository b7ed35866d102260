"""The store's ports beside the slot protocol: notices (pub/sub hints) and the alerts journal.

What crosses them, as values both stores exchange (no redis-py here): an
assignment :class:`Notice` and an operator :class:`Trigger` with their wire
forms, the :class:`NoticeListening` handle a subscription returns, and a
:class:`StoredAlert` kept in the namespace's bounded alert journal. The
methods are in the ``Store`` contract (:mod:`quorum_cron.store.base`); the
Redis side is :mod:`.redis_notices` and :mod:`.redis_alerts`, the model's
:mod:`.memory_ports`. Kept apart from ``core/model.py`` because the core never
sees them: only the agent and the faces do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Protocol

from quorum_cron.core.model import Member, MissedRequest, SlotView
from quorum_cron.errors import StoreError, StoreUnavailable

__all__ = [
    "ALERTS_MAXLEN",
    "MAX_JOB_TABLE_CHARS",
    "MAX_REASON",
    "AlertPage",
    "DeliverNotice",
    "Flag",
    "JobTables",
    "MissedRecords",
    "Notice",
    "NoticeListening",
    "StoredAlert",
    "Trigger",
    "table_digest",
    "with_job_tables",
]

MAX_REASON: Final = 500
"""The longest operator reason (pause) the faces accept: the CLI and the web check the same bound."""

ALERTS_MAXLEN: Final = 200
"""Alerts kept in a namespace's journal (exact: the oldest beyond it are dropped on each write)."""


@dataclass(frozen=True, slots=True)
class Notice:
    """ "Slot ``(job, fire_ms)`` is yours with ``token``"."""

    job: str
    fire_ms: int
    token: int


@dataclass(frozen=True, slots=True)
class Trigger:
    """ "An operator asked for slot ``(job, fire_ms)``": vote for it."""

    job: str
    fire_ms: int


DeliverNotice = Callable[[Notice | Trigger], None]
"""Where a subscription hands each notice (Redis: on its listener thread; the model: on the caller's)."""


class Flag(Protocol):
    """What a listening handle's ``subscribed`` is (a :class:`threading.Event` does)."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class NoticeListening(Protocol):
    """A subscription to a node's notices, as :meth:`Store.listen_notices` returns it (not started yet).

    ``start`` begins listening: on Redis a daemon thread that re-subscribes
    with backoff, on the model at once; ``subscribed`` is set while every
    channel is live; ``stop`` asks it to end and ``join`` waits for that.
    """

    @property
    def subscribed(self) -> Flag: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def join(self, timeout: float | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class StoredAlert:
    """One alert in the namespace's journal; ``id`` is the store's (empty until written).

    Ids grow with each write (Redis: the stream id ``<ms>-<seq>``; the model:
    ``<store ms>-<seq>``); a reader compares them only for equality.
    """

    kind: str
    node: str
    ts_ms: int
    message: str
    fields: dict[str, str] = field(default_factory=dict)
    id: str = ""


@dataclass(frozen=True, slots=True)
class AlertPage:
    """The newest alerts, newest first, and how many entries were skipped as not an agent's alert."""

    alerts: tuple[StoredAlert, ...]
    skipped: int = 0


MAX_JOB_TABLE_CHARS: Final = 8 * 1024 * 1024
"""The longest job table a store hands back (100,000 jobs of 60-character names fit)."""


class JobTables(Protocol):
    """Each node's job table, kept beside its heartbeat (part of :class:`~quorum_cron.store.base.Store`).

    A table is ``name=spec hash`` per job, sorted by name, comma-separated:
    what a node runs, for its peers' definition checks, ``status`` and the
    dashboard. Why not in the heartbeat: at 10,000 jobs it is ~270 KB, and
    sent every 2 s by every node and read back by each, it cost the store
    4.2 ms of CPU per heartbeat (all of it on the master holding the
    namespace's keys, on a cluster) and the agent 2.8 ms (issue 27). A
    heartbeat's info names it by digest (``jobs_digest``); a node writes its
    table when it changes and now and then, peers read it when a digest
    they hold moves.
    """

    def publish_jobs(self, node: str, table: str) -> None:
        """Keep ``table`` as ``node``'s job table (replacing the one it had)."""
        ...

    def published_jobs(self, nodes: Sequence[str]) -> dict[str, str]:
        """The tables kept for ``nodes``; a node without one (or with a corrupt one) is left out."""
        ...


class MissedRecords(Protocol):
    """Accounting for slots nobody voted for (part of :class:`~quorum_cron.store.base.Store`)."""

    def record_missed(self, job: str, fire_ms: int, deadline_ms: int, reason: str) -> SlotView:
        """Account for a slot nobody voted for (whole-cluster outage).

        Marks an ``absent`` or ``proposed`` slot ``missed`` with ``reason`` —
        only if ``now > fire_ms + deadline_ms`` by store time (for a proposed
        slot ``max(deadline_ms, D)``, ``D`` the largest deadline its votes
        carried), so a live slot is never ended early. Returns the slot as it
        stands afterwards.
        """
        ...

    def record_missed_many(self, requests: Sequence[MissedRequest]) -> list[SlotView | StoreError]:
        """Several :meth:`record_missed` calls in one round trip, each its own atomic step, in order.

        Why: a node that could not vote for a minute's slots in time (a first
        tick of every job on a slow machine) records each missed; at 100,000 jobs one
        call each kept its store thread busy for minutes, and the votes of
        the following minutes queued behind them until they too were missed
        (docs/benchmarks.md, "Scale"). Results are in request order; a
        request the store answered with an error (a corrupt key of its job)
        gets that :class:`StoreError` in its place. Raises
        :class:`~quorum_cron.errors.StoreUnavailable` for the whole batch,
        whose requests may then have taken effect, as with a lost reply.
        """
        ...


def table_digest(table: str) -> str:
    """The first 16 hex digits of a job table's SHA-256: what a heartbeat carries (``jobs_digest``)."""
    return hashlib.sha256(table.encode()).hexdigest()[:16]


def with_job_tables(tables: JobTables, members: list[Member]) -> list[Member]:
    """``members`` with ``info["jobs"]`` filled in from the published table of each whose heartbeat
    names it by ``jobs_digest`` only (one read for all of them), when the table is the one the
    digest names: what ``status`` and the dashboard show, as older agents' heartbeats carried it
    inline."""
    need = [m.node for m in members if "jobs" not in m.info and m.info.get("jobs_digest")]
    try:
        got = tables.published_jobs(need) if need else {}
    except StoreUnavailable:
        raise
    except StoreError:  # (a corrupt key costs the tables shown, not the page: as for the agent)
        got = {}
    # (Only a table the heartbeat's digest names: a reload whose table write failed still
    # heartbeats its new digest, and the old table then would be read as current.)
    return [
        replace(m, info={**m.info, "jobs": got[m.node]})
        if m.node in got and table_digest(got[m.node]) == m.info.get("jobs_digest")
        else m
        for m in members
    ]
