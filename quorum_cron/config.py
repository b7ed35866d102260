"""Configuration: the cluster's parameters and the job definitions, validated where they enter.

This module owns the TOML file format (``docs/configuration.md``), the
frozen values the rest of quorum-cron consumes (:class:`ClusterConfig`,
:class:`JobSpec`, :class:`Config`) and ``JobSpec.spec_hash``, the fingerprint
that votes carry so that nodes with different definitions of a job can never
form a quorum together.

Job definitions live only here (each node's local file or code), never in
Redis.  Every refusal is a one-line :class:`ConfigError` naming the file, the
job, the field, the value and what was expected; :func:`parse_config`
collects every problem it finds and raises :class:`InvalidConfig` carrying
all of them in ``.errors``.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
import tomllib
import types
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar, cast, get_args

from quorum_cron.durations import format_duration, parse_duration
from quorum_cron.errors import ConfigError, ScheduleError
from quorum_cron.model import Delivery, Overlap
from quorum_cron.redact import redact_url as _redact
from quorum_cron.schedule import DST_POLICIES, DstPolicy, Schedule, check_timezone
from quorum_cron.skew import default_unreachable_policy

__all__ = [
    "AUTO",
    "ClusterConfig",
    "Config",
    "InvalidConfig",
    "JobSpec",
    "Misfire",
    "NtpUnreachable",
    "StoreUnavailablePolicy",
    "load_config",
    "parse_config",
    "redact_url",
]

Misfire = Literal["skip", "run-once"]
NtpUnreachable = Literal["abstain", "store-time"]
StoreUnavailablePolicy = Literal["skip", "run-local"]

AUTO: Final = -1
"""Sentinel for ``quorum`` and ``starting_deadline_ms``: compute the documented default."""

_SECOND: Final = 1_000
_MINUTE: Final = 60 * _SECOND
_HOUR: Final = 60 * _MINUTE
_DAY: Final = 24 * _HOUR

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_MAX_NAME = 100
_MAX_SIZE = 100
_MAX_ARGV = 1000
_MAX_ENV = 200
_MAX_STDIN = 100_000


class InvalidConfig(ConfigError):
    """A configuration had one or more problems; ``errors`` holds each as one line.

    ``str()`` is the first problem (plus a count of the others), so callers
    that print one line still print something complete.
    """

    def __init__(self, errors: list[str] | tuple[str, ...]) -> None:
        self.errors: tuple[str, ...] = tuple(errors)
        first = self.errors[0] if self.errors else "invalid configuration"
        more = len(self.errors) - 1
        super().__init__(first if more <= 0 else f"{first} (and {more} more)")


# --------------------------------------------------------------------------- helpers


def redact_url(url: str | None) -> str | None:
    """``url`` with any password replaced by ``***`` (``None`` stays ``None``)."""
    return None if url is None else _redact(url)


def _redact_alert_url(url: str | None) -> str | None:
    # Webhook URLs often carry their secret in the path (Slack, Teams).
    if url is None:
        return None
    parts = urllib.parse.urlsplit(url)
    tail = "/***" if parts.path.strip("/") or parts.query else ""
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{tail}"


def _type_name(value: object) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _suggest(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return "expected one of " + ", ".join(repr(k) for k in known)


def _name_problem(name: object, what: str) -> str | None:
    if not isinstance(name, str):
        return f"{name!r} is {_type_name(name)} (expected a string)"
    if not name or len(name) > _MAX_NAME or not _NAME_RE.fullmatch(name):
        return f"{name!r} is not a valid {what} (expected 1-{_MAX_NAME} characters from A-Z a-z 0-9 _ . -)"
    return None


def _range_problem(value: int, lo: int, hi: int, fmt: Callable[[int], str] = str) -> str | None:
    if lo <= value <= hi:
        return None
    return f"{fmt(value)!r} is out of range (expected {fmt(lo)} to {fmt(hi)})"


def _redis_url_problem(url: str) -> str | None:
    shown = redact_url(url)
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port
    except ValueError as exc:
        return f"{shown!r} is not a valid URL ({exc})"
    if parts.scheme not in ("redis", "rediss", "unix"):
        return f"{shown!r} has scheme {parts.scheme!r} (expected redis://, rediss:// or unix://)"
    if parts.scheme == "unix" and not parts.path:
        return f"{shown!r} has no socket path (expected e.g. 'unix:///run/redis.sock')"
    if parts.scheme != "unix" and not parts.hostname:
        return f"{shown!r} has no host (expected e.g. 'redis://redis.internal:6379/0')"
    return None


def _alert_url_problem(url: str) -> str | None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            f"{_redact_alert_url(url)!r} is not an http(s) URL (expected e.g. 'https://alerts.example/hook')"
        )
    return None


def _fail(where: str, key: str, problem: str | None) -> None:
    if problem is not None:
        raise ConfigError(f"{where}: field {key!r}: {problem}")


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class ClusterConfig:
    """The cluster every node of one namespace shares.

    ``size`` is the configured N (never derived from live members);
    ``quorum`` defaults to ``size // 2 + 1``.  ``redis_url`` may hold a
    password: it is kept out of ``repr``; show :attr:`redacted_redis_url`.
    """

    namespace: str
    size: int
    quorum: int = AUTO
    redis_url: str | None = field(default=None, repr=False)
    max_skew_ms: int = 250
    lease_ms: int = 15 * _SECOND
    start_timeout_ms: int = 5 * _SECOND
    heartbeat_ms: int = 2 * _SECOND
    retention_ms: int = 7 * _DAY
    ledger_maxlen: int = 10_000
    wait_replicas: int = 0
    """Replicas that must hold a write before a node acts on it (Redis ``WAIT``; 0 = off)."""
    wait_timeout_ms: int = 100
    clock_check_interval_ms: int = 60 * _SECOND
    ntp_servers: tuple[str, ...] = ()
    ntp_unreachable: NtpUnreachable = "store-time"
    """A config file's default is :func:`~quorum_cron.skew.default_unreachable_policy` of its servers."""
    alert_command: tuple[str, ...] | None = None
    alert_url: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        where = "cluster"
        _fail(where, "namespace", _name_problem(self.namespace, "namespace"))
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            _fail(where, "size", f"{self.size!r} is {_type_name(self.size)} (expected an integer)")
        _fail(where, "size", _range_problem(self.size, 1, _MAX_SIZE))
        if self.quorum == AUTO:
            object.__setattr__(self, "quorum", self.size // 2 + 1)
        if not self.size // 2 + 1 <= self.quorum <= self.size:
            _fail(
                where,
                "quorum",
                f"{self.quorum!r} is not a majority of size {self.size} "
                f"(expected {self.size // 2 + 1} to {self.size})",
            )
        if self.redis_url is not None:
            _fail(where, "redis_url", _redis_url_problem(self.redis_url))
        if self.alert_url is not None:
            _fail(where, "alert_url", _alert_url_problem(self.alert_url))
        for key, lo, hi in _CLUSTER_DURATION_BOUNDS:
            _fail(where, key.removesuffix("_ms"), _range_problem(getattr(self, key), lo, hi, format_duration))
        if self.heartbeat_ms * 2 > self.lease_ms:
            _fail(
                where,
                "heartbeat",
                f"'{format_duration(self.heartbeat_ms)}' is more than half of lease "
                f"'{format_duration(self.lease_ms)}' (a lease must survive one lost heartbeat)",
            )
        _fail(where, "ledger_maxlen", _range_problem(self.ledger_maxlen, 100, 10_000_000))
        _fail(where, "wait_replicas", _range_problem(self.wait_replicas, 0, _MAX_WAIT_REPLICAS))
        if self.ntp_unreachable not in get_args(NtpUnreachable):
            _fail(where, "ntp_unreachable", f"{self.ntp_unreachable!r} is not 'abstain' or 'store-time'")
        if self.ntp_unreachable == "abstain" and not self.ntp_servers:
            _fail(
                where,
                "ntp_unreachable",
                "'abstain' with no ntp_servers would never vote "
                "(expected ntp_servers, or ntp_unreachable = 'store-time')",
            )
        if self.alert_command is not None and (not self.alert_command or not self.alert_command[0]):
            _fail(where, "alert_command", "expected a non-empty argv list")

    @property
    def redacted_redis_url(self) -> str | None:
        """``redis_url`` with its password replaced by ``***``; safe to print."""
        return redact_url(self.redis_url)

    def __repr__(self) -> str:
        shown: dict[str, object] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "redis_url":
                value = self.redacted_redis_url
            elif name == "alert_url":
                value = _redact_alert_url(value)
            shown[name] = value
        return "ClusterConfig(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


_CLUSTER_DURATION_BOUNDS: tuple[tuple[str, int, int], ...] = (
    ("max_skew_ms", 1, 60 * _SECOND),
    ("lease_ms", 1 * _SECOND, _DAY),
    ("start_timeout_ms", 100, _HOUR),
    ("heartbeat_ms", 100, _HOUR),
    ("retention_ms", _HOUR, 366 * _DAY),
    ("clock_check_interval_ms", 1 * _SECOND, _DAY),
    ("wait_timeout_ms", 1, 10 * _SECOND),
)
_MAX_WAIT_REPLICAS = 16


def default_starting_deadline_ms(schedule: Schedule) -> int:
    """``min(60 s, half the schedule's shortest interval)``: a slot is decided before the next is due."""
    return max(1, min(_MINUTE, schedule.min_interval_ms // 2))


@dataclass(frozen=True)
class JobSpec:
    """One job: what runs, when, and under which policies.

    Build from code with :meth:`create` (takes the schedule as a string).
    Exactly one of ``command`` (argv) and ``shell`` (a string for ``sh -c``)
    is set, unless ``in_process=True``: then the job's body is a Python
    callable registered in code and both are ``None``.
    ``starting_deadline_ms=AUTO`` means :func:`default_starting_deadline_ms`.
    """

    name: str
    schedule: Schedule
    command: tuple[str, ...] | None = None
    shell: str | None = None
    timeout_ms: int = _HOUR
    starting_deadline_ms: int = AUTO
    overlap: Overlap = Overlap.FORBID
    delivery: Delivery = Delivery.AT_MOST_ONCE
    misfire: Misfire = "skip"
    retries: int = 0
    retry_backoff_ms: int = 10 * _SECOND
    on_store_unavailable: StoreUnavailablePolicy = "skip"
    env: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    in_process: bool = False
    stdin: str | None = field(default=None, repr=False)
    """Text written (UTF-8) to the command's standard input, which is then closed (cron's ``%``)."""
    inherit_env: bool = True
    """``False``: the command gets only ``env`` and the slot's ``QUORUM_CRON_*`` facts, like cron."""
    cwd: str | None = None
    """Absolute working directory of the command (cron starts jobs in ``$HOME``); default: the agent's."""

    @classmethod
    def create(
        cls,
        name: str,
        schedule: str,
        *,
        timezone: str = "UTC",
        dst: DstPolicy = "once",
        **options: Any,
    ) -> JobSpec:
        """Build a job from a schedule string; ``options`` are the other fields by name."""
        return cls(name=name, schedule=Schedule.parse(schedule, timezone, job=name, dst=dst), **options)

    def __post_init__(self) -> None:
        where = f"job {self.name!r}"
        _fail(where, "name", _name_problem(self.name, "job name"))
        if not isinstance(self.schedule, Schedule):
            _fail(where, "schedule", f"{self.schedule!r} is not a Schedule (use JobSpec.create)")
        if self.schedule.job != self.name:
            _fail(where, "schedule", f"was parsed for job {self.schedule.job!r} (H tokens hash the job name)")
        if isinstance(self.command, str):
            _fail(where, "command", _command_string_problem(self.command))
        if self.command is not None:
            object.__setattr__(self, "command", tuple(self.command))
        if self.in_process:
            if self.command is not None or self.shell is not None:
                _fail(where, "command", "an in-process job has neither 'command' nor 'shell'")
        elif (self.command is None) == (self.shell is None):
            both = "both" if self.command is not None else "neither"
            _fail(where, "command", f"{both} of 'command' and 'shell' given (expected exactly one)")
        if self.command is not None and (not self.command or not self.command[0]):
            _fail(where, "command", "expected a non-empty argv list such as ['/usr/bin/backup', '--full']")
        if self.shell is not None and not self.shell.strip():
            _fail(where, "shell", "expected a non-empty command string")
        if self.in_process and (self.stdin is not None or self.cwd is not None or not self.inherit_env):
            _fail(where, "stdin", "an in-process job has no process ('stdin', 'cwd', 'inherit_env')")
        if self.stdin is not None and len(self.stdin) > _MAX_STDIN:
            _fail(where, "stdin", f"has {len(self.stdin)} characters (expected at most {_MAX_STDIN})")
        if self.cwd is not None and not os.path.isabs(self.cwd):
            _fail(where, "cwd", f"{self.cwd!r} is not an absolute path (expected e.g. '/var/lib/app')")
        if self.starting_deadline_ms == AUTO:
            object.__setattr__(self, "starting_deadline_ms", default_starting_deadline_ms(self.schedule))
        for key, lo, hi in _JOB_DURATION_BOUNDS:
            _fail(where, key.removesuffix("_ms"), _range_problem(getattr(self, key), lo, hi, format_duration))
        _fail(where, "retries", _range_problem(self.retries, 0, 100))
        for key, enum in (("overlap", Overlap), ("delivery", Delivery)):
            try:
                object.__setattr__(self, key, enum(getattr(self, key)))
            except ValueError:
                choices = ", ".join(repr(e.value) for e in enum)
                _fail(where, key, f"{getattr(self, key)!r} is not one of {choices}")
        if self.misfire not in get_args(Misfire):
            _fail(where, "misfire", f"{self.misfire!r} is not 'skip' or 'run-once'")
        if self.on_store_unavailable not in get_args(StoreUnavailablePolicy):
            _fail(
                where, "on_store_unavailable", f"{self.on_store_unavailable!r} is not 'skip' or 'run-local'"
            )
        for key in self.env:
            if not _ENV_KEY_RE.fullmatch(key):
                _fail(where, "env", f"{key!r} is not a valid environment variable name")
        object.__setattr__(self, "env", types.MappingProxyType(dict(sorted(self.env.items()))))

    @property
    def schedule_expr(self) -> str:
        """The schedule as written."""
        return self.schedule.expr

    @property
    def timezone(self) -> str:
        """The IANA zone the schedule's wall-clock fields are read in."""
        return self.schedule.tz

    @property
    def dst(self) -> DstPolicy:
        """What the schedule does with wall times repeated by a DST fall-back."""
        return self.schedule.dst

    def canonical(self) -> dict[str, object]:
        """Every field of the definition as JSON-ready data (the input of :attr:`spec_hash`)."""
        return {
            "v": 1,
            "name": self.name,
            "schedule": self.schedule.expr,
            "schedule_resolved": self.schedule.resolved_expr,
            "timezone": self.schedule.tz,
            "dst": self.schedule.dst,
            "command": list(self.command) if self.command is not None else None,
            "shell": self.shell,
            "in_process": self.in_process,
            "timeout_ms": self.timeout_ms,
            "starting_deadline_ms": self.starting_deadline_ms,
            "overlap": str(self.overlap),
            "delivery": str(self.delivery),
            "misfire": self.misfire,
            "retries": self.retries,
            "retry_backoff_ms": self.retry_backoff_ms,
            "on_store_unavailable": self.on_store_unavailable,
            "env": dict(self.env),
            # Added after v1: present only when set, so that the hashes of
            # existing jobs (and a rolling upgrade's quorum) do not change.
            **({"stdin": self.stdin} if self.stdin is not None else {}),
            **({"inherit_env": False} if not self.inherit_env else {}),
            **({"cwd": self.cwd} if self.cwd is not None else {}),
        }

    @functools.cached_property
    def spec_hash(self) -> str:
        """First 16 hex digits of SHA-256 over :meth:`canonical` as sorted, compact JSON."""
        data = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(data.encode("ascii")).hexdigest()[:16]


_JOB_DURATION_BOUNDS: tuple[tuple[str, int, int], ...] = (
    ("timeout_ms", 1 * _SECOND, 30 * _DAY),
    ("starting_deadline_ms", 1, _DAY),
    ("retry_backoff_ms", 0, _DAY),
)


@dataclass(frozen=True)
class Config:
    """A whole configuration: the cluster, its jobs, and where it came from."""

    cluster: ClusterConfig
    jobs: tuple[JobSpec, ...] = ()
    source: str = "<config>"

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        seen: set[str] = set()
        for job in self.jobs:
            if job.name in seen:
                raise ConfigError(f"{self.source}: job {job.name!r}: field 'name': duplicate job name")
            seen.add(job.name)
            if job.starting_deadline_ms <= self.cluster.max_skew_ms:
                raise ConfigError(_deadline_vs_skew(self.source, job, self.cluster))

    def job(self, name: str) -> JobSpec:
        """The job called ``name``; :class:`ConfigError` listing the known names otherwise."""
        for job in self.jobs:
            if job.name == name:
                return job
        known = ", ".join(sorted(j.name for j in self.jobs)) or "none"
        raise ConfigError(f"{self.source}: no job named {name!r} (known jobs: {known})")


def _deadline_vs_skew(source: str, job: JobSpec, cluster: ClusterConfig) -> str:
    return (
        f"{source}: job {job.name!r}: field 'starting_deadline': "
        f"'{format_duration(job.starting_deadline_ms)}' must be longer than cluster max_skew "
        f"'{format_duration(cluster.max_skew_ms)}' (a node whose clock lags by max_skew could never vote)"
    )


# --------------------------------------------------------------------------- TOML reading

_T = TypeVar("_T")
_MISSING: Final = object()

_TOP_KEYS = ("cluster", "jobs")
_CLUSTER_KEYS = (
    "name",
    "namespace",
    "size",
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
    "on_store_unavailable",
    "env",
    "stdin",
    "inherit_env",
    "cwd",
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
    """Validate parsed TOML ``data``; raise :class:`InvalidConfig` listing every problem found."""
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
        job = _parse_job(raw, index, source, errors)
        if job is None:
            continue
        if job.name in seen:
            errors.append(
                f"{source}: job {job.name!r}: field 'name': duplicate job name "
                f"(jobs #{seen[job.name] + 1} and #{index + 1})"
            )
            continue
        seen[job.name] = index
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
    size = t.integer("size", 1, _MAX_SIZE)
    quorum = t.integer("quorum", 1, _MAX_SIZE, default=AUTO) if "quorum" in raw else AUTO
    if size is not None and quorum is not None and quorum != AUTO and not size // 2 + 1 <= quorum <= size:
        t.error(
            "quorum",
            f"{quorum!r} is not a majority of size {size} (expected {size // 2 + 1} to {size})",
        )
    redis_url = t.get("redis_url", str, "a redis://, rediss:// or unix:// URL", None)
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
    if not t.ok or namespace is None or size is None:
        return None
    try:
        return ClusterConfig(
            namespace=namespace,
            size=size,
            quorum=cast(int, quorum),
            redis_url=redis_url,
            ledger_maxlen=cast(int, ledger_maxlen),
            wait_replicas=cast(int, wait_replicas),
            ntp_servers=ntp_servers,
            ntp_unreachable=cast(NtpUnreachable, ntp_unreachable),
            alert_command=alert_command,
            alert_url=alert_url,
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
    on_store = t.choice("on_store_unavailable", get_args(StoreUnavailablePolicy), "skip")
    env = _parse_env(t, raw.get("env"))
    stdin = t.get("stdin", str, "a string (the command's standard input)", None)
    inherit_env = t.get("inherit_env", bool, "true or false", True)
    cwd = t.get("cwd", str, "an absolute directory path", None)
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
        )
    except ConfigError as exc:  # a rule only the constructor checks
        errors.append(f"{source}: {exc}")
        return None


def _command_string_problem(value: str) -> str:
    # The suggestion is TOML (a JSON string is a valid TOML basic string).
    return (
        f"{value!r} is a string (expected an array of strings (argv); "
        f"for a shell command line write shell = {json.dumps(value, ensure_ascii=False)})"
    )


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
