"""Which format the reading commands default to: a table on a terminal wide enough for one.

A newcomer's `status` at an 80-column terminal split words mid-word (``succee|ded``), each cell
over up to eight lines: nine columns do not fit. A narrower terminal now gets the plain rows;
``--format table`` still gives the table. The terminal here is a real pseudo-terminal.
"""

from __future__ import annotations

import os
import pty
import sys

import pytest

from quorum_cron.commands.output import TABLE_MIN_COLUMNS, resolve_format


@pytest.mark.parametrize(
    ("columns", "expected"), [(80, "plain"), (TABLE_MIN_COLUMNS - 1, "plain"), (TABLE_MIN_COLUMNS, "table")]
)
def test_a_terminal_gets_the_table_only_when_it_is_wide_enough(
    columns: int, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as terminal:
            monkeypatch.setattr(sys, "stdout", terminal)
            monkeypatch.setenv("COLUMNS", str(columns))
            assert terminal.isatty()
            assert resolve_format(None, False) == expected
            assert resolve_format("table", False) == "table"  # (asked for: always)
            assert resolve_format(None, True) == "json"
    finally:
        os.close(leader)
        os.close(follower)


def test_a_pipe_gets_plain_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    read, write = os.pipe()
    try:
        with os.fdopen(write, "w", closefd=False) as pipe:
            monkeypatch.setattr(sys, "stdout", pipe)
            monkeypatch.setenv("COLUMNS", "300")
            assert resolve_format(None, False) == "plain"
    finally:
        os.close(read)
        os.close(write)
