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

Anything else is a :class:`BadLine` with its number and the reason.  The
five time fields are checked by :mod:`quorum_cron.crontab.fields`.  A
command over Vixie cron's 999 bytes is refused: Vixie cron cut it there,
cronie did not, and an import cannot tell which of the two ran it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from quorum_cron.crontab.fields import FIELD_NAMES, check_field

__all__ = [
    "CRON_ALIASES",
    "BadLine",
    "CronEntry",
    "Crontab",
    "is_user_name",
    "parse_crontab",
    "split_percent",
]

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

_USER_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*\$?", re.ASCII)
_MAX_LINE = 10_000
_MAX_COMMAND = 999
"""The longest command Vixie cron keeps (``MAX_COMMAND`` 1000 with its NUL; Debian's and Ubuntu's
``cron``): ``get_string`` drops the rest of the line without a word. cronie keeps 131071."""
_MAX_USER = 32
"""The longest user name ``useradd`` accepts by default (``LOGIN_NAME_MAX`` is larger; cron is not)."""
_NOT_UTF8_RE = re.compile("[\udc80-\udcff]")
"""A byte that is not UTF-8, as ``bytes.decode("utf-8", "surrogateescape")`` leaves it."""
_C_SPACE = " \t\n\v\f\r"
"""What C's ``isspace`` (cronie's ``load_env``) counts as blank."""


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
    quiet: bool = False
    """Written with a leading ``-``: cronie logs no syslog line when it runs."""
    mail_on_error: bool = False
    """The command was written ``-n command`` (cronie 1.7+): cron mailed its output only when it failed."""

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

    A transcription of cronie's ``child_process`` (Vixie cron's): in the
    command part ``\\%`` becomes ``%`` and other backslashes stay; the first
    bare ``%`` ends it.  In the input part a bare ``%`` is a newline, ``\\%``
    a ``%``, any other backslash is kept, and when the last character
    written is not a newline cron adds one (a backslash at the very end is
    written after that check, as in cron).  An empty input part writes
    nothing: the job reads end-of-file at once.
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
    escaped = need_newline = False
    for ch in rest:
        if escaped:
            if ch != "%":
                data.append("\\")
        elif ch == "%":
            ch = "\n"
        escaped = ch == "\\"
        if not escaped:
            data.append(ch)
            need_newline = ch != "\n"
    if escaped:
        data.append("\\")
    if need_newline:
        data.append("\n")
    return "".join(out), "".join(data)


def _env_setting(line: str) -> tuple[str, str, bool] | None:
    """``(name, value, bare)`` if cron reads ``line`` as an environment setting, else ``None``.

    A transcription of cronie's ``load_env`` state machine: a name (quoted,
    or up to a blank or ``=``), blanks, ``=``, blanks, then a value that is
    either quoted (nothing but blanks may follow the closing quote) or runs
    to the end of the line without its trailing blanks.  "Blank" is C's
    ``isspace`` (space, ``\t\n\v\f\r``), not Python's, which also counts
    ``U+00A0`` and other Unicode spaces that cron keeps.  ``bare``: ``NAME=``
    with nothing after the ``=``, a setting to the empty string for cronie
    1.5.2+ (the ``EQ2`` state) but a refused line for Vixie cron and older
    cronie.
    """
    name_i, name, eq1, eq2, value_i, value, fini, error = range(8)
    state, quote = name_i, ""
    name_chars: list[str] = []
    value_chars: list[str] = []
    buf = name_chars
    text = line.lstrip(" \t")
    i = 0
    while state != error and i < len(text):
        c = text[i]
        if state in (name_i, value_i):
            if c in ("'", '"'):
                quote = c
                i += 1
            state += 1
            continue
        if state in (name, value):
            if quote:
                if c == quote:
                    state += 1
                    i += 1
                    continue
                if state == name and c == "=":
                    state = error
                    continue
            elif state == name:
                if c in _C_SPACE:
                    i += 1
                    state += 1
                    continue
                if c == "=":
                    state += 1
                    continue
            buf.append(c)
            i += 1
        elif state == eq1:
            if c == "=":
                state, buf, quote = eq2, value_chars, ""
            elif c not in _C_SPACE:
                state = error
            i += 1
        else:  # eq2, fini
            if c in _C_SPACE:
                i += 1
            else:
                state += 1
    if state not in (fini, eq2) and not (state == value and not quote):
        return None
    result = "".join(value_chars)
    if state == value:
        result = result.rstrip(_C_SPACE)
    key = "".join(name_chars)
    return (key, result, state == eq2) if key else None


def _entry(lineno: int, line: str, system: bool, env: list[tuple[str, str]]) -> CronEntry | BadLine:
    text = line.lstrip(" \t")
    quiet = text.startswith("-")
    if quiet:  # cronie: no syslog line for this job; nothing to carry over (the agent logs every run)
        text = text[1:]
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
        for part, what in zip(parts[:5], FIELD_NAMES, strict=True):
            if problem := check_field(part, what):
                return BadLine(lineno, line, problem)
        schedule, rest = " ".join(parts[:5]), parts[5]
    rest = rest.lstrip(" \t")
    if rest.startswith("*"):
        return BadLine(lineno, line, "a sixth time field? cron refuses a command that starts with '*'")
    user: str | None = None
    if system:
        user, *tail = re.split(r"[ \t]+", rest, maxsplit=1)
        rest = tail[0] if tail else ""
        if not is_user_name(user):
            return BadLine(
                lineno, line, f"user column {user!r} is not a user name (is this a system crontab?)"
            )
    if not rest.strip():
        return BadLine(lineno, line, "no command")
    rest, mail_on_error, problem = _command_options(rest)
    if problem:
        return BadLine(lineno, line, problem)
    if rest.endswith("\r"):
        return BadLine(
            lineno, line, "ends with a carriage return (DOS line end): cron would pass it to the shell"
        )
    if (size := len(rest.encode())) > _MAX_COMMAND:
        return BadLine(
            lineno,
            line,
            f"command is {size} bytes: Vixie cron (Debian's and Ubuntu's) ran only its first "
            f"{_MAX_COMMAND}, cronie all of it; move it into a script, so that what runs does not "
            f"depend on the cron",
        )
    command, stdin = split_percent(rest)
    if not command.strip():
        return BadLine(lineno, line, "no command before the first '%'")
    return CronEntry(lineno, line, schedule, command, stdin, user, tuple(env), quiet, mail_on_error)


def _command_options(rest: str) -> tuple[str, bool, str | None]:
    """cronie's options before the command (``load_entry``): ``-n`` and a blank, then the command.

    cronie 1.7+ reads a command that starts with ``-`` as options: ``-n`` (mail the output
    only when the job fails) is the only one, given once and followed by a blank; anything
    else starting with ``-`` makes it refuse the line.  (Older crons passed ``-n cmd`` to the
    shell, which then failed to run ``-n``: nobody meant that.)
    """
    mail_on_error = False
    while rest.startswith("-"):
        if rest.rstrip(" \t") == "-n":
            return rest, mail_on_error, "no command after '-n'"
        if rest[:2] == "-n" and mail_on_error:
            return rest, mail_on_error, "'-n' given twice: cronie refuses this line"
        if rest[:2] != "-n" or rest[2:3] not in (" ", "\t"):
            shown = rest.split(None, 1)[0] if rest.strip() else rest
            return (
                rest,
                mail_on_error,
                (
                    f"command starts with {shown!r}: cronie reads a leading '-' as its options (only '-n', "
                    f"once, then a blank) and refuses this line; quote or move it if it is the program"
                ),
            )
        mail_on_error = True
        rest = rest[2:].lstrip(" \t")
    return rest, mail_on_error, None


def is_user_name(text: str) -> bool:
    """Whether ``text`` is a POSIX-portable user name (what ``useradd`` accepts, ``$`` for Samba).

    The system crontab's user column and ``import-crontab --user`` both become
    ``USER``/``LOGNAME`` in the job's environment: a space or a control
    character there is a typo, not a user.
    """
    return len(text) <= _MAX_USER and _USER_RE.fullmatch(text) is not None


def parse_crontab(text: str, *, system: bool = False) -> Crontab:
    """Read crontab ``text``; ``system=True`` for the ``/etc/crontab`` format with a user column.

    ``text`` may hold bytes that are not UTF-8 as ``surrogateescape`` decodes them: comments
    and blank lines holding them are ignored, as cron ignores them; other lines are refused.
    """
    entries: list[CronEntry] = []
    bad: list[BadLine] = []
    env: list[tuple[str, str]] = []
    lines = text.split("\n")
    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip(" \t\r")
        if not stripped or stripped.startswith("#"):
            continue
        if lineno == len(lines):
            bad.append(
                BadLine(lineno, line, "no newline at the end of the file: cron ignores this last line")
            )
            continue
        if undecodable := _NOT_UTF8_RE.search(line):
            raw = line.encode("utf-8", "surrogateescape")
            byte = ord(undecodable.group()) - 0xDC00
            bad.append(
                BadLine(
                    lineno,
                    raw.decode("utf-8", "backslashreplace"),
                    f"not UTF-8 (byte 0x{byte:02x} at column {undecodable.start() + 1}): a config "
                    f"is UTF-8 text and cannot hold these bytes; write the line in UTF-8 (the "
                    f"program then gets UTF-8 bytes) or move the command into a script",
                )
            )
            continue
        if len(line) > _MAX_LINE or "\x00" in line:
            bad.append(BadLine(lineno, line[:100], f"longer than {_MAX_LINE} characters or holds NUL"))
            continue
        setting = _env_setting(line)
        if setting is not None and setting[2]:
            name = setting[0]
            bad.append(
                BadLine(
                    lineno,
                    line,
                    f"crons disagree on an empty {name}=: cronie 1.5.2+ sets it to the empty string, "
                    f'Vixie cron and older cronie refuse the line (write {name}="" or delete the line)',
                )
            )
            continue
        if setting is not None:
            env = [(k, v) for k, v in env if k != setting[0]]
            env.append(setting[:2])
            continue
        result = _entry(lineno, line, system, env)
        if isinstance(result, CronEntry):
            entries.append(result)
        else:
            bad.append(result)
    return Crontab(tuple(entries), tuple(bad))
