"""Scenarios: cluster size, jobs, network, settings and a timed list of faults.

A scenario is a frozen value, loaded from TOML (``sim/scenarios/*.toml``) or
built in code (the explorer and the hypothesis strategies), and written back
to TOML by :func:`dumps` — which is how a shrunk failing run becomes a file
that replays it. Durations are written as operators write them (``"30s"``,
``"250ms"``); ranges as ``"100ms..2s"``. Validation happens here, where a
scenario enters the system, and every error names the file, the field and
the value.

Example::

    name = "minority-partition"
    nodes = 5
    duration = "10m"

    [[jobs]]
    name = "tick"
    every = "10s"
    deadline = "5s"
    run = "100ms..2s"

    [[faults]]
    kind = "partition"
    at = "2m"
    for = "1m"
    nodes = ["n1", "n2"]
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from quorum_cron.config.bounds import CLUSTER_DURATION_BOUNDS as _CLUSTER_DURATION_BOUNDS
from quorum_cron.config.bounds import JOB_DURATION_BOUNDS as _JOB_DURATION_BOUNDS
from quorum_cron.config.bounds import MAX_RETRIES as _MAX_RETRIES
from quorum_cron.config.bounds import MAX_WAIT_REPLICAS as _MAX_WAIT_REPLICAS
from quorum_cron.config.durations import format_duration, parse_duration
from quorum_cron.config.schedule import Schedule
from quorum_cron.core.model import Delivery, Overlap
from quorum_cron.errors import ConfigError, ScheduleError
from sim.mutant_names import MUTANTS

__all__ = [
    "DEFAULT_START_MS",
    "FAULT_KINDS",
    "STRATEGIES",
    "ClockDef",
    "Fault",
    "JobDef",
    "NetworkDef",
    "Scenario",
    "SettingsDef",
    "dumps",
    "load",
    "loads",
]

MAX_NODES = 99
"""Nodes a scenario may have (``sim explore --nodes`` has the same bound)."""
MIN_DURATION_MS = 1_000
MAX_DURATION_MS = 366 * 86_400_000
"""A scenario's simulated time: a year of it is hours of a run already."""
DEFAULT_START_MS = 1_700_000_040_000
"""2023-11-14T22:14:00Z: a whole minute, so every-minute slots line up."""
MAX_START_MS = 221_845_392_000_000
"""9000-01-01T00:00:00Z: a run (at most 366 days) and cron's search for the next fire time (up
to 50 years ahead) stay inside the calendar Python knows (to the year 9999)."""

_SECOND = 1_000
_HOUR = 3_600_000
_DAY = 86_400_000
_AGENT = {key: (lo, hi) for key, lo, hi in (*_CLUSTER_DURATION_BOUNDS, *_JOB_DURATION_BOUNDS)}
"""The agent's own bounds (quorum_cron/config/settings.py) for the settings a scenario shares with
it: a value the agent refuses is refused here too, not simulated and reported as a violation."""
BOUNDS: dict[str, tuple[int, int]] = {
    # the agent's ([settings] and job fields)
    "max_skew": _AGENT["max_skew_ms"],
    "lease": _AGENT["lease_ms"],
    "start_timeout": _AGENT["start_timeout_ms"],
    "check": _AGENT["clock_check_interval_ms"],
    "deadline": _AGENT["starting_deadline_ms"],
    "timeout": _AGENT["timeout_ms"],
    "retry_backoff": _AGENT["retry_backoff_ms"],
    # the simulator's own (no agent setting): wide, but each ends a run in finite time
    "retry": (10, _HOUR),
    "sweep": (10, _HOUR),
    "assign_poll": (10, _HOUR),
    "network timeout": (1, _HOUR),
    "delay": (0, _HOUR),
    "run": (0, 30 * _DAY),
    "skew": (0, _DAY),
    "for": (0, MAX_DURATION_MS),
    "by": (-_HOUR, _HOUR),
    "period": (100, _DAY),
}
"""Every duration of a scenario: ``(lowest, highest)`` in ms (a fault's ``period`` may also be 0:
reload, every node at once; ``at`` must fall inside the run)."""
MAX_PPM = 100_000
"""A clock drift (``[clocks] drift``, a ``clock_drift`` fault's ``ppm``) within ±10 %: far beyond
any real oscillator, and short of a clock that stops (-1,000,000) or races ahead, whose timers
would fire so often that a run never ends."""

STRATEGIES = ("quorum", "leader", "lock")

PAUSE_TRIGGERS = ("", "run", "commit", "start")
"""``when`` of a pause: at once, or the next node that runs a job / is chosen executor /
has its start accepted by the store (quorum only) after ``at``."""

FAULT_KINDS: dict[str, str] = {
    "partition": "cut the links of `nodes` (or `pick` random nodes) to the store for `for`",
    "flap": "links of the nodes go down and up at random, about every `period`, for `for`",
    "swizzle": "cut the links one by one every `period`, after `for` heal them in random order",
    "loss": "drop requests with probability `loss` and replies with `reply_loss`, for `for`",
    "delay": "message delay drawn from `delay` (a range: reordering), for `for`",
    "pause": "stop the node's process for `for`; `when` = run|commit|start pauses the next executor",
    "crash": "kill the node (state and job processes lost); restart after `for` (0: never)",
    "outage": "crash every node; restart them all after `for` (misfire policy at work)",
    "clock_jump": "step the wall clock by `by` (signed); step back after `for` if given",
    "clock_drift": "drift by `ppm` parts per million; back to none after `for` if given",
    "clock_strobe": "swing the wall clock ±`by` every `period`, for `for`",
    "ntp_lie": "the NTP server is off by `by`: the node's clock follows it and the guard trusts it",
    "store_restart": "the store is down for `for`; `lose_state` = true restarts it empty",
    "store_failover": "a replica takes over after `for`, missing the last `by` of writes",
    "store_refuse": "the store answers every write with an error (a script's: not an outage) for `for`",
    "deploy": "restart `nodes` one per `period` (down `for`) with a new spec hash `spec` for `job`",
    "reload": "reload `nodes` live one per `period` (0: together) with a new spec hash `spec` for "
    "`job`, or without `job` (`remove` = true); back to the scenario's definition after `for` (0: never)",
    "reconfigure": "an operator moves the membership to the set `nodes`: old -> joint (the first step)",
    "finish": "an operator leaves the joint state (refused unless every new member holds its epoch)",
    "stale_config": "the nodes keep the membership record they hold, learning none for `for` (0: ever)",
    "rogue": "the nodes vote as members: a copy of the config lists them under the store's epoch",
}
"""Every fault kind and what it does (the reference for scenario authors)."""

_NODE_KINDS = {
    "partition",
    "flap",
    "swizzle",
    "loss",
    "delay",
    "pause",
    "crash",
    "clock_jump",
    "clock_drift",
    "clock_strobe",
    "ntp_lie",
    "deploy",
    "reload",
    "reconfigure",
    "stale_config",
    "rogue",
}

MEMBERSHIP_KINDS = frozenset({"reconfigure", "finish", "stale_config", "rogue"})
"""Fault kinds about the membership record (issue 22): a scenario with one, or with ``members``,
simulates heartbeats (the way nodes learn the record) and traces every record change."""


@dataclass(frozen=True, slots=True)
class JobDef:
    """One job: schedule (``every`` or ``cron`` + ``timezone``), timing and behaviour of its runs."""

    name: str
    every_ms: int = 0
    cron: str = ""
    timezone: str = "UTC"
    deadline_ms: int = 5_000
    timeout_ms: int = 60_000
    run_ms: tuple[int, int] = (50, 500)
    fail_rate: float = 0.0
    delivery: Delivery = Delivery.AT_MOST_ONCE
    overlap: Overlap = Overlap.FORBID
    misfire: str = "skip"
    retries: int = 0
    """A failed run is retried this many times (the store decides, under a new token)."""
    retry_backoff_ms: int = 0
    on_store_unavailable: str = "skip"
    """``run-local``: while the store is unreachable, a node runs the slot alone (no quorum)."""


@dataclass(frozen=True, slots=True)
class NetworkDef:
    """The links between every node and the store, when no fault is active."""

    delay_ms: tuple[int, int] = (1, 10)
    loss: float = 0.0
    reply_loss: float = 0.0
    timeout_ms: int = 1_000
    """A store call with no reply after this long (node's monotonic clock) has failed."""


@dataclass(frozen=True, slots=True)
class ClockDef:
    """Initial clock quality: each node gets a random offset and drift within these bounds."""

    skew_ms: int = 20
    drift_ppm: int = 50
    check_ms: int = 5_000
    """How often the skew guard measures each node's clock."""


@dataclass(frozen=True, slots=True)
class SettingsDef:
    """Protocol settings (``NodeSettings``); ``quorum = 0`` means ``N // 2 + 1``."""

    quorum: int = 0
    max_skew_ms: int = 250
    lease_ms: int = 15_000
    start_timeout_ms: int = 5_000
    retry_ms: int = 500
    sweep_ms: int = 1_000
    assign_poll_ms: int = 1_000
    vote_lead_ms: int = 50
    """How long before a fire time the nodes vote (``NodeSettings.vote_lead_ms``). ``0`` votes at
    the fire time, so most slots commit after it and their executor's start is folded into the
    commit (docs/protocol.md, "A start folded into the commit"), as in a burst of many jobs."""
    notices: bool = True
    """Whether the nodes subscribe to their assignment notices, as an agent does by default:
    a slot still proposed is then parked rather than polled (docs/protocol.md); ``false`` runs
    them as agents with notices off, polling every ``assign_poll``."""
    wait_replicas: int = 1
    """The store's ``wait_replicas``: a write is acknowledged only once a replica
    has it (Redis ``WAIT``), so a failover loses no acknowledged write. On by
    default, as docs/store.md asks of a replicated store that can fail over;
    ``0`` simulates a store without ``WAIT`` (its limits are the checker's
    ``FAILOVER_LOSS``: see ``sim/scenarios/limits/``)."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One timed fault; which fields matter depends on ``kind`` (see :data:`FAULT_KINDS`)."""

    kind: str
    at_ms: int
    for_ms: int = 0
    nodes: tuple[str, ...] = ()
    pick: int = 0
    by_ms: int = 0
    ppm: int = 0
    loss: float = 0.0
    reply_loss: float = 0.0
    delay_ms: tuple[int, int] = (0, 0)
    period_ms: int = 0
    job: str = ""
    spec: str = ""
    when: str = ""
    lose_state: bool = False
    remove: bool = False
    """A ``reload`` that drops ``job`` from the nodes' config instead of changing its spec."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """Everything a simulated run needs besides the seed and the strategy."""

    name: str
    nodes: int
    duration_ms: int
    jobs: tuple[JobDef, ...]
    faults: tuple[Fault, ...] = ()
    description: str = ""
    network: NetworkDef = field(default_factory=NetworkDef)
    clocks: ClockDef = field(default_factory=ClockDef)
    settings: SettingsDef = field(default_factory=SettingsDef)
    start_ms: int = DEFAULT_START_MS
    seed: int | None = None
    """Set in files written by the shrinker: the seed that replays the run."""
    strategy: str = ""
    """Set in files written by the shrinker: the strategy that failed."""
    mutant: str = ""
    """Set in files written by the shrinker for a planted mutant (tests only)."""
    members: tuple[str, ...] = ()
    """The membership the cluster starts with (sorted node ids); empty: every node. Nodes outside
    it run, heartbeat and abstain until a ``reconfigure`` adds them."""

    @property
    def first_members(self) -> tuple[str, ...]:
        """The member ids of the first membership record."""
        return self.members or self.node_ids

    @property
    def uses_membership(self) -> bool:
        """Whether heartbeats and membership changes are simulated (see ``MEMBERSHIP_KINDS``)."""
        return bool(self.members) or any(f.kind in MEMBERSHIP_KINDS for f in self.faults)

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(f"n{i}" for i in range(1, self.nodes + 1))

    @property
    def quorum(self) -> int:
        return self.settings.quorum or self.nodes // 2 + 1

    def with_faults(self, faults: tuple[Fault, ...]) -> Scenario:
        return replace(self, faults=faults)


# -- reading -------------------------------------------------------------------


class _Reader:
    """Pulls typed fields out of one TOML table, naming the place in every error."""

    def __init__(self, table: Mapping[str, Any], where: str) -> None:
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: expected a table, got {table!r}")
        self.table = dict(table)
        self.where = where

    def _take(self, key: str) -> Any:
        return self.table.pop(key, None)

    def _bounded(self, key: str, ms: int, bounds: tuple[int, int] | None, zero: bool = False) -> int:
        if bounds is not None and not (bounds[0] <= ms <= bounds[1] or (zero and ms == 0)):
            lo, hi = (format_duration(b) for b in bounds)
            also = " (or 0s)" if zero else ""
            raise ConfigError(
                f"{self.where}: field {key!r} is '{format_duration(ms)}' (expected {lo} to {hi}{also})"
            )
        return ms

    def duration(
        self, key: str, default: int, bounds: tuple[int, int] | None = None, zero: bool = False
    ) -> int:
        """``key`` in ms; with ``bounds`` refused outside them (``zero``: 0 is also accepted)."""
        value = self._take(key)
        if value is None:
            return default
        return self._bounded(key, parse_duration(value, what=f"{self.where}: field {key!r}"), bounds, zero)

    def signed_duration(self, key: str, default: int, bounds: tuple[int, int] | None = None) -> int:
        value = self._take(key)
        if value is None:
            return default
        what = f"{self.where}: field {key!r}"
        if isinstance(value, str) and value.startswith("-"):
            ms = -parse_duration(value[1:], what=what)
        elif isinstance(value, int) and not isinstance(value, bool) and value < 0:
            ms = -parse_duration(-value, what=what)  # (an integer is seconds, and may be negative here)
        else:
            ms = parse_duration(value, what=what)
        return self._bounded(key, ms, bounds)

    def range(self, key: str, default: tuple[int, int], bounds: tuple[int, int]) -> tuple[int, int]:
        value = self._take(key)
        if value is None:
            return default
        what = f"{self.where}: field {key!r}"
        if isinstance(value, str) and ".." in value:
            lo_s, hi_s = value.split("..", 1)
            lo, hi = parse_duration(lo_s, what=what), parse_duration(hi_s, what=what)
        else:
            lo = hi = parse_duration(value, what=what)
        if lo > hi:
            raise ConfigError(f"{what}: {value!r} is an empty range (expected 'low..high' with low <= high)")
        if not bounds[0] <= lo <= hi <= bounds[1]:
            low, high = (format_duration(b) for b in bounds)
            raise ConfigError(f"{what}: {value!r} is out of range (expected durations from {low} to {high})")
        return lo, hi

    def int_(self, key: str, default: int, lo: int | None = None, hi: int | None = None) -> int:
        value = self._take(key)
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or (lo is not None and value < lo)
            or (hi is not None and value > hi)
        ):
            bound = f" >= {lo}" if lo is not None else ""
            bound = f" from {lo} to {hi}" if lo is not None and hi is not None else bound
            raise ConfigError(f"{self.where}: field {key!r} is {value!r} (expected an integer{bound})")
        return value

    def prob(self, key: str, default: float) -> float:
        value = self._take(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ConfigError(f"{self.where}: field {key!r} is {value!r} (expected a probability in [0, 1])")
        return float(value)

    def str_(self, key: str, default: str, choices: tuple[str, ...] = ()) -> str:
        value = self._take(key)
        if value is None:
            return default
        if not isinstance(value, str) or (choices and value not in choices):
            shown = ", ".join(c or '"" (none)' for c in choices)
            expected = f"one of {shown}" if choices else "a string"
            raise ConfigError(f"{self.where}: field {key!r} is {value!r} (expected {expected})")
        return value

    def bool_(self, key: str, default: bool) -> bool:
        value = self._take(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"{self.where}: field {key!r} is {value!r} (expected true or false)")
        return value

    def names(self, key: str) -> tuple[str, ...]:
        value = self._take(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{self.where}: field {key!r} is {value!r} (expected a list of node ids)")
        return tuple(value)

    def done(self) -> None:
        if self.table:
            unknown = ", ".join(sorted(self.table))
            raise ConfigError(f"{self.where}: unknown field(s) {unknown}")


def _job(table: Mapping[str, Any], where: str) -> JobDef:
    r = _Reader(table, where)
    name = r.str_("name", "")
    if not name:
        raise ConfigError(f"{where}: field 'name' is missing (expected a job name)")
    r.where = f"{where} ({name})"
    given_every = "every" in table
    every = r.duration("every", 0)
    cron = r.str_("cron", "")
    if given_every == bool(cron):
        raise ConfigError(f"{r.where}: expected exactly one of 'every' or 'cron'")
    if "timezone" in r.table and not cron:
        raise ConfigError(f"{r.where}: field 'timezone' applies to a cron job only (this job has 'every')")
    timezone = r.str_("timezone", "UTC")
    try:  # (checked here, as the agent's config is: not as a traceback once the run has begun)
        if cron:
            Schedule.parse(cron, timezone, job=name)
        else:
            Schedule.parse(f"@every {every}ms", job=name)
    except ScheduleError as exc:
        if cron:
            raise ConfigError(f"{r.where}: {exc}") from None
        why = str(exc).rpartition(": ")[2]
        raise ConfigError(f"{r.where}: field 'every' is '{format_duration(every)}' ({why})") from None
    job = JobDef(
        name=name,
        every_ms=every,
        cron=cron,
        timezone=timezone,
        deadline_ms=r.duration("deadline", 5_000, BOUNDS["deadline"]),
        timeout_ms=r.duration("timeout", 60_000, BOUNDS["timeout"]),
        run_ms=r.range("run", (50, 500), BOUNDS["run"]),
        fail_rate=r.prob("fail_rate", 0.0),
        delivery=Delivery(r.str_("delivery", "at-most-once", tuple(d.value for d in Delivery))),
        overlap=Overlap(r.str_("overlap", "forbid", tuple(o.value for o in Overlap))),
        misfire=r.str_("misfire", "skip", ("skip", "run-once")),
        retries=r.int_("retries", 0, lo=0, hi=_MAX_RETRIES),
        retry_backoff_ms=r.duration("retry_backoff", 0, BOUNDS["retry_backoff"]),
        on_store_unavailable=r.str_("on_store_unavailable", "skip", ("skip", "run-local")),
    )
    r.done()
    return job


_TARGETED = ("nodes", "pick")
_LINKS = ("for", *_TARGETED, "loss", "reply_loss", "delay")
FAULT_FIELDS: dict[str, tuple[str, ...]] = {
    "partition": ("for", *_TARGETED),
    "flap": ("for", "period", *_TARGETED),
    "swizzle": ("for", "period", *_TARGETED),
    "loss": _LINKS,
    "delay": _LINKS,
    "pause": ("for", "when", *_TARGETED),
    "crash": ("for", *_TARGETED),
    "outage": ("for",),
    "clock_jump": ("by", "for", *_TARGETED),
    "clock_drift": ("ppm", "for", *_TARGETED),
    "clock_strobe": ("by", "period", "for", *_TARGETED),
    "ntp_lie": ("by", "for", *_TARGETED),
    "store_restart": ("for", "lose_state"),
    "store_failover": ("for", "by"),
    "store_refuse": ("for",),
    "deploy": ("job", "spec", "period", "for", *_TARGETED),
    "reload": ("job", "spec", "remove", "period", "for", *_TARGETED),
    "reconfigure": ("nodes",),
    "finish": (),
    "stale_config": ("for", *_TARGETED),
    "rogue": _TARGETED,
}
"""The fields each fault kind takes besides ``kind`` and ``at``: any other is refused, not ignored.
(``loss`` and ``delay`` faults set the same link model: each takes all three of its fields.)"""
_FAULT_KEYS = frozenset(
    {
        "for",
        "nodes",
        "pick",
        "by",
        "ppm",
        "loss",
        "reply_loss",
        "delay",
        "period",
        "job",
        "spec",
        "when",
        "lose_state",
        "remove",
    }
)
_REQUIRED_FIELDS = {"clock_jump": "by", "clock_strobe": "by", "ntp_lie": "by", "clock_drift": "ppm"}
"""A field without which the kind does nothing."""


def _fault(
    table: Mapping[str, Any],
    where: str,
    node_ids: tuple[str, ...],
    jobs: set[str],
    duration_ms: int = MAX_DURATION_MS,
) -> Fault:
    r = _Reader(table, where)
    kind = r.str_("kind", "", tuple(FAULT_KINDS))
    if not kind:
        raise ConfigError(f"{where}: field 'kind' is missing (expected one of {', '.join(FAULT_KINDS)})")
    r.where = f"{where} ({kind})"
    takes = ("kind", "at", *FAULT_FIELDS[kind])
    for key in r.table:
        if key not in takes and key in _FAULT_KEYS:
            raise ConfigError(
                f"{r.where}: field {key!r} does not apply to kind {kind!r} (it takes {', '.join(takes)})"
            )
    need = _REQUIRED_FIELDS.get(kind)
    if need is not None and need not in r.table:
        raise ConfigError(f"{r.where}: field {need!r} is missing (kind {kind!r} does nothing without it)")
    at_ms = r.duration("at", 0)
    if at_ms >= duration_ms:
        raise ConfigError(
            f"{r.where}: field 'at' is '{format_duration(at_ms)}' (expected a time before the scenario's "
            f"end, duration = '{format_duration(duration_ms)}': a fault after it never happens)"
        )
    f = Fault(
        kind=kind,
        at_ms=at_ms,
        for_ms=r.duration("for", 0, BOUNDS["for"]),
        nodes=r.names("nodes"),
        pick=r.int_("pick", 0, lo=0),
        by_ms=r.signed_duration("by", 0, BOUNDS["by"]),
        ppm=r.int_("ppm", 0, lo=-MAX_PPM, hi=MAX_PPM),
        loss=r.prob("loss", 0.0),
        reply_loss=r.prob("reply_loss", 0.0),
        delay_ms=r.range("delay", (0, 0), BOUNDS["delay"]),
        period_ms=r.duration("period", 0, BOUNDS["period"], zero=True),
        job=r.str_("job", ""),
        spec=r.str_("spec", ""),
        when=r.str_("when", "", PAUSE_TRIGGERS),
        lose_state=r.bool_("lose_state", False),
        remove=r.bool_("remove", False),
    )
    r.done()
    validate_fault(f, node_ids, jobs, r.where)
    return f


def validate_fault(f: Fault, node_ids: tuple[str, ...], jobs: set[str], where: str) -> None:
    """Refuse a fault that cannot apply (unknown node or job, missing field)."""
    for n in f.nodes:
        if n not in node_ids:
            raise ConfigError(f"{where}: unknown node {n!r} (expected one of {', '.join(node_ids)})")
    if len(set(f.nodes)) != len(f.nodes):
        raise ConfigError(f"{where}: field 'nodes' is {list(f.nodes)!r} (expected each node once)")
    if f.pick > len(node_ids):
        raise ConfigError(f"{where}: pick = {f.pick} but the cluster has {len(node_ids)} nodes")
    if f.pick and f.nodes:
        raise ConfigError(f"{where}: both 'nodes' and 'pick' (expected one of them: 'nodes' would win)")
    if f.kind == "pause" and f.when and (f.nodes or f.pick):
        raise ConfigError(
            f"{where}: field 'when' with {'nodes' if f.nodes else 'pick'} (a pause with 'when' "
            "pauses the next node to reach it, whichever that is: expected no 'nodes' or 'pick')"
        )
    if f.kind == "store_failover" and f.by_ms < 0:
        raise ConfigError(
            f"{where}: field 'by' is '{format_duration(f.by_ms)}' (expected the writes lost, "
            "a duration >= 0s: the replica's snapshot is taken that long before the failover)"
        )
    if f.kind in {"clock_jump", "clock_strobe", "ntp_lie"} and f.by_ms == 0:
        raise ConfigError(f"{where}: field 'by' is '0s' (a {f.kind} by 0s does nothing)")
    if f.kind == "clock_drift" and f.ppm == 0:
        raise ConfigError(f"{where}: field 'ppm' is 0 (a clock_drift of 0 ppm does nothing)")
    if f.kind == "reconfigure" and not f.nodes:
        raise ConfigError(f"{where}: expected 'nodes' (the new member set, by id)")
    needs_nodes = f.kind in _NODE_KINDS and f.kind != "swizzle" and not (f.kind == "pause" and f.when)
    if needs_nodes and not f.nodes and not f.pick:
        raise ConfigError(f"{where}: expected 'nodes' or 'pick' to say which nodes")
    if f.kind in {"flap", "swizzle", "clock_strobe", "deploy"} and f.period_ms <= 0:
        raise ConfigError(f"{where}: field 'period' must be > 0")
    if f.kind == "deploy" and (f.job not in jobs or not f.spec):
        raise ConfigError(f"{where}: expected 'job' (one of {', '.join(sorted(jobs))}) and 'spec'")
    if f.kind == "reload" and (f.job not in jobs or bool(f.spec) == f.remove):
        raise ConfigError(
            f"{where}: expected 'job' (one of {', '.join(sorted(jobs))}) and either 'spec' or remove = true"
        )
    timed = {"pause", "partition", "flap", "loss", "delay", "clock_strobe", "store_restart", "store_refuse"}
    if f.kind in timed and f.for_ms <= 0:
        raise ConfigError(f"{where}: field 'for' must be > 0")


def loads(text: str, source: str = "<scenario>") -> Scenario:
    """Parse a scenario from TOML text; errors name ``source``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:  # (tomllib reads nested arrays and inline tables recursively)
        raise ConfigError(f"{source}: not valid TOML: arrays or inline tables nested too deeply") from None
    except ValueError:  # an integer past Python's digit limit: tomllib's int() raised a traceback
        raise ConfigError(
            f"{source}: not valid TOML: a number too long to read "
            f"(more than {sys.get_int_max_str_digits()} digits)"
        ) from None
    r = _Reader(data, source)
    name = r.str_("name", Path(source).stem)
    nodes = r.int_("nodes", 5, lo=1, hi=MAX_NODES)
    duration = r.duration("duration", 600_000)
    if not MIN_DURATION_MS <= duration <= MAX_DURATION_MS:
        raise ConfigError(
            f"{source}: field 'duration' is '{format_duration(duration)}' (expected "
            f"{format_duration(MIN_DURATION_MS)} to {format_duration(MAX_DURATION_MS)})"
        )
    description = r.str_("description", "")
    start = r.int_("start_ms", DEFAULT_START_MS, lo=0, hi=MAX_START_MS)
    seed_raw = r.table.pop("seed", None)
    if seed_raw is not None and (isinstance(seed_raw, bool) or not isinstance(seed_raw, int)):
        raise ConfigError(f"{source}: field 'seed' is {seed_raw!r} (expected an integer)")
    strategy = r.str_("strategy", "", ("", *STRATEGIES))
    mutant = r.str_("mutant", "")
    members = tuple(sorted(r.names("members")))
    jobs_raw = r.table.pop("jobs", [])
    faults_raw = r.table.pop("faults", [])
    net = _Reader(r.table.pop("network", {}), f"{source}: [network]")
    network = NetworkDef(
        delay_ms=net.range("delay", (1, 10), BOUNDS["delay"]),
        loss=net.prob("loss", 0.0),
        reply_loss=net.prob("reply_loss", 0.0),
        timeout_ms=net.duration("timeout", 1_000, BOUNDS["network timeout"]),
    )
    net.done()
    ck = _Reader(r.table.pop("clocks", {}), f"{source}: [clocks]")
    clocks = ClockDef(
        skew_ms=ck.duration("skew", 20, BOUNDS["skew"]),
        drift_ppm=ck.int_("drift", 50, lo=0, hi=MAX_PPM),
        check_ms=ck.duration("check", 5_000, BOUNDS["check"]),
    )
    ck.done()
    st = _Reader(r.table.pop("settings", {}), f"{source}: [settings]")
    settings = SettingsDef(
        quorum=st.int_("quorum", 0, lo=0),
        max_skew_ms=st.duration("max_skew", 250, BOUNDS["max_skew"]),
        lease_ms=st.duration("lease", 15_000, BOUNDS["lease"]),
        start_timeout_ms=st.duration("start_timeout", 5_000, BOUNDS["start_timeout"]),
        retry_ms=st.duration("retry", 500, BOUNDS["retry"]),
        sweep_ms=st.duration("sweep", 1_000, BOUNDS["sweep"]),
        assign_poll_ms=st.duration("assign_poll", 1_000, BOUNDS["assign_poll"]),
        vote_lead_ms=st.duration("vote_lead", 50),
        notices=st.bool_("notices", True),
        wait_replicas=st.int_("wait_replicas", SettingsDef().wait_replicas, lo=0, hi=_MAX_WAIT_REPLICAS),
    )
    st.done()
    r.done()
    if not isinstance(jobs_raw, list) or not jobs_raw:
        raise ConfigError(f"{source}: expected at least one [[jobs]] table")
    jobs = tuple(_job(j, f"{source}: jobs[{i}]") for i, j in enumerate(jobs_raw))
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: job names repeat in {names!r} (expected each job once)")
    node_ids = tuple(f"n{i}" for i in range(1, nodes + 1))
    if not isinstance(faults_raw, list):
        raise ConfigError(f"{source}: 'faults' must be an array of tables ([[faults]])")
    faults = tuple(
        _fault(f, f"{source}: faults[{i}]", node_ids, set(names), duration) for i, f in enumerate(faults_raw)
    )
    majority = nodes // 2 + 1
    if settings.quorum and not members and not majority <= settings.quorum <= nodes:
        raise ConfigError(
            f"{source}: [settings] quorum = {settings.quorum} is not a majority of nodes = {nodes} "
            f"(expected {majority} to {nodes}, or 0 for {majority}; the agent refuses a smaller one)"
        )
    if network.timeout_ms <= 2 * network.delay_ms[1]:
        raise ConfigError(
            f"{source}: [network] timeout = '{format_duration(network.timeout_ms)}' is not longer than a "
            f"round trip at the slowest delay '{format_duration(network.delay_ms[1])}' (expected more "
            f"than '{format_duration(2 * network.delay_ms[1])}': else calls fail with no fault at work)"
        )
    if not settings.vote_lead_ms < max(1, settings.max_skew_ms):
        raise ConfigError(
            f"{source}: [settings] vote_lead = {settings.vote_lead_ms} ms is outside the store's early "
            f"window (expected less than max_skew = {settings.max_skew_ms} ms)"
        )
    for n in members:
        if n not in node_ids:
            raise ConfigError(f"{source}: members names {n!r} (expected ids among {', '.join(node_ids)})")
    if len(set(members)) != len(members):
        twice = next(n for n in members if members.count(n) > 1)
        raise ConfigError(f"{source}: members lists {twice!r} twice (expected distinct node ids)")
    if mutant:
        if mutant not in MUTANTS:
            raise ConfigError(
                f"{source}: field 'mutant' is {mutant!r} (expected one of {', '.join(MUTANTS)})"
            )
        if strategy not in ("", "quorum"):
            raise ConfigError(
                f"{source}: field 'strategy' is {strategy!r} with mutant = {mutant!r} "
                "(a mutant is a broken quorum protocol: expected strategy 'quorum' or none)"
            )
    if members and settings.quorum:
        raise ConfigError(f"{source}: [settings] quorum with 'members' (expected a majority of the members)")
    return Scenario(
        name=name,
        nodes=nodes,
        duration_ms=duration,
        jobs=jobs,
        faults=faults,
        description=description,
        network=network,
        clocks=clocks,
        settings=settings,
        start_ms=start,
        seed=seed_raw,
        strategy=strategy,
        mutant=mutant,
        members=members,
    )


def load(path: str | Path) -> Scenario:
    """Read a scenario file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read scenario {str(p)!r}: {exc.strerror}") from None
    return loads(text, str(p))


# -- writing -------------------------------------------------------------------


_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _control(c: str) -> bool:
    """A character a TOML basic string must escape (a control character: U+0000-001F, U+007F)."""
    return c < " " or c == "\x7f"


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return (
            '"'
            + "".join(_TOML_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if _control(c) else c) for c in value)
            + '"'
        )
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")


def _dur(ms: int) -> str:
    return format_duration(ms)


def _rng(r: tuple[int, int]) -> str:
    return _dur(r[0]) if r[0] == r[1] else f"{_dur(r[0])}..{_dur(r[1])}"


_FIELD_KEYS = {
    "every_ms": ("every", _dur),
    "deadline_ms": ("deadline", _dur),
    "timeout_ms": ("timeout", _dur),
    "run_ms": ("run", _rng),
    "delay_ms": ("delay", _rng),
    "at_ms": ("at", _dur),
    "for_ms": ("for", _dur),
    "by_ms": ("by", _dur),
    "period_ms": ("period", _dur),
    "skew_ms": ("skew", _dur),
    "drift_ppm": ("drift", None),
    "check_ms": ("check", _dur),
    "max_skew_ms": ("max_skew", _dur),
    "lease_ms": ("lease", _dur),
    "start_timeout_ms": ("start_timeout", _dur),
    "retry_ms": ("retry", _dur),
    "retry_backoff_ms": ("retry_backoff", _dur),
    "sweep_ms": ("sweep", _dur),
    "assign_poll_ms": ("assign_poll", _dur),
    "vote_lead_ms": ("vote_lead", _dur),
}


def _line(name: str, value: object) -> str:
    key, fmt = _FIELD_KEYS.get(name, (name, None))
    return f"{key} = {_toml_value(fmt(value) if fmt else value)}"  # type: ignore[operator]


def _table_lines(obj: Any, default: Any, always: tuple[str, ...] = ()) -> list[str]:
    """``key = value`` lines for the fields of ``obj`` that differ from ``default``'s."""
    return [
        _line(f.name, getattr(obj, f.name))
        for f in fields(obj)
        if f.name in always or getattr(obj, f.name) != getattr(default, f.name)
    ]


def dumps(s: Scenario) -> str:
    """The scenario as TOML that :func:`loads` reads back to an equal value."""
    out = [f"name = {_toml_value(s.name)}"]
    if s.description:
        out.append(f"description = {_toml_value(s.description)}")
    out += [f"nodes = {s.nodes}", f"duration = {_toml_value(_dur(s.duration_ms))}"]
    if s.start_ms != DEFAULT_START_MS:
        out.append(f"start_ms = {s.start_ms}")
    if s.seed is not None:
        out.append(f"seed = {s.seed}")
    if s.strategy:
        out.append(f"strategy = {_toml_value(s.strategy)}")
    if s.mutant:
        out.append(f"mutant = {_toml_value(s.mutant)}")
    if s.members:
        out.append(f"members = {_toml_value(list(s.members))}")
    tables: tuple[tuple[str, Any, Any], ...] = (
        ("network", s.network, NetworkDef()),
        ("clocks", s.clocks, ClockDef()),
        ("settings", s.settings, SettingsDef()),
    )
    for title, obj, default in tables:
        lines = _table_lines(obj, default)
        if lines:
            out += ["", f"[{title}]", *lines]
    for job in s.jobs:
        out += ["", "[[jobs]]", *_table_lines(job, JobDef(name=job.name), always=("name",))]
    for fault in s.faults:
        default = Fault(kind=fault.kind, at_ms=fault.at_ms)
        out += ["", "[[faults]]", *_table_lines(fault, default, always=("kind", "at_ms"))]
    return "\n".join(out) + "\n"
