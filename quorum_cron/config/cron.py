"""The cron grammar: a cron expression (or alias) parsed into an explicit plan, with cron's own rules.

Every field becomes an explicit set of values: ranges never wrap, ``7`` is
Sunday, names (``jan``, ``mon``) are accepted, Jenkins-style ``H`` tokens
resolve to a value derived from SHA-256 of the job name (identical on every
node), and day-of-month and day-of-week are ORed unless either field starts
with ``*`` (Vixie cron / cronie). :mod:`quorum_cron.config.schedule` walks the plan
over wall-clock time and maps it to instants. Pure: no clock, no I/O.

Plans are shared: an installation declares thousands of jobs with a handful
of expressions, so an expression without ``H`` is compiled once (its plan is
the same for every job), and a plan with ``H`` resolved is interned, so jobs
whose ``H`` tokens land on the same values hold one plan between them.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import NamedTuple

__all__ = ["ALIASES", "CronPlan", "InvalidCron", "compile_cron"]

ALIASES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""Cron's aliases, as Vixie cron defines them (not hashed)."""


_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MAX_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class _Field(NamedTuple):
    name: str
    lo: int
    hi: int
    hash_lo: int  # range a bare H draws from (Jenkins: dom 1-28, dow 0-6)
    hash_hi: int
    names: tuple[str, ...]  # names mapped to name_base + index
    name_base: int


_SECOND = _Field("second", 0, 59, 0, 59, (), 0)
_MINUTE = _Field("minute", 0, 59, 0, 59, (), 0)
_HOUR = _Field("hour", 0, 23, 0, 23, (), 0)
_DOM = _Field("day-of-month", 1, 31, 1, 28, (), 0)
_MONTH = _Field("month", 1, 12, 1, 12, _MONTH_NAMES, 1)
_DOW = _Field("day-of-week", 0, 7, 0, 6, _DOW_NAMES, 0)
_FIELDS6 = (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW)

_STAR_RE = re.compile(r"\*(?:/(?P<step>[^/]*))?", re.ASCII)
_HASH_RE = re.compile(r"[Hh](?:\((?P<a>[^()]*)-(?P<b>[^()]*)\))?(?:/(?P<step>[^/]*))?", re.ASCII)
_RANGE_RE = re.compile(r"(?P<a>[A-Za-z0-9]+)(?:-(?P<b>[A-Za-z0-9]+))?(?:/(?P<step>[^/]*))?", re.ASCII)


class InvalidCron(Exception):
    """Internal: a problem found while parsing; becomes a ScheduleError with context."""


# --------------------------------------------------------------------------- cron grammar


class _ParsedField(NamedTuple):
    values: frozenset[int]
    resolved: str  # the field with H tokens replaced, as a plain cron field
    star: bool  # written starting with '*' (Vixie's DOM_STAR / DOW_STAR)


def _hash_int(job: str, fld: _Field, index: int) -> int:
    digest = hashlib.sha256(f"quorum-cron/H\x00{job}\x00{fld.name}\x00{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _value(text: str, fld: _Field) -> int:
    if text.isascii() and text.isdecimal():
        number = int(text)
    elif fld.names and text.lower() in fld.names:
        number = fld.names.index(text.lower()) + fld.name_base
    elif fld.names:
        first, last = fld.names[0].upper(), fld.names[-1].upper()
        raise InvalidCron(f"unknown {fld.name} name {text!r} (expected {fld.lo}-{fld.hi} or {first}..{last})")
    else:
        raise InvalidCron(f"{text!r} is not a number in the {fld.name} field (expected {fld.lo}-{fld.hi})")
    if not fld.lo <= number <= fld.hi:
        raise InvalidCron(f"{number} is out of range for the {fld.name} field (expected {fld.lo}-{fld.hi})")
    return number


def _step(text: str | None, fld: _Field) -> int:
    if text is None:
        return 1
    if not (text.isascii() and text.isdecimal()):
        raise InvalidCron(f"step {text!r} in the {fld.name} field is not a whole number")
    step = int(text)
    if step < 1:
        raise InvalidCron(f"step must be >= 1 in the {fld.name} field (got {step})")
    return step


def _parse_item(item: str, fld: _Field, job: str, index: int) -> tuple[list[int], str]:
    """One comma-separated element of a field: its values and its H-free spelling."""
    if m := _STAR_RE.fullmatch(item):
        step = _step(m["step"], fld)
        return list(range(fld.lo, fld.hi + 1, step)), item
    if m := _HASH_RE.fullmatch(item):
        lo, hi = fld.hash_lo, fld.hash_hi
        if m["a"] is not None:
            lo, hi = _value(m["a"], fld), _value(m["b"], fld)
            if lo >= hi:
                raise InvalidCron(f"H range {lo}-{hi} in the {fld.name} field must have begin < end")
        h = _hash_int(job, fld, index)
        if m["step"] is None:
            value = lo + h % (hi - lo + 1)
            return [value], str(value)
        step = _step(m["step"], fld)
        start = lo + h % min(step, hi - lo + 1)
        values = list(range(start, hi + 1, step))
        return values, (f"{start}-{hi}/{step}" if len(values) > 1 else str(start))
    if m := _RANGE_RE.fullmatch(item):
        a = _value(m["a"], fld)
        if m["b"] is None:
            if m["step"] is not None:
                raise InvalidCron(
                    f"step without a range in {item!r} ({fld.name} field): cron implementations "
                    f"disagree on 'N/S', write '{m['a']}-{fld.hi}/{m['step']}' or '*/{m['step']}'"
                )
            return [a], item
        b = _value(m["b"], fld)
        if a > b:
            raise InvalidCron(
                f"range {item!r} in the {fld.name} field runs backwards (cron ranges do not wrap; "
                f"{_wrapped_hint(a, b, fld, stepped=m['step'] is not None)})"
            )
        return list(range(a, b + 1, _step(m["step"], fld))), item
    raise InvalidCron(
        f"unsupported syntax {item!r} in the {fld.name} field (expected numbers, names, '*', "
        f"ranges 'a-b', steps '/n', lists 'a,b' and H; not L, W, #, ? or R)"
    )


def _wrapped_hint(a: int, b: int, fld: _Field, *, stepped: bool) -> str:
    """The list a backwards range would mean if it wrapped, written as short as it goes.

    ``sat-sun`` gives ``'6,0'`` (Sunday is 0: the 7 a wrap would reach is Sunday again) and
    ``22-2`` in the hours ``'22-23,0-2'``, not the ``'sat-7,0-sun'`` the plain rule wrote. With a
    step, where it restarts after the wrap is a guess: only a list is asked for.
    """
    if stepped:
        return "write the values as a list"
    hi = 6 if fld is _DOW else fld.hi
    parts = [(a, hi), (fld.lo, b)]
    text = ",".join(str(lo) if lo == top else f"{lo}-{top}" for lo, top in parts if lo <= top)
    return f"use a list such as '{text}'"


def _parse_field(text: str, fld: _Field, job: str) -> _ParsedField:
    values: set[int] = set()
    resolved: list[str] = []
    for index, item in enumerate(text.split(",")):
        if not item:
            raise InvalidCron(f"empty list element in the {fld.name} field {text!r}")
        item_values, item_text = _parse_item(item, fld, job, index)
        values.update(item_values)
        resolved.append(item_text)
    if fld is _DOW and 7 in values:  # 7 is Sunday too
        values.discard(7)
        values.add(0)
    return _ParsedField(_interned_set(frozenset(values)), ",".join(resolved), text.startswith("*"))


@functools.lru_cache(maxsize=4096)
def _interned_set(values: frozenset[int]) -> frozenset[int]:
    """The first set equal to ``values``: plans of different expressions share their equal fields."""
    return values


class CronPlan(NamedTuple):
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]
    day_or: bool  # cron's rule: OR dom/dow unless either field starts with '*'
    with_seconds: bool
    resolved: str  # the expression with H resolved and aliases expanded
    canonical: str  # explicit 6-field lists handed to croniter


def compile_cron(expr: str, job: str) -> CronPlan:
    """The plan of ``expr`` for ``job`` (which seeds ``H``); :class:`InvalidCron` names the problem.

    Equal plans are one object: the field sets of ``* * * * *`` are built once
    however many jobs use it (an agent of 100k jobs would otherwise hold ~6 KB
    of sets per job), and per-plan caches (``Schedule.min_interval_ms``) hit.
    """
    text = ALIASES.get(expr.lower(), expr)
    if not _hashed(text):
        return _compile_unhashed(text)  # the job name plays no part: one plan per expression
    return _interned(_compile(text, job))


def _hashed(text: str) -> bool:
    """Whether an item of the expression is an ``H`` token (the only syntax that reads the job name).

    Split as :func:`_compile` splits, so both agree on what an item is; no name starts with H.
    """
    return any(item.startswith(("H", "h")) for part in text.split() for item in part.split(","))


@functools.lru_cache(maxsize=4096)
def _compile_unhashed(text: str) -> CronPlan:
    # Not cached when it raises: a bad expression is parsed (and refused) each time.
    return _compile(text, "")


@functools.lru_cache(maxsize=4096)
def _interned(plan: CronPlan) -> CronPlan:
    """The first plan equal to ``plan`` (``lru_cache`` returns the cached object for an equal key)."""
    return plan


def _compile(text: str, job: str) -> CronPlan:
    parts = text.split()
    if len(parts) not in (5, 6):
        raise InvalidCron(
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds "
            f"first, got {len(parts)}"
        )
    with_seconds = len(parts) == 6
    if not with_seconds:
        parts = ["0", *parts]
    parsed = [_parse_field(part, fld, job) for part, fld in zip(parts, _FIELDS6, strict=True)]
    sec, minute, hour, dom, month, dow = parsed
    day_or = not (dom.star or dow.star)
    # Under OR some weekday always matches.  Under AND a valid date falls on
    # every weekday within a 28-year cycle, so only day-of-month x month matters.
    if not day_or and not any(d <= _MAX_DAYS[m - 1] for m in month.values for d in dom.values):
        months = ",".join(_MONTH_NAMES[m - 1].upper() for m in sorted(month.values))
        hashed = ""
        if "H" in parts[3] + parts[4]:  # the value depends on the job's name: say what H chose
            hashed = f" (H chose {dom.resolved} {month.resolved} from {parts[3]} {parts[4]} for job {job!r}"
            hashed += "; a plain H in day-of-month draws from 1-28)" if "H" in parts[3] else ")"
        raise InvalidCron(f"never fires: day-of-month {dom.resolved!r} never occurs in {months}{hashed}")
    resolved_parts = [p.resolved for p in (parsed if with_seconds else parsed[1:])]
    canonical = " ".join(",".join(str(v) for v in sorted(p.values)) for p in parsed)
    return CronPlan(
        sec.values,
        minute.values,
        hour.values,
        dom.values,
        month.values,
        dow.values,
        day_or,
        with_seconds,
        " ".join(resolved_parts),
        canonical,
    )
