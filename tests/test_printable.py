"""quorum_cron/printable.py: what reaches a terminal or a log line from Redis is escaped.

:func:`printable` runs once per field of every agent log line, so it is one
regular-expression pass; the character-by-character rule it implements is
written out here as the specification, and hypothesis checks the two agree
on any text (controls, bidi marks, astral characters, newlines).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.printable import cell, printable

_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A)) | {0x200E, 0x200F}


def _spec(text: str, newlines: bool) -> str:
    """C0 controls (but a kept newline), DEL, C1 controls and bidi characters become escapes."""
    out = []
    for ch in text:
        code = ord(ch)
        if (code < 0x20 and not (newlines and ch == "\n")) or 0x7F <= code < 0xA0 or code in _BIDI:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


_TRICKY = st.sampled_from(
    ["\n", "\r", "\x1b", "\x7f", "\x85", "\x9f", "\xa0", "\u200e", "\u202e", "\u2069", "é"]
)


@given(st.lists(st.one_of(st.characters(), _TRICKY), max_size=60).map("".join), st.booleans())
def test_printable_escapes_exactly_what_the_rule_names(text: str, newlines: bool) -> None:
    assert printable(text, newlines=newlines) == _spec(text, newlines)


def test_escapes_are_visible_and_plain_text_comes_back_as_it_is() -> None:
    assert printable("a\x1b[31mb\u202ec\x85d\ne") == "a\\x1b[31mb\\u202ec\\x85d\\x0ae"
    assert printable("line 1\nline 2", newlines=True) == "line 1\nline 2"
    plain = "j000001@1796441400000 started with token 1, résumé ✓"
    assert printable(plain) is plain  # nothing to escape: no copy


def test_a_limit_cuts_before_escaping_and_says_how_long_the_text_was() -> None:
    assert printable("abcdefgh", 3) == "abc…(8 chars)"
    assert printable("\x1b" * 5, 2) == "\\x1b\\x1b…(5 chars)"


def test_a_cell_escapes_rich_markup_too() -> None:
    assert cell("[bold red]x\x1b") == "\\[bold red]x\\x1b"
