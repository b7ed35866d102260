"""Reads: slots, the high-water mark, ledger and audit streams, and what the web face follows.

Nothing here changes state: the slot reads run ``read.lua``, which writes
nothing. The reads that span jobs (the web face's, ``status``, ``history``) fan out:
:meth:`RedisReads.follow` is one blocking ``XREAD`` over every job's
streams (a bounded poll on a cluster); :meth:`RedisReads.ledger_tails` and
:meth:`RedisReads.ledgers` (``history``) one pipeline per 500 jobs, split per
master on a cluster. A corrupt entry is reported and left out, the rest of
the reply still counts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from redis.exceptions import ResponseError

from quorum_cron.errors import StoreError
from quorum_cron.store import keys as store_keys
from quorum_cron.store import parse
from quorum_cron.store.base import AuditEntry, JobControl, LedgerEntry, SlotState, SlotView
from quorum_cron.store.redis_base import as_list, as_text
from quorum_cron.store.redis_batch import RedisBatching
from quorum_cron.store.scripts import READ, Call

__all__ = ["RedisReads"]


def _stream_replies(reply: object) -> list[Any]:
    """``XREAD``'s reply as ``[(key, entries), ...]`` (RESP2 gives a list, RESP3 a map)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return list(reply.items())
    return as_list(reply)


class RedisReads(RedisBatching):
    """The read side of the store contract on Redis, and the web face's observation reads."""

    def high_waters(self, jobs: Sequence[str]) -> list[int]:
        """One ``HGET`` per job, pipelined: a round trip per 500 jobs (split per master on a cluster).

        A corrupt mark (or a ``meta`` key of the wrong type) is reported and
        read as 0, no catch-up for that job: it must not hold back the other
        jobs' first votes, which wait for this reply.
        """
        out: list[int] = []
        with self._boundary("high_water"):
            for i in range(0, len(jobs), 500):
                batch = jobs[i : i + 500]
                pipe = self._client.pipeline(transaction=False)
                for job in batch:
                    pipe.hget(self._job_prefix(job) + store_keys.META, "hw")
                # (A command's error reply comes back in its place; a lost connection still raises.)
                for job, value in zip(batch, pipe.execute(raise_on_error=False), strict=True):
                    out.append(self._mark(job, value))
        return out

    def _mark(self, job: str, value: object) -> int:
        """One job's mark from its ``HGET`` reply; a bad one is reported and read as 0."""
        what = f"high-water mark of {job}"
        if isinstance(value, ResponseError):  # (WRONGTYPE: meta is not a hash)
            self._bad(what, parse.shorten(str(value)))
            return 0
        try:
            return 0 if value is None else parse.bounded_int(value, what, 0)
        except parse.BadValue as exc:
            self._bad(exc.what, exc.problem)
            return 0

    def slot(self, job: str, fire_ms: int) -> SlotView:
        return self._one(job, fire_ms, self._read(job, fire_ms, fire_ms))

    def _one(self, job: str, fire_ms: int, views: list[SlotView]) -> SlotView:
        """The view of one slot from a read of exactly its fire time (``ABSENT`` when none)."""
        if len(views) > 1:
            raise StoreError(f"redis at {self._where} returned {len(views)} slots for {job!r} at {fire_ms}")
        return views[0] if views else SlotView(job=job, fire_ms=fire_ms, state=SlotState.ABSENT)

    def read_slots(self, slots: Sequence[tuple[str, int]]) -> list[SlotView]:
        """``read.lua`` calls of many jobs each (one master per call on a cluster), in one pipeline."""
        if not slots:
            return []
        now = self._now_arg()

        def build(items: Sequence[int], singles: bool) -> list[tuple[Call, list[int]]]:
            return self._grouped_calls(
                READ, now, [slots[i][0] for i in items], lambda k: (slots[items[k]][1],) * 2, singles=singles
            )

        out: list[SlotView | None] = [None] * len(slots)
        with self._boundary("read"):
            for order, raw in self._run_grouped(build, len(slots), None):
                reply = as_list(raw)
                if len(reply) != len(order) + 1:
                    raise ValueError(f"read reply has {len(reply) - 1} ranges for {len(order)} slots")
                for i, views in zip(order, reply[1:], strict=True):
                    job, fire_ms = slots[i]
                    out[i] = self._one(job, fire_ms, self._views(job, as_list(views)))
        return [v for v in out if v is not None]

    def slots(self, job: str, from_ms: int, to_ms: int) -> list[SlotView]:
        return self._read(job, from_ms, to_ms)

    def _read(self, job: str, from_ms: int, to_ms: int) -> list[SlotView]:
        with self._boundary("read"):
            call = self._job_call(READ, job, self._now_arg(), [1, from_ms, to_ms])
            reply = as_list(self._scripts.call(call))
            if len(reply) != 2:
                raise ValueError(f"read reply has {len(reply) - 1} ranges for 1")
            return self._views(job, as_list(reply[1]))

    def ledger(self, job: str, limit: int) -> list[LedgerEntry]:
        if limit <= 0:
            return []
        with self._boundary("ledger"):
            entries = self._client.xrevrange(self._job_prefix(job) + store_keys.LEDGER, count=limit) or []
            return self._entries(job, "ledger", entries)

    def audit(self, job: str, limit: int) -> list[AuditEntry]:
        if limit <= 0:
            return []
        with self._boundary("audit"):
            entries = self._client.xrevrange(self._job_prefix(job) + store_keys.AUDIT, count=limit) or []
            return self._entries(job, "audit", entries)

    def _entries(self, job: str, kind: str, entries: Sequence[Any]) -> list[Any]:
        """Decode ledger (``kind`` "ledger") or audit stream entries; a corrupt one is reported, left out."""
        decode = parse.ledger_entry if kind == "ledger" else parse.audit_entry
        out = []
        for _, fields in entries:
            try:
                out.append(decode(job, fields or {}))
            except parse.BadValue as exc:
                self._bad(exc.what, exc.problem)
        return out

    # -- observation (read-only, for the web face) -----------------------------

    def follow_cursor(self) -> str:
        """A starting point for :meth:`follow`: entries written from now on (store time) are new."""
        # Stream ids are "<server ms>-<seq>" from the server's own clock (an
        # injected clock does not reach XADD): everything up to the previous
        # millisecond is old. An entry written in this very millisecond may be
        # reported twice (once by a page load, once by follow): harmless.
        with self._boundary("time"):
            sec, usec = self._client.time()
        return f"{int(sec) * 1000 + int(usec) // 1000 - 1}-18446744073709551615"

    def follow(
        self, jobs: Sequence[str], cursor: dict[str, str], start: str, block_ms: int
    ) -> list[LedgerEntry | AuditEntry]:
        """Wait up to ``block_ms`` for ledger or audit entries of ``jobs`` newer than ``cursor``.

        One blocking ``XREAD`` over every job's ledger and audit streams (a
        standalone server), so a watcher learns of new entries at once
        without polling each job. ``cursor`` maps ``ledger:<job>`` /
        ``audit:<job>`` to the last stream id seen (``start``, from
        :meth:`follow_cursor`, for streams not in it) and is advanced in
        place. Returns the new entries in stream order per stream. With
        ``cluster=True`` the streams live in different cluster slots: each is
        read without blocking, and the call sleeps ``block_ms`` when none had
        anything (a bounded poll, once per call for all jobs).
        """
        streams: dict[str, tuple[str, str]] = {}
        for job in jobs:
            prefix = self._job_prefix(job)
            streams[prefix + store_keys.LEDGER] = ("ledger", job)
            streams[prefix + store_keys.AUDIT] = ("audit", job)
        if not streams:
            return []
        ids = {key: cursor.get(f"{kind}:{job}", start) for key, (kind, job) in streams.items()}
        with self._boundary("follow"):
            streams_arg: dict[Any, Any] = dict(ids)
            replies: list[Any] = []
            if self._cluster:
                pipe = self._client.pipeline(transaction=False)
                for key, last in ids.items():
                    pipe.xread({key: last}, count=1000)
                for rep in pipe.execute():
                    replies.extend(_stream_replies(rep))
                if not replies:
                    time.sleep(block_ms / 1000)
            else:
                replies = _stream_replies(self._client.xread(streams_arg, count=1000, block=max(1, block_ms)))
            out: list[LedgerEntry | AuditEntry] = []
            for key, entries in replies:
                kind, job = streams[as_text(key)]
                if entries:
                    cursor[f"{kind}:{job}"] = as_text(entries[-1][0])
                out.extend(self._entries(job, kind, entries))
            return out

    def ledgers(self, jobs: Sequence[str], limit: int) -> list[list[LedgerEntry]]:
        """:meth:`ledger` of many jobs: per job, in job order, its newest ``limit`` entries, newest first.

        ``history`` without a job reads every configured job's ledger; one
        ``XREVRANGE`` round trip per job would make it as slow as the job
        list is long. Read in pipelined batches instead, one round trip per
        500 jobs — on a cluster redis-py's cluster pipeline splits each batch
        into one pipeline per master (on that master's connection), so the
        read fans out per node and follows MOVED / ASK like any command. A
        job whose ledger key is not a stream (corrupt) fails the whole call
        with :class:`StoreError`; a caller that wants the other jobs' entries
        then reads job by job.
        """
        if limit <= 0:
            return [[] for _ in jobs]
        out: list[list[LedgerEntry]] = []
        with self._boundary("ledgers"):
            for i in range(0, len(jobs), 500):
                batch = jobs[i : i + 500]
                pipe = self._client.pipeline(transaction=False)
                for job in batch:
                    pipe.xrevrange(self._job_prefix(job) + store_keys.LEDGER, count=limit)
                for job, raw in zip(batch, pipe.execute(), strict=True):
                    out.append(self._entries(job, "ledger", raw or []))
        return out

    def ledger_tails(
        self, jobs: Sequence[str], limit: int, after: Mapping[str, str]
    ) -> list[tuple[str, list[LedgerEntry], JobControl]]:
        """Per job, in job order: newest ledger stream id, entries newer than ``after[job]``, control.

        ``after`` maps a job to a stream id this method returned before; the
        job's entries newer than it are returned (at most ``limit``, newest
        first), so a caller that keeps what it read earlier only parses what
        is new. A job not in ``after`` gets its newest ``limit`` entries. The
        id is ``""`` for a job without entries (or ``after``'s when nothing
        is new). Read in pipelined batches, one round trip per 500 jobs, for
        pages that list hundreds of jobs.
        """
        out: list[tuple[str, list[LedgerEntry], JobControl]] = []
        count = max(1, limit)
        with self._boundary("ledger_tails"):
            for i in range(0, len(jobs), 500):
                batch = jobs[i : i + 500]
                pipe = self._client.pipeline(transaction=False)
                for job in batch:
                    prefix = self._job_prefix(job)
                    last = after.get(job)
                    pipe.xrevrange(prefix + store_keys.LEDGER, "+", f"({last}" if last else "-", count=count)
                    pipe.hmget(prefix + "meta", ["p", "pb", "pa", "pr"])
                replies = pipe.execute()
                for k, job in enumerate(batch):
                    raw = (replies[2 * k] or []) if limit > 0 else []
                    entries = self._entries(job, "ledger", raw)
                    newest = as_text(raw[0][0]) if raw else after.get(job, "")
                    # A corrupt pause state raises (BadValue, a StoreError), as control() does: the
                    # callers then read job by job and name the key. Taken as "not paused", it showed
                    # a job the cluster skips as running, on the jobs page and in `status`.
                    control = self._job_control(job, *replies[2 * k + 1])
                    out.append((newest, entries, control))
        return out

    def server_info(self) -> dict[str, str]:
        """What an operator wants to know about the server: version, role, replicas, memory policy."""
        with self._boundary("info"):
            info: dict[str, Any] = {}
            for section in ("server", "replication", "memory"):
                info.update(self._client.info(section))
        keys = ("redis_version", "role", "connected_slaves", "maxmemory_policy", "used_memory_human")
        return {k: str(info[k]) for k in keys if k in info}
