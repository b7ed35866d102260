"""Reading one table of settings (a TOML table, or the Python API's keywords) with one line per problem.

:class:`Table` is shared by the config file reader (:mod:`quorum_cron.config.file`),
which collects every problem of a file before it reports them, and the
Python API (:mod:`quorum_cron.app`), which raises at the first one: the same
reads give both the same checks and the same wording, ``<where>: field
'<key>': <problem>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar, cast

from quorum_cron.config.durations import format_duration, parse_duration
from quorum_cron.config.values import _range_problem, _suggest, _type_name
from quorum_cron.errors import ConfigError

__all__ = ["MISSING", "Table"]

_T = TypeVar("_T")
MISSING: Final = object()
"""A read's default when the key is required."""


class Table:
    """Reads one table, recording each problem as one line in ``errors``.

    ``errors=None`` is strict: the first problem raises (a :class:`ConfigError`,
    or the ``kind`` given to :meth:`error`), as the Python API reports a
    declaration's bad value where it enters.
    """

    def __init__(
        self, data: Mapping[str, object], where: str, known: tuple[str, ...], errors: list[str] | None
    ):
        self.data, self.where, self.errors = data, where, errors
        self.ok = True
        for key in data:
            if key not in known:
                self.error(key, f"unknown key ({_suggest(key, known)})")

    def error(self, key: str, problem: str, kind: type[ConfigError] = ConfigError) -> None:
        self.line(f"{self.where}: field {key!r}: {problem}", kind)

    def line(self, line: str, kind: type[ConfigError] = ConfigError) -> None:
        """Record one whole problem line (or raise it, when strict)."""
        self.ok = False
        if self.errors is None:
            raise kind(line)
        self.errors.append(line)

    def get(self, key: str, kind: type[_T], expected: str, default: object = MISSING) -> _T | None:
        if key not in self.data:
            if default is MISSING:
                self.error(key, f"missing (expected {expected})")
            return None
        value = self.data[key]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            self.error(key, f"{value!r} is {_type_name(value)} (expected {expected})")
            return None
        return value

    def integer(self, key: str, lo: int, hi: int, default: int | None = None) -> int | None:
        value = self.get(key, int, f"an integer {lo}-{hi}", MISSING if default is None else default)
        if value is None:
            return default
        problem = _range_problem(value, lo, hi)
        if problem:
            self.error(key, problem)
            return default
        return value

    def duration(self, key: str, default: int, lo: int, hi: int) -> int:
        if key not in self.data:
            return default
        try:
            ms = parse_duration(cast("str | int", self.data[key]), what=f"{self.where}: field {key!r}")
        except ConfigError as exc:
            self.line(str(exc))
            return default
        problem = _range_problem(ms, lo, hi, format_duration)
        if problem:
            self.error(key, problem)
            return default
        return ms

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        if key not in self.data:  # the common case, without building the expectation's text
            return default
        value = self.get(key, str, "one of " + ", ".join(repr(c) for c in choices), default)
        if value is None:
            return default
        if value not in choices:
            self.error(key, f"{value!r} is not one of " + ", ".join(repr(c) for c in choices))
            return default
        return value

    def str_list(
        self, key: str, what: str, *, max_items: int, when_empty: str | None = None, empty_ok: bool = False
    ) -> tuple[str, ...] | None:
        """``when_empty``: the advice an empty list gets (e.g. to leave the key out), if any;
        ``empty_ok``: ``[]`` is the key's default written out, read as ``()``."""
        value = self.get(key, list, f"an array of strings ({what})", None)
        if value is None:
            return None
        if not value and empty_ok:
            return ()
        if not value:
            # The line said "expected 1-1000 strings (an argv list)" without naming the value.
            advice = f"; {when_empty}" if when_empty is not None else ""
            self.error(key, f"[] is an empty list (expected 1-{max_items} {what}{advice})")
            return None
        if len(value) > max_items:
            self.error(key, f"has {len(value)} elements (expected 1-{max_items} {what})")
            return None
        for item in value:
            if isinstance(item, str) and "\x00" in item:  # (it is a non-empty string: say what is wrong)
                self.error(key, f"element {item!r} contains a NUL character, which no argv or name can hold")
                return None
            if not isinstance(item, str) or not item:
                self.error(key, f"element {item!r} is not a non-empty string ({what})")
                return None
        return tuple(value)
