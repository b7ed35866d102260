"""``@app.cron`` and a ``[[jobs]]`` table are one definition of a job's options (config/job_options.py).

Every option an in-process job can have is a keyword of ``App.cron`` and a
key of the file, with the same default, the same accepted values and the same
one-line error for a bad one (the file's line is the API's after the file's
name). An option added to one side only fails here: the keywords are compared
with the table, and :data:`GOOD_AND_BAD` must name a value of each kind for
every option the table lists.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from quorum_cron.app import App, JobContext
from quorum_cron.config.file import parse_config
from quorum_cron.config.job_options import IN_PROCESS_OPTIONS, JOB_OPTIONS, in_process_job
from quorum_cron.config.settings import InvalidConfig, JobSpec
from quorum_cron.errors import ConfigError, ScheduleError

SOURCE = "jobs.toml"
PROCESS_ONLY = {"command", "shell", "env", "stdin", "inherit_env", "cwd", "env_passthrough"}
"""What only a command has (an in-process job runs a function): the file's alone."""

GOOD_AND_BAD: dict[str, tuple[object, object]] = {
    "schedule": ("@every 90s", "*/0 * * * *"),
    "timezone": ("Europe/Berlin", "Mars/Base"),
    "dst": ("every", "twice"),
    "timeout": ("2m", "31d"),
    "starting_deadline": ("45s", "2d"),
    "overlap": ("allow", "twice"),
    "delivery": ("at-least-once", "always"),
    "misfire": ("run-once", "never"),
    "retries": (3, 101),
    "retry_backoff": ("1m", "2d"),
    "retry_backoff_max": ("1h", "5s"),
    "retry_jitter": (0.25, 1.5),
    "on_store_unavailable": ("run-local", "maybe"),
    "alert_on": (["failed"], ["nope"]),
}
"""Per option: a value other than its default, and a value it refuses."""


def app() -> App:
    return App(namespace="ns", size=3, redis_url="redis://127.0.0.1:1/0", node_id="n")


def by_app(options: dict[str, Any]) -> JobSpec:
    """The job ``j`` declared with ``@app.cron`` (``schedule`` positional, ``@hourly`` unless given)."""
    options = dict(options)
    schedule = options.pop("schedule", "@hourly")
    a = app()

    @a.cron(schedule, name="j", **options)
    def j(ctx: JobContext) -> None: ...

    return a.jobs["j"]


def by_file(options: dict[str, object]) -> JobSpec:
    """The job ``j`` read from a ``[[jobs]]`` table (a command, as a file's job must have)."""
    job = {"name": "j", "schedule": "@hourly", "command": ["true"], **options}
    config = parse_config({"cluster": {"namespace": "ns", "size": 3}, "jobs": [job]}, SOURCE)
    return config.jobs[0]


def definition(spec: JobSpec) -> dict[str, object]:
    """Every field but what tells the two kinds of job apart (the command and the in-process flag)."""
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    return {k: v for k, v in fields.items() if k not in ("command", "in_process")}


def test_app_cron_takes_exactly_the_in_process_options_of_the_table() -> None:
    params = inspect.signature(App.cron).parameters
    keywords = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY and n != "name"]
    assert ["schedule", *keywords] == list(IN_PROCESS_OPTIONS)
    assert all(params[k].default is None for k in keywords), "None is the table's default, named once"
    assert set(JOB_OPTIONS) - set(IN_PROCESS_OPTIONS) == PROCESS_ONLY
    assert set(GOOD_AND_BAD) == set(IN_PROCESS_OPTIONS), "name a good and a bad value of each option"


def test_no_option_given_is_the_same_job_both_ways() -> None:
    declared, read = by_app({}), by_file({})
    assert definition(declared) == definition(read)
    assert declared.in_process and declared.command is None and read.command == ("true",)


@pytest.mark.parametrize("option", sorted(GOOD_AND_BAD))
def test_an_option_set_is_the_same_job_both_ways(option: str) -> None:
    good, _ = GOOD_AND_BAD[option]
    declared = by_app({option: good})
    assert definition(declared) == definition(by_file({option: good}))
    assert definition(declared) != definition(by_app({})), f"{option}={good!r} is its default"


@pytest.mark.parametrize("option", sorted(GOOD_AND_BAD))
def test_a_bad_value_is_the_same_one_line_both_ways(option: str) -> None:
    _, bad = GOOD_AND_BAD[option]
    with pytest.raises(InvalidConfig) as file_error:
        by_file({option: bad})
    with pytest.raises(ConfigError) as app_error:
        by_app({option: bad})
    assert file_error.value.errors == (f"{SOURCE}: {app_error.value}",)
    line, named = str(app_error.value), repr(bad[0] if isinstance(bad, list) else bad)
    assert "\n" not in line and f"field {option!r}" in line and named in line
    if option in ("schedule", "timezone"):
        assert isinstance(app_error.value, ScheduleError)  # what the API raised for these before


def test_a_process_option_is_refused_for_an_in_process_job() -> None:
    with pytest.raises(ConfigError, match=r"^job 'j': field 'command': unknown key"):
        in_process_job("j", {"schedule": "@hourly", "command": ["true"]})
