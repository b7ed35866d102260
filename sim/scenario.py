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

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from quorum_cron.config.durations import format_duration, parse_duration
from quorum_cron.config.schedule import Schedule
from quorum_cron.core.model import Delivery, Overlap
from quorum_cron.errors import ConfigError, ScheduleError

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

    def duration(self, key: str, default: int) -> int:
        value = self._take(key)
        return default if value is None else parse_duration(value, what=f"{self.where}: field {key!r}")

    def signed_duration(self, key: str, default: int) -> int:
        value = self._take(key)
        if value is None:
            return default
        if isinstance(value, str) and value.startswith("-"):
            return -parse_duration(value[1:], what=f"{self.where}: field {key!r}")
        return parse_duration(value, what=f"{self.where}: field {key!r}")

    def range(self, key: str, default: tuple[int, int]) -> tuple[int, int]:
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
            expected = f"one of {', '.join(choices)}" if choices else "a string"
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
        deadline_ms=r.duration("deadline", 5_000),
        timeout_ms=r.duration("timeout", 60_000),
        run_ms=r.range("run", (50, 500)),
        fail_rate=r.prob("fail_rate", 0.0),
        delivery=Delivery(r.str_("delivery", "at-most-once", tuple(d.value for d in Delivery))),
        overlap=Overlap(r.str_("overlap", "forbid", tuple(o.value for o in Overlap))),
        misfire=r.str_("misfire", "skip", ("skip", "run-once")),
        retries=r.int_("retries", 0, lo=0),
        retry_backoff_ms=r.duration("retry_backoff", 0),
        on_store_unavailable=r.str_("on_store_unavailable", "skip", ("skip", "run-local")),
    )
    r.done()
    if job.deadline_ms <= 0:
        raise ConfigError(f"{r.where}: field 'deadline' must be > 0")
    return job


def _fault(table: Mapping[str, Any], where: str, node_ids: tuple[str, ...], jobs: set[str]) -> Fault:
    r = _Reader(table, where)
    kind = r.str_("kind", "", tuple(FAULT_KINDS))
    if not kind:
        raise ConfigError(f"{where}: field 'kind' is missing (expected one of {', '.join(FAULT_KINDS)})")
    r.where = f"{where} ({kind})"
    f = Fault(
        kind=kind,
        at_ms=r.duration("at", 0),
        for_ms=r.duration("for", 0),
        nodes=r.names("nodes"),
        pick=r.int_("pick", 0, lo=0),
        by_ms=r.signed_duration("by", 0),
        ppm=r.int_("ppm", 0, lo=-999_999),
        loss=r.prob("loss", 0.0),
        reply_loss=r.prob("reply_loss", 0.0),
        delay_ms=r.range("delay", (0, 0)),
        period_ms=r.duration("period", 0),
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
    if f.pick > len(node_ids):
        raise ConfigError(f"{where}: pick = {f.pick} but the cluster has {len(node_ids)} nodes")
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
    if f.remove and f.kind != "reload":
        raise ConfigError(f"{where}: field 'remove' applies to a reload only")
    timed = {"pause", "partition", "flap", "loss", "delay", "clock_strobe", "store_restart", "store_refuse"}
    if f.kind in timed and f.for_ms <= 0:
        raise ConfigError(f"{where}: field 'for' must be > 0")


def loads(text: str, source: str = "<scenario>") -> Scenario:
    """Parse a scenario from TOML text; errors name ``source``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
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
    start = r.int_("start_ms", DEFAULT_START_MS, lo=0)
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
        delay_ms=net.range("delay", (1, 10)),
        loss=net.prob("loss", 0.0),
        reply_loss=net.prob("reply_loss", 0.0),
        timeout_ms=net.duration("timeout", 1_000),
    )
    net.done()
    ck = _Reader(r.table.pop("clocks", {}), f"{source}: [clocks]")
    clocks = ClockDef(
        skew_ms=ck.duration("skew", 20),
        drift_ppm=ck.int_("drift", 50, lo=0),
        check_ms=ck.duration("check", 5_000),
    )
    ck.done()
    st = _Reader(r.table.pop("settings", {}), f"{source}: [settings]")
    settings = SettingsDef(
        quorum=st.int_("quorum", 0, lo=0),
        max_skew_ms=st.duration("max_skew", 250),
        lease_ms=st.duration("lease", 15_000),
        start_timeout_ms=st.duration("start_timeout", 5_000),
        retry_ms=st.duration("retry", 500),
        sweep_ms=st.duration("sweep", 1_000),
        assign_poll_ms=st.duration("assign_poll", 1_000),
        vote_lead_ms=st.duration("vote_lead", 50),
        notices=st.bool_("notices", True),
        wait_replicas=st.int_("wait_replicas", SettingsDef().wait_replicas, lo=0),
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
        _fault(f, f"{source}: faults[{i}]", node_ids, set(names)) for i, f in enumerate(faults_raw)
    )
    if settings.quorum > nodes:
        raise ConfigError(f"{source}: [settings] quorum = {settings.quorum} exceeds nodes = {nodes}")
    if not settings.vote_lead_ms < max(1, settings.max_skew_ms):
        raise ConfigError(
            f"{source}: [settings] vote_lead = {settings.vote_lead_ms} ms is outside the store's early "
            f"window (expected less than max_skew = {settings.max_skew_ms} ms)"
        )
    for n in members:
        if n not in node_ids:
            raise ConfigError(f"{source}: members names {n!r} (expected ids among {', '.join(node_ids)})")
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


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
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
