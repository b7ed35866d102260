"""Schedules: cron semantics against an independent reference, DST policy, H, @every, errors.

The reference matcher below is written from Vixie cron's rules (entry.c /
cron.c), not from quorum_cron.config.schedule: it expands each field to a set, walks
the calendar day by day, and ORs day-of-month with day-of-week unless either
field starts with '*'.
"""

from __future__ import annotations

import calendar
import datetime as dt
import itertools
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum_cron.config.schedule import Schedule
from quorum_cron.errors import ScheduleError

UTC = dt.UTC
BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def ms(iso: str) -> int:
    """ISO-8601 with offset -> epoch ms."""
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def iso(t: int, tz: str = "UTC") -> str:
    return dt.datetime.fromtimestamp(t / 1000, ZoneInfo(tz)).isoformat()


def fires(expr: str, start: str, end: str, tz: str = "UTC", dst: str = "once") -> list[str]:
    sched = Schedule.parse(expr, tz, job="t", dst=dst)  # type: ignore[arg-type]
    return [iso(t, tz) for t in sched.fire_times(ms(start), ms(end))]


# --------------------------------------------------------------------------- reference

_MONTH_LIST = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_MONTHS = {n: i + 1 for i, n in enumerate(_MONTH_LIST)}
_DOWS = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}


def _ref_field(text: str, lo: int, hi: int, names: dict[str, int]) -> set[int]:
    def num(token: str) -> int:
        return names[token.upper()] if token.upper() in names else int(token)

    out: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            first, last = lo, hi
        elif "-" in base:
            a, b = base.split("-")
            first, last = num(a), num(b)
        else:
            first = last = num(base)
        out.update(range(first, last + 1, step))
    return out


def reference(expr: str, start_ms: int, end_ms: int, tz: str = "UTC") -> Iterator[int]:
    """Fire times in (start, end] for a zone without DST in the window."""
    fields = expr.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    sec, mins, hours = (
        _ref_field(f, lo, hi, {}) for f, lo, hi in zip(fields[:3], (0, 0, 0), (59, 59, 23), strict=True)
    )
    doms = _ref_field(fields[3], 1, 31, {})
    months = _ref_field(fields[4], 1, 12, _MONTHS)
    dows = {d % 7 for d in _ref_field(fields[5], 0, 7, _DOWS)}
    star = fields[3].startswith("*") or fields[5].startswith("*")
    zone = ZoneInfo(tz)
    day = dt.datetime.fromtimestamp(start_ms / 1000, zone).date() - dt.timedelta(days=1)
    last_day = dt.datetime.fromtimestamp(end_ms / 1000, zone).date() + dt.timedelta(days=1)
    while day <= last_day:
        dom_ok, dow_ok = day.day in doms, (day.weekday() + 1) % 7 in dows
        if day.month in months and ((dom_ok and dow_ok) if star else (dom_ok or dow_ok)):
            for h, m, s in itertools.product(sorted(hours), sorted(mins), sorted(sec)):
                local = dt.datetime(day.year, day.month, day.day, h, m, s, tzinfo=zone)
                t = int(local.timestamp()) * 1000
                if start_ms < t <= end_ms:
                    yield t
        day += dt.timedelta(days=1)


@st.composite
def cron_field(draw: st.DrawFn, lo: int, hi: int, names: tuple[str, ...] = (), name_base: int = 0) -> str:
    def value(a: int, b: int) -> str:
        v = draw(st.integers(a, b))
        if names and 0 <= v - name_base < len(names) and draw(st.booleans()):
            return names[v - name_base]
        return str(v)

    def item() -> str:
        kind = draw(st.sampled_from(["star", "star-step", "value", "range", "range-step"]))
        if kind == "star":
            return "*"
        if kind == "star-step":
            return f"*/{draw(st.integers(1, hi - lo + 2))}"
        if kind == "value":
            return value(lo, hi)
        a = draw(st.integers(lo, hi))
        b = draw(st.integers(a, hi))
        text = f"{value(a, a)}-{value(b, b)}"
        if kind == "range-step":
            text += f"/{draw(st.integers(1, hi - lo + 2))}"
        return text

    return ",".join(item() for _ in range(draw(st.integers(1, 3))))


@st.composite
def cron_expr(draw: st.DrawFn) -> str:
    fields = [
        draw(cron_field(0, 59)),
        draw(cron_field(0, 23)),
        draw(cron_field(1, 31)),
        draw(cron_field(1, 12, tuple(_MONTHS), 1)),
        draw(cron_field(0, 7, tuple(_DOWS), 0)),
    ]
    if draw(st.booleans()):
        fields.insert(0, draw(cron_field(0, 59)))
    return " ".join(fields)


def _fires_at_all(expr: str) -> bool:
    try:
        Schedule.parse(expr, job="p")
    except ScheduleError as exc:
        assert "never fires" in str(exc), str(exc)
        return False
    return True


_START = st.integers(ms("2000-01-01T00:00:00+00:00"), ms("2040-01-01T00:00:00+00:00"))


@settings(max_examples=150, deadline=None)
@given(expr=cron_expr(), start=_START, days=st.integers(1, 400), tz=st.sampled_from(["UTC", "Asia/Kolkata"]))
def test_fire_times_match_reference(expr: str, start: int, days: int, tz: str) -> None:
    if not _fires_at_all(expr):
        return
    sched = Schedule.parse(expr, tz, job="p")
    end = start + days * 86_400_000
    got = list(itertools.islice(sched.fire_times(start, end), 150))
    want = list(itertools.islice(reference(expr, start, end, tz), 150))
    assert got == want


@settings(max_examples=100, deadline=None)
@given(expr=cron_expr(), start=_START)
def test_next_after_matches_reference(expr: str, start: int) -> None:
    if not _fires_at_all(expr):
        return
    want = next(reference(expr, start, start + 29 * 366 * 86_400_000), None)
    assert want is not None
    assert Schedule.parse(expr, job="p").next_after(start) == want


def _walked(sched: Schedule, ms: int) -> int:
    """``next_after`` without its shared cache: the calendar walk itself."""
    return next(iter(sched._cron_seconds(ms // 1000, None))) * 1000


@settings(max_examples=100, deadline=None)
@given(
    exprs=st.lists(
        cron_expr() | st.sampled_from(["H * * * *", "H H * * *", "H/7 * * * * *"]), min_size=1, max_size=4
    ),
    jobs=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=4),
    tz=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
    dst=st.sampled_from(["once", "every"]),
    asks=st.lists(st.tuples(st.integers(0, 15), _START, st.integers(0, 999)), min_size=1, max_size=12),
)
def test_next_after_cache_answers_as_the_walk(
    exprs: list[str], jobs: list[str], tz: str, dst: str, asks: list[tuple[int, int, int]]
) -> None:
    """Schedules that share a plan share cached answers; a different plan, zone, policy or
    second never gets another's answer (asked in any order, twice in the same second too)."""
    scheds = [
        Schedule.parse(e, tz, job=j, dst=dst)  # type: ignore[arg-type]
        for e in exprs
        for j in jobs
        if _fires_at_all(e)
    ]
    if not scheds:
        return
    for pick, start, sub in asks:
        sched = scheds[pick % len(scheds)]
        for ms_ in (start, start - start % 1000 + sub):
            assert sched.next_after(ms_) == _walked(sched, ms_)


# --------------------------------------------------------------------------- cron semantics


def test_day_of_month_or_day_of_week_when_both_restricted() -> None:
    # Friday the 13th style: cron fires on every 13th AND every Friday.
    got = fires("0 0 13 * FRI", "2026-02-01T00:00:00+00:00", "2026-02-28T00:00:00+00:00")
    assert [d[:10] for d in got] == ["2026-02-06", "2026-02-13", "2026-02-20", "2026-02-27"]


def test_star_prefixed_day_field_means_and() -> None:
    # '*/2' starts with '*': Vixie cron ANDs (odd days that are Mondays); croniter's
    # default would OR.
    got = fires("0 0 */2 * MON", "2026-05-31T00:00:00+00:00", "2026-07-01T00:00:00+00:00")
    assert [d[:10] for d in got] == ["2026-06-01", "2026-06-15", "2026-06-29"]


def test_sunday_is_0_and_7() -> None:
    a = fires("0 12 * * 0", "2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00")
    b = fires("0 12 * * 7", "2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00")
    c = fires("0 12 * * 5-7", "2026-01-01T00:00:00+00:00", "2026-01-05T00:00:00+00:00")
    assert a == b and len(a) == 4
    assert [d[:10] for d in c] == ["2026-01-02", "2026-01-03", "2026-01-04"]


def test_six_fields_put_seconds_first() -> None:
    got = fires("*/20 30 9 * * *", "2026-01-01T09:29:59+00:00", "2026-01-01T09:31:00+00:00")
    assert got == [
        "2026-01-01T09:30:00+00:00",
        "2026-01-01T09:30:20+00:00",
        "2026-01-01T09:30:40+00:00",
    ]


@pytest.mark.parametrize(
    ("alias", "expr"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_aliases(alias: str, expr: str) -> None:
    a, b = Schedule.parse(alias, job="j"), Schedule.parse(expr, job="j")
    assert a.resolved_expr == expr
    start, end = ms("2026-01-01T00:00:00+00:00"), ms("2029-01-01T00:00:00+00:00")
    assert list(itertools.islice(a.fire_times(start, end), 100)) == list(
        itertools.islice(b.fire_times(start, end), 100)
    )


def test_boundaries_are_exclusive_then_inclusive() -> None:
    s = Schedule.parse("0 * * * *", job="j")
    t = ms("2026-01-01T10:00:00+00:00")
    assert list(s.fire_times(t, t + 3_600_000)) == [t + 3_600_000]
    assert s.next_after(t) == t + 3_600_000
    assert s.next_after(t - 1) == t
    assert list(s.fire_times(t, t)) == []
    assert s.latest_at_or_before(t) == t
    assert s.latest_at_or_before(t - 1) == t - 3_600_000


def test_latest_at_or_before_searches_far_back() -> None:
    s = Schedule.parse("0 0 29 2 *", job="j")
    assert s.latest_at_or_before(ms("2027-06-01T00:00:00+00:00")) == ms("2024-02-29T00:00:00+00:00")


def test_min_interval() -> None:
    assert Schedule.parse("*/15 * * * *", job="j").min_interval_ms == 15 * 60_000
    assert Schedule.parse("0,59 * * * *", job="j").min_interval_ms == 60_000  # 59 -> next hour's 0
    assert Schedule.parse("*/10 * * * * *", job="j").min_interval_ms == 10_000
    assert Schedule.parse("30 2 * * *", job="j").min_interval_ms == 86_400_000
    assert Schedule.parse("0 0 1 * *", job="j").min_interval_ms == 28 * 86_400_000
    assert Schedule.parse("@every 90s", job="j").min_interval_ms == 90_000


# --------------------------------------------------------------------------- DST
# 2025 transitions: Berlin  +01->+02 at 2025-03-30T01:00Z, +02->+01 at 2025-10-26T01:00Z;
#                   New York -05->-04 at 2025-03-09T07:00Z, -04->-05 at 2025-11-02T06:00Z.


def test_berlin_fall_back_daily_once_runs_first_occurrence() -> None:
    got = fires("30 2 * * *", "2025-10-25T12:00:00+00:00", "2025-10-27T12:00:00+00:00", BERLIN)
    assert got == ["2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"]


def test_berlin_fall_back_daily_every_runs_both_instants() -> None:
    got = fires("30 2 * * *", "2025-10-25T12:00:00+00:00", "2025-10-27T12:00:00+00:00", BERLIN, "every")
    assert got == ["2025-10-26T02:30:00+02:00", "2025-10-26T02:30:00+01:00", "2025-10-27T02:30:00+01:00"]


def test_berlin_fall_back_hourly_does_not_repeat_wall_times_under_once() -> None:
    window = ("2025-10-25T23:00:00+00:00", "2025-10-26T03:00:00+00:00")
    once = fires("30 * * * *", *window, BERLIN)
    every = fires("30 * * * *", *window, BERLIN, "every")
    assert once == [
        "2025-10-26T01:30:00+02:00",
        "2025-10-26T02:30:00+02:00",
        "2025-10-26T03:30:00+01:00",
    ]
    assert every == [
        "2025-10-26T01:30:00+02:00",
        "2025-10-26T02:30:00+02:00",
        "2025-10-26T02:30:00+01:00",
        "2025-10-26T03:30:00+01:00",
    ]


def test_berlin_fall_back_every_minute() -> None:
    window = ("2025-10-26T00:00:00+00:00", "2025-10-26T03:00:00+00:00")
    once = fires("* * * * *", *window, BERLIN)
    every = fires("* * * * *", *window, BERLIN, "every")
    assert len(every) == 180
    assert len(once) == 120  # 02:00-02:59 CET repeats wall times already run in CEST
    assert "2025-10-26T02:59:00+02:00" in once and "2025-10-26T03:00:00+01:00" in once
    assert not any(t.startswith("2025-10-26T02") and t.endswith("+01:00") for t in once)


def test_once_starting_inside_the_repeated_hour() -> None:
    s = Schedule.parse("30 2 * * *", BERLIN, job="t")
    # 01:10Z is 02:10 CET, the second pass: 02:30 already ran at 00:30Z.
    assert iso(s.next_after(ms("2025-10-26T01:10:00+00:00")), BERLIN) == "2025-10-27T02:30:00+01:00"
    every = Schedule.parse("30 2 * * *", BERLIN, job="t", dst="every")
    assert iso(every.next_after(ms("2025-10-26T01:10:00+00:00")), BERLIN) == "2025-10-26T02:30:00+01:00"


def test_berlin_spring_forward_daily_runs_at_end_of_gap() -> None:
    got = fires("30 2 * * *", "2025-03-29T12:00:00+00:00", "2025-03-31T12:00:00+00:00", BERLIN)
    assert got == ["2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"]
    s = Schedule.parse("30 2 * * *", BERLIN, job="t")
    assert s.next_after(ms("2025-03-30T00:59:59.999+00:00")) == ms("2025-03-30T01:00:00+00:00")
    assert list(s.fire_times(ms("2025-03-30T00:59:59+00:00"), ms("2025-03-30T01:00:00+00:00"))) == [
        ms("2025-03-30T01:00:00+00:00")
    ]


def test_berlin_spring_forward_several_gap_times_run_once() -> None:
    got = fires("*/15 2 * * *", "2025-03-30T00:00:00+00:00", "2025-03-30T12:00:00+00:00", BERLIN)
    assert got == ["2025-03-30T03:00:00+02:00"]


def test_berlin_spring_forward_hourly_skips_gap() -> None:
    got = fires("30 * * * *", "2025-03-29T23:00:00+00:00", "2025-03-30T02:00:00+00:00", BERLIN)
    assert got == ["2025-03-30T00:30:00+01:00", "2025-03-30T01:30:00+01:00", "2025-03-30T03:30:00+02:00"]


def test_new_york_fall_back() -> None:
    window = ("2025-11-02T04:00:00+00:00", "2025-11-02T08:00:00+00:00")
    assert fires("30 1 * * *", *window, NEW_YORK) == ["2025-11-02T01:30:00-04:00"]
    assert fires("30 1 * * *", *window, NEW_YORK, "every") == [
        "2025-11-02T01:30:00-04:00",
        "2025-11-02T01:30:00-05:00",
    ]
    sec = fires("0 30 1 * * *", *window, NEW_YORK)
    assert sec == ["2025-11-02T01:30:00-04:00"]


def test_new_york_spring_forward() -> None:
    window = ("2025-03-09T05:00:00+00:00", "2025-03-09T09:00:00+00:00")
    assert fires("30 2 * * *", *window, NEW_YORK) == ["2025-03-09T03:00:00-04:00"]
    assert fires("0 2 * * *", *window, NEW_YORK) == ["2025-03-09T03:00:00-04:00"]
    # 03:00 also matches on its own: one slot, not two.
    assert fires("0 2,3 * * *", *window, NEW_YORK) == ["2025-03-09T03:00:00-04:00"]
    assert fires("0 * * * *", *window, NEW_YORK) == [
        "2025-03-09T01:00:00-05:00",
        "2025-03-09T03:00:00-04:00",
        "2025-03-09T04:00:00-04:00",
        "2025-03-09T05:00:00-04:00",
    ]


@pytest.mark.parametrize("expr", ["30 2 * * *", "30 * * * *", "*/20 * * * *", "15 1,2,3 * * *"])
@pytest.mark.parametrize(
    ("tz", "start"),
    [
        (BERLIN, "2025-10-25T12:00:00+00:00"),
        (BERLIN, "2025-03-29T12:00:00+00:00"),
        (NEW_YORK, "2025-11-01T12:00:00+00:00"),
        (NEW_YORK, "2025-03-08T12:00:00+00:00"),
    ],
)
def test_every_policy_equals_croniter_native(expr: str, tz: str, start: str) -> None:
    """dst='every' is what croniter itself does with a tz-aware start time."""
    s = Schedule.parse(expr, tz, job="t", dst="every")
    begin = ms(start)
    native = croniter(expr, dt.datetime.fromtimestamp(begin / 1000, ZoneInfo(tz)))
    want = [int(native.get_next(float) * 1000) for _ in range(40)]
    got = list(itertools.islice(s.fire_times(begin, begin + 60 * 86_400_000), 40))
    assert got == want


# --------------------------------------------------------------------------- H


def test_h_is_stable_and_in_range() -> None:
    s = Schedule.parse("H H(0-5) H H(3-4) H", job="backup")
    minute, hour, dom, month, dow = (int(v) for v in s.resolved_expr.split())
    assert 0 <= minute <= 59 and 0 <= hour <= 5 and 1 <= dom <= 28 and 3 <= month <= 4 and 0 <= dow <= 6
    assert Schedule.parse("H H(0-5) H H(3-4) H", job="backup").resolved_expr == s.resolved_expr
    assert Schedule.parse("H H(0-5) H H(3-4) H", job="other").resolved_expr != s.resolved_expr


def test_h_pinned_value() -> None:
    # Pinned: changing the hash would move every deployed H job at upgrade time.
    assert Schedule.parse("H H * * *", job="backup").resolved_expr == "57 19 * * *"


def test_h_same_in_another_process_with_another_hash_seed() -> None:
    code = (
        "from quorum_cron.config.schedule import Schedule;"
        "print(Schedule.parse('H H * * *', job='backup').resolved_expr)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(Path(__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == Schedule.parse("H H * * *", job="backup").resolved_expr


def test_h_spreads_jobs_over_the_hour() -> None:
    minutes = Counter(
        int(Schedule.parse("H * * * *", job=f"job-{i}").resolved_expr.split()[0]) for i in range(1000)
    )
    assert len(minutes) == 60
    assert max(minutes.values()) < 35  # mean 16.7


def test_h_step_and_range_step() -> None:
    s = Schedule.parse("H/15 * * * *", job="x")
    start, rest = s.resolved_expr.split()[0].split("-")
    assert 0 <= int(start) < 15 and rest == "59/15"
    r = Schedule.parse("H(30-59)/10 * * * *", job="x").resolved_expr.split()[0]
    first = int(r.split("-")[0])
    assert 30 <= first < 40 and r.endswith("-59/10")
    t0 = ms("2026-01-01T00:00:00+00:00")
    assert len(list(s.fire_times(t0, t0 + 3_600_000))) == 4


# --------------------------------------------------------------------------- @every


def test_every_is_anchored_to_epoch_and_ignores_tz() -> None:
    s = Schedule.parse("@every 90s", BERLIN, job="j")
    t0 = ms("2026-01-01T00:00:00+00:00")  # a multiple of 90 s since the epoch
    assert list(s.fire_times(t0 - 1, t0 + 180_000)) == [t0, t0 + 90_000, t0 + 180_000]
    assert s.next_after(t0) == t0 + 90_000
    assert s.latest_at_or_before(t0 + 89_999) == t0
    assert s.kind == "every" and s.period_ms == 90_000


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("*/0 * * * *", "invalid cron expression '*/0 * * * *' for job 'backup': step must be >= 1"),
        ("60 * * * *", "60 is out of range for the minute field (expected 0-59)"),
        (
            "* * * *",
            "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got 4",
        ),
        ("* * * * * * *", "got 7"),
        ("5-2 * * * *", "range '5-2' in the minute field runs backwards"),
        # The list offered is what a wrap would mean, short: it offered 'sat-7,0-sun' and '7-7,0-1'.
        ("0 0 * * sat-sun", "use a list such as '6,0')"),
        ("0 0 * * mon-sun", "use a list such as '1-6,0')"),
        ("0 0 * * 7-1", "use a list such as '0-1')"),
        ("0 22-2 * * *", "use a list such as '22-23,0-2')"),
        ("0 0 * nov-feb *", "use a list such as '11-12,1-2')"),
        ("0 22-2/2 * * *", "(cron ranges do not wrap; write the values as a list)"),
        ("5/15 * * * *", "step without a range in '5/15'"),
        ("0 0 30 2 *", "never fires: day-of-month '30' never occurs in FEB"),
        # With H the refusal depends on the job's name: the line said '30' where the file says
        # H(30-31) (or '31 ... SEP' for a month written H), and not why another name passed.
        (
            "0 0 H(30-31) 2 *",
            "never occurs in FEB (H chose 30 2 from H(30-31) 2 for job 'backup'; "
            "a plain H in day-of-month draws from 1-28)",
        ),
        ("0 0 31 H *", "'31' never occurs in SEP (H chose 31 9 from 31 H for job 'backup')"),
        ("0 0 L * *", "'L' is not a number in the day-of-month field (expected 1-31)"),
        ("0 0 * * MON#2", "unsupported syntax 'MON#2'"),
        ("0 0 ? * *", "unsupported syntax '?'"),
        ("R * * * *", "'R' is not a number in the minute field"),
        ("0 0 * * FOO", "unknown day-of-week name 'FOO' (expected 0-7 or SUN..SAT)"),
        ("0 0 * JANUARY *", "unknown month name 'JANUARY'"),
        ("0 0 0 * *", "0 is out of range for the day-of-month field (expected 1-31)"),
        ("1,,2 * * * *", "empty list element"),
        ("H(5-5) * * * *", "H range 5-5 in the minute field must have begin < end"),
        ("*/x * * * *", "step 'x' in the minute field is not a whole number"),
        # '²'.isdigit() is true and int('²') raises: these were tracebacks, not one line.
        ("*/² * * * *", "step '²' in the minute field is not a whole number"),
        ("H(²-9) * * * *", "'²' is not a number in the minute field (expected 0-59)"),
        ("@reboot", "invalid schedule '@reboot' for job 'backup': @reboot is not supported"),
        ("@fortnightly", "unknown alias (expected one of @yearly"),
        ("@every 0s", "period must be between 1s and 366d"),
        ("@every 5 parsecs", "'5 parsecs' is not a duration"),
        ("@every", "expected '@every <duration>'"),
        ("", "got 0"),
    ],
)
def test_bad_expressions(expr: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        Schedule.parse(expr, job="backup")
    assert message in str(info.value)
    assert "backup" in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_timezone_and_policy() -> None:
    with pytest.raises(ScheduleError, match=r"invalid timezone 'Mars/Olympus' for job 'j': expected an IANA"):
        Schedule.parse("* * * * *", "Mars/Olympus", job="j")
    with pytest.raises(ScheduleError, match=r"did you mean 'Europe/Berlin'\?"):
        Schedule.parse("* * * * *", "europe/berlin", job="j")
    with pytest.raises(ScheduleError, match="invalid timezone 'localtime'"):
        Schedule.parse("* * * * *", "localtime", job="j")
    with pytest.raises(
        ScheduleError, match=r"invalid dst policy 'twice' for job 'j': expected 'once' or 'every'"
    ):
        Schedule.parse("* * * * *", job="j", dst="twice")  # type: ignore[arg-type]


def test_schedule_is_a_value() -> None:
    a = Schedule.parse(" 0 * * * * ", job="j")
    assert a == Schedule.parse("0 * * * *", job="j")
    assert hash(a) == hash(Schedule.parse("0 * * * *", job="j"))
    assert a != Schedule.parse("0 * * * *", job="k")
    assert "Schedule(expr='0 * * * *'" in repr(a)


def test_long_window_in_utc_is_fast_enough() -> None:
    s = Schedule.parse("* * * * *", BERLIN, job="j")
    t0 = ms("2026-01-01T00:00:00+00:00")
    assert sum(1 for _ in s.fire_times(t0, t0 + 7 * 86_400_000)) == 7 * 1440
    assert calendar.timegm((2026, 1, 1, 0, 0, 0)) * 1000 == t0


@given(st.data())
def test_the_list_a_backwards_range_is_told_to_write_means_its_wrap(data: st.DataObject) -> None:
    """Written in place of the range, the offered list compiles and holds exactly the values the
    range would hold if it wrapped (Sunday as 0 or 7 alike)."""
    from quorum_cron.config.cron import InvalidCron, compile_cron

    position, lo, hi = data.draw(st.sampled_from([(0, 0, 59), (1, 0, 23), (3, 1, 12), (4, 0, 7)]))
    a = data.draw(st.integers(lo + 1, hi))
    b = data.draw(st.integers(lo, a - 1))
    fields = ["0", "0", "*", "*", "*"]
    fields[position] = f"{a}-{b}"
    with pytest.raises(InvalidCron) as refused:
        compile_cron(" ".join(fields), job="j")
    offered = str(refused.value).rsplit("use a list such as '", 1)[1].split("'")[0]
    fields[position] = offered
    plan = compile_cron(" ".join(fields), job="j")
    wrapped = {v % 7 if position == 4 else v for v in [*range(a, hi + 1), *range(lo, b + 1)]}
    held = (plan.minutes, plan.hours, plan.doms, plan.months, plan.dows)[position]
    assert set(held) == wrapped, offered
