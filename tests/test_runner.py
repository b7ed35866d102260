"""The job runner: environment, exit codes, bounded output, timeouts that kill the whole group."""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from quorum_cron.agent.jobprocess import (
    CallableTarget,
    CommandTarget,
    JobContext,
    JobRun,
    RunOutcome,
    Tail,
    iso_utc,
    runs_on_loop,
)
from quorum_cron.agent.spec import AgentSettings
from quorum_cron.core.node import NodeSettings

SLOT_MS = 1_700_000_000_123


def run(target: CommandTarget | CallableTarget, timeout_ms: int = 10_000, **kw: object) -> JobRun:
    return JobRun(target, job="j", fire_ms=SLOT_MS, token=42, node="n1", timeout_ms=timeout_ms, **kw)  # type: ignore[arg-type]


def test_iso_utc_keeps_milliseconds() -> None:
    assert iso_utc(SLOT_MS) == "2023-11-14T22:13:20.123Z"
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"
    # A fire time no date holds (a value read from Redis) is said in ms, not raised.
    assert iso_utc(2**53 - 1) == f"{2**53 - 1} ms"
    assert iso_utc(-(2**53) + 1) == f"{-(2**53) + 1} ms"


def test_tail_keeps_only_the_last_bytes_and_counts_the_rest() -> None:
    t = Tail(4)
    t.write(b"abc")
    t.write(b"defg")
    assert t.text() == "[3 bytes dropped]...defg"
    assert Tail(4).text() == ""


def test_command_sees_the_slot_in_its_environment() -> None:
    script = (
        'echo "$QUORUM_CRON_JOB $QUORUM_CRON_SLOT $QUORUM_CRON_SLOT_MS $QUORUM_CRON_TOKEN'
        ' $QUORUM_CRON_NODE $X"'
    )
    out = asyncio.run(run(CommandTarget(shell=script, env={"X": "extra"})).run())
    assert out.succeeded and out.exit_code == 0
    assert out.detail == f"exit 0\n--- stdout ---\nj 2023-11-14T22:13:20.123Z {SLOT_MS} 42 n1 extra"


def test_argv_runs_without_a_shell_and_nonzero_exit_fails() -> None:
    out = asyncio.run(run(CommandTarget(argv=(sys.executable, "-c", "import sys; sys.exit(3)"))).run())
    assert not out.succeeded and out.exit_code == 3 and out.detail == "exit 3"


def test_missing_program_is_a_failed_run_not_a_crash() -> None:
    out = asyncio.run(run(CommandTarget(argv=("/nonexistent/prog",))).run())
    assert not out.succeeded and "could not start '/nonexistent/prog'" in out.detail


def test_output_is_bounded_but_fully_drained() -> None:
    # 1 MB on stdout: more than a pipe buffer, so an undrained pipe would hang the job.
    code = "import sys; sys.stdout.write('x' * 1_000_000 + 'END'); sys.stderr.write('oops')"
    out = asyncio.run(run(CommandTarget(argv=(sys.executable, "-c", code)), tail_bytes=100).run())
    assert out.succeeded
    assert out.detail.startswith("exit 0\n--- stdout ---\n[999903 bytes dropped]...")
    assert "xEND\n--- stderr ---\noops" in out.detail
    assert len(out.detail) < 300


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # The shell starts a background child that would outlive a plain kill of the shell.
    pidfile = tmp_path / "child.pid"
    # (2 s: time for the shell to start its child and write the pid on a loaded machine, where
    # 300 ms could end the shell before it did; the kill is what is timed, loosely.)
    script = f"sleep 60 & echo $! > {pidfile}; wait"
    t0 = time.monotonic()
    out = asyncio.run(run(CommandTarget(shell=script), timeout_ms=2_000).run())
    assert time.monotonic() - t0 < 30
    assert not out.succeeded and out.timed_out
    assert out.detail.startswith("timed out after 2000 ms: process group killed")
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.02)
    assert not _alive(child)


def test_stop_ends_a_running_command_with_the_reason() -> None:
    async def go() -> tuple[bool, str]:
        r = run(CommandTarget(argv=("sleep", "30")))
        task = asyncio.ensure_future(r.run())
        await asyncio.sleep(0.2)
        r.stop("renew refused")
        out = await asyncio.wait_for(task, 5)
        return out.succeeded, out.detail

    ok, detail = asyncio.run(go())
    assert not ok and detail == "stopped by the agent (renew refused): process group killed"


def test_signal_death_is_reported_by_name() -> None:
    out = asyncio.run(run(CommandTarget(shell="kill -KILL $$")).run())
    assert not out.succeeded and out.detail == "killed by signal SIGKILL"


def test_callable_gets_a_context_and_exceptions_fail_the_slot() -> None:
    seen: list[JobContext] = []

    def ok(ctx: JobContext) -> None:
        seen.append(ctx)

    def bad(ctx: JobContext) -> None:
        raise RuntimeError("boom")

    assert asyncio.run(run(CallableTarget(ok)).run()).succeeded
    assert seen[0].token == 42 and seen[0].slot_ms == SLOT_MS and seen[0].node == "n1"
    assert seen[0].slot.isoformat() == "2023-11-14T22:13:20.123000+00:00"
    out = asyncio.run(run(CallableTarget(bad)).run())
    assert not out.succeeded and out.detail.startswith("raised RuntimeError: boom")


def _sleeps_until_cancelled(cancelled: list[bool]) -> Callable[[JobContext], Awaitable[None]]:
    """A coroutine job that sleeps 30 s and, when cancelled, says so in ``cancelled``."""

    async def slow(ctx: JobContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    return slow


def test_coroutine_is_cancelled_on_timeout() -> None:
    cancelled: list[bool] = []

    slow = _sleeps_until_cancelled(cancelled)

    async def go() -> tuple[bool, bool]:
        out = await run(CallableTarget(slow), timeout_ms=100).run()
        await asyncio.sleep(0)
        return out.succeeded, out.timed_out

    assert asyncio.run(go()) == (False, True)
    assert cancelled == [True]


def test_a_coroutine_that_cancels_itself_is_a_failed_run_not_a_lost_one() -> None:
    """Its task ends cancelled; the run still ends, failed (it once left the slot unreported)."""

    async def gives_up(ctx: JobContext) -> None:
        raise asyncio.CancelledError

    out = asyncio.run(run(CallableTarget(gives_up)).run())
    assert (out.succeeded, out.detail, out.timed_out, out.stopped) == (False, "cancelled", False, "")


def test_a_stopped_callable_ends_at_once_even_if_it_ignores_its_cancellation() -> None:
    """A stop (before the start, or while it runs) ends the run on the loop's next turns; the job
    is cancelled, and one that swallows the cancellation runs on without holding the run."""
    swallowed: list[bool] = []

    async def stubborn(ctx: JobContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            swallowed.append(True)
        await asyncio.sleep(0.05)

    async def go() -> tuple[list[str], list[str]]:
        ends: list[str] = []
        early = run(CallableTarget(stubborn))
        early.stop("before it began")
        late = run(CallableTarget(stubborn))
        ended = asyncio.Event()

        def on_end(out: object) -> None:
            ends.append(getattr(out, "detail", ""))
            if len(ends) == 2:
                ended.set()

        early.start(on_end)
        late.start(on_end)
        await asyncio.sleep(0)
        late.stop("taken away")
        late.stop("twice")  # a second stop changes nothing and ends nothing twice
        await asyncio.wait_for(ended.wait(), 5)
        await asyncio.sleep(0.2)  # the jobs' own ends, which must not end the runs again
        return ends, [r._stop_reason for r in (early, late)]

    ends, reasons = asyncio.run(go())
    assert sorted(ends) == ["stopped by the agent (before it began)", "stopped by the agent (taken away)"]
    assert reasons == ["before it began", "taken away"]
    assert swallowed == [True, True]


async def _ends(*runs: JobRun) -> list[str]:
    """Start ``runs`` together; their outcomes' details, in order, once all ended."""
    ends: dict[int, str] = {}
    all_ended = asyncio.Event()
    for i, r in enumerate(runs):

        def on_end(out: RunOutcome, i: int = i) -> None:
            ends[i] = ("ok: " if out.succeeded else "failed: ") + out.detail
            if len(ends) == len(runs):
                all_ended.set()

        r.start(on_end)
    await asyncio.wait_for(all_ended.wait(), 10)
    return [ends[i] for i in range(len(runs))]


def test_a_job_that_exits_or_is_interrupted_fails_its_run_only() -> None:
    """``sys.exit()`` or ``KeyboardInterrupt`` in a job (a thread's or a coroutine's) once escaped
    the event loop: the run was recorded failed, then the host program died without leaving the
    membership. Now the run fails with what it raised, and the loop goes on."""

    def sync_exit(ctx: JobContext) -> None:
        sys.exit(3)

    async def async_exit(ctx: JobContext) -> None:
        sys.exit(3)

    def sync_interrupt(ctx: JobContext) -> None:
        raise KeyboardInterrupt

    async def async_interrupt(ctx: JobContext) -> None:
        await asyncio.sleep(0)
        raise KeyboardInterrupt

    jobs = (sync_exit, async_exit, sync_interrupt, async_interrupt)

    async def go() -> tuple[list[str], str]:
        ends = await _ends(*(run(CallableTarget(job)) for job in jobs))
        await asyncio.sleep(0.05)  # a re-raise would come out of the loop here
        return ends, "the loop ran on"

    ends, after = asyncio.run(go())
    heads = [e.splitlines()[0] for e in ends]
    assert heads == [
        "failed: raised SystemExit(3)",
        "failed: raised SystemExit(3)",
        "failed: raised KeyboardInterrupt()",
        "failed: raised KeyboardInterrupt()",
    ]
    assert all("Traceback" in e for e in ends)
    assert after == "the loop ran on"


def test_an_async_job_a_plain_decorator_hides_is_awaited_not_reported_succeeded() -> None:
    """An ``async def`` under a sync ``functools.wraps`` decorator, or an object with an
    ``async def __call__``, once never ran while the ledger said it succeeded (Python warned
    "coroutine ... was never awaited"). The returned coroutine is now awaited on the loop, under
    the run's timeout; a function returning a generator fails (its body would never run)."""
    ran: list[str] = []

    def traced(f: Callable[[JobContext], Awaitable[None]]) -> Callable[[JobContext], Awaitable[None]]:
        @functools.wraps(f)
        def wrapper(ctx: JobContext) -> Awaitable[None]:
            return f(ctx)

        return wrapper

    @traced
    async def wrapped(ctx: JobContext) -> None:
        await asyncio.sleep(0)
        ran.append(f"wrapped on the loop: {threading.current_thread() is threading.main_thread()}")

    class Job:
        async def __call__(self, ctx: JobContext) -> None:
            ran.append(f"object on the loop: {threading.current_thread() is threading.main_thread()}")

    cancelled: list[bool] = []
    slow = traced(_sleeps_until_cancelled(cancelled))

    def gen(ctx: JobContext) -> Iterator[int]:
        ran.append("generator body")
        yield 1

    async def go() -> list[str]:
        return await _ends(
            run(CallableTarget(wrapped)),
            run(CallableTarget(Job())),
            run(CallableTarget(slow), timeout_ms=200),
            run(CallableTarget(gen)),
        )

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would fail the test
        ends = asyncio.run(go())
    assert ends[:2] == ["ok: returned", "ok: returned"]
    assert ends[2] == "failed: timed out after 200 ms"  # on the loop: cancelled, no thread note
    assert cancelled == [True]
    assert ends[3].startswith(
        "failed: raised TypeError: the job returned a generator (its body never ran)"
    ), ends[3]
    assert sorted(ran) == ["object on the loop: True", "wrapped on the loop: True"]
    assert runs_on_loop(Job()) and not runs_on_loop(wrapped) and not runs_on_loop(Job)


def test_start_refuses_a_command_target() -> None:
    with pytest.raises(TypeError, match="CommandTarget"):
        run(CommandTarget(argv=("true",))).start(lambda out: None)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (already killed, not yet reaped by init) counts as dead.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_command_target_needs_exactly_one_form() -> None:
    with pytest.raises(ValueError, match="exactly one of argv or shell"):
        CommandTarget()
    with pytest.raises(ValueError, match="exactly one of argv or shell"):
        CommandTarget(argv=("a",), shell="b")


def test_escaped_child_does_not_hold_the_run() -> None:
    # The shell exits at once; its children keep stdout open (one escaped to
    # its own session, out of reach of the group kill). The run ends with the
    # shell, within the pipe-drain bound, and is a success.
    for script in ("setsid sleep 30 & echo started", "sleep 30 & echo started"):
        t0 = time.monotonic()
        out = asyncio.run(run(CommandTarget(shell=script), timeout_ms=20_000).run())
        elapsed = time.monotonic() - t0
        assert out.succeeded and out.exit_code == 0, out
        assert "started" in out.detail
        assert elapsed < 10, (script, elapsed)


def test_timeout_with_escaped_child_ends_at_the_timeout() -> None:
    t0 = time.monotonic()
    out = asyncio.run(run(CommandTarget(shell="setsid sleep 30; sleep 30"), timeout_ms=500).run())
    assert out.timed_out and not out.succeeded
    assert time.monotonic() - t0 < 10


def test_job_environment_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUORUM_CRON_REDIS_URL", "redis://:hunter2@r:6379/0")
    monkeypatch.setenv("SOME_AGENT_SECRET", "s3cret")
    monkeypatch.setenv("LC_ALL", "C")
    out = asyncio.run(run(CommandTarget(shell="env", env={"MINE": "yes"})).run())
    assert out.succeeded
    assert "hunter2" not in out.detail and "QUORUM_CRON_REDIS_URL" not in out.detail
    assert "s3cret" not in out.detail
    assert "MINE=yes" in out.detail and "LC_ALL=C" in out.detail and "PATH=" in out.detail
    assert "QUORUM_CRON_TOKEN=42" in out.detail


def test_alert_command_gets_the_clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from quorum_cron.agent.alerts import AlertHook

    monkeypatch.setenv("QUORUM_CRON_REDIS_URL", "redis://:hunter2@r:6379/0")
    out = tmp_path / "env"
    hook = AlertHook("n1", command=f"env > {out}")

    async def main() -> None:
        hook.raise_("quorum_lost", "test")
        await hook.aclose(flush_s=10)

    asyncio.run(main())
    text = out.read_text()
    assert "hunter2" not in text and "QUORUM_CRON_REDIS_URL" not in text
    assert "QUORUM_CRON_ALERT=quorum_lost" in text and "PATH=" in text


def test_env_passthrough_passes_the_named_variables_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUORUM_CRON_REDIS_URL", "redis://:hunter2@r:6379/0")
    monkeypatch.setenv("AWS_PROFILE", "reports")
    monkeypatch.setenv("SOME_AGENT_SECRET", "s3cret")
    target = CommandTarget(shell="env", passthrough=("AWS_PROFILE", "UNSET_HERE", "QUORUM_CRON_REDIS_URL"))
    out = asyncio.run(run(target).run())
    assert out.succeeded
    assert "AWS_PROFILE=reports" in out.detail and "UNSET_HERE" not in out.detail
    assert "hunter2" not in out.detail and "s3cret" not in out.detail


def test_a_cancelled_wait_stops_the_callable_without_a_loop_error() -> None:
    """Cancelling the task that awaits ``run()`` stops the job; the run's end, which comes after
    the wait was cancelled, must not try to resolve the cancelled wait."""
    errors: list[str] = []
    cancelled: list[bool] = []

    slow = _sleeps_until_cancelled(cancelled)

    async def go() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx["message"]))
        waiting = asyncio.ensure_future(run(CallableTarget(slow)).run())
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        for _ in range(5):  # the stop's call_soon, then the job's own cancellation
            await asyncio.sleep(0)

    asyncio.run(go())
    assert cancelled == [True]
    assert errors == []


def test_a_command_targets_repr_shows_no_environment_or_input() -> None:
    """A job's variables and an alert's input (the text on stdin) may hold secrets: a repr, which
    can reach a log line or an error, shows neither."""
    target = CommandTarget(argv=("true",), env={"API_KEY": "hunter2"}, stdin=b"token s3cret")
    assert "hunter2" not in repr(target) and "s3cret" not in repr(target)
    assert target.env == {"API_KEY": "hunter2"} and target.stdin == b"token s3cret"
    with pytest.raises(ValueError, match="got both") as bad:
        CommandTarget(argv=("a",), shell="b", env={"API_KEY": "hunter2"})
    assert "hunter2" not in str(bad.value)


def test_the_agent_settings_repr_shows_no_webhook_url() -> None:
    settings = AgentSettings(
        node=NodeSettings(node_id="n1", quorum=1),
        namespace="n",
        size=1,
        alert_url="https://hooks.example/services/T000/B000/SUPERSECRET",
    )
    assert "SUPERSECRET" not in repr(settings)
    assert settings.alert_url is not None and settings.alert_url.endswith("SUPERSECRET")
