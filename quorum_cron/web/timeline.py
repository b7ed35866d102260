"""Expected against actual: every due slot of a window next to what the store recorded.

Pure (no store, no clock): the caller passes the schedule, the slots the
store holds for the window and ``now``. Every fire time the schedule has in
the window becomes one row, whether or not the store knows the slot — a
slot nobody voted for (the whole cluster was down) shows as ``no record``
instead of silently not existing. Slots the store holds that the schedule
does not have (manual triggers) get rows of their own. Fire times are
computed here on the server by :meth:`Schedule.fire_times` (one offset
segment at a time), never stepped minute by minute.

DST marks: a fire time at the instant the clocks jumped forward (a wall
time that did not exist that day, fired at the end of the gap) is ``gap``;
one whose wall time happened twice that night is ``repeat`` (``first`` or
``second`` occurrence).
"""

from __future__ import annotations

import collections
import datetime as dt
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass

from quorum_cron.config.schedule import Schedule
from quorum_cron.store.base import SlotState, SlotView

__all__ = ["MAX_ROWS", "Row", "dst_mark", "expected_window", "timeline", "walk_start"]

MAX_ROWS = 1440
"""At most this many expected slots per window (one a minute for a day); older ones are cut."""

_EARLY = {SlotState.PROPOSED, SlotState.COMMITTED, SlotState.RUNNING}


@dataclass(frozen=True, slots=True)
class Row:
    """One slot of the window: when it was due and what became of it."""

    fire_ms: int
    expected: bool
    """On the schedule (False: a manual trigger, or a slot of an older definition)."""
    status: str
    """A :class:`SlotState` value, or ``no record`` (due, past its deadline, unknown to the store),
    ``pending`` (due, still inside its deadline, no vote yet) or ``upcoming``."""
    reason: str = ""
    executor: str = ""
    token: int = 0
    delay_ms: int | None = None
    """Start minus nominal fire time, for a slot that started."""
    runs: int = 0
    retried: bool = False
    dst: str = ""
    """``""``, ``gap``, ``repeat first`` or ``repeat second``."""


def dst_mark(fire_ms: int, tz: str) -> str:
    """Whether ``fire_ms`` sits on a DST transition of ``tz`` (see the module docstring)."""
    if tz == "UTC":
        return ""
    zone = zoneinfo.ZoneInfo(tz)
    when = dt.datetime.fromtimestamp(fire_ms / 1000, zone)
    offset = when.utcoffset()
    before = dt.datetime.fromtimestamp(fire_ms / 1000 - 1, zone).utcoffset()
    if offset is not None and before is not None and offset > before:
        return "gap"
    if when.replace(fold=1 - when.fold).utcoffset() != offset:
        return "repeat second" if when.fold else "repeat first"
    return ""


def walk_start(schedule: Schedule, from_ms: int, to_ms: int) -> int:
    """Where to start walking fire times so that about :data:`MAX_ROWS` + 1 at most lie before ``to_ms``.

    The shortest interval bounds how many fire times a span can hold; the
    caller reads the store's slots from here too (older ones would be cut).
    """
    return max(from_ms, to_ms - (MAX_ROWS + 1) * max(1, schedule.min_interval_ms))


def expected_window(schedule: Schedule, from_ms: int, to_ms: int) -> tuple[list[int], bool]:
    """The schedule's fire times in ``(from_ms, to_ms]``, newest :data:`MAX_ROWS` kept; and whether cut."""
    start = walk_start(schedule, from_ms, to_ms)
    kept: collections.deque[int] = collections.deque(maxlen=MAX_ROWS)
    seen = 0
    for t in schedule.fire_times(start, to_ms):
        kept.append(t)
        seen += 1
    return list(kept), start > from_ms or seen > MAX_ROWS


def _row(fire_ms: int, expected: bool, slot: SlotView | None, now_ms: int, deadline_ms: int, tz: str) -> Row:
    mark = dst_mark(fire_ms, tz)
    if slot is None or slot.state == SlotState.ABSENT:
        if fire_ms > now_ms:
            status = "upcoming"
        elif now_ms > fire_ms + deadline_ms:
            status = "no record"
        else:
            status = "pending"
        return Row(fire_ms, expected, status, dst=mark)
    return Row(
        fire_ms=fire_ms,
        expected=expected,
        status=str(slot.state),
        reason=slot.reason,
        executor=slot.executor,
        token=slot.token,
        delay_ms=slot.started_ms - fire_ms if slot.started_ms else None,
        runs=slot.runs,
        retried=slot.runs > 1,
        dst=mark,
    )


def timeline(
    schedule: Schedule,
    slots: Sequence[SlotView],
    from_ms: int,
    to_ms: int,
    now_ms: int,
    deadline_ms: int,
    triggers: Sequence[int] = (),
) -> tuple[list[Row], bool]:
    """Rows for every expected fire time in ``(from_ms, to_ms]``, every other known slot and every
    trigger (``triggers``: their fire times, voted for or not), oldest first.

    Returns the rows and whether the window was cut to :data:`MAX_ROWS` expected slots.
    """
    expected, cut = expected_window(schedule, from_ms, to_ms)
    lo = expected[0] if cut and expected else from_ms
    by_fire: dict[int, SlotView | None] = {s.fire_ms: s for s in slots if from_ms < s.fire_ms <= to_ms}
    for t in triggers:
        if from_ms < t <= to_ms:
            by_fire.setdefault(t, None)
    rows = [_row(t, True, by_fire.pop(t, None), now_ms, deadline_ms, schedule.tz) for t in expected]
    rows += [_row(t, False, s, now_ms, deadline_ms, schedule.tz) for t, s in by_fire.items() if t >= lo]
    rows.sort(key=lambda r: r.fire_ms)
    return rows, cut
