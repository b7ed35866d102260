"""Duration syntax: what parses, to how many ms, and the message for what does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.cli import main
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


@pytest.mark.parametrize("value", ["5 parsecs", "1.5s", "abc", "-3s"])
def test_a_text_value_is_not_told_it_may_be_a_bare_integer(value: str) -> None:
    """Text reaches this parser from the CLI (``--grace``) and ``@every`` too, where a bare number
    is refused for its missing unit: offering "an integer number of seconds" there sent users to
    a form they could not type. Only a value of another type (a TOML file's) hears of it."""
    with pytest.raises(ConfigError) as text_error:
        parse_duration(value, what="--grace")
    assert "integer" not in str(text_error.value) and "'30s'" in str(text_error.value)
    with pytest.raises(ConfigError) as toml_error:
        parse_duration(1.5, what="timeout")  # type: ignore[arg-type]
    assert "or an integer number of seconds" in str(toml_error.value)


def test_the_agent_grace_option_error_names_only_what_the_cli_takes(tmp_path: Path) -> None:
    config = tmp_path / "node.toml"
    config.write_text(
        '[cluster]\nname = "node"\nsize = 1\nredis_url = "redis://127.0.0.1:1/0"\n\n'
        '[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    args = ["agent", "--config", str(config), "--node-id", "n1", "--grace", "5 parsecs"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.stderr == (
        "error: --grace: '5 parsecs' is not a duration "
        "(expected e.g. '30s', '5m', '1h30m', '250ms' or '2d')\n"
    ), result.stderr
