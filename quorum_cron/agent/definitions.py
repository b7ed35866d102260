"""Which definition of a job each slot runs under, across config reloads.

A reload (:meth:`~quorum_cron.agent.runtime.Agent.replace_jobs`) swaps the
agent's job table, but a slot the node took in before it — voted,
committed, a retry of one — was voted under the old spec hash, and runs
the old command, environment and timeout. :class:`Definitions` keeps the
replaced definitions with the boundary the core drew for each
(:mod:`quorum_cron.core.jobswap`): slots at or before it are the old
definition's. A removed job's definition is kept for its slots still to
run. Bounded: :data:`MAX_DEFINITIONS_KEPT` per job.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from quorum_cron.agent import heap
from quorum_cron.agent.spec import AgentJob
from quorum_cron.core.node import JobChanges

__all__ = ["MAX_DEFINITIONS_KEPT", "Definitions"]

MAX_DEFINITIONS_KEPT = 8
"""Per job, how many definitions replaced by reloads are kept for their slots still to run."""


class Definitions:
    """The agent's current jobs (a table shared with its parts) and the definitions reloads replaced."""

    def __init__(self, jobs: MutableMapping[str, AgentJob]) -> None:
        self.jobs = jobs
        self._before: dict[str, list[tuple[int, AgentJob]]] = {}
        """job → ``(boundary, definition)``, oldest first."""
        self._retired: dict[str, AgentJob] = {}
        """Jobs removed by a reload: their slots already taken in still run under this."""

    def swap(self, new: Mapping[str, AgentJob], changes: JobChanges) -> None:
        """Make ``new`` the job table (in place), keeping what ``changes`` says old slots still need."""
        for name, boundary in changes.boundaries:
            old = self.jobs.get(name) or self._retired.get(name)
            if old is not None:
                kept = self._before.setdefault(name, [])
                kept.append((boundary, old))
                del kept[:-MAX_DEFINITIONS_KEPT]
        for name in changes.removed:
            self._retired[name] = self.jobs[name]
        for name in new:
            self._retired.pop(name, None)
        self.jobs.clear()
        self.jobs.update(new)
        heap.settle(len(new))  # the new definitions are as long-lived as the old ones were

    def job_for(self, job: str, fire_ms: int) -> AgentJob | None:
        """The definition slot ``(job, fire_ms)`` runs under (None: a job never known here)."""
        for boundary, old in self._before.get(job, ()):
            if fire_ms <= boundary:
                return old
        current = self.jobs.get(job)
        return current if current is not None else self._retired.get(job)
