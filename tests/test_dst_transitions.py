"""config/schedule.dst_transitions: the one place UTC-offset changes are found (schedules, crontab import)."""

from __future__ import annotations

import calendar

from quorum_cron.config.schedule import dst_transitions

SPRING_2026 = calendar.timegm((2026, 3, 29, 1, 0, 0))  # Europe/Berlin: 02:00 CET -> 03:00 CEST
AUTUMN_2026 = calendar.timegm((2026, 10, 25, 1, 0, 0))  # 03:00 CEST -> 02:00 CET


def test_a_year_of_berlin_has_its_two_changes_to_the_second() -> None:
    start, end = calendar.timegm((2026, 1, 1, 0, 0, 0)), calendar.timegm((2027, 1, 1, 0, 0, 0))
    found = [tuple(tr) for tr in dst_transitions("Europe/Berlin", start, end)]
    assert found == [(SPRING_2026, 3600, 7200), (AUTUMN_2026, 7200, 3600)]


def test_the_range_is_open_at_the_start_and_closed_at_the_end() -> None:
    assert [tr.at for tr in dst_transitions("Europe/Berlin", SPRING_2026 - 1, SPRING_2026)] == [SPRING_2026]
    assert dst_transitions("Europe/Berlin", SPRING_2026, AUTUMN_2026 - 1) == ()


def test_a_range_across_years_and_a_zone_without_dst() -> None:
    start, end = calendar.timegm((2025, 12, 1, 0, 0, 0)), calendar.timegm((2027, 4, 1, 0, 0, 0))
    assert len(dst_transitions("Europe/Berlin", start, end)) == 3  # 2026 spring, autumn; 2027 spring
    assert dst_transitions("UTC", start, end) == () and dst_transitions("Asia/Tokyo", start, end) == ()
