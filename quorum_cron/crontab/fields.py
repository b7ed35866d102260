"""Cron's five time fields as cronie and Vixie cron read them: what they refuse, what cronie's ``~`` means.

quorum-cron's own schedule parser (:class:`~quorum_cron.config.schedule.Schedule`)
reads the fields once the job is built; it accepts more than cron (``H``,
``L``) and says a bad value in its own terms. What is checked here is what
cron itself refuses, in cron's terms: a word that is no month or day name,
cronie's ``a~b`` (drawn at random when the crontab is loaded: it becomes
``H(a-b)``), and a range that runs backwards (``sat-sun``, which cronie and
Vixie cron refuse while busybox and dcron wrap it around).
"""

from __future__ import annotations

import re

__all__ = ["FIELD_NAMES", "check_field", "random_as_hash"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = frozenset(_MONTHS + _DAYS)
_FIELD_RE = re.compile(r"[A-Za-z0-9*,/~-]+", re.ASCII)
_TILDE_RE = re.compile(r"(?P<a>[A-Za-z0-9]*)~(?P<b>[A-Za-z0-9]*)", re.ASCII)
_FIELD_BOUNDS: tuple[tuple[int, int, tuple[str, ...]], ...] = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, _MONTHS),
    (0, 7, _DAYS),
)
"""Each field's lowest and highest value and names (cronie's FIRST_/LAST_ and MonthNames/DowNames)."""
_WORD_RE = re.compile(r"[A-Za-z]+", re.ASCII)
_RANGE_RE = re.compile(r"(?P<a>[A-Za-z0-9]+)-(?P<b>[A-Za-z0-9]+)(?P<step>/[0-9]+)?", re.ASCII)

FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")


def check_field(text: str, what: str) -> str | None:
    """Why cron would refuse ``text`` as its ``what`` field (one clause naming both), or None."""
    if not _FIELD_RE.fullmatch(text):
        return f"{what} field {text!r} is not cron syntax (expected numbers, names, '*', '-', '/' and ',')"
    if "~" in text:
        bounds = _FIELD_BOUNDS[FIELD_NAMES.index(what)]
        for item in text.split(","):
            if "~" in item and isinstance(problem := _tilde(item, bounds), str):
                return f"{what} field {text!r}: {problem}"
    for word in _WORD_RE.findall(text):
        if word.lower() not in _NAMES:
            return f"{what} field {text!r}: {word!r} is not cron syntax (H and L/W/# are not cron's)"
    bounds = _FIELD_BOUNDS[FIELD_NAMES.index(what)]
    for item in text.split(","):
        if (m := _RANGE_RE.fullmatch(item)) and (backwards := _backwards(m, bounds)):
            return f"{what} field {text!r}: {backwards}"
    return None


def _backwards(m: re.Match[str], bounds: tuple[int, int, tuple[str, ...]]) -> str | None:
    """Why cron refuses the range ``a-b[/n]`` of ``m`` because it runs backwards (``sat-sun``), or None.

    cronie's and Vixie cron's ``get_range`` refuse ``a > b`` (``sun`` is 0), so the line never ran
    there, while busybox and dcron wrap around the end of the field: the message gives that
    reading as a list, for the operator to write if it is what ran. (Values out of the field are
    :class:`~quorum_cron.config.schedule.Schedule`'s to refuse.)
    """
    lo, hi, names = bounds
    a, b = _value(m["a"], bounds), _value(m["b"], bounds)
    if a is None or b is None or a <= b:
        return None
    item = m.group()
    refused = f"range {item!r} runs backwards: cronie and Vixie cron refuse the line, so it never ran there"
    if m["step"]:
        return f"{refused}; busybox and dcron wrap it around: write the values yours ran at as a list"
    if names == _DAYS:  # 7 is Sunday, 0 too: a wrap ends at Saturday
        a, hi = a % 7, 6
    as_names = m["a"].isalpha() and m["b"].isalpha()
    spans = [(a, b)] if a <= b else [(a, hi), (lo, b)]
    shown = [tuple(names[v - lo] if as_names else str(v) for v in span) for span in spans]
    wrapped = ",".join(x if x == y else f"{x}-{y}" for x, y in shown)
    return f"{refused}; busybox and dcron wrap it around, as {wrapped!r}: write that if yours did"


def _value(text: str, bounds: tuple[int, int, tuple[str, ...]]) -> int | None:
    """A field's number or name as cron reads it (a name: its first match, so ``sun`` is 0)."""
    lo, _, names = bounds
    if text.isdecimal():
        return int(text)
    return names.index(text.lower()) + lo if text.lower() in names else None


def _tilde(item: str, bounds: tuple[int, int, tuple[str, ...]]) -> tuple[int, int] | str:
    """cronie's ``a~b`` (``get_range``, ``R_RANDOM``): its range, or why cronie refuses it.

    Either end may be left out (the field's first or last value); names count as in
    ``get_number``; no step may follow; ``a > b`` or a value out of the field is refused.
    """
    lo, hi, _ = bounds
    m = _TILDE_RE.fullmatch(item)
    if m is None:
        return f"{item!r} is not cronie's random 'a~b' (no step, one '~')"
    ends: list[int] = []
    for text, default in ((m["a"], lo), (m["b"], hi)):
        value = _value(text, bounds) if text else default
        if value is None:
            return f"{text!r} in {item!r} is not a number or name of this field"
        ends.append(value)
    a, b = ends
    if not lo <= a <= b <= hi:
        return f"random range {item!r} must run upwards within {lo}-{hi}"
    return a, b


def random_as_hash(schedule: str) -> str | None:
    """The five fields with each cronie ``a~b`` as ``H(a-b)`` (``None``: no ``~``).

    cronie 1.6+ draws ``a~b`` once when it loads the crontab, on each host anew;
    ``H(a-b)`` draws it from the job name, the same on every node and every load.
    """
    if "~" not in schedule or schedule.startswith("@"):
        return None
    fields: list[str] = []
    for text, bounds in zip(schedule.split(), _FIELD_BOUNDS, strict=True):
        items: list[str] = []
        for item in text.split(","):
            span = _tilde(item, bounds) if "~" in item else None
            if isinstance(span, str):  # (parse_crontab refused it already)
                raise ValueError(span)
            if span is None:
                items.append(item)
            else:
                items.append(str(span[0]) if span[0] == span[1] else f"H({span[0]}-{span[1]})")
        fields.append(",".join(items))
    return " ".join(fields)
