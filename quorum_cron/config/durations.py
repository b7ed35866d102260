"""Durations as operators write them (``"30s"``, ``"1h30m"``) and as the code keeps them (int ms).

This module owns the one duration syntax used everywhere a human types a
length of time: the configuration file, ``@every`` schedules and the CLI.

Syntax (see ``docs/configuration.md``):

* a string of one or more ``<integer><unit>`` parts, units ``d`` ``h`` ``m``
  ``s`` ``ms``, largest first, each unit at most once: ``"250ms"``, ``"30s"``,
  ``"1h30m"``, ``"2d"``.  No spaces, no fractions, no signs.
* a bare integer (a TOML integer, not a string) is a number of **seconds**.
  A string without a unit (``"30"``) is refused: ``"30"`` in a file is more
  often a typo for ``"30m"`` than a deliberate number of seconds.

Everything is integer milliseconds so that arithmetic on instants and
durations is exact and identical on every node.
"""

from __future__ import annotations

import re

from quorum_cron.errors import ConfigError

__all__ = ["format_duration", "parse_duration"]

_MS_PER_UNIT: dict[str, int] = {
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1_000,
    "ms": 1,
}

# Units in descending order, each optional, each at most once.  ``m(?!s)``
# keeps "5ms" from being read as five minutes followed by garbage.
_DURATION_RE = re.compile(
    r"(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m(?!s))?(?:(?P<s>\d+)s)?(?:(?P<ms>\d+)ms)?",
    re.ASCII,
)

_EXPECTED = "expected e.g. '30s', '5m', '1h30m', '250ms' or '2d'"
"""What a text value may be. Not "or an integer number of seconds": only a TOML integer is one, and
the same text reached the CLI's options and ``@every``, where a bare number is refused."""
_EXPECTED_ANY = "expected e.g. '30s', '5m', '1h30m', '250ms', '2d' or an integer number of seconds"
"""What a value of another type (a TOML file's boolean, float or table) may be: there an integer
of seconds is the other form."""
_MAX_DIGITS = 30
"""The most digits one amount may have: far beyond any bound a caller checks (a year is 11 digits
of ms), and far below Python's 4,300-digit limit on reading an integer from text, which a longer
amount hit as a ValueError traceback instead of this module's one line."""


def parse_duration(value: str | int, *, what: str) -> int:
    """Return ``value`` as a non-negative number of milliseconds.

    ``what`` names where the value came from and starts the error message,
    e.g. ``"cluster.toml: job 'backup': field 'timeout'"``.

    Raises:
        ConfigError: one line naming ``what``, the value and the expected form.
    """
    # bool is a subclass of int; ``timeout = true`` is a mistake, not 1 second.
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(f"{what}: {value!r} is not a duration ({_EXPECTED_ANY})")
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"{what}: {value!r} is negative (expected a number of seconds >= 0)")
        return value * 1000
    text = value.strip()
    if text.isascii() and text.isdecimal():
        raise ConfigError(
            f"{what}: {value!r} has no unit (expected e.g. '{text}s'; a unit is required in strings)"
        )
    match = _DURATION_RE.fullmatch(text)
    if not text or match is None:
        raise ConfigError(f"{what}: {value!r} is not a duration ({_EXPECTED})")
    if any(amount and len(amount) > _MAX_DIGITS for amount in match.groupdict().values()):
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
        raise ConfigError(
            f"{what}: {shown!r} ({len(text)} characters) has a number of more than {_MAX_DIGITS} digits "
            f"(expected a duration such as '30s' or '2d')"
        )
    return sum(int(amount) * _MS_PER_UNIT[unit] for unit, amount in match.groupdict().items() if amount)


def format_duration(ms: int) -> str:
    """Render ``ms`` in the syntax :func:`parse_duration` reads back, e.g. ``5_400_000 -> "1h30m"``."""
    if ms == 0:
        return "0s"
    sign, rest = ("-", -ms) if ms < 0 else ("", ms)
    parts: list[str] = []
    for unit, size in _MS_PER_UNIT.items():
        amount, rest = divmod(rest, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return sign + "".join(parts)
