"""Seconds options refuse NaN and what no socket or sleep takes: one usage line, exit 1, no traceback.

``check-clock --timeout nan`` (or ``inf``, ``1e308``) and ``--sample-interval
inf`` ended in a traceback from the socket's timeout or ``time.sleep``;
``demo --duration nan`` ran a demo of no slots and said "every due slot ran
exactly once", exit 0 (NaN compares false with a ``FloatRange``'s bounds).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main

CHECK = ["check-clock", "--server", "127.0.0.1:1", "--samples", "2"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            [*CHECK, "--timeout", "nan"],
            "error: Invalid value for '--timeout': 'nan' is not a number of seconds (expected 0.01<=x<=60.0)",
        ),
        (
            [*CHECK, "--timeout", "inf"],
            "error: Invalid value for '--timeout': inf is not in the range 0.01<=x<=60.0.",
        ),
        (
            [*CHECK, "--timeout", "1e308"],
            "error: Invalid value for '--timeout': 1e+308 is not in the range 0.01<=x<=60.0.",
        ),
        (
            [*CHECK, "--timeout", "0.1", "--sample-interval", "inf"],
            "error: Invalid value for '--sample-interval': inf is not in the range 0<=x<=3600.0.",
        ),
        (
            [*CHECK, "--timeout", "0.1", "--sample-interval", "NaN"],
            "error: Invalid value for '--sample-interval': 'NaN' is not a number of seconds (expected 0<=x",
        ),
        (
            ["demo", "--duration", "nan"],
            "error: Invalid value for '--duration': 'nan' is not a number of seconds (expected 6<=x<=3600)",
        ),
    ],
)
def test_a_seconds_option_out_of_what_it_can_be_is_one_error_line(args: list[str], expected: str) -> None:
    res = CliRunner().invoke(main, args, prog_name="quorum-cron")
    assert res.exit_code == 1, (res.stdout, res.stderr, res.exception)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), lines
