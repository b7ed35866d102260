"""Schedules: which nominal fire times (UTC epoch ms) a job has.

This module owns the meaning of a schedule string: parsing and validating it,
resolving Jenkins-style ``H`` tokens, and turning wall-clock matches in an
IANA timezone into UTC instants, including what happens at DST transitions.
It is pure: it never reads the clock; every method takes explicit epoch ms,
so every node (and the simulator) computes the same slots for the same job.

Accepted forms (full reference in ``docs/schedules.md``):

* 5-field Vixie cron: ``minute hour day-of-month month day-of-week``;
* 6-field cron with **seconds first**: ``second minute hour dom month dow``
  (the Quartz / Spring / node-cron order, croniter's ``second_at_beginning``);
* aliases ``@yearly @annually @monthly @weekly @daily @midnight @hourly``;
* ``H``, ``H/15``, ``H(0-29)``, ``H(0-29)/10`` in any field: a value derived
  from SHA-256 of the job name, identical on every node;
* ``@every <duration>``: the multiples of the period since the Unix epoch.

Design: the cron grammar is parsed here, not by croniter, so that every field
becomes an explicit set of values with cron's own rules (ranges never wrap,
``7`` is Sunday, day-of-month and day-of-week are ORed unless either field
starts with ``*``, as in Vixie cron / cronie).  croniter then only walks
*naive wall-clock time* over those explicit lists (``day_or`` set per
expression), and this module maps wall-clock times to instants one UTC-offset
segment at a time, which is where the DST policy lives:

* repeated wall times (fall back): ``dst="once"`` fires at the first
  occurrence only; ``dst="every"`` fires at both instants (croniter's native
  behaviour);
* skipped wall times (spring forward): a schedule with a restricted hour
  field fires once at the end of the gap (like cronie runs fixed-time jobs
  right after the jump); a schedule that fires in every hour just skips them.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import itertools
import threading
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, get_args

from croniter import croniter

from quorum_cron.config.cron import ALIASES, CronPlan, InvalidCron, compile_cron
from quorum_cron.config.durations import parse_duration
from quorum_cron.errors import ConfigError, ScheduleError

__all__ = [
    "ALIASES",
    "DST_POLICIES",
    "DstPolicy",
    "Schedule",
    "check_timezone",
    "dst_transitions",
    "utc_offset_s",
]

DstPolicy = Literal["once", "every"]
DST_POLICIES: tuple[str, ...] = get_args(DstPolicy)

_MAX_EXPR_LEN = 1000
_MIN_EVERY_MS = 1_000
_MAX_EVERY_MS = 366 * 86_400_000
_SEARCH_YEARS = 2  # a segment without DST transitions is cut every two years


# --------------------------------------------------------------------------- wall-clock walking

_croniter_lock = threading.Lock()


@functools.lru_cache(maxsize=1024)
def _croniter_for(canonical: str, day_or: bool) -> croniter:
    # implement_cron_bug is irrelevant here: the lists are explicit and day_or
    # already carries cron's DOM/DOW rule.  max_years_between_matches covers
    # the longest real gap (Feb 29 on a given weekday: 28 years).
    return croniter(canonical, 0.0, day_or=day_or, second_at_beginning=True, max_years_between_matches=50)


@functools.lru_cache(maxsize=1 << 16)
def _wall_next(canonical: str, day_or: bool, wall_s: int) -> int:
    """First matching naive wall-clock second strictly after ``wall_s`` (wall-epoch seconds)."""
    with _croniter_lock:
        it = _croniter_for(canonical, day_or)
        return int(it.get_next(float, start_time=float(wall_s)))


class _Transition(NamedTuple):
    at: int  # first instant (s) on the new offset
    before: int  # UTC offset (s) before
    after: int  # UTC offset (s) from ``at`` on


_available_lock = threading.Lock()


@functools.cache
def _available_zones() -> frozenset[str]:
    with _available_lock:
        # "localtime" is whatever /etc/localtime is on each node; "Factory" and
        # "posixrules" are tzdata internals, not places.
        return frozenset(zoneinfo.available_timezones()) - {"localtime", "posixrules", "Factory"}


@functools.cache
def _zone(name: str) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(name)


def utc_offset_s(zone: zoneinfo.ZoneInfo, t: int) -> int:
    """``zone``'s UTC offset (s) at the instant ``t`` (epoch s)."""
    delta = dt.datetime.fromtimestamp(t, zone).utcoffset()
    return 0 if delta is None else int(delta.total_seconds())


def _year_start(year: int) -> int:
    return calendar.timegm((year, 1, 1, 0, 0, 0))


def _year_of(t: int) -> int:
    return dt.datetime.fromtimestamp(t, dt.UTC).year


@functools.lru_cache(maxsize=4096)
def _year_transitions(tz: str, year: int) -> tuple[_Transition, ...]:
    """Offset changes with ``at`` in (start of year, start of next year], UTC.

    Sampled every 6 hours, then bisected to the second; two transitions less
    than 6 hours apart would be seen as one (no zone in use does that).
    """
    zone = _zone(tz)
    step = 6 * 3600
    points = [*range(_year_start(year), _year_start(year + 1), step), _year_start(year + 1)]
    found: list[_Transition] = []
    prev_t, prev_off = points[0], utc_offset_s(zone, points[0])
    for t in points[1:]:
        off = utc_offset_s(zone, t)
        if off != prev_off:
            lo, hi = prev_t, t  # offset(lo) == prev_off, offset(hi) == off
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if utc_offset_s(zone, mid) == prev_off:
                    lo = mid
                else:
                    hi = mid
            found.append(_Transition(hi, prev_off, off))
        prev_t, prev_off = t, off
    return tuple(found)


def dst_transitions(tz: str, start: int, end: int) -> tuple[_Transition, ...]:
    """Every UTC-offset change of zone ``tz`` with ``at`` in ``(start, end]`` (epoch s), in order.

    The one place transitions are found (the crontab importer's DST notes ask it too), so
    the importer compares cron with the same transitions the schedules fire around.
    """
    return tuple(
        tr
        for y in range(_year_of(start), _year_of(end) + 1)
        for tr in _year_transitions(tz, y)
        if start < tr.at <= end
    )


def _next_transition(tz: str, t: int) -> _Transition | None:
    """The first transition with ``at > t`` within the next two years, if any."""
    year = _year_of(t)
    for y in range(year - 1, year + _SEARCH_YEARS):
        for tr in _year_transitions(tz, y):
            if tr.at > t:
                return tr
    return None


def _prev_transition(tz: str, t: int) -> _Transition | None:
    """The last transition with ``at <= t`` in this or the previous year, if any."""
    year = _year_of(t)
    for y in (year, year - 1):
        for tr in reversed(_year_transitions(tz, y)):
            if tr.at <= t:
                return tr
    return None


def check_timezone(tz: object, *, job: str) -> None:
    """Raise :class:`ScheduleError` unless ``tz`` is an IANA zone name known to tzdata.

    Names outside the tzdata list (``localtime``, a file path) are refused:
    they could mean a different zone on each node.
    """
    if isinstance(tz, str) and tz in _available_zones():
        return
    hint = ""
    if isinstance(tz, str):
        close = sorted(z for z in _available_zones() if z.lower() == tz.lower())
        if close:
            hint = f"; did you mean {close[0]!r}?"
    raise ScheduleError(
        f"invalid timezone {tz!r} for job {job!r}: expected an IANA name such as "
        f"'Europe/Berlin' or 'UTC'{hint}"
    )


_NEXT_AFTER: dict[tuple[CronPlan | None, str, str, int], int] = {}
"""``Schedule.next_after`` answers by (plan, zone, DST policy, second asked about).

The answer depends on nothing else (``H`` is resolved in the plan, and equal plans are
one object), so schedules of different jobs share entries. Cleared when full: a pure
function's cache, no clock read, so the simulator stays deterministic. A dict read or
write is atomic under the GIL, so threads may share it; a race only repeats a walk."""
_NEXT_AFTER_MAX = 8192


# --------------------------------------------------------------------------- the value


@dataclass(frozen=True, slots=True)
class Schedule:
    """When one job fires, as UTC epoch milliseconds.

    Build it with :meth:`parse` (the constructor validates the same way).
    Two schedules are equal when expression, timezone, DST policy and job
    name are equal; the job name matters because it seeds ``H``.
    """

    expr: str
    tz: str = "UTC"
    dst: DstPolicy = "once"
    job: str = ""
    _plan: CronPlan | None = field(init=False, repr=False, compare=False)
    _every_ms: int | None = field(init=False, repr=False, compare=False)
    _min_interval: int = field(default=0, init=False, repr=False, compare=False)
    """:attr:`min_interval_ms` once computed (0: not yet). Slots, not a ``cached_property``: its
    cache made each instance a ``__dict__``, one more object per job (issue 27)."""

    @classmethod
    def parse(cls, expr: str, tz: str = "UTC", *, job: str, dst: DstPolicy = "once") -> Schedule:
        """Validate and build a schedule; raise :class:`ScheduleError` naming job, value and expectation."""
        return cls(expr=expr, tz=tz, dst=dst, job=job)

    def __post_init__(self) -> None:
        expr, job = self.expr, self.job
        if not isinstance(expr, str):
            raise ScheduleError(f"invalid schedule {expr!r} for job {job!r}: expected a string")
        stripped = expr.strip()
        if stripped != expr:
            object.__setattr__(self, "expr", stripped)
        bad = next((ch for ch in stripped if not ch.isprintable() and ch != "\t"), None)
        if bad is not None:  # ("* *\n* * *" split into five fields, and printed on two lines)
            raise ScheduleError(
                f"invalid schedule {stripped!r} for job {job!r}: contains {bad!r} "
                f"(expected one line, e.g. '*/5 * * * *')"
            )
        plan: CronPlan | None = None
        every_ms: int | None = None
        lowered = stripped.lower()
        if lowered == "@reboot":
            raise ScheduleError(
                f"invalid schedule {stripped!r} for job {job!r}: @reboot is not supported "
                f"(a slot needs a time on the clock; nodes reboot at different times)"
            )
        if len(stripped) > _MAX_EXPR_LEN:
            raise ScheduleError(
                f"invalid cron expression {stripped[:40]!r}... for job {job!r}: "
                f"longer than {_MAX_EXPR_LEN} characters"
            )
        if lowered.startswith("@every"):
            every_ms = self._parse_every(stripped, job)
        elif stripped.startswith("@") and lowered not in ALIASES:
            raise ScheduleError(
                f"invalid schedule {stripped!r} for job {job!r}: unknown alias "
                f"(expected one of {', '.join(ALIASES)}, or '@every <duration>')"
            )
        else:
            try:
                plan = compile_cron(stripped, job)
            except InvalidCron as exc:
                raise ScheduleError(f"invalid cron expression {stripped!r} for job {job!r}: {exc}") from None
        check_timezone(self.tz, job=job)
        if self.dst not in DST_POLICIES:
            raise ScheduleError(
                f"invalid dst policy {self.dst!r} for job {job!r}: expected 'once' or 'every'"
            )
        object.__setattr__(self, "_plan", plan)
        object.__setattr__(self, "_every_ms", every_ms)

    @staticmethod
    def _parse_every(expr: str, job: str) -> int:
        parts = expr.split(None, 1)
        if len(parts) != 2 or parts[0].lower() != "@every":
            raise ScheduleError(
                f"invalid schedule {expr!r} for job {job!r}: expected '@every <duration>', e.g. '@every 90s'"
            )
        try:
            period = parse_duration(parts[1].strip(), what=f"invalid schedule {expr!r} for job {job!r}")
        except ConfigError as exc:
            raise ScheduleError(str(exc)) from None
        if not _MIN_EVERY_MS <= period <= _MAX_EVERY_MS:
            raise ScheduleError(
                f"invalid schedule {expr!r} for job {job!r}: period must be between 1s and 366d"
            )
        return period

    # ---------------------------------------------------------------- introspection

    @property
    def kind(self) -> Literal["cron", "every"]:
        """``"every"`` for ``@every`` schedules, ``"cron"`` for everything else."""
        return "every" if self._every_ms is not None else "cron"

    @property
    def period_ms(self) -> int | None:
        """The period of an ``@every`` schedule, else ``None``."""
        return self._every_ms

    @property
    def resolved_expr(self) -> str:
        """The schedule as plain cron: aliases expanded, ``H`` replaced by this job's values.

        ``@every`` schedules are returned as written.
        """
        return self._plan.resolved if self._plan is not None else self.expr

    @property
    def min_interval_ms(self) -> int:
        """The shortest gap between consecutive nominal fire times, ignoring DST shifts.

        Exact for ``@every`` and for schedules that fire more than once a day;
        for daily-or-rarer schedules it is the shortest gap between matching
        dates over a 28-year calendar cycle.
        """
        gap = self._min_interval
        if not gap:
            every = self._every_ms
            gap = every if every is not None else _cron_min_interval_ms(self._require_plan())
            object.__setattr__(self, "_min_interval", gap)
        return gap

    @staticmethod
    def _day_matches(plan: CronPlan, date: dt.date) -> bool:
        if date.month not in plan.months:
            return False
        dom_ok = date.day in plan.doms
        dow_ok = date.isoweekday() % 7 in plan.dows
        return (dom_ok or dow_ok) if plan.day_or else (dom_ok and dow_ok)

    def _require_plan(self) -> CronPlan:
        assert self._plan is not None, "cron plan missing on a cron schedule"
        return self._plan

    # ---------------------------------------------------------------- fire times

    def next_after(self, ms: int) -> int:
        """The first fire time strictly after ``ms`` (UTC epoch ms).

        Answered from :data:`_NEXT_AFTER` when a schedule with the same plan, zone and DST
        policy asked about the same second: every node asks this once per job and fire
        time, and 10,000 ``* * * * *`` jobs share one plan, so a burst's walk of the
        calendar is done once instead of once per job (6 % of an agent's CPU at that burst).
        """
        if self._every_ms is not None:
            return (ms // self._every_ms + 1) * self._every_ms
        key = (self._plan, self.tz, self.dst, ms // 1000)
        found = _NEXT_AFTER.get(key)
        if found is not None:
            return found
        for t in self._cron_seconds(ms // 1000, None):
            if len(_NEXT_AFTER) >= _NEXT_AFTER_MAX:
                _NEXT_AFTER.clear()
            _NEXT_AFTER[key] = t * 1000
            return t * 1000
        raise AssertionError("a validated cron schedule always has a next fire time")  # pragma: no cover

    def fire_times(self, start_ms: int, end_ms: int) -> Iterator[int]:
        """All fire times ``t`` with ``start_ms < t <= end_ms``, ascending (UTC epoch ms)."""
        if end_ms <= start_ms:
            return
        if self._every_ms is not None:
            period = self._every_ms
            yield from range((start_ms // period + 1) * period, end_ms + 1, period)
            return
        for t in self._cron_seconds(start_ms // 1000, end_ms // 1000):
            yield t * 1000

    def latest_at_or_before(self, ms: int) -> int | None:
        """The last fire time ``t <= ms``, or ``None`` if there is none within 30 years."""
        if self._every_ms is not None:
            return (ms // self._every_ms) * self._every_ms
        window = 2 * 60_000
        limit = 30 * 366 * 86_400_000
        while True:
            last: int | None = None
            for t in self.fire_times(ms - window, ms):
                last = t
            if last is not None:
                return last
            if window >= limit:
                return None
            window = min(window * 16, limit)

    def _cron_seconds(self, lo: int, hi: int | None) -> Iterator[int]:
        """Fire instants in whole seconds with ``lo < t <= hi`` (``hi=None``: unbounded).

        Walks one UTC-offset segment at a time: inside a segment wall time and
        instant differ by a constant, so croniter's naive walk is exact; the
        DST policy is applied where segments meet.
        """
        plan = self._require_plan()
        canonical, day_or = plan.canonical, plan.day_or
        zone = _zone(self.tz)
        shift_gap = len(plan.hours) < 24
        once = self.dst == "once"
        # Wall times up to `covered` already happened in an earlier segment
        # (only after a fall-back); under "once" they do not fire again.
        covered: int | None = None
        last: int | None = None
        prev = _prev_transition(self.tz, lo + 1)
        if prev is not None and prev.before > prev.after:
            covered = prev.at - 1 + prev.before
        elif (
            prev is not None
            and prev.at == lo + 1
            and (hi is None or prev.at <= hi)
            and shift_gap
            and self._gap_fires(prev)
        ):
            last = prev.at
            yield prev.at
        cur = lo
        while hi is None or cur < hi:
            # The segment is the instants (cur, seg_last], all on one UTC offset;
            # a transition exactly at cur + 1 was handled when reaching it.
            nxt = _next_transition(self.tz, cur + 1)
            seg_last = nxt.at - 1 if nxt is not None else _year_start(_year_of(cur) + _SEARCH_YEARS) - 1
            bound = seg_last if hi is None else min(seg_last, hi)
            off = utc_offset_s(zone, cur + 1)
            wall = cur + off
            while True:
                wall = _wall_next(canonical, day_or, wall)
                t = wall - off
                if t > bound:
                    break
                if once and covered is not None and wall <= covered:
                    continue
                if last is None or t > last:
                    last = t
                    yield t
            if nxt is None:
                cur = seg_last
                continue
            if hi is not None and nxt.at > hi:
                return
            if nxt.after > nxt.before:
                # Spring forward: walls [at+before, at+after) do not exist.
                if shift_gap and self._gap_fires(nxt) and (last is None or nxt.at > last):
                    last = nxt.at
                    yield nxt.at
            else:
                covered = nxt.at - 1 + nxt.before
            cur = nxt.at - 1

    def _gap_fires(self, tr: _Transition) -> bool:
        """Whether a wall time skipped by the spring-forward ``tr`` matches the schedule."""
        plan = self._require_plan()
        gap_first, gap_last = tr.at + tr.before, tr.at + tr.after - 1
        return _wall_next(plan.canonical, plan.day_or, gap_first - 1) <= gap_last


@functools.lru_cache(maxsize=4096)
def _cron_min_interval_ms(plan: CronPlan) -> int:
    """:attr:`Schedule.min_interval_ms` of a cron plan, once per plan (not per job).

    Every job needs it (the default starting deadline); a daily plan walks 28
    years of dates. Plans are shared between jobs (:func:`~quorum_cron.config.cron.compile_cron`),
    so the key's hash and equality are cheap.
    """
    tods = sorted(h * 3600 + m * 60 + s for h in plan.hours for m in plan.minutes for s in plan.seconds)
    if len(tods) > 1:
        gaps = [b - a for a, b in itertools.pairwise(tods)]
        gaps.append(tods[0] + 86_400 - tods[-1])  # across midnight, if both days match
        return min(gaps) * 1000
    best: int | None = None
    previous: int | None = None
    day = dt.date(2000, 1, 1)
    for ordinal in range(day.toordinal(), dt.date(2028, 12, 31).toordinal() + 1):
        date = dt.date.fromordinal(ordinal)
        if Schedule._day_matches(plan, date):
            if previous is not None:
                gap = ordinal - previous
                best = gap if best is None else min(best, gap)
            previous = ordinal
    return (best or 1) * 86_400_000
