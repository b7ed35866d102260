"""Telling whether a success recovered from failures (``job_recovered``), a few reads per burst.

After a run this node executed succeeds, the alert needs the job's ledger:
the runs before it may have failed on other nodes, which only the ledger
(the cluster's record) knows. Reading :data:`RECOVERY_LOOKBACK` entries per
success, one round trip each on a thread of its own, was the largest read
the agent made: at a minute boundary with thousands of jobs it parsed twenty
entries per slot and queued thousands of threads' calls on the store while
the burst's starts waited (docs/benchmarks.md, "Scale"). So the checks of
all successes pending at once go together, in two steps:

1. the newest :data:`SHORT_READ` entries of every pending job, in one
   batched read: nearly always the entry before the success is another
   success (no failures before it) or there is none, and the check ends;
2. only the jobs that step left undecided (a failure, or missed and skipped
   slots passed over) read :data:`RECOVERY_LOOKBACK` entries, batched too.

A batch the store refuses (a corrupt ledger key) is read again job by job,
so one job's bad value costs only its own check. Best-effort throughout: a
failed read is logged and the alert not raised, never retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from quorum_cron.agent.logs import event
from quorum_cron.core.actions import Finish
from quorum_cron.core.model import LedgerEntry, SlotState, SlotView
from quorum_cron.errors import StoreUnavailable
from quorum_cron.store.base import Store

__all__ = [
    "RECOVERY_LOOKBACK",
    "SHORT_READ",
    "ReadLedgers",
    "RecoveryChecks",
    "failures_before",
    "ledgers_of",
]

log = logging.getLogger("quorum_cron.agent")

RECOVERY_LOOKBACK = 20
"""Ledger entries read to count the failed runs a success recovers from."""

SHORT_READ = 3
"""Entries read first: the success, maybe a retry entry of its own, and the run before it."""

ReadLedgers = Callable[[Sequence[str], int], list[list[LedgerEntry]]]
"""``store.ledgers(jobs, limit)``: per job, its newest entries, newest first (blocking)."""

Recovered = Callable[[Finish, SlotView, str], None]
"""Called with the success and its failure count (``"3"``, or ``"19+"`` past the look-back)."""


def ledgers_of(store: Store) -> ReadLedgers:
    """The store's batched ledger read (one pipeline per 500 jobs on Redis), or one read per job."""
    batched = getattr(store, "ledgers", None)
    if callable(batched):
        return batched  # type: ignore[no-any-return]
    return lambda jobs, limit: [store.ledger(job, limit) for job in jobs]


def failures_before(entries: list[LedgerEntry], fire_ms: int) -> int:
    """How many runs failed (or were lost) in a row before slot ``fire_ms``'s, newest first.

    ``entries`` is the job's ledger, newest first; the slot's own entries
    (its retries) and missed or skipped slots (nothing ran) are passed over;
    the count stops at the first success.
    """
    count, _ = _scan(entries, fire_ms)
    return count


def _scan(entries: list[LedgerEntry], fire_ms: int) -> tuple[int, bool]:
    """(failures before ``fire_ms``'s entry, whether a success ended the count)."""
    ours = next((i for i, e in enumerate(entries) if e.fire_ms == fire_ms), -1)
    count = 0
    for entry in entries[ours + 1 :]:
        if entry.fire_ms == fire_ms or entry.state in (SlotState.MISSED, SlotState.SKIPPED):
            continue
        if entry.state in (SlotState.FAILED, SlotState.LOST):
            count += 1
        elif entry.state == SlotState.SUCCEEDED:
            return count, True
    return count, False


class RecoveryChecks:
    """The pending recovery checks of one node, read in batches by one task at a time."""

    def __init__(self, read: ReadLedgers, recovered: Recovered) -> None:
        self._read = read
        self._recovered = recovered
        self._pending: list[tuple[Finish, SlotView]] = []
        self._task: asyncio.Task[None] | None = None

    def add(self, action: Finish, view: SlotView) -> None:
        """Check this success (the reply to this node's ``finish``) once the current batch is read."""
        self._pending.append((action, view))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain())

    async def aclose(self) -> None:
        """Drop what is pending and stop the reading task (at shutdown)."""
        self._pending.clear()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            undecided = []
            for (action, view), entries in zip(batch, await self._entries(batch, SHORT_READ), strict=True):
                if entries is None:
                    continue
                count, ended = _scan(entries, action.fire_ms)
                if ended or len(entries) < SHORT_READ:
                    self._found(action, view, count, more=False)
                else:
                    undecided.append((action, view))
            if undecided:
                long_reads = await self._entries(undecided, RECOVERY_LOOKBACK)
                for (action, view), entries in zip(undecided, long_reads, strict=True):
                    if entries is not None:
                        count = failures_before(entries, action.fire_ms)
                        self._found(action, view, count, more=count >= RECOVERY_LOOKBACK - 1)

    def _found(self, action: Finish, view: SlotView, count: int, *, more: bool) -> None:
        if count:
            self._recovered(action, view, f"{count}{'+' if more else ''}")

    async def _entries(
        self, batch: list[tuple[Finish, SlotView]], limit: int
    ) -> list[list[LedgerEntry] | None]:
        """Each check's job's newest ``limit`` entries; None where the read failed (said once per job)."""
        jobs = [action.job for action, _ in batch]
        try:
            return list(await asyncio.to_thread(self._read, jobs, limit))
        except StoreUnavailable as exc:  # nothing to gain job by job: one line for the batch
            said = f"could not read the ledgers of {len(set(jobs))} job(s) to tell a recovery: {exc}"
            event(log, logging.WARNING, "alert", said)
            return [None] * len(jobs)
        except Exception:  # a corrupt key fails a batched read: job by job, so it costs only its own
            pass
        out: list[list[LedgerEntry] | None] = []
        for job in jobs:
            try:
                out.append((await asyncio.to_thread(self._read, [job], limit))[0])
            except Exception as exc:  # best-effort: a recovery alert is not worth an outage's noise
                event(
                    log,
                    logging.WARNING,
                    "alert",
                    f"could not read the ledger of {job} to tell a recovery: {exc}",
                    job=job,
                )
                out.append(None)
        return out
