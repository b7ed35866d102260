"""Reading a node's TOML configuration file into :mod:`quorum_cron.config.settings`'s values.

Each table is read by a :class:`~quorum_cron.config.table.Table`, which
records every problem as one line (file, job, field, value, what was
expected) instead of stopping at the first; :func:`parse_config` raises
:class:`~quorum_cron.config.settings.InvalidConfig` with all of them. A
``[[jobs]]`` table's options, defaults and checks are
:mod:`quorum_cron.config.job_options`'s, which the Python API reads too.
The values and their own validation live in :mod:`quorum_cron.config.settings`;
:func:`parse_config` and :func:`load_config` are imported from here (settings cannot
re-export them: this module imports settings).
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Mapping
from typing import cast, get_args

from quorum_cron.clock.policy import default_unreachable_policy
from quorum_cron.config.bounds import CLUSTER_DURATION_BOUNDS as _CLUSTER_DURATION_BOUNDS
from quorum_cron.config.bounds import MAX_WAIT_REPLICAS as _MAX_WAIT_REPLICAS
from quorum_cron.config.job_options import JOB_OPTIONS, read_job
from quorum_cron.config.members import members_problem, size_vs_members
from quorum_cron.config.settings import (
    _MAX_ARGV,
    AUTO,
    ClusterConfig,
    Config,
    InvalidConfig,
    JobSpec,
    NtpUnreachable,
    _deadline_vs_skew,
    _redis_url_problem,
)
from quorum_cron.config.table import Table
from quorum_cron.config.values import (
    _CLUSTER_OUTPUT_BOUNDS,
    _MAX_SIZE,
    _alert_url_problem,
    _name_problem,
    _type_name,
    heartbeat_vs_lease_problem,
)
from quorum_cron.errors import ConfigError

__all__ = ["load_config", "parse_config"]


# --------------------------------------------------------------------------- TOML reading

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


def parse_config(data: Mapping[str, object], source: str) -> Config:
    """Validate parsed TOML ``data``; raise :class:`InvalidConfig` listing every problem found.

    Every problem comes out in one run (``validate`` must not reveal them one fix at a time),
    duplicate job names included. The one exception: a job's ``starting_deadline`` is checked
    against ``max_skew`` only when the ``[cluster]`` table itself parsed, as there is no skew
    to compare with otherwise.
    """
    errors: list[str] = []
    top = Table(data, source, _TOP_KEYS, errors)
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
            skew_given = "max_skew" in cast("dict[str, object]", data["cluster"])
            given = "starting_deadline" in raw
            errors.append(
                _deadline_vs_skew(
                    source, job, cluster, deadline_default=not given, skew_default=not skew_given
                )
            )
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
    t = Table(raw, where, _CLUSTER_KEYS, errors)
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
            problem = heartbeat_vs_lease_problem(
                hb, lease, heartbeat_default="heartbeat" not in raw, lease_default="lease" not in raw
            )
            t.error("heartbeat", problem)
    ledger_maxlen = t.integer("ledger_maxlen", 100, 10_000_000, default=10_000)
    wait_replicas = t.integer("wait_replicas", 0, _MAX_WAIT_REPLICAS, default=0)
    ntp_servers = (
        t.str_list(
            "ntp_servers", "NTP server host names", max_items=16, when_empty="leave the key out for none"
        )
        or ()
    )
    ntp_unreachable = t.choice(
        "ntp_unreachable", get_args(NtpUnreachable), default_unreachable_policy(ntp_servers).value
    )
    alert_command = t.str_list(
        "alert_command",
        "argv strings, e.g. ['/usr/local/bin/page-oncall', '--team', 'ops']",
        max_items=_MAX_ARGV,
        when_empty="leave the key out for no alert command",
    )
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
    t = Table(raw, where, ("name", *JOB_OPTIONS), errors)
    name = t.get("name", str, "a job name such as 'nightly-backup'")
    if name is not None and (problem := _name_problem(name, "job name")):
        t.error("name", problem)
        name = None
    fields = read_job(t, name, in_process=False)
    if not t.ok or name is None or fields["schedule"] is None:
        return None
    try:
        return JobSpec(name=name, **fields)
    except ConfigError as exc:  # a rule only the constructor checks
        errors.append(f"{source}: {exc}")
        return None


MAX_CONFIG_BYTES = 64 << 20
"""The largest config file read (64 MiB: a hundred thousand jobs fit many times over)."""


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
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a directory (expected a TOML file)") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:  # (/dev/zero was read until memory ran out)
        raise ConfigError(f"{source}: larger than {MAX_CONFIG_BYTES >> 20} MiB (expected a TOML config file)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        # TOML has no byte order mark; tomllib's own line ("Invalid statement (at line 1,
        # column 1)") did not say what was wrong with a file that looks right in an editor.
        raise ConfigError(
            f"{source}: invalid TOML: the file starts with a byte order mark (U+FEFF; "
            "expected plain UTF-8: save it without a BOM)"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise ConfigError(
            f"{source}: invalid TOML: arrays or inline tables nested too deeply to read"
        ) from None
    except ValueError:  # an integer longer than Python reads from text (sys.get_int_max_str_digits())
        raise ConfigError(
            f"{source}: invalid TOML: a number too long to read "
            f"(more than {sys.get_int_max_str_digits()} digits)"
        ) from None
    return parse_config(data, source)
