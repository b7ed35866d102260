"""This node's job table beside its heartbeat, and each peer's read only when its digest moves.

A node tells its peers which definition of each job it runs, so that two
nodes running different definitions of a job are reported
(``Observer.mismatch``), and ``status`` and the dashboard can show the
drift. The table is ``name=spec hash`` per job, sorted by name. It used to
ride in every heartbeat's info: at 10,000 jobs ~270 KB, sent every 2 s by
each node and read back by each, which cost the store 4.2 ms of CPU per
heartbeat (on a cluster, all of it on the master holding the namespace's
keys) and the agent 2.8 ms (docs/benchmarks.md, "Scale", issue 27). Now the
heartbeat carries the table's digest (``jobs_digest``); the table itself
is written with :meth:`~quorum_cron.store.ports.JobTables.publish_jobs`
before the first heartbeat that names it, again every
:data:`REPUBLISH_BEATS` heartbeats (a store that lost it gets it back),
and a peer reads it only when the digest it last compared moved. A peer
from before this change still sends its table inline (``jobs``), which is
compared as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from quorum_cron.agent.spec import AgentJob
from quorum_cron.core.model import Member
from quorum_cron.store.ports import table_digest

__all__ = ["REPUBLISH_BEATS", "JobTableSync", "job_table", "table_digest"]

REPUBLISH_BEATS = 30
"""Heartbeats between two writes of an unchanged table (a minute at the default 2 s)."""


def job_table(jobs: Mapping[str, AgentJob]) -> str:
    """``name=spec hash`` per job, sorted by name, comma-separated."""
    return ",".join(f"{j.name}={j.core.spec_hash}" for j in sorted(jobs.values(), key=lambda j: j.name))


class JobTableSync:
    """When to write this node's table, and which peers' tables to read and compare."""

    def __init__(self, node: str, jobs: Mapping[str, AgentJob]) -> None:
        self.node = node
        self.jobs = jobs
        self._table: str | None = None
        self._digest = ""
        self._published = ""
        """The digest of the table last written ("" before the first write)."""
        self._beats = 0
        """Heartbeats since the last write."""
        self._seen: dict[str, str] = {}
        """Per peer, the digest (or, from an older peer, the inline table) last compared."""

    def changed(self) -> None:
        """The job table was replaced (a reload): written before the next heartbeat, peers compared anew."""
        self._table = None
        self._seen.clear()

    @property
    def table(self) -> str:
        """This node's table, built once per job table (3,000 jobs cost 25 ms to build)."""
        if self._table is None:
            self._table = job_table(self.jobs)
            self._digest = table_digest(self._table)
        return self._table

    @property
    def digest(self) -> str:
        """The heartbeat's ``jobs_digest``."""
        _ = self.table
        return self._digest

    def publish_due(self) -> bool:
        """A heartbeat is about to go: whether the table must be written first (new, or not for
        :data:`REPUBLISH_BEATS` heartbeats); call :meth:`published` once it was."""
        self._beats += 1
        return self.digest != self._published or self._beats >= REPUBLISH_BEATS

    def published(self) -> None:
        """The table was written."""
        self._published, self._beats = self.digest, 0

    def to_read(self, live: list[Member]) -> list[str]:
        """The peers whose published table is to be read: their digest moved since last compared."""
        return [
            m.node
            for m in live
            if m.node != self.node
            and "jobs" not in m.info
            and m.info.get("jobs_digest")
            and self._seen.get(m.node) != m.info["jobs_digest"]
        ]

    def to_compare(self, live: list[Member], tables: Mapping[str, str]) -> Iterator[tuple[str, str]]:
        """(peer, its table) for each peer whose table changed since last compared, marking it compared.

        ``tables``: what :meth:`to_read`'s peers have published. A table that does not match the
        peer's digest yet (its write and its heartbeat crossed) is compared on a later heartbeat.
        """
        for m in live:
            if m.node == self.node:
                continue
            inline = m.info.get("jobs")
            key = inline if inline is not None else m.info.get("jobs_digest", "")
            if not key or self._seen.get(m.node) == key:
                continue
            listed = inline if inline is not None else tables.get(m.node)
            if listed is None or (inline is None and table_digest(listed) != key):
                continue
            self._seen[m.node] = key
            yield m.node, listed
