"""Job output lines in the agent's log: the per-run and per-second bounds, redaction, and the
job outcome alerts made of a finish reply (pure: no process, no store)."""

from __future__ import annotations

import logging

import pytest

from quorum_cron.agent.joboutput import MAX_LINE_CHARS, OutputRate, RunOutput
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.observe import exit_code_of, output_tail
from quorum_cron.core.model import SlotState


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def output_events(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "qc_event", "") == "output"]


def test_lines_are_events_with_the_run_and_stream_password_masked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    run = RunOutput(job="j", fire_ms=5, token=7, max_lines=10, rate=OutputRate(100, Clock()))
    run.feed("stdout", b"one\ntw")
    run.feed("stderr", b"url redis://u:hunter2@h/0\r\n")
    run.feed("stdout", b"o")  # unterminated: logged at close
    assert [r.getMessage() for r in output_events(caplog)] == ["one", "url redis://u:***@h/0"]
    run.close()
    records = output_events(caplog)
    assert [r.getMessage() for r in records] == ["one", "url redis://u:***@h/0", "two"]
    assert [r.qc_fields for r in records][1] == {"job": "j", "slot": 5, "token": 7, "stream": "stderr"}  # type: ignore[attr-defined]


def test_a_run_logs_at_most_its_lines_and_says_how_many_it_left_out(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    dropped: list[int] = []
    run = RunOutput(
        job="j", fire_ms=5, token=7, max_lines=3, rate=OutputRate(100, Clock()), on_dropped=dropped.append
    )
    run.feed("stdout", b"x\n" * 10 + b"y" * (3 * MAX_LINE_CHARS) + b"\n")
    run.close()
    assert len(output_events(caplog)) == 3 and dropped == [8]
    (said,) = [r for r in caplog.records if getattr(r, "qc_event", "") == "output_dropped"]
    assert "8 output line(s) not logged" in said.getMessage()


def test_the_node_wide_rate_bounds_lines_per_second_over_all_runs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=EVENT_LOGGER)
    clock = Clock()
    rate = OutputRate(5, clock)
    a = RunOutput(job="a", fire_ms=1, token=1, max_lines=100, rate=rate)
    b = RunOutput(job="b", fire_ms=1, token=2, max_lines=100, rate=rate)
    a.feed("stdout", b"l\n" * 4)
    b.feed("stdout", b"l\n" * 4)
    assert len(output_events(caplog)) == 5 and a.dropped + b.dropped == 3
    clock.t += 1.0  # a second later: 5 more
    b.feed("stdout", b"l\n" * 6)
    assert len(output_events(caplog)) == 10 and b.dropped == 4
    long = RunOutput(job="c", fire_ms=1, token=3, max_lines=1, rate=OutputRate(5, clock))
    long.feed("stdout", b"z" * (MAX_LINE_CHARS + 50) + b"\n")
    assert len(output_events(caplog)[-1].getMessage()) == MAX_LINE_CHARS


def test_exit_codes_and_output_tails_for_the_alerts() -> None:
    assert exit_code_of("exit 3\n--- stdout ---\nx") == "3"
    assert exit_code_of("ran locally while the store was unreachable: exit 4") == "4"
    assert exit_code_of("timed out after 1000 ms: process group killed") == "-"
    assert output_tail("exit 3\n" + "a" * 5000, 100) == "…" + "a" * 99


def test_the_python_api_takes_alert_on_like_the_config_file() -> None:
    from quorum_cron.app import App
    from quorum_cron.errors import ConfigError

    app = App(namespace="x", size=3, redis_url="redis://localhost:1/0", node_id="n")
    app.cron("@hourly", name="quiet", alert_on=["missed"])(lambda ctx: None)
    app.cron("@hourly", name="loud")(lambda ctx: None)
    assert app.jobs["quiet"].alert_on == ("missed",)
    assert app.jobs["loud"].alert_on == ("failed", "recovered", "missed", "lost")
    with pytest.raises(ConfigError, match="'mail' is not an alert kind"):
        app.cron("@hourly", name="bad", alert_on=["mail"])(lambda ctx: None)


def test_a_retried_failure_alerts_nothing_and_the_last_one_alerts_once_by_alert_on() -> None:
    """The executor's accepted final result alerts; a failure the store turns into a retry does not."""
    from quorum_cron.agent.alerts import AlertHook
    from quorum_cron.agent.build import agent_job
    from quorum_cron.agent.metrics import Metrics
    from quorum_cron.agent.observe import Observer
    from quorum_cron.agent.spec import AgentJob
    from quorum_cron.config.settings import JobSpec
    from quorum_cron.core.actions import Finish
    from quorum_cron.core.model import SlotView, TransitionResult

    def job(name: str, alert_on: tuple[str, ...]) -> AgentJob:
        return agent_job(JobSpec.create(name, "@every 10s", command=("true",), alert_on=alert_on))

    hook = AlertHook("n1")
    metrics = Metrics()
    obs = Observer("n1", {"j": job("j", ("failed",)), "q": job("q", ())}, metrics, hook)
    detail = "exit 3\n--- stderr ---\ndisk full redis://u:pw@h/0"
    fin = Finish("j", 10_000, 7, False, detail, retries=1)
    retry = SlotView("j", 10_000, SlotState.COMMITTED, executor="n2", token=8, runs=1)
    obs.reply(fin, TransitionResult(True, retry, 0))
    assert hook.sent == []  # retried: not the slot's last word
    final = SlotView(
        "j", 10_000, SlotState.FAILED, executor="n1", token=8, runs=2, detail=detail, finished_ms=12_000
    )
    obs.reply(Finish("j", 10_000, 8, False, detail, retries=1), TransitionResult(True, final, 0))
    (alert,) = hook.sent
    assert alert.kind == "job_failed" and alert.fields["exit_code"] == "3" and alert.fields["attempt"] == "2"
    assert alert.fields["output"] == "--- stderr ---\ndisk full redis://u:***@h/0"
    obs.reply(Finish("j", 10_000, 8, False, detail), TransitionResult(False, final, 0, "stale"))
    assert len(hook.sent) == 1  # a refused (stale) result alerts nothing
    quiet = SlotView("q", 10_000, SlotState.FAILED, executor="n1", token=3, runs=1, detail=detail)
    obs.reply(Finish("q", 10_000, 3, False, detail), TransitionResult(True, quiet, 0))
    assert len(hook.sent) == 1  # alert_on = []
    assert metrics.last_failure.labels("j")._value.get() == 12.0  # the store's finish time, in seconds


def test_a_success_the_store_counts_failures_before_alerts_job_recovered_by_alert_on() -> None:
    """``job_recovered`` comes from the finish reply's ``failures_before`` (the store's count), on
    the executor, only for a job whose ``alert_on`` names it, and never for a clean success."""
    from quorum_cron.agent.alerts import AlertHook
    from quorum_cron.agent.build import agent_job
    from quorum_cron.agent.metrics import Metrics
    from quorum_cron.agent.observe import Observer
    from quorum_cron.config.settings import JobSpec
    from quorum_cron.core.actions import Finish
    from quorum_cron.core.model import SlotView, TransitionResult

    jobs = {
        name: agent_job(JobSpec.create(name, "@every 10s", command=("true",), alert_on=alert_on))
        for name, alert_on in (("j", ("recovered",)), ("q", ("failed",)))
    }
    hook = AlertHook("n1")
    obs = Observer("n1", jobs, Metrics(), hook)
    for name, fire, failures in (("j", 10_000, 0), ("q", 10_000, 4), ("j", 20_000, 3)):
        view = SlotView(name, fire, SlotState.SUCCEEDED, executor="n1", token=5, runs=1, finished_ms=fire)
        obs.reply(Finish(name, fire, 5, True, "exit 0"), TransitionResult(True, view, fire, "", failures))
    (alert,) = hook.sent
    assert alert.kind == "job_recovered", alert
    assert alert.fields["job"] == "j" and alert.fields["slot"] == "20000" and alert.fields["failures"] == "3"
