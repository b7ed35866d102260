"""Duration syntax: what parses, to how many ms, and the message for what does not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.config.durations import format_duration, parse_duration
from quorum_cron.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("250ms", 250),
        ("30s", 30_000),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("2d", 172_800_000),
        ("1d2h3m4s5ms", 93_784_005),
        ("0s", 0),
        (" 90s ", 90_000),
        (30, 30_000),
        (0, 0),
    ],
)
def test_parses(text: str | int, ms: int) -> None:
    assert parse_duration(text, what="t") == ms


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("5 parsecs", "'5 parsecs' is not a duration (expected e.g. '30s', '5m'"),
        ("30", "'30' has no unit (expected e.g. '30s'"),
        ("", "'' is not a duration"),
        ("1.5h", "is not a duration"),
        ("30m1h", "is not a duration"),  # units largest first
        ("1m1m", "is not a duration"),
        ("5M", "is not a duration"),
        ("-5s", "is not a duration"),
        ("1h 30m", "is not a duration"),
        (-1, "-1 is negative"),
        (True, "True is not a duration"),
        (1.5, "1.5 is not a duration"),
        ("1" * 5000 + "s", "has a number of more than 30 digits"),  # (was int()'s ValueError)
        ("1" * 31 + "d", "has a number of more than 30 digits"),
    ],
)
def test_refuses_with_message(value: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_duration(value, what="x.toml: job 'backup': field 'timeout'")  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("x.toml: job 'backup': field 'timeout': ")
    assert fragment in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0s"), (250, "250ms"), (5_400_000, "1h30m"), (93_784_005, "1d2h3m4s5ms"), (-1500, "-1s500ms")],
)
def test_format(ms: int, text: str) -> None:
    assert format_duration(ms) == text


@given(st.integers(min_value=0, max_value=10**12))
def test_format_round_trips(ms: int) -> None:
    assert parse_duration(format_duration(ms), what="t") == ms
