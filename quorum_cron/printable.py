"""Text from Redis made safe to print: no terminal escapes, no markup, bounded length.

Node ids, host names, pause reasons, executors, job output tails: all come
back from Redis, which anyone with write access can fill. Printed raw, an
escape sequence can rewrite the operator's terminal (or hide a line), and
in a ``rich`` table ``[bold red]`` or ``[link=...]`` would be interpreted
as markup. :func:`printable` replaces every control character (C0, DEL,
C1) and the bidirectional-override characters with a visible ``\\xNN`` /
``\\uNNNN`` escape; :func:`cell` also escapes rich markup. Newlines are
kept only where a caller asks (a run's output tail is multi-line).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["cell", "first_of", "printable"]

_BEYOND_C0: Final = "\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""What :func:`printable` escapes besides the C0 controls: DEL, C1 controls, bidi marks and overrides."""
_UNSAFE: Final = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_UNSAFE_BUT_NEWLINE: Final = re.compile(f"[\x00-\x09\x0b-\x1f{_BEYOND_C0}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, limit: int = 0, *, newlines: bool = False) -> str:
    """``text`` with control and bidi characters escaped; cut to ``limit`` characters (0: no limit).

    One regular-expression pass (a text with nothing to escape comes back as
    it is): every agent log line goes through here once per field, and a loop
    over its characters in Python was about half of formatting a text log
    line (37-61 µs before, 20-32 µs after, on a slow hour; issue 27).
    """
    if limit and len(text) > limit:
        text = text[:limit] + f"…({len(text)} chars)"
    return (_UNSAFE_BUT_NEWLINE if newlines else _UNSAFE).sub(_escape, text)


def cell(text: object, limit: int = 200, *, newlines: bool = False) -> str:
    """:func:`printable` for a ``rich`` table cell or markup string: markup escaped too."""
    from rich.markup import escape

    return escape(printable(str(text), limit, newlines=newlines))


def first_of(items: list[str], limit: int, sep: str = ", ") -> str:
    """The first ``limit`` of ``items``, then how many more: a line that names them stays one line
    at any count (100,000 jobs, a crontab of bad lines). ``sep``: "; " for items that hold commas."""
    return sep.join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")
