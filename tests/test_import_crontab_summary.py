"""``import-crontab``'s last stderr line after a line that cannot be imported.

Without ``--skip-bad``: exit 1, the refused lines and their count, nothing on stdout and no
"imported" summary (a newcomer's audit reported a success summary after the error; it holds on
this code, and this test keeps it so). With ``--skip-bad`` the summary said only "imported 1
job(s) from crontab", which read as if the whole crontab had come in: it now says how many
lines were left out, and which.
"""

from __future__ import annotations

from click.testing import CliRunner

from quorum_cron.cli import main

TAB = "0 * * * * /bin/ok\n@reboot /bin/warm\nnot a cron line\n"
ARGS = ["import-crontab", "-", "--timezone", "UTC", "--dst-from", "2026-01-01"]


def test_a_bad_line_is_an_error_without_a_summary() -> None:
    result = CliRunner().invoke(main, ARGS, input=TAB)
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert all(line.startswith("error: <stdin>: ") for line in lines), lines
    assert lines[-1] == "error: <stdin>: 2 line(s) not imported; fix them or pass --skip-bad"
    assert not any("imported 1 job" in line for line in lines)


def test_skip_bad_says_what_was_not_imported() -> None:
    result = CliRunner().invoke(main, [*ARGS, "--skip-bad"], input=TAB)
    assert result.exit_code == 0 and "/bin/ok" in result.stdout
    assert result.stderr.splitlines()[-1] == (
        "imported 1 job(s) from <stdin>; 2 line(s) not imported (--skip-bad): line(s) 2, 3"
    )


def test_many_skipped_lines_are_counted_not_all_listed() -> None:
    tab = "".join(f"bad {n}\n" for n in range(1, 13)) + "* * * * * /bin/ok\n"
    result = CliRunner().invoke(main, [*ARGS, "--skip-bad"], input=tab)
    assert result.exit_code == 0
    assert result.stderr.splitlines()[-1] == (
        "imported 1 job(s) from <stdin>; 12 line(s) not imported (--skip-bad): "
        "line(s) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more"
    )


def test_a_clean_crontab_keeps_the_plain_summary() -> None:
    result = CliRunner().invoke(main, [*ARGS, "--skip-bad"], input="0 * * * * /bin/ok\n")
    assert result.exit_code == 0
    assert result.stderr.splitlines()[-1] == "imported 1 job(s) from <stdin>"
