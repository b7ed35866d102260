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

* the jobs a sweep's reply said still have an open slot, once that slot
  can be changed by a sweep (``SweepResult.open_due``: per job, when its
  earliest deadline, start timeout or lease passes, by the store's
  reckoning at the sweep), and
* the jobs this node heard of a slot of since the last sweep was sent
  (``heard``: the core adds a job when it is shown a slot, or learns one
  may exist, without the store's word on when a sweep could change it),
  and
* the jobs a vote's reply showed a slot of (``expect``): the reply carries
  the store's time and the slot's state, so the core knows, as a sweep's
  reply would have said, the earliest instant a sweep can change that slot
  (its deadline, start timeout or lease end), and the job is swept then, not
  at once, unless a later reply shows that very slot ended (``ended``: the
  executor's own finish) while no other slot of the job is expected,

and, as the backstop for a slot this node never heard of (created by a
node whose schedule differs during a rolling change, or whose voters all
left), every :data:`FULL_SWEEP_MS` one of :data:`FULL_SWEEP_SLICES` slices
of all the jobs in turn (job ``i`` in slice ``i % FULL_SWEEP_SLICES``), and
all of them at start, after a reload and while the store is unreachable
(when the sweep is the probe). When the set is empty no call is made. Pure:
the caller passes monotonic readings.

Why slices: the backstop looked at every job every minute on every node,
which for 10,000 per-minute jobs on three agents was three of the ~5
job-sweeps per slot, and for installations of hourly or daily jobs nearly
all of the store's sweep work (a job-sweep per job and node every minute,
against one slot per job an hour or a day; benchmarks/scale.py, issue 27).
A slice a minute sweeps each job every three minutes on each node, so about
once a minute on a cluster of three; a slot heard of is never left to the
backstop (above), so only the rare slot no voter of this node knows of
waits up to three minutes instead of one for its deadline or takeover to
be enforced.

Why per job: at a minute boundary of 10,000 jobs every job has a slot open
for a few seconds, and sweeping all of them whenever the first one was due
(a start timeout) cost three sweeps of every job per node and slot. An open
slot changes only through a sweep once its time passes, or through steps
that only push that time later (a start, a renewal, a takeover, a retry);
a slot created since is heard of, and one never heard of is the full
sweep's. So a job's sweep waits for its own time.

Why ``expect``: at a burst every node votes for every job, and sweeping each
job as soon as its vote's reply came (or, before that, as soon as the vote
was planned) changed nothing — the slot was minutes from its deadline and
seconds from its start timeout — yet cost a sweep item per node and slot,
about a third of the store's sweep work (benchmarks/scale.py, issue 27).

Why ``ended``: the executor hears its slot end (its finish's reply) before
the start timeout its vote's reply set; sweeping the job then could change
nothing, and was one of the ~6 job-sweeps per slot at a burst. An
expectation is dropped only when the slot that set it is the one that
ended and no other slot of the job set one since (then it is kept: this
node cannot tell which of them is still open); a slot this node never
heard of stays the full sweep's, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from quorum_cron.core.actions import Sweep
from quorum_cron.core.model import SweepParams, SweepResult
from quorum_cron.core.timers import NEVER

__all__ = ["FULL_SWEEP_MS", "FULL_SWEEP_SLICES", "SweepPlan"]

FULL_SWEEP_MS = 60_000
"""How often a node sweeps a slice of its jobs, whatever it heard of (the backstop)."""

FULL_SWEEP_SLICES = 3
"""How many slices the backstop cycles through: each job is swept by it every
``FULL_SWEEP_SLICES * FULL_SWEEP_MS`` on each node (see the module docstring)."""

_SEVERAL = -1
"""``SweepPlan._expect_for`` of a job whose expected sweep more than one slot set."""


class SweepPlan:
    """The jobs (by index in the core's job list) the next sweep covers; see the module docstring."""

    __slots__ = (
        "_all",
        "_due",
        "_expect",
        "_expect_for",
        "_full_at",
        "_index",
        "_params",
        "_sent",
        "_sent_full",
        "_sent_slice",
        "_slice",
        "_whole",
        "heard",
    )

    def __init__(self, params: Iterable[SweepParams]) -> None:
        self.heard: set[int] = set()
        """Jobs this node heard of a slot of since the last sweep was sent (the core adds to it)."""
        self._due: dict[int, int] = {}
        """Jobs with a slot open: the monotonic time at which a sweep of the job can change one."""
        self._expect: dict[int, int] = {}
        """Like ``_due``, from replies other than a sweep's since the last sweep covering the job
        was sent (kept apart: a sweep's reply replaces ``_due`` of the jobs it covered, and must
        not drop what it could not have seen)."""
        self._expect_for: dict[int, int] = {}
        """For each job in ``_expect``: the fire time of the slot that set it, or :data:`_SEVERAL`
        when more than one slot did (then no single slot's end drops it)."""
        self._sent: set[int] = set()
        """What the sweep in flight covers besides the full list: re-covered if it fails."""
        self._sent_full = False
        self._sent_slice = False
        """The sweep in flight covers the backstop's current slice (its reply moves to the next)."""
        self._slice = 0
        """The backstop's next slice: jobs whose index modulo :data:`FULL_SWEEP_SLICES` is this."""
        self._whole = True
        """The next backstop covers every job (at start, after a reload, until one was answered)."""
        self.reset(params)

    def reset(self, params: Iterable[SweepParams]) -> None:
        """The job list changed (a reload; index i is job i): the next sweep covers every job."""
        self._params = tuple(params)
        self._all = Sweep(self._params)
        self._index = {p.job: i for i, p in enumerate(self._params)}
        self._due = {}
        self._expect = {}
        self._expect_for = {}
        self._full_at = 0
        self._whole = True

    def expect(self, index: int, mono_ms: int, fire_ms: int) -> None:
        """Job ``index``'s slot at ``fire_ms`` is one a sweep can change from ``mono_ms`` on (a
        reply said): sweep the job then (or earlier, with whatever else is due)."""
        at = self._expect.get(index)
        if at is None:
            self._expect[index] = mono_ms
            self._expect_for[index] = fire_ms
            return
        if self._expect_for.get(index) != fire_ms:
            self._expect_for[index] = _SEVERAL
        if mono_ms < at:
            self._expect[index] = mono_ms

    def ended(self, index: int, fire_ms: int) -> None:
        """Job ``index``'s slot at ``fire_ms`` ended (a reply said): if that slot alone set the
        job's expected sweep, the sweep is not needed (see the module docstring)."""
        if self._expect_for.get(index) == fire_ms:
            del self._expect[index]
            del self._expect_for[index]

    def next(self, mono_ms: int, probe: bool) -> Sweep | None:
        """The sweep to send now (None: no job has anything a sweep could change yet).

        ``probe``: the store is unreachable and this sweep is how the node finds out when it
        answers again: it covers every job (a failed call costs the store nothing).
        """
        heard, self.heard = self.heard, set()
        expect = self._expect
        backstop = mono_ms >= self._full_at
        if probe or (backstop and self._whole):
            self._sent, self._sent_full, self._sent_slice = heard.union(expect), True, False
            self._expect = {}
            self._expect_for = {}
            return self._all
        chosen = heard.union(i for i, at in self._due.items() if at <= mono_ms)
        if expect:
            ripe = [i for i, at in expect.items() if at <= mono_ms]
            if backstop:  # (the slice's jobs go with it: its reply says when each is due)
                part = self._slice
                ripe.extend(i for i, at in expect.items() if at > mono_ms and i % FULL_SWEEP_SLICES == part)
            expect_for = self._expect_for
            for i in ripe:
                del expect[i]
                del expect_for[i]
            chosen.update(ripe)
        if backstop:
            chosen.update(range(self._slice, len(self._params), FULL_SWEEP_SLICES))
        self._sent, self._sent_full, self._sent_slice = chosen, False, backstop
        if not chosen:
            if backstop:  # (an empty slice, with fewer jobs than slices: on to the next)
                self._slice_done(mono_ms)
            return None
        params = self._params
        return Sweep(tuple(params[i] for i in sorted(chosen)))

    def _slice_done(self, mono_ms: int) -> None:
        """The backstop's current slice was swept (or is empty): the next one is due a period on."""
        self._sent_slice = False
        self._slice = (self._slice + 1) % FULL_SWEEP_SLICES
        self._full_at = mono_ms + FULL_SWEEP_MS

    def next_full(self) -> int:
        """The monotonic time at which the next sweep covers the backstop's next slice (every job
        at start and after a reload)."""
        return self._full_at

    def due_in_ms(self, mono_ms: int) -> int:
        """Milliseconds from ``mono_ms`` until a sweep can change an open slot this node knows of
        (>= 1; 0 when it knows of none): when the next sweep is worth sending."""
        if not self._due and not self._expect:
            return 0
        first = min(min(self._due.values(), default=NEVER), min(self._expect.values(), default=NEVER))
        return max(1, first - mono_ms)

    def replied(self, reply: SweepResult, mono_ms: int) -> None:
        """The sweep sent last was answered at ``mono_ms``: its jobs still open are swept again
        when due; the open jobs it did not cover keep their times."""
        if self._sent_full:
            self._due = {}
            self._full_at = mono_ms + FULL_SWEEP_MS
            self._whole = False
        else:
            for i in self._sent:  # (a partial sweep covered exactly these)
                self._due.pop(i, None)
            if self._sent_slice:
                self._slice_done(mono_ms)
        index = self._index
        for job, due_in in reply.open_due.items():
            idx = index.get(job)
            if idx is not None:
                self._due[idx] = mono_ms + due_in
        self._sent = set()

    def failed(self) -> None:
        """The sweep sent last failed: what it covered is covered by the next one (a full sweep,
        or the backstop's slice, stays due)."""
        self.heard |= self._sent
        self._sent = set()
        self._sent_slice = False
