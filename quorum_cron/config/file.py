"""Reading a node's TOML configuration file into :mod:`quorum_cron.config.settings`'s values.

Each table is read by :class:`_Table`, which records every problem as one
line (file, job, field, value, what was expected) instead of stopping at the
first; :func:`parse_config` raises :class:`~quorum_cron.config.settings.InvalidConfig`
with all of them. The values and their own validation live in
:mod:`quorum_cron.config.settings`, which re-exports :func:`parse_config` and
:func:`load_config`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Final, TypeVar, cast, get_args

from quorum_cron.clock.policy import default_unreachable_policy
from quorum_cron.config.durations import format_duration, parse_duration
from quorum_cron.config.members import members_problem, size_vs_members
from quorum_cron.config.schedule import DST_POLICIES, DstPolicy, Schedule, check_timezone
from quorum_cron.config.settings import (
    _CLUSTER_DURATION_BOUNDS,
    _DAY,
    _ENV_KEY_RE,
    _HOUR,
    _MAX_ARGV,
    _MAX_ENV,
    _MAX_WAIT_REPLICAS,
    _SECOND,
    AUTO,
    ClusterConfig,
    Config,
    InvalidConfig,
    JobSpec,
    Misfire,
    NtpUnreachable,
    StoreUnavailablePolicy,
    _deadline_vs_skew,
    _redis_url_problem,
)
from quorum_cron.config.values import (
    _CLUSTER_OUTPUT_BOUNDS,
    _MAX_SIZE,
    DEFAULT_ALERT_ON,
    _alert_url_problem,
    _command_string_problem,
    _name_problem,
    _range_problem,
    _suggest,
    _type_name,
    alert_on_problem,
)
from quorum_cron.core.model import Delivery, Overlap
from quorum_cron.errors import ConfigError, ScheduleError

__all__ = ["load_config", "parse_config"]


# --------------------------------------------------------------------------- TOML reading

_T = TypeVar("_T")
_MISSING: Final = object()

_TOP_KEYS = ("cluster", "jobs")
_CLUSTER_KEYS = (
    "name",
    "namespace",
    "size",
    "members",
    "quorum",
    "redis_url",
    "max_skew",
    "lease",
    "start_timeout",
    "heartbeat",
    "retention",
    "ledger_maxlen",
    "wait_replicas",
    "wait_timeout",
    "clock_check_interval",
    "ntp_servers",
    "ntp_unreachable",
    "alert_command",
    "alert_url",
    "output_tail",
    "output_log_lines",
    "output_log_rate",
)
_JOB_KEYS = (
    "name",
    "schedule",
    "timezone",
    "dst",
    "command",
    "shell",
    "timeout",
    "starting_deadline",
    "overlap",
    "delivery",
    "misfire",
    "retries",
    "retry_backoff",
    "retry_backoff_max",
    "retry_jitter",
    "on_store_unavailable",
    "env",
    "stdin",
    "inherit_env",
    "cwd",
    "env_passthrough",
    "alert_on",
)


class _Table:
    """Reads one TOML table, recording each problem as one line in ``errors``."""

    def __init__(self, data: Mapping[str, object], where: str, known: tuple[str, ...], errors: list[str]):
        self.data, self.where, self.errors = data, where, errors
        self.ok = True
        for key in data:
            if key not in known:
                self.error(key, f"unknown key ({_suggest(key, known)})")

    def error(self, key: str, problem: str) -> None:
        self.ok = False
        self.errors.append(f"{self.where}: field {key!r}: {problem}")

    def get(self, key: str, kind: type[_T], expected: str, default: object = _MISSING) -> _T | None:
        if key not in self.data:
            if default is _MISSING:
                self.error(key, f"missing (expected {expected})")
            return None
        value = self.data[key]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            self.error(key, f"{value!r} is {_type_name(value)} (expected {expected})")
            return None
        return value

    def integer(self, key: str, lo: int, hi: int, default: int | None = None) -> int | None:
        value = self.get(key, int, f"an integer {lo}-{hi}", _MISSING if default is None else default)
        if value is None:
            return default
        problem = _range_problem(value, lo, hi)
        if problem:
            self.error(key, problem)
            return default
        return value

    def duration(self, key: str, default: int, lo: int, hi: int) -> int:
        if key not in self.data:
            return default
        try:
            ms = parse_duration(cast("str | int", self.data[key]), what=f"{self.where}: field {key!r}")
        except ConfigError as exc:
            self.ok = False
            self.errors.append(str(exc))
            return default
        problem = _range_problem(ms, lo, hi, format_duration)
        if problem:
            self.error(key, problem)
            return default
        return ms

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(key, str, "one of " + ", ".join(repr(c) for c in choices), default)
        if value is None:
            return default
        if value not in choices:
            self.error(key, f"{value!r} is not one of " + ", ".join(repr(c) for c in choices))
            return default
        return value

    def str_list(self, key: str, what: str, *, max_items: int) -> tuple[str, ...] | None:
        value = self.get(key, list, f"an array of strings ({what})", None)
        if value is None:
            return None
        if not value or len(value) > max_items:
            self.error(key, f"expected 1-{max_items} strings ({what})")
            return None
        for item in value:
            if not isinstance(item, str) or not item or "\x00" in item:
                self.error(key, f"element {item!r} is not a non-empty string ({what})")
                return None
        return tuple(value)


def parse_config(data: Mapping[str, object], source: str) -> Config:
    """Validate parsed TOML ``data``; raise :class:`InvalidConfig` listing every problem found.

    Every problem comes out in one run (``validate`` must not reveal them one fix at a time),
    duplicate job names included. The one exception: a job's ``starting_deadline`` is checked
    against ``max_skew`` only when the ``[cluster]`` table itself parsed, as there is no skew
    to compare with otherwise.
    """
    errors: list[str] = []
    top = _Table(data, source, _TOP_KEYS, errors)
    cluster = _parse_cluster(data.get("cluster"), source, errors) if "cluster" in data else None
    if "cluster" not in data:
        top.error("cluster", "missing (expected a [cluster] table)")
    jobs: list[JobSpec] = []
    raw_jobs = data.get("jobs", [])
    if not isinstance(raw_jobs, list):
        top.error("jobs", f"is {_type_name(raw_jobs)} (expected [[jobs]] tables)")
        raw_jobs = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_jobs):
        # Names are compared on the raw tables, so a duplicate is reported in the same run as
        # the jobs' other problems (not only once both copies parse).
        name = raw.get("name") if isinstance(raw, dict) else None
        duplicate = False
        if isinstance(name, str) and name:
            duplicate = name in seen
            if duplicate:
                errors.append(
                    f"{source}: job {name!r}: field 'name': duplicate job name "
                    f"(jobs #{seen[name] + 1} and #{index + 1})"
                )
            else:
                seen[name] = index
        job = _parse_job(raw, index, source, errors)
        if job is None or duplicate:
            continue
        if cluster is not None and job.starting_deadline_ms <= cluster.max_skew_ms:
            errors.append(_deadline_vs_skew(source, job, cluster))
            continue
        jobs.append(job)
    if errors:
        raise InvalidConfig(errors)
    assert cluster is not None
    return Config(cluster=cluster, jobs=tuple(jobs), source=source)


def _parse_cluster(raw: object, source: str, errors: list[str]) -> ClusterConfig | None:
    where = f"{source}: cluster"
    if not isinstance(raw, dict):
        errors.append(f"{where}: is {_type_name(raw)} (expected a [cluster] table)")
        return None
    t = _Table(raw, where, _CLUSTER_KEYS, errors)
    if "name" in raw and "namespace" in raw:
        t.error("namespace", "given together with 'name' (they are the same setting; keep one)")
    name_key = "namespace" if "namespace" in raw else "name"
    namespace = t.get(name_key, str, "a namespace such as 'billing-prod'")
    if namespace is not None:
        problem = _name_problem(namespace, "namespace")
        if problem:
            t.error(name_key, problem)
    members: tuple[str, ...] = ()
    if "members" in raw:
        members_problem_line = members_problem(raw["members"])
        if members_problem_line is not None:
            t.error("members", members_problem_line)
        else:
            members = tuple(sorted(cast("list[str]", raw["members"])))
    size: int | None = None
    if "size" not in raw and "members" not in raw:
        t.error("size", f"missing (expected size = N (1-{_MAX_SIZE}), or members = ['a', 'b', 'c'])")
    elif "size" in raw:
        size = t.integer("size", 1, _MAX_SIZE)
        if size is not None and members and size != len(members):
            t.error("size", size_vs_members(size, len(members)))
    else:
        size = len(members) or None
    quorum = t.integer("quorum", 1, _MAX_SIZE, default=AUTO) if "quorum" in raw else AUTO
    if size is not None and quorum is not None and quorum != AUTO and not size // 2 + 1 <= quorum <= size:
        t.error(
            "quorum",
            f"{quorum!r} is not a majority of size {size} (expected {size // 2 + 1} to {size})",
        )
    redis_url = t.get(
        "redis_url", str, "a redis://, rediss://, unix://, redis+sentinel:// or redis+cluster:// URL", None
    )
    if redis_url is not None and (problem := _redis_url_problem(redis_url)):
        t.error("redis_url", problem)
    alert_url = t.get("alert_url", str, "an http(s) URL", None)
    if alert_url is not None and (problem := _alert_url_problem(alert_url)):
        t.error("alert_url", problem)
    defaults = ClusterConfig.__dataclass_fields__
    durations = {
        key: t.duration(key.removesuffix("_ms"), cast(int, defaults[key].default), lo, hi)
        for key, lo, hi in _CLUSTER_DURATION_BOUNDS
    }
    if "heartbeat" in raw or "lease" in raw:
        hb, lease = durations["heartbeat_ms"], durations["lease_ms"]
        if t.ok and hb * 2 > lease:
            t.error(
                "heartbeat",
                f"'{format_duration(hb)}' is more than half of lease '{format_duration(lease)}' "
                f"(a lease must survive one lost heartbeat)",
            )
    ledger_maxlen = t.integer("ledger_maxlen", 100, 10_000_000, default=10_000)
    wait_replicas = t.integer("wait_replicas", 0, _MAX_WAIT_REPLICAS, default=0)
    ntp_servers = t.str_list("ntp_servers", "NTP server host names", max_items=16) or ()
    ntp_unreachable = t.choice(
        "ntp_unreachable", get_args(NtpUnreachable), default_unreachable_policy(ntp_servers).value
    )
    alert_command = t.str_list("alert_command", "an argv list", max_items=_MAX_ARGV)
    output = {
        key: cast(int, t.integer(key, lo, hi, default=cast(int, defaults[key].default)))
        for key, lo, hi in _CLUSTER_OUTPUT_BOUNDS
    }
    if not t.ok or namespace is None or size is None:
        return None
    try:
        return ClusterConfig(
            namespace=namespace,
            size=size,
            members=members,
            quorum=cast(int, quorum),
            redis_url=redis_url,
            ledger_maxlen=cast(int, ledger_maxlen),
            wait_replicas=cast(int, wait_replicas),
            ntp_servers=ntp_servers,
            ntp_unreachable=cast(NtpUnreachable, ntp_unreachable),
            alert_command=alert_command,
            alert_url=alert_url,
            **output,
            **durations,
        )
    except ConfigError as exc:  # a rule only the constructor checks
        errors.append(f"{source}: {exc}")
        return None


def _parse_job(raw: object, index: int, source: str, errors: list[str]) -> JobSpec | None:
    if not isinstance(raw, dict):
        errors.append(f"{source}: jobs #{index + 1}: is {_type_name(raw)} (expected a [[jobs]] table)")
        return None
    name_value = raw.get("name")
    if isinstance(name_value, str) and name_value:
        where = f"{source}: job {name_value!r}"
    else:
        where = f"{source}: jobs #{index + 1}"
    t = _Table(raw, where, _JOB_KEYS, errors)
    name = t.get("name", str, "a job name such as 'nightly-backup'")
    if name is not None and (problem := _name_problem(name, "job name")):
        t.error("name", problem)
        name = None
    expr = t.get("schedule", str, "a cron expression such as '30 2 * * *', or '@every 90s'")
    tz = t.get("timezone", str, "an IANA timezone such as 'Europe/Berlin'", "UTC") or "UTC"
    dst = t.choice("dst", DST_POLICIES, "once")
    schedule: Schedule | None = None
    try:
        check_timezone(tz, job=name or "")
    except ScheduleError as exc:
        t.error("timezone", str(exc).replace(f" for job {name or ''!r}", "", 1))
    else:
        if expr is not None and name is not None:
            try:
                schedule = Schedule.parse(expr, tz, job=name, dst=cast(DstPolicy, dst))
            except ScheduleError as exc:
                t.error("schedule", str(exc).replace(f" for job {name!r}", "", 1))
    if isinstance(raw.get("command"), str):
        t.error("command", _command_string_problem(raw["command"]))
        command = None
    else:
        command = t.str_list("command", "argv, e.g. ['/usr/local/bin/backup', '--full']", max_items=_MAX_ARGV)
    shell = t.get("shell", str, "a shell command string", None)
    if shell is not None and not shell.strip():
        t.error("shell", "expected a non-empty command string")
    if "command" in raw and "shell" in raw:
        t.error("command", "both 'command' and 'shell' given (expected exactly one)")
    elif "command" not in raw and "shell" not in raw:
        t.error("command", "missing (expected 'command' = argv list, or 'shell' = string)")
    timeout = t.duration("timeout", _HOUR, 1 * _SECOND, 30 * _DAY)
    deadline = t.duration("starting_deadline", AUTO, 1, _DAY) if "starting_deadline" in raw else AUTO
    overlap = t.choice("overlap", tuple(o.value for o in Overlap), Overlap.FORBID.value)
    delivery = t.choice("delivery", tuple(d.value for d in Delivery), Delivery.AT_MOST_ONCE.value)
    misfire = t.choice("misfire", get_args(Misfire), "skip")
    retries = t.integer("retries", 0, 100, default=0)
    backoff = t.duration("retry_backoff", 10 * _SECOND, 0, _DAY)
    backoff_max = t.duration("retry_backoff_max", AUTO, 0, _DAY) if "retry_backoff_max" in raw else AUTO
    jitter = raw.get("retry_jitter", 0.0)
    for key, problem in JobSpec.retry_problems(backoff, backoff_max, jitter):
        t.error(key, problem)
    on_store = t.choice("on_store_unavailable", get_args(StoreUnavailablePolicy), "skip")
    env = _parse_env(t, raw.get("env"))
    stdin = t.get("stdin", str, "a string (the command's standard input)", None)
    inherit_env = t.get("inherit_env", bool, "true or false", True)
    cwd = t.get("cwd", str, "an absolute directory path", None)
    passthrough = (
        t.str_list("env_passthrough", "names of the agent's variables the job gets", max_items=_MAX_ENV)
        if "env_passthrough" in raw
        else ()
    )
    alert_on = raw.get("alert_on", list(DEFAULT_ALERT_ON))
    if (problem := alert_on_problem(alert_on)) is not None:
        t.error("alert_on", problem)
    if not t.ok or name is None or schedule is None:
        return None
    try:
        return JobSpec(
            name=name,
            schedule=schedule,
            command=command,
            shell=shell,
            timeout_ms=timeout,
            starting_deadline_ms=deadline,
            overlap=Overlap(overlap),
            delivery=Delivery(delivery),
            misfire=cast(Misfire, misfire),
            retries=cast(int, retries),
            retry_backoff_ms=backoff,
            on_store_unavailable=cast(StoreUnavailablePolicy, on_store),
            env=env,
            stdin=stdin,
            inherit_env=True if inherit_env is None else inherit_env,
            cwd=cwd,
            env_passthrough=passthrough or (),
            alert_on=tuple(alert_on),
            retry_backoff_max_ms=backoff_max,
            retry_jitter=cast(float, jitter),
        )
    except ConfigError as exc:  # a rule only the constructor checks
        errors.append(f"{source}: {exc}")
        return None


def _parse_env(t: _Table, raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        t.error("env", f"{raw!r} is {_type_name(raw)} (expected a table of strings)")
        return {}
    if len(raw) > _MAX_ENV:
        t.error("env", f"has {len(raw)} entries (expected at most {_MAX_ENV})")
        return {}
    env: dict[str, str] = {}
    for key, value in raw.items():
        if not _ENV_KEY_RE.fullmatch(key):
            t.error("env", f"{key!r} is not a valid environment variable name")
        elif not isinstance(value, str) or "\x00" in value:
            t.error("env", f"value of {key!r} is {_type_name(value)} (expected a string)")
        else:
            env[key] = value
    return env


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a TOML configuration file.

    Raises:
        ConfigError: the file is missing or unreadable, or is not valid TOML
            (the message carries the line), or :class:`InvalidConfig` with
            every validation problem.
    """
    source = os.fspath(path)
    try:
        with open(source, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a directory (expected a TOML file)") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    return parse_config(data, source)
