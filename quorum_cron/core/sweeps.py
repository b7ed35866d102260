"""Which jobs a node's next sweep covers: the ones with a slot open, not every job every time.

A sweep enforces deadlines, start timeouts and leases on the open slots of
the jobs it names (``Store.sweep``). Sweeping every job every time costs
the store a look at each job's open index, which for 10,000 per-minute jobs
on three nodes was ~65 job-sweeps per slot, most of them of jobs with
nothing open (benchmarks/scale.py, issue 27). A job can only have an open
slot if a vote created it, and this node hears of its jobs' slots: it votes
(or abstains, or runs locally) for each slot it computes, and every reply,
read, notice or sweep that shows it a slot says so. So the next sweep
covers

* the jobs the last sweep's reply said still have an open slot
  (``SweepResult.open_jobs``), and
* the jobs this node heard of a slot of since that sweep was sent
  (``heard``: the core adds a job when it takes in a slot record or is
  shown a slot),

and every :data:`FULL_SWEEP_MS` (and at start, after a reload, and while
the store is unreachable, when the sweep is the probe) all of them: the
backstop for a slot this node never heard of (created by a node whose
schedule differs during a rolling change, or whose voters all left). When
the set is empty no call is made. Pure: the caller passes monotonic
readings.
"""

from __future__ import annotations

from collections.abc import Iterable

from quorum_cron.core.actions import Sweep
from quorum_cron.core.model import SweepParams, SweepResult

__all__ = ["FULL_SWEEP_MS", "SweepPlan"]

FULL_SWEEP_MS = 60_000
"""How often a node sweeps every job, whatever it heard of (the backstop)."""


class SweepPlan:
    """The jobs (by index in the core's job list) the next sweep covers; see the module docstring."""

    __slots__ = ("_all", "_full_at", "_index", "_open", "_params", "_sent", "_sent_full", "heard")

    def __init__(self, params: Iterable[SweepParams]) -> None:
        self.heard: set[int] = set()
        """Jobs this node heard of a slot of since the last sweep was sent (the core adds to it)."""
        self._open: set[int] = set()
        self._sent: set[int] = set()
        self._sent_full = False
        self.reset(params)

    def reset(self, params: Iterable[SweepParams]) -> None:
        """The job list changed (a reload; index i is job i): the next sweep covers every job."""
        self._params = tuple(params)
        self._all = Sweep(self._params)
        self._index = {p.job: i for i, p in enumerate(self._params)}
        self._full_at = 0

    def next(self, mono_ms: int, probe: bool) -> Sweep | None:
        """The sweep to send now (None: no job has anything a sweep could change).

        ``probe``: the store is unreachable and this sweep is how the node finds out when it
        answers again: it covers every job (a failed call costs the store nothing).
        """
        heard, self.heard = self.heard, set()
        if probe or mono_ms >= self._full_at:
            self._sent, self._sent_full = heard, True
            return self._all
        chosen = self._open | heard
        self._sent, self._sent_full = chosen, False
        if not chosen:
            return None
        params = self._params
        return Sweep(tuple(params[i] for i in sorted(chosen)))

    def next_full(self) -> int:
        """The monotonic time at which the next sweep covers every job."""
        return self._full_at

    def replied(self, reply: SweepResult, mono_ms: int) -> None:
        """The sweep sent last was answered at ``mono_ms``: its jobs still open are swept again."""
        index = self._index
        self._open = {index[job] for job in reply.open_jobs if job in index}
        if self._sent_full:
            self._full_at = mono_ms + FULL_SWEEP_MS
        self._sent = set()

    def failed(self) -> None:
        """The sweep sent last failed: what it covered is covered by the next one (a full sweep
        stays due)."""
        self.heard |= self._sent
        self._sent = set()
