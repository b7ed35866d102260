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

import hashlib
import json
import os
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from quorum_cron.clock.servers import ntp_server_problem
from quorum_cron.config.bounds import CLUSTER_DURATION_BOUNDS as _CLUSTER_DURATION_BOUNDS
from quorum_cron.config.bounds import JOB_DURATION_BOUNDS as _JOB_DURATION_BOUNDS
from quorum_cron.config.bounds import MAX_RETRIES as _MAX_RETRIES
from quorum_cron.config.bounds import MAX_WAIT_REPLICAS as _MAX_WAIT_REPLICAS
from quorum_cron.config.durations import format_duration
from quorum_cron.config.members import members_problem, size_vs_members
from quorum_cron.config.retry import retry_problems
from quorum_cron.config.schedule import DstPolicy, Schedule
from quorum_cron.config.values import (
    _CLUSTER_OUTPUT_BOUNDS,
    _MAX_SIZE,
    DEFAULT_ALERT_ON,
    DEFAULT_HEARTBEAT_MS,
    DEFAULT_LEASE_MS,
    DEFAULT_OUTPUT_LOG_LINES,
    DEFAULT_OUTPUT_LOG_RATE,
    DEFAULT_OUTPUT_TAIL,
    _alert_url_problem,
    _command_string_problem,
    _name_problem,
    _range_problem,
    _redact_alert_url,
    _type_name,
    alert_on_problem,
    deadline_vs_skew_problem,
    heartbeat_vs_lease_problem,
)
from quorum_cron.core.model import Delivery, Overlap
from quorum_cron.errors import ConfigError
from quorum_cron.printable import printable
from quorum_cron.redact import redact_url as _redact
from quorum_cron.store.urls import redis_url_problem

__all__ = [
    "AUTO",
    "ClusterConfig",
    "Config",
    "InvalidConfig",
    "JobSpec",
    "Misfire",
    "NtpUnreachable",
    "StoreUnavailablePolicy",
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

_NO_ENV: Final[Mapping[str, str]] = types.MappingProxyType({})
"""The ``env`` of every job that sets none, shared: an empty mapping each is 104 bytes a job,
10 MB at 100,000 jobs (issue 27)."""
_ALERT_ON_SHARED: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Each distinct ``alert_on`` once (jobs nearly all share the default): a tuple each was 72
bytes a job. Bounded: its entries are distinct orderings of :data:`ALERT_ON_KINDS`' few names."""
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
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


def _redis_url_problem(url: str) -> str | None:
    return redis_url_problem(url)


def _fail(where: str, key: str, problem: str | None) -> None:
    if problem is not None:
        raise ConfigError(f"{where}: field {key!r}: {problem}")


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class ClusterConfig:
    """The cluster every node of one namespace shares.

    ``size`` is the configured N (never derived from live members);
    ``quorum`` defaults to ``size // 2 + 1``.  ``members`` names the node
    ids of the cluster (sorted, distinct); with members, ``size`` may be
    :data:`AUTO` and is then ``len(members)`` (given, it must agree). Without
    members, ``size = N`` keeps its meaning as "the first N distinct ids to
    register" (docs/operations.md, "Membership"). The config only proposes
    a membership: the store's record, created from the first node's config,
    is what every vote is checked against.  ``redis_url`` may hold a
    password: it is kept out of ``repr``; show :attr:`redacted_redis_url`.
    """

    namespace: str
    size: int
    quorum: int = AUTO
    redis_url: str | None = field(default=None, repr=False)
    max_skew_ms: int = 250
    lease_ms: int = DEFAULT_LEASE_MS
    start_timeout_ms: int = 5 * _SECOND
    heartbeat_ms: int = DEFAULT_HEARTBEAT_MS
    retention_ms: int = 7 * _DAY
    ledger_maxlen: int = 10_000
    wait_replicas: int = 0
    """Replicas that must hold a write before a node acts on it (Redis ``WAIT``; 0 = off)."""
    wait_timeout_ms: int = 100
    clock_check_interval_ms: int = 60 * _SECOND
    ntp_servers: tuple[str, ...] = ()
    ntp_unreachable: NtpUnreachable = "store-time"
    """The file default is :func:`~quorum_cron.clock.skew.default_unreachable_policy` of its servers."""
    alert_command: tuple[str, ...] | None = None
    alert_url: str | None = field(default=None, repr=False)
    members: tuple[str, ...] = ()
    """The member node ids (sorted); empty: ``size`` mode, the first ``size`` ids to register."""
    output_tail: int = DEFAULT_OUTPUT_TAIL
    """Bytes of each of a run's stdout and stderr kept in the ledger (the end of each)."""
    output_log_lines: int = DEFAULT_OUTPUT_LOG_LINES
    """Output lines of one run copied to the agent's log (0: none); the rest are counted."""
    output_log_rate: int = DEFAULT_OUTPUT_LOG_RATE
    """Output lines per second the agent logs over all its runs; lines beyond are counted."""

    def __post_init__(self) -> None:
        where = "cluster"
        _fail(where, "namespace", _name_problem(self.namespace, "namespace"))
        if isinstance(self.members, str) or not isinstance(self.members, (tuple, list)):
            _fail(where, "members", f"{self.members!r} is {_type_name(self.members)} (expected node ids)")
        if self.members:
            _fail(where, "members", members_problem(self.members))
        object.__setattr__(self, "members", tuple(sorted(self.members)))
        if self.members and self.size == AUTO:
            object.__setattr__(self, "size", len(self.members))
        if self.members and self.size != len(self.members):
            _fail(where, "size", size_vs_members(self.size, len(self.members)))
        if self.size == AUTO:
            _fail(where, "size", "missing (expected size = N, or members = ['a', 'b', 'c'])")
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            _fail(where, "size", f"{self.size!r} is {_type_name(self.size)} (expected an integer)")
        _fail(where, "size", _range_problem(self.size, 1, _MAX_SIZE))
        if self.quorum == AUTO:
            object.__setattr__(self, "quorum", self.size // 2 + 1)
        _fail(where, "quorum", _range_problem(self.quorum, 1, self.size))  # (2.5: a float was taken)
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
            _fail(where, "heartbeat", heartbeat_vs_lease_problem(self.heartbeat_ms, self.lease_ms))
        _fail(where, "ledger_maxlen", _range_problem(self.ledger_maxlen, 100, 10_000_000))
        _fail(where, "wait_replicas", _range_problem(self.wait_replicas, 0, _MAX_WAIT_REPLICAS))
        _fail(where, "ntp_servers", next(filter(None, map(ntp_server_problem, self.ntp_servers)), None))
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
            _fail(where, "alert_command", f"{self.alert_command!r} (expected an argv: non-empty strings)")
        for key, lo, hi in _CLUSTER_OUTPUT_BOUNDS:
            _fail(where, key, _range_problem(getattr(self, key), lo, hi))

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


def default_starting_deadline_ms(schedule: Schedule) -> int:
    """``min(60 s, half the schedule's shortest interval)``: a slot is decided before the next is due."""
    return max(1, min(_MINUTE, schedule.min_interval_ms // 2))


@dataclass(frozen=True, slots=True)
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
    env_passthrough: tuple[str, ...] = ()
    """Names of the agent's environment variables the command also gets (e.g. ``AWS_PROFILE``).

    Never a ``QUORUM_CRON_*`` name: those are the agent's own settings, the Redis URL among them.
    """
    alert_on: tuple[str, ...] = DEFAULT_ALERT_ON
    """Which outcomes of this job raise an alert (:data:`ALERT_ON_KINDS`). Not part of
    :attr:`spec_hash`: it changes who is told, not what runs, so nodes may differ on it during
    a rollout without splitting the quorum."""
    retry_backoff_max_ms: int = AUTO
    """Each retry waits twice as long as the one before (``retry_backoff_ms`` first), up to
    this. ``AUTO``: ``retry_backoff_ms``, i.e. a fixed backoff (the behaviour before it existed)."""
    retry_jitter: float = 0.0
    """0-1: each retry's wait is shortened by up to this fraction of itself, by an amount derived
    from the slot and attempt, so every node computes the same wait (``quorum_cron.core.backoff``)."""

    _spec_hash: str = field(default="", init=False, repr=False, compare=False)
    """:attr:`spec_hash` once computed. Slots, not a ``cached_property``: its cache made each
    instance a ``__dict__``, one more object per job at 100,000 jobs (issue 27)."""

    retry_problems = staticmethod(retry_problems)
    """The retry policy's rules (:mod:`quorum_cron.config.retry`), for the file reader and the API."""

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
        for key, text in (("shell", self.shell), ("cwd", self.cwd)):
            if text is not None and "\x00" in text:  # (exec refused it at every run, a traceback each)
                _fail(
                    where,
                    key,
                    f"'{printable(text, 80)}' contains a NUL character (a process's "
                    "arguments and paths cannot hold one)",
                )
        if self.in_process and (self.stdin is not None or self.cwd is not None or not self.inherit_env):
            _fail(where, "stdin", "an in-process job has no process ('stdin', 'cwd', 'inherit_env')")
        if self.stdin is not None and len(self.stdin) > _MAX_STDIN:
            _fail(where, "stdin", f"has {len(self.stdin)} characters (expected at most {_MAX_STDIN})")
        object.__setattr__(self, "env_passthrough", tuple(self.env_passthrough))
        for name in self.env_passthrough:
            if not _ENV_KEY_RE.fullmatch(name) or name.upper().startswith("QUORUM_CRON_"):
                _fail(
                    where,
                    "env_passthrough",
                    f"{name!r} is not a variable a job may inherit (expected a variable name, "
                    f"not QUORUM_CRON_*: the agent's own settings hold the Redis URL)",
                )
        if self.in_process and self.env_passthrough:
            _fail(where, "env_passthrough", "an in-process job has no process environment")
        _fail(where, "alert_on", alert_on_problem(self.alert_on))
        alert_on = tuple(dict.fromkeys(self.alert_on))
        object.__setattr__(self, "alert_on", _ALERT_ON_SHARED.setdefault(alert_on, alert_on))
        if self.cwd is not None and not os.path.isabs(self.cwd):
            _fail(where, "cwd", f"{self.cwd!r} is not an absolute path (expected e.g. '/var/lib/app')")
        if self.starting_deadline_ms == AUTO:
            object.__setattr__(self, "starting_deadline_ms", default_starting_deadline_ms(self.schedule))
        if (backoff_max := self.retry_backoff_max_ms) != AUTO:
            _fail(where, "retry_backoff_max", _range_problem(backoff_max, 0, _DAY, format_duration))
        for key, lo, hi in _JOB_DURATION_BOUNDS:
            _fail(where, key.removesuffix("_ms"), _range_problem(getattr(self, key), lo, hi, format_duration))
        for key, problem in retry_problems(self.retry_backoff_ms, backoff_max, self.retry_jitter):
            _fail(where, key, problem)
        if self.retry_backoff_max_ms == AUTO:
            object.__setattr__(self, "retry_backoff_max_ms", self.retry_backoff_ms)
        object.__setattr__(self, "retry_jitter", float(self.retry_jitter))
        _fail(where, "retries", _range_problem(self.retries, 0, _MAX_RETRIES))
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
        env = types.MappingProxyType(dict(sorted(self.env.items()))) if self.env else _NO_ENV
        object.__setattr__(self, "env", env)

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
        backoff_max = self.retry_backoff_max_ms
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
            **({"env_passthrough": sorted(self.env_passthrough)} if self.env_passthrough else {}),
            **({"retry_backoff_max_ms": backoff_max} if backoff_max != self.retry_backoff_ms else {}),
            **({"retry_jitter": self.retry_jitter} if self.retry_jitter else {}),
        }

    @property
    def spec_hash(self) -> str:
        """First 16 hex digits of SHA-256 over :meth:`canonical` as sorted, compact JSON."""
        digest = self._spec_hash
        if not digest:
            data = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
            digest = hashlib.sha256(data.encode("ascii")).hexdigest()[:16]
            object.__setattr__(self, "_spec_hash", digest)
        return digest


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


def _deadline_vs_skew(
    source: str,
    job: JobSpec,
    cluster: ClusterConfig,
    *,
    deadline_default: bool | None = None,
    skew_default: bool | None = None,
) -> str:
    """The line refusing ``job``'s ``starting_deadline`` within ``cluster``'s ``max_skew``.

    A ``*_default`` of ``None``: the caller cannot tell whether the value was given (a
    :class:`Config` built in code), so a value equal to the default is named the default.
    """
    if deadline_default is None:
        deadline_default = job.starting_deadline_ms == default_starting_deadline_ms(job.schedule)
    if skew_default is None:
        skew_default = cluster.max_skew_ms == ClusterConfig.__dataclass_fields__["max_skew_ms"].default
    problem = deadline_vs_skew_problem(
        job.starting_deadline_ms, cluster.max_skew_ms, deadline_default, skew_default
    )
    return f"{source}: job {job.name!r}: field 'starting_deadline': {problem}"
