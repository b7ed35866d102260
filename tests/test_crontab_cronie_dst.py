"""The importer's model of cron at DST changes, against a transcription of cronie's main loop.

``cron_runs(..., per_minute_zone=False)`` says when cron on a host whose clock is in the
zone runs a line around a DST change; the DST comments of ``import-crontab`` are built on
it. Here cronie's ``cron.c`` main loop (``virtualTime``/``timeRunning``, the ``small``,
``medium``, ``negative`` and ``large`` wake-ups, ``find_jobs``' wildcard rule and
``job_add``'s one-per-queue) is transcribed minute by minute, independently of the
importer, and both must name the same instants for any schedule and zone.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum_cron.config.cron import ALIASES
from quorum_cron.config.schedule import Schedule, dst_transitions
from quorum_cron.crontab.dst import cron_runs

FROM_S = 1_767_225_600  # 2026-01-01T00:00Z
ZONES = ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Havana", "Pacific/Chatham")


def _offset(zone: zoneinfo.ZoneInfo, t: int) -> int:
    delta = dt.datetime.fromtimestamp(t, zone).utcoffset()
    assert delta is not None
    return int(delta.total_seconds())


def cronie_main_loop(expr: str, tz: str, lo: int, hi: int) -> list[int]:
    """The instants in ``(lo, hi]`` at which cronie, its host clock in ``tz``, runs ``expr``."""
    zone = zoneinfo.ZoneInfo(tz)
    walls = Schedule.parse(expr, "UTC", job="cron")
    fields = ALIASES.get(expr, expr).split()
    wild = fields[0].startswith("*") or fields[1].startswith("*")  # MIN_STAR | HR_STAR
    runs: list[int] = []
    queue: list[int] = []

    def clock(t: int) -> int:  # set_time: minutes since the epoch, in local time
        return (t + _offset(zone, t)) // 60

    def find_jobs(vtime: int, do_wild: bool, do_non_wild: bool, now: int) -> None:
        wall = vtime * 60  # gmtime(virtualSecond): the local wall time
        if next(walls.fire_times((wall - 1) * 1000, wall * 1000), None) is None:
            return
        if ((do_non_wild and not wild) or (do_wild and wild)) and not queue:  # job_add
            queue.append(now)

    def job_runqueue() -> None:
        runs.extend(queue)
        queue.clear()

    start = lo - lo % 60
    time_running = virtual_time = clock(start)
    for now in range(start + 60, hi + 1, 60):
        if clock(now) == time_running:
            continue  # cron_sleep until the minute changes
        time_running = clock(now)
        diff = time_running - virtual_time
        if diff == 1:
            virtual_time = time_running
            find_jobs(virtual_time, True, True, now)
        elif not -180 <= diff <= 180:  # large
            virtual_time = time_running
            find_jobs(time_running, True, True, now)
        elif diff > 5:  # medium: wildcard jobs now, fixed-time jobs of every minute missed
            find_jobs(time_running, True, False, now)
            while True:
                job_runqueue()
                virtual_time += 1
                find_jobs(virtual_time, False, True, now)
                if virtual_time >= time_running:
                    break
        elif diff > 0:  # small
            while True:
                job_runqueue()
                virtual_time += 1
                find_jobs(virtual_time, True, True, now)
                if virtual_time >= time_running:
                    break
        else:  # negative: wildcard jobs only, virtual time waits
            find_jobs(time_running, True, False, now)
        job_runqueue()
    return [t for t in runs if lo < t <= hi]


MINUTES = st.sampled_from(["*", "*/15", "0", "30", "0,30", "*/7", "59", "10-20", "45"])
HOURS = st.sampled_from(["*", "1", "2", "3", "1-3", "*/2", "0", "2,3", "23", "22-23"])
EXPRS = st.one_of(
    st.builds(lambda m, h: f"{m} {h} * * *", MINUTES, HOURS),
    st.sampled_from(["@hourly", "@daily", "0 2 * * sun", "30 2 29-31 3,10 *"]),
)


@settings(max_examples=60, deadline=None)
@given(EXPRS, st.sampled_from(ZONES), st.integers(0, 1))
def test_cron_runs_is_cronies_main_loop_at_each_dst_change(expr: str, tz: str, which: int) -> None:
    changes = dst_transitions(tz, FROM_S, FROM_S + 366 * 86_400)
    at = changes[which % len(changes)].at
    lo, hi = at - 3 * 3600, at + 3 * 3600
    assert cron_runs(expr, tz, lo, hi, per_minute_zone=False) == cronie_main_loop(expr, tz, lo, hi)
