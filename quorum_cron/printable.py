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

from typing import Final

__all__ = ["cell", "printable"]

_BIDI: Final = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A)) | {0x200E, 0x200F}


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, limit: int = 0, *, newlines: bool = False) -> str:
    """``text`` with control and bidi characters escaped; cut to ``limit`` characters (0: no limit)."""
    if limit and len(text) > limit:
        text = text[:limit] + f"…({len(text)} chars)"
    out = []
    for ch in text:
        code = ord(ch)
        if (code < 0x20 and not (newlines and ch == "\n")) or 0x7F <= code < 0xA0 or code in _BIDI:
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "".join(out)


def cell(text: object, limit: int = 200, *, newlines: bool = False) -> str:
    """:func:`printable` for a ``rich`` table cell or markup string: markup escaped too."""
    from rich.markup import escape

    return escape(printable(str(text), limit, newlines=newlines))
