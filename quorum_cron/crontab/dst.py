"""What cron does at daylight-saving changes, to compare with what an imported job will do.

Apart from :mod:`.translate` (which writes the jobs) because it is a model of
cron's own main loop, tested against a transcription of cronie's
(``tests/test_crontab_cronie_dst.py``): :func:`cron_runs` says when cron
runs a schedule around a change, :func:`dst_note` what differs from the
imported job's fire times over the coming year.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

from quorum_cron.config.schedule import ALIASES, Schedule, dst_transitions, utc_offset_s
from quorum_cron.config.settings import JobSpec

__all__ = ["cron_runs", "dst_note", "five_fields"]

_DST_WINDOW_S = 4 * 3600  # around a transition: covers every offset change in tzdata (at most 2 h)
_DST_LOOKAHEAD_S = 366 * 86_400


def five_fields(schedule: str) -> str:
    """The five cron fields of ``schedule`` (an alias such as ``@daily`` spelled out)."""
    return ALIASES.get(schedule, schedule)


def cron_runs(expr: str, tz: str, lo: int, hi: int, *, per_minute_zone: bool) -> list[int]:
    """The instants (s) in ``(lo, hi]`` at which cron runs ``expr`` in zone ``tz``.

    ``per_minute_zone=True`` is cronie with ``CRON_TZ``: each real minute is
    converted to ``tz`` and matched, so a repeated wall time runs twice and a
    skipped one never.  ``False`` is cron on a host whose own clock is in
    ``tz`` (cronie's and Vixie's DST handling): a jump of up to 3 hours
    forward runs the skipped *fixed-time* jobs right after it, once per
    skipped match; backward, fixed-time jobs do not run again, while jobs
    whose minute or hour field starts with ``*`` run as the wall clock says.
    """
    zone = zoneinfo.ZoneInfo(tz)
    walls = Schedule.parse(expr, "UTC", job="cron")
    first = lo - lo % 60 + 60
    wall_of = {m: m + utc_offset_s(zone, m) for m in range(first, hi + 1, 60)}
    if not wall_of:
        return []
    w_lo, w_hi = min(wall_of.values()) - 1, max(wall_of.values())
    matching = {t // 1000 for t in walls.fire_times(w_lo * 1000, w_hi * 1000)}
    if per_minute_zone:
        return [m for m, w in wall_of.items() if w in matching]
    fields = five_fields(expr).split()
    wild = fields[0].startswith("*") or fields[1].startswith("*")
    runs: list[int] = []
    highest_wall: int | None = None
    prev_wall: int | None = None
    for m, w in wall_of.items():
        if prev_wall is not None and w - prev_wall > 60 and not wild:
            # Spring forward: each skipped wall minute that matches runs now, after the jump.
            runs.extend([m] * sum(1 for x in matching if prev_wall < x < w))
        repeated = highest_wall is not None and w <= highest_wall
        if w in matching and (wild or not repeated):
            runs.append(m)
        highest_wall = w if highest_wall is None else max(highest_wall, w)
        prev_wall = w
    return runs


def dst_note(spec: JobSpec, now_s: int, *, per_minute_zone: bool) -> str | None:
    """What cron and quorum-cron do differently at this job's next DST changes (``None``: nothing)."""
    if spec.schedule.kind != "cron":
        return None
    zone = zoneinfo.ZoneInfo(spec.timezone)
    every = Schedule.parse(spec.schedule_expr, spec.timezone, job=spec.name, dst="every")
    differs: list[str] = []
    every_matches = True
    for at, before, after in dst_transitions(spec.timezone, now_s, now_s + _DST_LOOKAHEAD_S):
        lo, hi = at - _DST_WINDOW_S, at + _DST_WINDOW_S
        cron = cron_runs(spec.schedule.resolved_expr, spec.timezone, lo, hi, per_minute_zone=per_minute_zone)
        ours = [t // 1000 for t in spec.schedule.fire_times(lo * 1000, hi * 1000)]
        if cron == ours:
            continue
        every_matches = every_matches and cron == [t // 1000 for t in every.fire_times(lo * 1000, hi * 1000)]
        # The instants the change touches: a repeated hour, or the jump a skipped hour lands on.
        shift = abs(after - before)

        def near(who: str, ts: list[int], at: int = at, shift: int = shift) -> str:
            shown = [
                dt.datetime.fromtimestamp(t, zone).strftime("%H:%M%z") for t in ts if -shift <= t - at < shift
            ]
            return f"{who} runs it at {', '.join(shown)}" if shown else f"{who} does not run it"

        day = dt.datetime.fromtimestamp(at, zone).date().isoformat()
        differs.append(f"on {day} {near('cron', cron)}, {near('quorum-cron', ours)}")
    if not differs:
        return None
    how = "cronie with CRON_TZ" if per_minute_zone else "cron on a host in this zone"
    text = f"DST ({spec.timezone}, {how}): " + "; ".join(differs)
    if every_matches:
        text += '. dst = "every" reproduces cron here (uncomment it below)'
    else:
        text += (
            ". No dst setting reproduces this: quorum-cron runs a skipped wall time once, "
            'at the end of the gap, and a repeated one once (or twice with dst = "every")'
        )
    return text
