"""A job's options, their defaults and their checks, listed once: the ``[[jobs]]`` table and ``@app.cron``.

:data:`JOB_READING` is every option of a ``[[jobs]]`` table, in the order the
file reader reads them (so a file's problems come out in that order), with
the rules that span options (the schedule in its zone, exactly one of
``command`` and ``shell``, the retry policy) where they apply. Each step says
whether an in-process job (the Python API's ``@app.cron``) takes it: the
process options (``command``, ``env``, ``cwd``...) are the file's alone.
:func:`read_job` runs the steps over a :class:`~quorum_cron.config.table.Table`
(collecting for a file, raising at the first problem for the API), so both
ways of declaring a job read, default and check an option in one place;
adding an option is one entry here (and ``@app.cron``'s keyword, which
``tests/test_job_options.py`` holds to this table).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast, get_args

from quorum_cron.config.retry import retry_problems
from quorum_cron.config.schedule import DST_POLICIES, DstPolicy, Schedule, check_timezone
from quorum_cron.config.settings import (
    _DAY,
    _ENV_KEY_RE,
    _HOUR,
    _MAX_ARGV,
    _MAX_ENV,
    _SECOND,
    AUTO,
    JobSpec,
    Misfire,
    StoreUnavailablePolicy,
)
from quorum_cron.config.table import Table
from quorum_cron.config.values import (
    DEFAULT_ALERT_ON,
    _command_string_problem,
    _type_name,
    alert_on_problem,
)
from quorum_cron.core.model import Delivery, Overlap
from quorum_cron.errors import ScheduleError

__all__ = [
    "IN_PROCESS_OPTIONS",
    "JOB_OPTIONS",
    "JOB_READING",
    "JobCheck",
    "JobOption",
    "in_process_job",
    "read_job",
]


@dataclass(frozen=True)
class JobOption:
    """One option: its key (the ``[[jobs]]`` key and the ``@app.cron`` keyword) and how it is read.

    ``read(table, key)`` returns the value (its default when absent or bad) and records
    each problem on the table. ``field`` is the :class:`~quorum_cron.config.settings.JobSpec`
    field the value sets (``None``: it only feeds a rule, as the schedule's zone does).
    """

    key: str
    read: Callable[[Table, str], object]
    field: str | None
    in_process: bool = True


@dataclass(frozen=True)
class JobCheck:
    """A rule across options, run on the values read so far.

    It may replace one: the schedule's rule turns the expression into a parsed schedule.
    """

    run: Callable[[Table, dict[str, Any], str | None], None]
    in_process: bool = True


def _check_schedule(t: Table, got: dict[str, Any], name: str | None) -> None:
    tz, expr = got["timezone"], got["schedule"]
    got["schedule"] = None
    try:
        check_timezone(tz, job=name or "")
    except ScheduleError as exc:
        t.error("timezone", str(exc).replace(f" for job {name or ''!r}", "", 1), ScheduleError)
        return
    if expr is not None and name is not None:
        try:
            got["schedule"] = Schedule.parse(expr, tz, job=name, dst=cast(DstPolicy, got["dst"]))
        except ScheduleError as exc:
            t.error("schedule", str(exc).replace(f" for job {name!r}", "", 1), ScheduleError)


def _read_command(t: Table, key: str) -> tuple[str, ...] | None:
    if isinstance(value := t.data.get(key), str):
        t.error(key, _command_string_problem(value))
        return None
    return t.str_list(key, "argv, e.g. ['/usr/local/bin/backup', '--full']", max_items=_MAX_ARGV)


def _read_shell(t: Table, key: str) -> str | None:
    shell = t.get(key, str, "a shell command string", None)
    if shell is not None and not shell.strip():
        t.error(key, "expected a non-empty command string")
    return shell


def _check_one_command(t: Table, got: dict[str, Any], name: str | None) -> None:
    if "command" in t.data and "shell" in t.data:
        t.error("command", "both 'command' and 'shell' given (expected exactly one)")
    elif "command" not in t.data and "shell" not in t.data:
        t.error("command", "missing (expected 'command' = argv list, or 'shell' = string)")


def _check_retry(t: Table, got: dict[str, Any], name: str | None) -> None:
    for key, problem in retry_problems(got["retry_backoff"], got["retry_backoff_max"], got["retry_jitter"]):
        t.error(key, problem)


def _read_env(t: Table, key: str) -> dict[str, str]:
    raw = t.data.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        t.error(key, f"{raw!r} is {_type_name(raw)} (expected a table of strings)")
        return {}
    if len(raw) > _MAX_ENV:
        t.error(key, f"has {len(raw)} entries (expected at most {_MAX_ENV})")
        return {}
    env: dict[str, str] = {}
    for var, value in raw.items():
        if not _ENV_KEY_RE.fullmatch(var):
            t.error(key, f"{var!r} is not a valid environment variable name")
        elif not isinstance(value, str):
            t.error(key, f"value of {var!r} is {_type_name(value)} (expected a string)")
        elif "\x00" in value:
            t.error(key, f"value of {var!r} contains a NUL character (an environment cannot hold one)")
        else:
            env[var] = value
    return env


def _or_utc(zone: str | None) -> str:
    """The zone given, or UTC when none is (an empty one is not none: it is refused as a zone)."""
    return "UTC" if zone is None else zone


def _read_alert_on(t: Table, key: str) -> tuple[str, ...]:
    value = t.data.get(key, list(DEFAULT_ALERT_ON))
    if (problem := alert_on_problem(value)) is not None:
        t.error(key, problem)
        return DEFAULT_ALERT_ON
    return tuple(cast("list[str]", value))


# The choices, built once (an agent declares up to 100k jobs through these reads).
_OVERLAPS: tuple[str, ...] = tuple(o.value for o in Overlap)
_DELIVERIES: tuple[str, ...] = tuple(d.value for d in Delivery)
_MISFIRES: tuple[str, ...] = get_args(Misfire)
_STORE_UNAVAILABLE: tuple[str, ...] = get_args(StoreUnavailablePolicy)

JOB_READING: tuple[JobOption | JobCheck, ...] = (
    JobOption(
        "schedule",
        lambda t, k: t.get(k, str, "a cron expression such as '30 2 * * *', or '@every 90s'"),
        "schedule",
    ),
    JobOption(
        "timezone",
        lambda t, k: _or_utc(t.get(k, str, "an IANA timezone such as 'Europe/Berlin'", "UTC")),
        None,
    ),
    JobOption("dst", lambda t, k: t.choice(k, DST_POLICIES, "once"), None),
    JobCheck(_check_schedule),
    JobOption("command", _read_command, "command", in_process=False),
    JobOption("shell", _read_shell, "shell", in_process=False),
    JobCheck(_check_one_command, in_process=False),
    JobOption("timeout", lambda t, k: t.duration(k, _HOUR, 1 * _SECOND, 30 * _DAY), "timeout_ms"),
    JobOption("starting_deadline", lambda t, k: t.duration(k, AUTO, 1, _DAY), "starting_deadline_ms"),
    JobOption(
        "overlap",
        lambda t, k: t.choice(k, _OVERLAPS, Overlap.FORBID.value),
        "overlap",
    ),
    JobOption(
        "delivery",
        lambda t, k: t.choice(k, _DELIVERIES, Delivery.AT_MOST_ONCE.value),
        "delivery",
    ),
    JobOption("misfire", lambda t, k: t.choice(k, _MISFIRES, "skip"), "misfire"),
    JobOption("retries", lambda t, k: t.integer(k, 0, 100, default=0), "retries"),
    JobOption("retry_backoff", lambda t, k: t.duration(k, 10 * _SECOND, 0, _DAY), "retry_backoff_ms"),
    JobOption("retry_backoff_max", lambda t, k: t.duration(k, AUTO, 0, _DAY), "retry_backoff_max_ms"),
    JobOption("retry_jitter", lambda t, k: t.data.get(k, 0.0), "retry_jitter"),
    JobCheck(_check_retry),
    JobOption(
        "on_store_unavailable",
        lambda t, k: t.choice(k, _STORE_UNAVAILABLE, "skip"),
        "on_store_unavailable",
    ),
    JobOption("env", _read_env, "env", in_process=False),
    JobOption(
        "stdin",
        lambda t, k: t.get(k, str, "a string (the command's standard input)", None),
        "stdin",
        False,
    ),
    JobOption(  # absent or bad: None, i.e. the default True
        "inherit_env", lambda t, k: t.get(k, bool, "true or false", True) is not False, "inherit_env", False
    ),
    JobOption("cwd", lambda t, k: t.get(k, str, "an absolute directory path", None), "cwd", False),
    JobOption(
        "env_passthrough",
        lambda t, k: (
            t.str_list(k, "names of the agent's variables the job gets", max_items=_MAX_ENV, empty_ok=True)
            if k in t.data
            else ()
        ),
        "env_passthrough",
        in_process=False,
    ),
    JobOption("alert_on", _read_alert_on, "alert_on"),
)
"""Every ``[[jobs]]`` option (besides ``name``) and cross-option rule, in reading order."""

JOB_OPTIONS: tuple[str, ...] = tuple(s.key for s in JOB_READING if isinstance(s, JobOption))
"""The keys of a ``[[jobs]]`` table besides ``name``."""

IN_PROCESS_OPTIONS: tuple[str, ...] = tuple(
    s.key for s in JOB_READING if isinstance(s, JobOption) and s.in_process
)
"""The options an in-process job takes: ``@app.cron``'s keywords besides ``name``."""


_IN_PROCESS_READING: tuple[JobOption | JobCheck, ...] = tuple(s for s in JOB_READING if s.in_process)
_FIELDS: tuple[tuple[str, str], ...] = tuple(
    (s.key, s.field) for s in JOB_READING if isinstance(s, JobOption) and s.field is not None
)
"""(option, JobSpec field) in reading order."""


def read_job(t: Table, name: str | None, *, in_process: bool) -> dict[str, Any]:
    """The :class:`~quorum_cron.config.settings.JobSpec` fields (besides ``name``) read from ``t``.

    Absent options get their defaults; each problem is recorded on ``t`` (or
    raised, when ``t`` is strict). ``schedule`` is ``None`` when it could not
    be parsed. ``in_process``: only the steps an in-process job takes.
    """
    got: dict[str, Any] = {}
    for step in _IN_PROCESS_READING if in_process else JOB_READING:
        if isinstance(step, JobCheck):
            step.run(t, got, name)
        else:
            got[step.key] = step.read(t, step.key)
    return {f: got[key] for key, f in _FIELDS if key in got}


def in_process_job(name: str, options: Mapping[str, object]) -> JobSpec:
    """The in-process job ``name`` (the Python API's ``@app.cron``) from ``options``, by ``[[jobs]]`` key.

    ``options`` holds ``schedule`` and any of :data:`IN_PROCESS_OPTIONS`;
    the absent ones get the file's defaults. Strict: the first bad value
    raises one line, ``job '<name>': field '<key>': <problem>`` (what a file
    says after its own name), a :class:`~quorum_cron.errors.ScheduleError`
    for the schedule or its zone, else a :class:`~quorum_cron.errors.ConfigError`.
    """
    t = Table(options, f"job {name!r}", IN_PROCESS_OPTIONS, None)
    # The name's own rule is the constructor's (the same line), after the options', as before.
    return JobSpec(name=name, in_process=True, **read_job(t, name, in_process=True))
