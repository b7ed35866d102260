"""The jobs' newest ledger entries for the dashboard, read once for all jobs, and corrupt jobs named.

:class:`RecentLedger` keeps each job's newest entries between page loads
and asks the store only for what is new, in one pipelined read for all
jobs. One job whose key holds the wrong type fails that read for every
job: then the jobs are read one by one (as ``history`` does) and the
corrupt one is named by its key (:func:`corrupt_message`), so the other
jobs' rows and the pages built on them stay up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store import keys as store_keys
from quorum_cron.store.base import JobControl, LedgerEntry, ObservedStore
from quorum_cron.store.connect import store_failure

__all__ = ["NOT_PAUSED", "SPARK", "RecentLedger", "corrupt_line", "corrupt_message"]

SPARK = 20
"""Recent outcomes per job on the jobs page."""
MAX_MESSAGE = 4000
"""A corrupt key's line is cut to this many characters (the store's answer may quote a value read)."""


def corrupt_line(key: str, exc: StoreError) -> str:
    """One line naming a key that could not be read, and the store's answer once.

    The answer is what failed (:func:`~quorum_cron.store.connect.store_failure`: "error reply:
    WRONGTYPE ...", its Redis-supplied text redacted), not the whole error: that one names the
    store's URL and its internal operation ("redis at redis://h:1/0 failed ledger: ..."),
    which the dashboard's page names already or which mean nothing to its reader.
    """
    line = f"key {key} is corrupt (not what quorum-cron writes): {store_failure(exc)}"
    return line if len(line) <= MAX_MESSAGE else line[:MAX_MESSAGE] + " …"


def corrupt_message(namespace: str, job: str, suffix: str, exc: StoreError) -> str:
    """One line naming the job's key that could not be read, and the store's answer (:func:`corrupt_line`)."""
    return corrupt_line(store_keys.job_prefix(namespace, job) + suffix, exc)


def _which_key(store: ObservedStore, namespace: str, job: str, exc: StoreError) -> str:
    """The corrupt key of a job whose ledger-and-control read failed: the ledger's, else the meta's."""
    try:
        store.ledger(job, 1)
    except StoreUnavailable:
        raise
    except StoreError as ledger_exc:
        return corrupt_message(namespace, job, store_keys.LEDGER, ledger_exc)
    return corrupt_message(namespace, job, store_keys.META, exc)


NOT_PAUSED = JobControl(False, "", 0, "")


class RecentLedger:
    """Every job's newest ledger entries, kept between page loads and read again only where new.

    The jobs and cluster pages show each job's last outcomes; with hundreds
    of jobs, reading and parsing 20 entries per job on every load (and the
    pages reload on every new ledger entry) would cost about a second. This
    keeps, per job, the newest entry's stream id, the newest
    :data:`KEEP_FULL` entries and the states of the newest :data:`SPARK`,
    and asks the store only for entries newer than that id
    (:meth:`ObservedStore.ledger_tails`). Reads are serialised by a lock (a
    page load reads the store once for all jobs).

    What is kept is forgotten — and every job read afresh — when a read
    finds the store unavailable (a Redis restarted without persistence, a
    failover, comes back with another ledger) and at least every
    :data:`MAX_AGE_S` (a ledger deleted or flushed while the store kept
    answering). Without it, entries the store no longer held were shown as
    the jobs' last outcomes and as the cluster's recent problems for as long
    as the server ran, unlike ``quorum-cron history``: asking only for what
    is newer than a kept id cannot tell that what came before it is gone.
    """

    KEEP_FULL = 5
    MAX_AGE_S = 60.0

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[str, list[LedgerEntry], list[str]]] = {}
        self._monotonic = monotonic
        self._since = monotonic()

    def forget(self) -> None:
        """Drop what is kept: the next read reads every job afresh."""
        with self._lock:
            self._kept.clear()

    def read(
        self, store: ObservedStore, jobs: Sequence[str]
    ) -> list[tuple[list[LedgerEntry], list[str], JobControl]]:
        """Per job: its newest entries (up to KEEP_FULL), the states of its newest SPARK; its control."""
        return [(full, states, control) for full, states, control, _ in self.read_checked(store, jobs, "")]

    def read_checked(
        self, store: ObservedStore, jobs: Sequence[str], namespace: str
    ) -> list[tuple[list[LedgerEntry], list[str], JobControl, str]]:
        """:meth:`read`, and per job a line naming its corrupt key ("" when it reads fine).

        A corrupt job's key fails the pipelined read of every job: the jobs
        are then read one by one, and only the corrupt one comes back empty.
        """
        try:
            return self._read_checked(store, jobs, namespace)
        except StoreUnavailable:
            self.forget()  # what comes back may be another ledger (a restart, a failover)
            raise

    def _read_checked(
        self, store: ObservedStore, jobs: Sequence[str], namespace: str
    ) -> list[tuple[list[LedgerEntry], list[str], JobControl, str]]:
        out: list[tuple[list[LedgerEntry], list[str], JobControl, str]] = []
        with self._lock:
            now = self._monotonic()
            if now - self._since >= self.MAX_AGE_S:
                self._kept.clear()
                self._since = now
            after = {j: self._kept[j][0] for j in jobs if j in self._kept and self._kept[j][0]}
            corrupt: dict[str, str] = {}
            try:
                tails = store.ledger_tails(jobs, SPARK, after)
            except StoreUnavailable:
                raise
            except StoreError:
                tails = []
                for job in jobs:
                    try:
                        tails.extend(
                            store.ledger_tails([job], SPARK, {j: after[j] for j in (job,) if j in after})
                        )
                    except StoreUnavailable:
                        raise
                    except StoreError as exc:
                        corrupt[job] = _which_key(store, namespace, job, exc)
                        tails.append(("", [], NOT_PAUSED))
            for job, (newest, new, control) in zip(jobs, tails, strict=True):
                if job in corrupt:
                    self._kept.pop(job, None)
                    out.append(([], [], control, corrupt[job]))
                    continue
                _, full, states = self._kept.get(job, ("", [], []))
                if job not in after:
                    full, states = [], []
                full = (new + full)[: self.KEEP_FULL]
                states = ([str(e.state) for e in new] + states)[:SPARK]
                self._kept[job] = (newest, full, states)
                out.append((full, states, control, ""))
        return out
