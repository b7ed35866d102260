"""Running one slot's job: a subprocess (argv or ``sh -c``) or a Python callable.

A command runs in its own session, so its whole process group can be killed
on timeout or when the store takes the slot away (a shell's children
included). Its stdout and stderr are drained continuously — a job that
writes a lot must never block on a full pipe — but only a bounded tail of
each is kept, for the ledger. The job learns which slot it runs through
environment variables (:data:`ENV_JOB` ... :data:`ENV_NODE`), the fencing
token included, so downstream systems can reject a stale writer.

A Python callable (the :mod:`quorum_cron.app` API) gets a :class:`JobContext`
with the same facts. A coroutine function (or an object with an ``async def
__call__``) runs on the agent's loop and is cancelled on timeout; a plain
function runs in a worker thread, which Python cannot kill: on timeout the
slot is reported failed and the thread is left to finish on its own (said so
in the ledger detail). A plain function that returns an awaitable (an ``async
def`` under a plain decorator) has it awaited on the loop, under the same
timeout. A job that raises ``SystemExit`` or ``KeyboardInterrupt`` fails its
run only: neither escapes the event loop (a task would re-raise both).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import functools
import inspect
import os
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from quorum_cron.agent.jobcallable import (
    JOBS,
    Escaped,
    awaited,
    close,
    in_thread,
    on_loop,
    returned_awaitable,
    runs_on_loop,
)
from quorum_cron.agent.jobenv import base_environment, passthrough
from quorum_cron.agent.jobgroup import (
    DEFAULT_TAIL_BYTES,
    JobProtocol,
    Tail,
    detail_of,
    feed_stdin,
    kill_group,
    signal_name,
)

__all__ = [
    "DEFAULT_TAIL_BYTES",
    "ENV_JOB",
    "ENV_NODE",
    "ENV_SLOT",
    "ENV_SLOT_MS",
    "ENV_TOKEN",
    "CallableTarget",
    "CommandTarget",
    "JobContext",
    "JobRun",
    "RunOutcome",
    "Tail",
    "Target",
    "iso_utc",
    "runs_on_loop",
]

ENV_JOB: Final = "QUORUM_CRON_JOB"
ENV_SLOT: Final = "QUORUM_CRON_SLOT"
ENV_SLOT_MS: Final = "QUORUM_CRON_SLOT_MS"
ENV_TOKEN: Final = "QUORUM_CRON_TOKEN"
ENV_NODE: Final = "QUORUM_CRON_NODE"

PIPE_DRAIN_S = 1.0
"""After the job's main process exited, how long background children may hold its pipes open."""


def iso_utc(ms: int) -> str:
    """``ms`` since the epoch as ISO-8601 UTC with milliseconds, e.g. ``2024-05-01T12:00:00.000Z``.

    A fire time beyond what a date can hold (a value read from Redis: the store's own bounds are
    ±2^53) reads ``<ms> ms``, so that one bad slot value cannot stop the job's run.
    """
    try:
        when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a Python job is told about the slot it runs."""

    job: str
    slot: dt.datetime
    """Nominal fire time (UTC)."""
    slot_ms: int
    token: int
    """Fencing token: hand it to downstream systems so a stale run can be refused."""
    node: str


@dataclass(frozen=True, slots=True)
class CommandTarget:
    """A command: ``argv`` run directly, or ``shell`` run with ``sh -c``."""

    argv: tuple[str, ...] = ()
    shell: str | None = None
    env: Mapping[str, str] | None = field(default=None, repr=False)
    """The job's own variables (secrets, often): never in a repr, as ``JobSpec.env`` is not."""
    cwd: str | None = None
    stdin: bytes | None = field(default=None, repr=False)
    """Written to the process's standard input, then closed; ``None``: stdin is /dev/null. (An
    alert's text, or the job's input: not in a repr either.)"""
    inherit_env: bool = True
    """``False``: the process gets only ``env`` and the slot's facts (cron's clean environment)."""
    passthrough: tuple[str, ...] = ()
    """Names of the agent's own variables the process also gets (the job's ``env_passthrough``)."""

    def __post_init__(self) -> None:
        if (not self.argv) == (self.shell is None):
            got = "both" if self.argv else "neither"
            raise ValueError(f"a command target needs exactly one of argv or shell, got {got}")

    @property
    def args(self) -> tuple[str, ...]:
        return ("/bin/sh", "-c", self.shell) if self.shell is not None else self.argv


@dataclass(frozen=True, slots=True)
class CallableTarget:
    """A Python function or coroutine function taking a :class:`JobContext`."""

    func: Callable[[JobContext], object]


Target = CommandTarget | CallableTarget


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended; ``detail`` is what goes into the ledger (bounded)."""

    succeeded: bool
    detail: str
    exit_code: int | None = None
    started_wall_ms: int = 0
    duration_ms: int = 0
    timed_out: bool = False
    stopped: str = ""
    """Non-empty when the agent stopped the run (why)."""


class JobRun:
    """One execution of a target for one slot; :meth:`run` once, :meth:`stop` any time.

    A stop is a reason and a wake-up callback, not an :class:`asyncio.Event`:
    an executor holds a run per slot it is running, 10,000 at once at a
    minute burst, and an event's waiter deque is ~700 bytes of each
    (docs/benchmarks.md, "An executor's memory per run"). Slots for the same
    reason.
    """

    __slots__ = (
        "_on_end",
        "_on_output",
        "_on_started",
        "_started",
        "_stop_reason",
        "_timer",
        "_wake",
        "_work",
        "fire_ms",
        "job",
        "node",
        "pid",
        "tail_bytes",
        "target",
        "timeout_ms",
        "token",
    )

    def __init__(
        self,
        target: Target,
        *,
        job: str,
        fire_ms: int,
        token: int,
        node: str,
        timeout_ms: int,
        tail_bytes: int = DEFAULT_TAIL_BYTES,
        on_started: Callable[[int], None] | None = None,
        on_output: Callable[[str, bytes], None] | None = None,
    ) -> None:
        """``on_output(stream, data)``: each chunk a command writes (``stdout`` / ``stderr``), as read."""
        self.target = target
        self.job = job
        self.fire_ms = fire_ms
        self.token = token
        self.node = node
        self.timeout_ms = timeout_ms
        self.tail_bytes = tail_bytes
        self._on_started = on_started
        self._on_output = on_output
        self._stop_reason = ""
        """Non-empty once :meth:`stop` was called: the run is stopped."""
        self._wake: Callable[[], None] | None = None
        """While a command runs: ends the wait (a stop)."""
        self._work: asyncio.Future[object] | None = None
        """While a callable runs (:meth:`start`): its task, or its thread's future."""
        self._timer: asyncio.TimerHandle | None = None
        self._on_end: Callable[[RunOutcome], None] | None = None
        self._started = (0, 0.0)
        """``(wall ms, monotonic s)`` when a callable started."""
        self.pid: int | None = None

    def env(self) -> dict[str, str]:
        """The job's environment: the allowlisted part of the agent's (unless not inherited), the job's
        own, then the slot's facts.

        Never the agent's ``QUORUM_CRON_*`` settings (the Redis URL): see :mod:`.jobenv`.
        """
        inherit = not isinstance(self.target, CommandTarget) or self.target.inherit_env
        env = base_environment(os.environ) if inherit else {}
        if isinstance(self.target, CommandTarget):
            env.update(passthrough(os.environ, self.target.passthrough))
            if self.target.env:
                env.update(self.target.env)
        env.update(
            {
                ENV_JOB: self.job,
                ENV_SLOT: iso_utc(self.fire_ms),
                ENV_SLOT_MS: str(self.fire_ms),
                ENV_TOKEN: str(self.token),
                ENV_NODE: self.node,
            }
        )
        return env

    def stop(self, reason: str) -> None:
        """Ask the run to end now (process group terminated, coroutine cancelled)."""
        if not self._stop_reason:
            self._stop_reason = reason or "stopped"
        if self._wake is not None:
            self._wake()
        if self._on_end is not None:  # a callable: it ends on the loop's next turn, not inside our caller
            asyncio.get_running_loop().call_soon(self._end)

    async def run(self) -> RunOutcome:
        if isinstance(self.target, CommandTarget):
            return await self._run_command(self.target)
        return await self._run_callable(self.target)

    # -- commands ------------------------------------------------------------

    async def _run_command(self, target: CommandTarget) -> RunOutcome:
        started_wall = time.time_ns() // 1_000_000
        t0 = time.monotonic()
        loop = asyncio.get_running_loop()
        out, err = Tail(self.tail_bytes), Tail(self.tail_bytes)
        proto = JobProtocol(out, err, self._on_output)
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: proto,
                *target.args,
                stdin=asyncio.subprocess.DEVNULL if target.stdin is None else asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env(),
                cwd=target.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            return RunOutcome(
                False, f"could not start {target.args[0]!r}: {exc}", started_wall_ms=started_wall
            )
        pid = transport.get_pid()
        self.pid = pid
        if self._on_started is not None:
            self._on_started(started_wall)
        if target.stdin is not None:
            feed_stdin(transport, target.stdin)
        exited: asyncio.Future[object] = asyncio.ensure_future(proto.exited.wait())
        stopper: asyncio.Future[object] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not stopper.done():
                stopper.set_result(True)

        self._wake = wake
        if self._stop_reason:
            wake()
        timed_out = False
        try:
            done, _ = await asyncio.wait(
                {exited, stopper}, timeout=self.timeout_ms / 1000, return_when=asyncio.FIRST_COMPLETED
            )
            if exited not in done:
                timed_out = not self._stop_reason
                await kill_group(pid, proto)
            # The run ends when the job's process ends, not when its pipes
            # close: a background child (``sleep 100 &``, ``setsid ...``) may
            # hold them for ever. Whatever it writes within the drain bound
            # is kept; then our ends are closed.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proto.pipes_closed.wait(), PIPE_DRAIN_S)
        except asyncio.CancelledError:
            await kill_group(pid, proto)
            raise
        finally:
            self._wake = None
            stopper.cancel()
            exited.cancel()
            transport.close()
        code = transport.get_returncode()
        duration = int((time.monotonic() - t0) * 1000)
        if timed_out:
            head = f"timed out after {self.timeout_ms} ms: process group killed"
        elif self._stop_reason:
            head = f"stopped by the agent ({self._stop_reason}): process group killed"
        elif code is not None and code < 0:
            head = f"killed by signal {signal_name(-code)}"
        else:
            head = f"exit {code}"
        detail = detail_of(head, out, err)
        return RunOutcome(
            succeeded=code == 0 and not timed_out and not self._stop_reason,
            detail=detail,
            exit_code=code,
            started_wall_ms=started_wall,
            duration_ms=duration,
            timed_out=timed_out,
            stopped=self._stop_reason,
        )

    # -- callables -----------------------------------------------------------

    async def _run_callable(self, target: CallableTarget) -> RunOutcome:
        """:meth:`start`, awaited (a cancelled wait stops the run)."""
        ended: asyncio.Future[RunOutcome] = asyncio.get_running_loop().create_future()

        def on_end(outcome: RunOutcome) -> None:
            if not ended.done():  # (a cancelled wait ends the run after the future was cancelled)
                ended.set_result(outcome)

        self.start(on_end)
        try:
            return await ended
        except asyncio.CancelledError:
            self.stop("the wait for it was cancelled")
            raise

    def start(self, on_end: Callable[[RunOutcome], None]) -> None:
        """Start a callable target now; ``on_end(outcome)`` is called once, from the loop, when it
        returned, raised, timed out or was stopped.

        Callbacks, not a coroutine awaiting the job: at a minute burst an
        executor runs thousands of callables at once, and a task, three
        coroutine frames and a future per run were ~1.2 KB of each
        (docs/benchmarks.md, "An executor's memory per run"). The work runs
        in a task of its own, so a timeout or a stop ends the run even if
        the job ignores its cancellation.
        """
        if not isinstance(self.target, CallableTarget):
            raise TypeError(f"start() runs a callable target, not {type(self.target).__name__}")
        ctx = JobContext(
            job=self.job,
            slot=dt.datetime.fromtimestamp(self.fire_ms / 1000, tz=dt.UTC),
            slot_ms=self.fire_ms,
            token=self.token,
            node=self.node,
        )
        self._started = (time.time_ns() // 1_000_000, time.monotonic())
        if self._on_started is not None:
            self._on_started(self._started[0])
        func = self.target.func
        loop = asyncio.get_running_loop()
        if runs_on_loop(func):
            self._work = loop.create_task(on_loop(func, ctx))
        else:  # a future of the job threads: no task, no coroutine frame (to_thread's, minus both)
            call = functools.partial(contextvars.copy_context().run, in_thread, func, ctx)
            self._work = JOBS.submit(loop, call)
        self._on_end = on_end
        self._work.add_done_callback(self._end)
        self._timer = loop.call_later(self.timeout_ms / 1000, self._timed_out)
        if self._stop_reason:
            asyncio.get_running_loop().call_soon(self._end)

    def _timed_out(self) -> None:
        self._timer = None  # (fired: a returned awaitable is not started after it)
        self._end()

    def _end(self, _: object = None) -> None:
        """The work finished, the timeout passed or a stop came: say the outcome, once."""
        on_end, work = self._on_end, self._work
        if on_end is None or work is None:
            return
        if returned_awaitable(work) and not self._stop_reason and self._timer is not None:
            # A plain function returned a coroutine (an ``async def`` under a sync decorator):
            # awaited on the loop, under the same timeout and stop, as a coroutine job is.
            work.remove_done_callback(self._end)
            returned = work.result()
            assert inspect.isawaitable(returned)
            self._work = asyncio.get_running_loop().create_task(awaited(returned))
            self._work.add_done_callback(self._end)
            return
        self._on_end = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        work.remove_done_callback(self._end)
        on_end(self._outcome(work))

    def _outcome(self, work: asyncio.Future[object]) -> RunOutcome:
        started_wall, t0 = self._started
        duration = int((time.monotonic() - t0) * 1000)
        in_thread = not isinstance(work, asyncio.Task)  # an executor's future: a worker thread
        thread_note = " (a thread cannot be killed: it runs on)" if in_thread else ""
        if not work.done():
            work.cancel()
            if self._stop_reason:
                head = f"stopped by the agent ({self._stop_reason}){thread_note}"
            else:
                head = f"timed out after {self.timeout_ms} ms{thread_note}"
            return RunOutcome(
                False,
                head,
                started_wall_ms=started_wall,
                duration_ms=duration,
                timed_out=not self._stop_reason,
                stopped=self._stop_reason,
            )
        if work.cancelled():  # the job cancelled itself (raised CancelledError)
            return RunOutcome(False, "cancelled", started_wall_ms=started_wall, duration_ms=duration)
        exc = work.exception()
        if exc is None and returned_awaitable(work):  # stopped or timed out as the thread returned
            close(work.result())
            exc = TypeError("a stop or the timeout came before its returned awaitable could run")
        if isinstance(exc, Escaped):  # SystemExit, KeyboardInterrupt: this run's failure only
            exc = exc.raised
            head = f"raised {exc!r}"
        elif exc is not None:
            head = f"raised {type(exc).__name__}: {exc}"
        if exc is not None:
            text = "".join(traceback.format_exception(exc))
            tail = Tail(self.tail_bytes)
            tail.write(text.encode())
            return RunOutcome(
                False,
                f"{head}\n{tail.text()}",
                started_wall_ms=started_wall,
                duration_ms=duration,
            )
        return RunOutcome(True, "returned", started_wall_ms=started_wall, duration_ms=duration)
