"""Job output lines in the agent's log: the per-run and per-second bounds, redaction, and the
count of ``job_recovered``'s failures from a ledger (pure: no process, no store)."""

from __future__ import annotations

import logging

import pytest

from quorum_cron.agent.joboutput import MAX_LINE_CHARS, OutputRate, RunOutput
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.observe import exit_code_of, output_tail
from quorum_cron.agent.recovery import failures_before
from quorum_cron.core.model import LedgerEntry, SlotState


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


def _entry(fire_ms: int, state: SlotState) -> LedgerEntry:
    return LedgerEntry("j", fire_ms, state, "", (), "n1", 1, 0, 0, 0, "")


def test_a_success_recovers_from_the_failed_runs_before_it() -> None:
    s, f, m = SlotState.SUCCEEDED, SlotState.FAILED, SlotState.MISSED
    newest_first = [
        _entry(9, s),
        _entry(9, SlotState.RETRYING),
        _entry(8, f),
        _entry(7, m),
        _entry(6, SlotState.LOST),
        _entry(5, s),
        _entry(4, f),
    ]
    assert failures_before(newest_first, 9) == 2  # 8 failed, 7 missed (nothing ran), 6 lost; 5 succeeded
    assert failures_before([_entry(9, s), _entry(8, s), _entry(7, f)], 9) == 0
    assert failures_before([_entry(9, s)], 9) == 0
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
