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
import tomllib

import pytest

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
