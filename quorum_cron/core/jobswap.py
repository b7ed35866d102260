"""Replacing a running node's job definitions (a config reload), slot by slot.

A reload must not change a slot under its feet: this node may have voted
for it (the vote carries the definition's spec hash, and the store commits
a slot only on a quorum of ONE hash), hold its lease, or run it. So
:meth:`JobSwap.replace_jobs` draws, per changed job, a **boundary**: the
later of the job's cursor (every fire time up to it was already taken in
under the old definition) and the wall clock at the swap. Slots at or
before the boundary keep the old definition (their votes, a retry of a
failed vote included, carry its hash); fire times after it come from the
new schedule and are voted with the new hash. The old definitions are kept
(``_JobState.before``) until no vote for their slots can still be due.

* **changed** (another spec hash): from its next fire time after the
  boundary; slots already due, voted, starting or running finish under the
  old definition.
* **added**: scheduled like at a node's start — slots still inside their
  deadline are voted (so nodes reloaded a few seconds apart agree on the
  first slot). No high-water catch-up: nothing before the reload was this
  node's to account for.
* **removed**: no new slot is taken in, a due slot nothing was done about
  yet is let go (the nodes still defining the job account for it), and
  what is already voted, abstained on, committed or running finishes: a
  failed vote is sent again, a refused one is recorded missed at its
  deadline with the refusal (explorer seed 111231: every member had
  removed the job, and the one node that still had it, outside the
  membership, lost it between its refused vote and its record; nobody
  recorded the slot), an abstained slot is recorded missed at its
  deadline (or voted, should the clock be trusted again before), and a slot
  run locally here gets its missed record with the run's outcome (the agent
  withdraws trust while the store is down, so such a slot was abstained,
  never voted). Otherwise a job removed from every node would leave those
  slots with no ledger entry (explorer seed 79,
  ``sim/scenarios/bugs/reload-drops-abstained-slot.toml``). The job stays in
  the sweep, so its open slots still time out and are taken over.

Pure like the rest of the core: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from quorum_cron.core.actions import CoreJob, Now
from quorum_cron.core.slots import LOCAL_OWED
from quorum_cron.core.state import CoreState, _JobState
from quorum_cron.core.timers import JobTimers

__all__ = ["JobChanges", "JobSwap"]


@dataclass(frozen=True, slots=True)
class JobChanges:
    """What :meth:`JobSwap.replace_jobs` changed, by job name (sorted)."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    """Jobs whose spec hash changed: new slots after ``boundaries[name]`` use the new definition."""
    removed: tuple[str, ...] = ()
    boundaries: tuple[tuple[str, int], ...] = ()
    """``(job, fire_ms)``: slots at or before ``fire_ms`` keep the job's previous definition."""


class JobSwap(CoreState):
    """Live replacement of the job set (mixed into :class:`~quorum_cron.core.node.NodeCore`)."""

    def replace_jobs(self, jobs: Sequence[CoreJob], now: Now) -> JobChanges:
        """Run ``jobs`` from now on (see the module docstring for what each kind of change does).

        Returns what changed; emits no action (the next :meth:`tick` votes
        what became due). A job given with the same spec hash is taken as is.
        """
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate job names in {names!r}: expected each job once")
        new = {j.name: j for j in jobs}
        added: list[str] = []
        changed: list[str] = []
        removed: list[str] = []
        boundaries: list[tuple[str, int]] = []
        for name, js in self._jobs.items():
            self._forget_old(js, now)
            job = new.get(name)
            if job is None:
                if not js.removed:
                    js.removed = True
                    removed.append(name)
                    # Due, nothing done about it yet: let it go. Kept: a failed vote's slot (it
                    # is voted again), a refused one (its record says why this node could not
                    # vote; explorer seed 111231), an abstained one (it is recorded missed at its
                    # deadline, or voted if the clock is trusted again before), one run locally
                    # here (its record carries the run's outcome).
                    for slot in js.slots.values():
                        p = slot.vote
                        if (
                            p is not None
                            and not p.in_flight
                            and p.request is None
                            and not p.why
                            and not p.abstained
                            and p.local not in LOCAL_OWED
                        ):
                            slot.vote = None
                            self._touched.append((js, slot))
                            self._floor_moved.add(name)  # (a slot run locally: see _record_missed)
            elif js.removed or job.spec_hash != js.job.spec_hash:
                if self._started:
                    if not js.removed:
                        self._take_in_due(js, now)
                    boundary = max(js.cursor_ms, now.wall_ms)
                    js.before = (*js.before, (boundary, js.job))
                    js.cursor_ms = boundary
                    js.next_fire_for = -1  # (another schedule: the cached next fire time is stale)
                    boundaries.append((name, boundary))
                js.job = job
                js.removed = False
                changed.append(name)
            else:
                js.job = job
        for name in sorted(set(new) - set(self._jobs)):
            js = _JobState(job=new[name], index=len(self._by_index))
            if self._started:
                js.cursor_ms = js.boot_ms = now.wall_ms - js.job.deadline_ms
                js.caught_up = True
            self._jobs[name] = js
            self._by_index.append(js)
            added.append(name)
        if added:
            self._timers = JobTimers(len(self._by_index))  # (sized for the jobs; every job refreshed below)
        self._local_jobs = [js.index for js in self._by_index if js.job.run_local and not js.removed]
        self._sweeps.reset(self._sweep_params())
        self._dirty.update(range(len(self._by_index)))
        self._settle()
        return JobChanges(
            added=tuple(added),
            changed=tuple(sorted(changed)),
            removed=tuple(sorted(removed)),
            boundaries=tuple(sorted(boundaries)),
        )

    def definition(self, job: str, fire_ms: int) -> CoreJob | None:
        """The definition slot ``(job, fire_ms)`` is voted and run under here (None: unknown job)."""
        js = self._jobs.get(job)
        return None if js is None else self._definition(js, fire_ms)

    @property
    def job_names(self) -> tuple[str, ...]:
        """The jobs this node schedules (a removed job finishing its slots is not one)."""
        return tuple(name for name, js in self._jobs.items() if not js.removed)

    def _forget_old(self, js: _JobState, now: Now) -> None:
        """Drop old definitions no vote can still need: past every deadline, and no slot of theirs due."""
        keep = []
        for boundary, old in js.before:
            late = now.wall_ms > boundary + old.deadline_ms + self._drop_after_ms
            if not late or any(t <= boundary for t, s in js.slots.items() if s.vote is not None):
                keep.append((boundary, old))
        js.before = tuple(keep)
