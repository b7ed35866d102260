"""Replication shortfalls of single Redis Cluster masters: a state of their jobs, not of the node.

On a Redis Cluster each master's ``WAIT`` covers only its own writes, and
the store names the master whose writes fell short ("WAIT: 0 of 1 replicas
acknowledged within 50 ms on master 10.0.0.7:6379"). Taken for the node's
own state (:mod:`.replication`), one master losing its replica stopped the
node voting for every job, on every node at once: the whole scheduler
halted, and a replicated write to another master ended the state while the
bad master still fell short, so it flapped. Here each master named is a
state of its own, said once (a line and an alert naming it) when it
begins and once when it ends:

* the jobs whose hash slot that master owns are not voted: the store worker
  answers their votes at once as not sent (:meth:`ShortMasters.split`), so
  the core votes again after its retry and records the slot missed at its
  deadline, with the shortfall as the reason; nothing unreplicated is voted;
* the other masters' jobs are voted and run as usual;
* the state ends only when a write to *that* master is replicated again
  (:meth:`ShortMasters.probe`, from the heartbeat loop), at least
  :attr:`.replication.Replication.hold_ms` after its last shortfall; or when
  the master owns no slot any more (a failover moved its jobs elsewhere).

A shortfall that names no master (a standalone server, Sentinel's master)
stays the node's own state, in :mod:`.health` as before.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Protocol

from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.replication import Replication, shortfall
from quorum_cron.core.actions import NOT_SENT, Failure
from quorum_cron.core.model import VoteRequest
from quorum_cron.core.node import Vote
from quorum_cron.errors import StoreUnavailable, StoreUnreplicated

__all__ = ["UNSENT", "ShortMasters", "per_master", "sent"]

log = logging.getLogger(EVENT_LOGGER)

UNSENT = f"{NOT_SENT}its master's writes are "
"""Before :attr:`StoreUnreplicated.MARKER` in the error a vote held back here gets: the core
records it as the slot's reason, and :meth:`ShortMasters.down` tells it from a write that fell
short (which alone renews the state)."""

_MASTERS = re.compile(r" on masters? (?P<names>\S+(?:, \S+)*)$")


def sent(exc: BaseException) -> bool:
    """Whether a failed store call reached the store: False for a vote held back here
    (:data:`UNSENT`), which is no store error (``store_errors`` counts calls that failed)."""
    return UNSENT not in str(exc)


def per_master(short: str) -> dict[str, str] | None:
    """Each master a ``WAIT`` shortfall names, with the shortfall as said of it alone; None when
    it names none (the one master of a standalone or Sentinel store)."""
    found = _MASTERS.search(short)
    if found is None:
        return None
    head = short[: found.start()]
    return {m: f"{head} on master {m}" for m in found["names"].split(", ")}


class Sharded(Protocol):
    """What a store of many masters offers (:class:`~quorum_cron.store.redis.RedisStore`)."""

    def master_of(self, job: str) -> str: ...

    def probe_master(self, master: str) -> bool: ...


class ShortMasters:
    """The masters whose writes fall short of ``wait_replicas`` (see the module docstring)."""

    def __init__(
        self, store: object, monotonic_ms: Callable[[], int], hold_ms: int, alerts: AlertHook
    ) -> None:
        self._store: Sharded | None = None
        if callable(getattr(store, "master_of", None)) and callable(getattr(store, "probe_master", None)):
            self._store = store  # type: ignore[assignment]
        self._monotonic_ms = monotonic_ms
        self._hold_ms = hold_ms
        self._alerts = alerts
        self._states: dict[str, Replication] = {}
        self.held: Mapping[str, str] = {}
        """Master -> its shortfall: replaced whole, never changed in place (the store worker's
        thread reads it while the loop's thread sets it)."""
        self.on_change: Callable[[], None] = lambda: None
        """Called when a master's state ends (its jobs may be voted at once)."""
        self.on_count: Callable[[int], None] = lambda n: None
        """Called with the number of short masters each time a state begins or ends (the
        ``quorum_cron_store_masters_unreplicated`` gauge): a held-back vote is no store call
        that failed, so ``store_errors`` does not count it (:func:`sent`), and this says it."""

    def down(self, reason: str) -> bool:
        """A store error: True when it is a shortfall of named masters, handled here (each said
        when it begins); False when it is the node's (no master named, or not a cluster)."""
        short = shortfall(reason)
        masters = per_master(short) if short is not None and self._store is not None else None
        if masters is None:
            return False
        if UNSENT in reason:
            return True  # (a vote held back here: no write fell short)
        for master, text in masters.items():
            state = self._states.get(master)
            if state is None:
                state = self._states[master] = Replication(self._monotonic_ms, self._hold_ms)
            if state.began(text):
                event(log, logging.WARNING, "store", f"store writes to master {master} not replicated: "
                      f"{text}; not voting for its jobs", master=master)  # fmt: skip
                self._alerts.raise_(
                    AlertKind.STORE_UNAVAILABLE,
                    f"store writes to master {master} not replicated: {text}; not voting for the jobs "
                    f"on it until a write there is (a replica is missing or behind: see "
                    f"docs/operations.md, wait_replicas)",
                    master=master,
                )
        self._held_changed()
        return True

    def _held_changed(self) -> None:
        self.held = {m: s.short for m, s in self._states.items()}
        self.on_count(len(self.held))

    def split(self, vote: Vote) -> tuple[Sequence[VoteRequest], list[tuple[Vote, BaseException]]]:
        """On the store worker's thread: the requests to send, and per short master a ``Vote`` of
        its jobs' requests with the error to answer it with, unsent."""
        held, store = self.held, self._store
        if not held or store is None:
            return vote.requests, []
        sent: list[VoteRequest] = []
        unsent: dict[str, list[VoteRequest]] = {}
        for r in vote.requests:
            master = store.master_of(r.job)
            if master in held:
                unsent.setdefault(master, []).append(r)
            else:
                sent.append(r)
        if not unsent:
            return vote.requests, []
        errors: list[BaseException] = [
            StoreUnreplicated(f"{UNSENT}{StoreUnreplicated.MARKER}{held[m]}") for m in unsent
        ]
        return sent, [(Vote(tuple(rs)), e) for rs, e in zip(unsent.values(), errors, strict=True)]

    def failure(self, exc: BaseException, reachable: bool = True) -> Failure:
        """How a failed store call is told to the core: ``UNREACHABLE`` for an outage, but
        ``REFUSED`` for a shortfall of masters held here (and any other error). Why: an
        unreachable store is the node's state (its votes held until the store answers, its
        ``run_local`` jobs run here alone), while this one is only their jobs'.

        A vote held back here (:data:`UNSENT`) never reached the store, so it says nothing of
        it: it is told as the core last saw the store (``reachable``). Why: told ``REFUSED``
        while the store is unreachable, the core took it for an answer and released every vote
        it held (each into a connect timeout), every ``retry_ms``; and told ``UNREACHABLE``
        because the master's state ended while it was on its way, the node took a reachable
        store for a lost one (its ``run_local`` jobs may then run here alone)."""
        if not isinstance(exc, StoreUnavailable):
            return Failure.REFUSED
        if UNSENT in str(exc):
            return Failure.REFUSED if reachable else Failure.UNREACHABLE
        short = shortfall(str(exc)) if isinstance(exc, StoreUnreplicated) else None
        masters = per_master(short) if short is not None else None
        if masters is not None and all(m in self._states for m in masters):
            return Failure.REFUSED
        return Failure.UNREACHABLE

    async def probe(self, background: Callable[[Callable[[], bool]], Awaitable[bool]]) -> None:
        """A replicated write to each short master ends its state (after the hold); a shortfall,
        or any other outage of the probe, keeps it."""
        store = self._store
        if store is None:
            return
        for master in list(self._states):
            try:
                owned = await background(partial(store.probe_master, master))
            except StoreUnavailable as exc:
                # A shortfall renews the state; another outage is said by the node's own calls
                # (raised here, a master gone would mark the node down at every heartbeat).
                self.down(str(exc))
                continue
            state = self._states[master]
            text = state.short
            if owned and not state.ends(True):
                continue
            del self._states[master]
            self._held_changed()
            how = "replicated again" if owned else "no longer needed: it owns no slot now"
            event(log, logging.INFO, "store", f"store writes to master {master} {how} (after {text})",
                  master=master)  # fmt: skip
            self.on_change()
