"""Job-process bookkeeping: which slots run on this node, under which token, and what became of them.

The core says *when* to run (``Run``) and *when to stop* (``Kill``); this
module starts the process (:class:`~quorum_cron.agent.jobprocess.JobRun`), logs
its start with the delay from the nominal time, and reports its end through
``report`` (the runtime hands it to the core, which records the result).

It also starts the core's :class:`~quorum_cron.core.node.RunLocal` runs
(``on_store_unavailable = "run-local"``; the core decides when). A local run
carries token 0; its end is reported to the core with token 0, and:

* if the store comes back inside the slot's deadline and the slot is
  assigned to this node, the local run (finished, or still running — it is
  adopted, never started twice) is reported as that slot's result, with a
  detail that says it ran locally;
* otherwise the core records the slot ``missed`` once its deadline has
  passed, with a reason naming the local run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import partial

from quorum_cron.agent.joboutput import OutputRate, RunOutput
from quorum_cron.agent.jobprocess import CommandTarget, JobRun, RunOutcome
from quorum_cron.agent.linebudget import LineBudget
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.spec import AgentJob
from quorum_cron.clock.base import Clock
from quorum_cron.core.model import SlotView
from quorum_cron.core.node import Kill, Run, RunLocal
from quorum_cron.core.outcomes import LOCAL_DETAIL
from quorum_cron.redact import redact_text

__all__ = ["LOCAL_DETAIL", "Report", "Runs"]

log = logging.getLogger(EVENT_LOGGER)

MAX_LOCAL_RESULTS = 1_000
"""Bound on finished local runs waiting to be reported."""
MAX_START_VIEWS = 1_000


Report = Callable[[str, int, int, bool, str], None]
"""``report(job, fire_ms, token, succeeded, detail)``: a run ended."""


class Runs:
    """The job processes of one node, keyed by slot ``(job, fire_ms)``."""

    def __init__(
        self,
        node: str,
        jobs: Mapping[str, AgentJob],
        *,
        clock: Clock,
        metrics: Metrics,
        tail_bytes: int,
        report: Report,
        poke: Callable[[], None],
        output_log_lines: int = 0,
        output_log_rate: int = 1,
        lines: LineBudget | None = None,
    ) -> None:
        """``output_log_lines`` (per run) and ``output_log_rate`` (per second, node-wide) bound the
        output lines copied to the log (:mod:`.joboutput`); ``lines`` the failed runs' ``ended``
        lines (the node's observer's, said in its summary line)."""
        self.node = node
        self.jobs = jobs
        self.clock = clock
        self.metrics = metrics
        self.tail_bytes = tail_bytes
        self.output_log_lines = output_log_lines
        self.lines = lines if lines is not None else LineBudget()
        self._output_rate = OutputRate(output_log_rate, time.monotonic)
        self._outputs: dict[tuple[str, int], RunOutput] = {}
        self._send = report
        self._poke = poke
        self._runs: dict[tuple[str, int], tuple[JobRun, asyncio.Task[None] | None, bool]] = {}
        """slot → (run, its task (a command's; none for a callable), local?)"""
        self._views: OrderedDict[tuple[str, int], SlotView] = OrderedDict()
        self._local_results: OrderedDict[tuple[str, int], RunOutcome] = OrderedDict()
        self._adopted: dict[tuple[str, int], int] = {}
        """Local runs still going when the store assigned their slot to us: slot → token."""

    def __len__(self) -> int:
        return len(self._runs)

    def set_output_rate(self, rate: int) -> None:
        """A reloaded ``output_log_rate``: runs started from now on share the new bound."""
        if rate != self._output_rate.rate:
            self._output_rate = OutputRate(rate, time.monotonic)

    def running(self, job: str, fire_ms: int) -> bool:
        return (job, fire_ms) in self._runs

    def _report(self, job: str, fire_ms: int, token: int, succeeded: bool, detail: str) -> None:
        """Report a run's end, URL passwords in its detail masked (the detail goes to the ledger)."""
        self._send(job, fire_ms, token, succeeded, redact_text(detail))

    def note_start(self, view: SlotView) -> None:
        """The store accepted our start: keep the view for the ``run`` log line (votes, attempt).

        A renew's reply comes here too: the start it confirmed (heard of late, or only by a read)
        runs next. A renew of a run already going keeps nothing: its line is written.
        """
        if (view.job, view.fire_ms) in self._runs:
            return
        self._views[(view.job, view.fire_ms)] = view
        while len(self._views) > MAX_START_VIEWS:
            self._views.popitem(last=False)

    # -- starting and stopping -----------------------------------------------

    def start(self, action: Run, job: AgentJob | None = None) -> None:
        """The store let this node start the slot: run it (or report the local run of it).

        ``job``: the definition the slot runs under when it is not the current one (a slot
        taken in before a config reload changed or removed the job keeps its command)."""
        key = (action.job, action.fire_ms)
        outcome = self._local_results.pop(key, None)
        if outcome is not None:
            self._report(
                action.job,
                action.fire_ms,
                action.token,
                outcome.succeeded,
                f"{LOCAL_DETAIL}: {outcome.detail}",
            )
            return
        current = self._runs.get(key)
        if current is not None and current[2]:
            self._adopted[key] = action.token
            event(
                log,
                logging.INFO,
                "adopt",
                f"{action.job}@{action.fire_ms} token {action.token}: already running locally; "
                f"its result will be recorded",
                job=action.job,
                slot=action.fire_ms,
                token=action.token,
                local=True,
            )
            return
        if current is not None:
            current[0].stop(f"superseded by token {action.token}")
        self._spawn(action, local=False, job=job)

    def run_local(self, action: RunLocal, reason: str) -> None:
        """The core's ``RunLocal``: run the slot here alone (the core runs a slot locally at most once)."""
        key = (action.job, action.fire_ms)
        if action.job not in self.jobs or key in self._runs or key in self._local_results:
            return
        event(
            log,
            logging.WARNING,
            "run_local",
            f"{action.job}@{action.fire_ms}: store unreachable ({reason}); running locally",
            job=action.job,
            slot=action.fire_ms,
        )
        self._spawn(Run(action.job, action.fire_ms, 0, action.timeout_ms), local=True)

    def kill(self, action: Kill) -> None:
        key = (action.job, action.fire_ms)
        entry = self._runs.get(key)
        event(
            log,
            logging.WARNING,
            "kill",
            f"stopping {action.job}@{action.fire_ms} token {action.token}: {action.reason}",
            job=action.job,
            slot=action.fire_ms,
            token=action.token,
            reason=action.reason,
        )
        if entry is None:
            return
        token = self._adopted.get(key) if entry[2] else entry[0].token
        if token == action.token:
            entry[0].stop(action.reason)

    def stop_all(self, reason: str) -> None:
        for run, _, _ in self._runs.values():
            run.stop(reason)

    # -- internals -----------------------------------------------------------

    def _spawn(self, action: Run, *, local: bool, job: AgentJob | None = None) -> None:
        key = (action.job, action.fire_ms)
        view = self._views.pop(key, None)
        target = (job if job is not None else self.jobs[action.job]).target
        feed = None
        if isinstance(target, CommandTarget):  # a callable writes no output the agent reads
            output = RunOutput(
                job=action.job,
                fire_ms=action.fire_ms,
                token=action.token,
                max_lines=self.output_log_lines,
                rate=self._output_rate,
                on_dropped=self.metrics.output_dropped.labels(action.job).inc,  # the job's series starts at 0
            )
            self._outputs[key] = output
            feed = output.feed
        run = JobRun(
            target,
            job=action.job,
            fire_ms=action.fire_ms,
            token=action.token,
            node=self.node,
            timeout_ms=action.timeout_ms,
            tail_bytes=self.tail_bytes,
            on_started=partial(self._on_started, action, view, local),
            on_output=feed,
        )
        if isinstance(target, CommandTarget):
            self._runs[key] = (run, asyncio.ensure_future(self._execute(run, local)), local)
        else:  # a callable: no task of ours per run (JobRun.start)
            self._runs[key] = (run, None, local)
            try:
                run.start(partial(self._ended, run, local))
            except Exception as exc:  # a bug in the runner must not kill the node
                log.error("running %s@%s failed", run.job, run.fire_ms, exc_info=exc)
                outcome = RunOutcome(False, f"agent error while running the job: {exc}")
                asyncio.get_running_loop().call_soon(self._ended, run, local, outcome)
        self.metrics.running.set(len(self._runs))

    def _on_started(self, action: Run, view: SlotView | None, local: bool, started_wall_ms: int) -> None:
        delay = started_wall_ms - action.fire_ms
        job = (action.job,)  # one key tuple, kept by both tables
        self.metrics.last_run.set(job, started_wall_ms / 1000)
        if not local:
            self.metrics.fire_delay.observe(job, max(0, delay) / 1000)
        event(
            log,
            logging.INFO,
            "run",
            f"{action.job}@{action.fire_ms} started{' LOCALLY (store unreachable)' if local else ''} "
            f"with token {action.token}, {delay} ms after its fire time",
            job=action.job,
            slot=action.fire_ms,
            token=action.token,
            delay_ms=delay,
            votes=len(view.votes) if view is not None else 0,
            voters=",".join(view.voters) if view is not None else "",
            attempt=view.attempt if view is not None else 0,
            local=local,
        )

    async def _execute(self, run: JobRun, local: bool) -> None:
        """A command's run, awaited in a task of its own."""
        try:
            outcome = await run.run()
        except Exception as exc:  # a bug in the runner must not kill the node
            log.error("running %s@%s failed", run.job, run.fire_ms, exc_info=exc)
            outcome = RunOutcome(False, f"agent error while running the job: {exc}")
        self._ended(run, local, outcome)

    def _ended(self, run: JobRun, local: bool, outcome: RunOutcome) -> None:
        """A run ended: drop it, log and count its end, report it (or keep a local run's result)."""
        key = (run.job, run.fire_ms)
        current = self._runs.get(key)
        if current is not None and current[0] is run:
            del self._runs[key]
        output = self._outputs.get(key)
        if output is not None and output.token == run.token:
            del self._outputs[key]
            output.close()
        self.metrics.running.set(len(self._runs))
        result = "succeeded" if outcome.succeeded else "failed"
        self.metrics.duration.observe((run.job, result), outcome.duration_ms / 1000)
        # A success reported to the store is told by the ``finish`` line that follows (with the
        # run's time): at INFO it would be a third line per slot, a third of an executor's log
        # work at 10,000 jobs. A failure (its line bounded: LineBudget), or a local run (no
        # ``finish`` may follow), keeps it.
        level = logging.WARNING if not outcome.succeeded else logging.INFO if local else logging.DEBUG
        if log.isEnabledFor(level):
            (self.lines.event if level == logging.WARNING else event)(
                log,
                level,
                "ended",
                f"{run.job}@{run.fire_ms} token {run.token} ended: {outcome.detail.split(chr(10), 1)[0]}",
                job=run.job,
                slot=run.fire_ms,
                token=run.token,
                ok=outcome.succeeded,
                duration_ms=outcome.duration_ms,
                local=local,
            )
        if not local:
            self._report(run.job, run.fire_ms, run.token, outcome.succeeded, outcome.detail)
        elif key in self._adopted:
            token = self._adopted.pop(key)
            self._report(run.job, run.fire_ms, token, outcome.succeeded, f"{LOCAL_DETAIL}: {outcome.detail}")
        else:
            # Kept in case the store assigns the slot to us after all; the core hears it now.
            self._local_results[key] = outcome
            while len(self._local_results) > MAX_LOCAL_RESULTS:
                self._local_results.popitem(last=False)
            self._report(run.job, run.fire_ms, 0, outcome.succeeded, outcome.detail)
        self._poke()
