"""import-crontab at cron's edges: a SHELL that is no path, a command over Vixie cron's 999 bytes,
a range that runs backwards (``sat-sun``).

Each was imported with a meaning cron never gave it, or refused as if quorum-cron were the one
that could not run it:

* ``SHELL=bash`` became ``command = ["bash", "-c", ...]``, which the agent finds on ``PATH``;
  cron ``execle``\\ s SHELL as a path (relative to HOME), so under cron the job never started;
* a command of 1000+ bytes was imported whole, while Vixie cron (Debian's and Ubuntu's ``cron``)
  ran only its first 999 (``get_string`` drops the rest silently) and cronie all of it;
* ``sat-sun`` was refused as "quorum-cron cannot run it" under a generated job name, when
  cronie and Vixie cron refuse it themselves and busybox/dcron wrap it around.

Each is now one line naming the line number and what to write.
"""

from __future__ import annotations

import calendar
import re
import tomllib

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.cli import main
from quorum_cron.config.file import parse_config
from quorum_cron.config.settings import JobSpec
from quorum_cron.crontab import parse_crontab, translate
from quorum_cron.crontab.translate import Imported

NOW_S = calendar.timegm((2026, 1, 1, 0, 0, 0))


def imported(text: str) -> Imported:
    return translate(
        parse_crontab(text),
        source="crontab",
        cluster_name="cron",
        host_tz="UTC",
        owner="alice",
        home_of={"alice": "/home/alice"}.get,
        now_s=NOW_S,
    )


def only_job(text: str) -> JobSpec:
    result = imported(text)
    assert result.bad == [], result.bad
    (job,) = parse_config(tomllib.loads(result.toml), "imported").jobs
    return job


def one_refusal(text: str) -> str:
    result = imported(text)
    assert result.jobs == 0, result.toml
    (bad,) = result.bad
    line = str(bad)
    assert "\n" not in line and line.startswith(f"line {bad.lineno}: "), line
    return line


# --------------------------------------------------------------------------- SHELL


@pytest.mark.parametrize("shell", ["bash", "zsh", "", "sh"])
def test_a_shell_that_is_no_path_is_refused_naming_the_line(shell: str) -> None:
    line = one_refusal(f'# comment\nSHELL="{shell}"\n0 1 * * * echo hi\n')
    assert line.startswith("line 3: ") and f"SHELL={shell!r} is not a path" in line, line
    assert "searches no PATH" in line and "SHELL=/bin/bash" in line, line


@pytest.mark.parametrize(
    ("shell", "command"),
    [
        ("/bin/bash", ("/bin/bash", "-c", "echo hi")),
        ("bin/zsh", ("bin/zsh", "-c", "echo hi")),  # relative to HOME, the job's cwd, as for cron
    ],
)
def test_a_shell_path_is_kept(shell: str, command: tuple[str, ...]) -> None:
    job = only_job(f"SHELL={shell}\n0 1 * * * echo hi\n")
    assert job.command == command and job.cwd == "/home/alice"
    assert only_job("0 1 * * * echo hi\n").shell == "echo hi"  # the default /bin/sh


# --------------------------------------------------------------------------- command length


def test_a_command_of_999_bytes_is_imported_whole_and_one_of_1000_refused() -> None:
    command = "echo " + "x" * 994
    assert only_job(f"0 4 * * * {command}\n").shell == command
    line = one_refusal(f"\n0 4 * * * {command}y\n")
    assert line.startswith("line 2: command is 1000 bytes: Vixie cron"), line
    assert "first 999" in line and "cronie all of it" in line, line


def test_the_limit_counts_bytes_with_the_input_after_percent_and_after_options() -> None:
    """Vixie cron's buffer holds bytes, the ``%`` input included (it is split at run time)."""
    assert "command is 1000 bytes" in one_refusal("0 4 * * * echo " + "é" * 497 + "x\n")
    assert "command is 1000 bytes" in one_refusal("0 4 * * * cat%" + "y" * 996 + "\n")
    assert "command is 1000 bytes" in one_refusal("0 4 * * * -n echo " + "z" * 995 + "\n")


@given(st.integers(0, 1200), st.sampled_from(["x", "é", "\\%"]))
def test_a_command_is_imported_whole_or_refused_never_cut(count: int, filler: str) -> None:
    command = "echo " + filler * count
    size = len(command.encode())
    result = imported(f"0 4 * * * {command}\n")
    if size <= 999:
        assert result.bad == [] and result.jobs == 1, result.bad
        (job,) = parse_config(tomllib.loads(result.toml), "imported").jobs
        assert job.shell == command.replace("\\%", "%")  # whole (cron's \\% is a plain %)
    else:
        (bad,) = result.bad
        assert str(bad).startswith(f"line 1: command is {size} bytes"), str(bad)


# --------------------------------------------------------------------------- backwards ranges


@pytest.mark.parametrize(
    ("fields", "field", "item", "wrapped"),
    [
        ("0 2 * * sat-sun", "day-of-week", "sat-sun", "sat,sun"),
        ("0 2 * * fri-mon", "day-of-week", "fri-mon", "fri-sat,sun-mon"),
        ("0 2 * * mon-sun", "day-of-week", "mon-sun", "mon-sat,sun"),  # sun is 0 to cron
        ("0 2 * * 5-1", "day-of-week", "5-1", "5-6,0-1"),
        ("0 2 * * 7-1", "day-of-week", "7-1", "0-1"),
        ("0 2 * * 1,6-0", "day-of-week", "6-0", "6,0"),
        ("0 22-2 * * *", "hour", "22-2", "22-23,0-2"),
        ("50-10 * * * *", "minute", "50-10", "50-59,0-10"),
        ("0 0 25-5 * *", "day-of-month", "25-5", "25-31,1-5"),
        ("0 0 1 nov-feb *", "month", "nov-feb", "nov-dec,jan-feb"),
        ("0 0 1 11-2 *", "month", "11-2", "11-12,1-2"),
    ],
)
def test_a_range_that_runs_backwards_is_refused_naming_field_and_line(
    fields: str, field: str, item: str, wrapped: str
) -> None:
    line = one_refusal(f'MAILTO=""\n{fields} echo weekend\n')
    assert line.startswith(f"line 2: {field} field "), line
    assert f"range {item!r} runs backwards" in line and "cronie and Vixie cron refuse the line" in line, line
    assert f"as {wrapped!r}: write that if yours did" in line and "quorum-cron cannot" not in line, line
    # ...and what it says to write is imported.
    fixed = fields.replace(item, wrapped)
    assert only_job(f"{fixed} echo weekend\n").schedule_expr == fixed


def test_a_backwards_range_with_a_step_is_refused_without_a_guess() -> None:
    line = one_refusal("0 2 * * sat-tue/2 echo x\n")
    assert "range 'sat-tue/2' runs backwards" in line and "as a list" in line, line


@pytest.mark.parametrize("fields", ["0 2 * * sun-sat", "0 2 * * mon-7", "0 2 * * 6-7", "0 0 1 jan-dec *"])
def test_ranges_that_run_forwards_are_kept(fields: str) -> None:
    assert only_job(f"{fields} echo x\n").schedule_expr == fields


DOW = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _days(field: str) -> set[int]:
    """The weekdays of a field of names and numbers (the test's own reading, not the importer's)."""
    out: set[int] = set()
    for item in field.split(","):
        lo, _, hi = item.partition("-")
        a, b = (DOW.index(v) if v in DOW else int(v) % 7 for v in (lo, hi or lo))
        out.update(range(a, b + 1))
    return out


@given(st.integers(0, 7), st.integers(0, 7), st.booleans())
def test_every_backwards_weekday_range_is_offered_as_busybox_wraps_it(a: int, b: int, names: bool) -> None:
    """busybox/dcron's ``ParseField`` steps ``n = (n + 1) % 7`` from ``a`` until it reaches ``b``."""
    first, last = (DOW[a % 7], DOW[b % 7]) if names else (str(a), str(b))
    value, end = (a % 7, b % 7) if names else (a, b)  # a name 'sun' is 0 to cron; the number 7 is 7
    result = imported(f"0 2 * * {first}-{last} echo x\n")
    if value <= end:
        assert result.bad == [], result.bad
        return
    (bad,) = result.bad
    wrapped = re.search(r"as '([^']+)': write that", str(bad))
    assert wrapped is not None, str(bad)
    expected, n = {a % 7}, a % 7
    while n != b % 7:
        n = (n + 1) % 7
        expected.add(n)
    assert _days(wrapped.group(1)) == expected, (first, last, wrapped.group(1))
    assert only_job(f"0 2 * * {wrapped.group(1)} echo x\n").schedule_expr == f"0 2 * * {wrapped.group(1)}"


def test_the_cli_prints_the_refusal_with_the_line_number() -> None:
    result = CliRunner().invoke(
        main,
        ["import-crontab", "-", "--timezone", "UTC", "--user", "alice"],
        input="0 2 * * sat-sun echo x\n",
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: <stdin>: line 1: day-of-week field 'sat-sun': range 'sat-sun'")
