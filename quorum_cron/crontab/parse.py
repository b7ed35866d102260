"""Reading crontab(5) text the way cronie and Vixie cron read it.

What a line is, in the order cron decides it:

* blank, or first non-blank character ``#``: ignored (a ``#`` later on a
  line is part of the command or the value, as in cron);
* ``NAME = value``: an environment setting for the entries *below* it (cron
  reads the file top to bottom, so a setting after an entry does not apply
  to it).  Spaces around ``=`` are allowed; a value in matching single or
  double quotes loses them; trailing blanks are dropped;
* otherwise an entry: five time fields (or one ``@`` alias), the user column
  in system crontabs (``/etc/crontab``, ``/etc/cron.d/*``), then the command
  — the rest of the line.  In the command the first ``%`` not written ``\\%``
  ends the command line; what follows is the job's standard input, each
  further ``%`` a newline (:func:`split_percent` reproduces cron's exact
  rules for backslashes).

Anything else is a :class:`BadLine` with its number and the reason.  Cron's
field grammar is checked here only for what quorum-cron's own parser would
accept but cron would not (``H``, six fields); ranges and values are checked
by :class:`quorum_cron.schedule.Schedule` when the job is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["CRON_ALIASES", "BadLine", "CronEntry", "Crontab", "parse_crontab", "split_percent"]

CRON_ALIASES: tuple[str, ...] = (
    "@reboot",
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
)
"""The ``@`` forms cronie and Vixie cron accept (lower case only, as they compare)."""

_NAMES = frozenset(
    [
        "jan",
        "feb",
        "mar",
        "apr",
        "may",
        "jun",
        "jul",
        "aug",
        "sep",
        "oct",
        "nov",
        "dec",
        "sun",
        "mon",
        "tue",
        "wed",
        "thu",
        "fri",
        "sat",
    ]
)
_FIELD_RE = re.compile(r"[A-Za-z0-9*,/-]+", re.ASCII)
_WORD_RE = re.compile(r"[A-Za-z]+", re.ASCII)
_USER_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*\$?", re.ASCII)
_MAX_LINE = 10_000


@dataclass(frozen=True)
class BadLine:
    """A line cron would refuse (or quorum-cron cannot carry): its number, text and why."""

    lineno: int
    text: str
    reason: str

    def __str__(self) -> str:
        shown = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return f"line {self.lineno}: {self.reason}: {shown!r}"


@dataclass(frozen=True)
class CronEntry:
    """One job line as cron understands it.

    ``schedule`` is the five fields joined by single spaces, or the alias;
    ``env`` is the environment settings in force at this line, in file order
    (later settings of a name replace earlier ones, as in cron).
    """

    lineno: int
    text: str
    schedule: str
    command: str
    stdin: str | None
    user: str | None
    env: tuple[tuple[str, str], ...] = field(default=())

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Crontab:
    """A parsed file: its entries and the lines that could not be read."""

    entries: tuple[CronEntry, ...]
    bad: tuple[BadLine, ...]


def split_percent(command: str) -> tuple[str, str | None]:
    """Cron's ``%`` rule: the command line, and the standard input (``None`` without a ``%``).

    A transcription of Vixie cron's ``child_process`` (kept by cronie): in
    the command part ``\\%`` becomes ``%`` and other backslashes stay; the
    first bare ``%`` ends it.  In the input part a bare ``%`` is a newline,
    ``\\%`` a ``%``, any other backslash is kept, and no newline is added at
    the end.
    """
    out: list[str] = []
    escaped = False
    rest: str | None = None
    for i, ch in enumerate(command):
        if escaped:
            if ch == "%":
                out[-1] = "%"
            else:
                out.append(ch)
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            out.append(ch)
            continue
        if ch == "%":
            rest = command[i + 1 :]
            break
        out.append(ch)
    if rest is None:
        return "".join(out), None
    data: list[str] = []
    escaped = False
    for ch in rest:
        if escaped:
            if ch != "%":
                data.append("\\")
        elif ch == "%":
            ch = "\n"
        escaped = ch == "\\"
        if not escaped:
            data.append(ch)
    if escaped:
        data.append("\\")
    return "".join(out), "".join(data)


def _env_setting(line: str) -> tuple[str, str] | None:
    """``(name, value)`` if cron would read ``line`` as an environment setting (Vixie ``load_env``)."""
    text = line.lstrip(" \t")
    if text[:1] in ("'", '"'):
        end = text.find(text[0], 1)
        if end < 1:
            return None
        name, rest = text[1:end], text[end + 1 :]
    else:
        m = re.match(r"[^\s=]+", text)
        if m is None:
            return None
        name, rest = m.group(0), text[m.end() :]
    rest = rest.lstrip(" \t")
    if not rest.startswith("="):
        return None
    value = rest[1:].lstrip(" \t").rstrip(" \t\r\n")
    if len(value) >= 2 and value[0] in ("'", '"') and value[-1] == value[0]:
        value = value[1:-1]
    if not name:
        return None
    return name, value


def _check_field(text: str, what: str) -> str | None:
    if not _FIELD_RE.fullmatch(text):
        return f"{what} field {text!r} is not cron syntax (expected numbers, names, '*', '-', '/' and ',')"
    for word in _WORD_RE.findall(text):
        if word.lower() not in _NAMES:
            return f"{what} field {text!r}: {word!r} is not cron syntax (H and L/W/# are not cron's)"
    return None


_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")


def _entry(lineno: int, line: str, system: bool, env: list[tuple[str, str]]) -> CronEntry | BadLine:
    text = line.lstrip(" \t")
    if text.startswith("@"):
        alias, *tail = re.split(r"[ \t]+", text, maxsplit=1)
        rest = tail[0] if tail else ""
        if alias not in CRON_ALIASES:
            return BadLine(lineno, line, f"unknown alias {alias!r} (cron knows {', '.join(CRON_ALIASES)})")
        schedule = alias
    else:
        parts = re.split(r"[ \t]+", text, maxsplit=5)
        if len(parts) < 6:
            return BadLine(lineno, line, "expected 5 time fields and a command, or an environment setting")
        for part, what in zip(parts[:5], _FIELD_NAMES, strict=True):
            if problem := _check_field(part, what):
                return BadLine(lineno, line, problem)
        schedule, rest = " ".join(parts[:5]), parts[5]
    rest = rest.lstrip(" \t")
    user: str | None = None
    if system:
        user, *tail = re.split(r"[ \t]+", rest, maxsplit=1)
        rest = tail[0] if tail else ""
        if not _USER_RE.fullmatch(user):
            return BadLine(
                lineno, line, f"user column {user!r} is not a user name (is this a system crontab?)"
            )
    if not rest.strip():
        return BadLine(lineno, line, "no command")
    command, stdin = split_percent(rest)
    if not command.strip():
        return BadLine(lineno, line, "no command before the first '%'")
    return CronEntry(lineno, line, schedule, command, stdin, user, tuple(env))


def parse_crontab(text: str, *, system: bool = False) -> Crontab:
    """Read crontab ``text``; ``system=True`` for the ``/etc/crontab`` format with a user column."""
    entries: list[CronEntry] = []
    bad: list[BadLine] = []
    env: list[tuple[str, str]] = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        stripped = line.strip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        if len(line) > _MAX_LINE or "\x00" in line:
            bad.append(BadLine(lineno, line[:100], f"longer than {_MAX_LINE} characters or holds NUL"))
            continue
        setting = _env_setting(line)
        if setting is not None:
            env = [(k, v) for k, v in env if k != setting[0]]
            env.append(setting)
            continue
        result = _entry(lineno, line, system, env)
        if isinstance(result, CronEntry):
            entries.append(result)
        else:
            bad.append(result)
    return Crontab(tuple(entries), tuple(bad))
