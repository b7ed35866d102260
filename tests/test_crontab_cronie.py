"""``import-crontab`` against cronie's source, where it was read wrong or not at all.

Each test names the cronie code it transcribes (cronie-crond/cronie, ``src/``):
``entry.c`` (``load_entry``, ``get_range``), ``env.c`` (``load_env``), ``cron.c``
(``find_jobs``, the main loop), ``user.c`` (``load_user``).  Expected values are
written from that code, not computed by the importer.
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
HOMES = {"alice": "/home/alice", "root": "/root"}


def imported(text: str, *, system: bool = False, host_tz: str = "UTC", owner: str = "alice") -> Imported:
    return translate(
        parse_crontab(text, system=system),
        source="crontab",
        cluster_name="cron",
        host_tz=host_tz,
        owner=owner,
        home_of=HOMES.get,
        now_s=NOW_S,
    )


def jobs_of(result: Imported) -> list[JobSpec]:
    return list(parse_config(tomllib.loads(result.toml), "imported").jobs)


# --------------------------------------------------------------------------- entry.c: '-n'


def test_dash_n_is_cronies_mail_on_error_option_not_part_of_the_command() -> None:
    """``load_entry``: ``while (ch == '-')`` reads ``-n`` and a blank before the command.

    The importer gave the shell ``-n /usr/bin/report``, which fails every run.
    """
    tab = "0 6 * * * alice -n /usr/bin/report --daily\n0 7 * * * root -n  /bin/b%in\n"
    result = imported(tab, system=True)
    assert result.bad == []
    a, b = jobs_of(result)
    assert a.shell == "/usr/bin/report --daily"
    assert (b.shell, b.stdin) == ("/bin/b", "in\n")
    assert result.toml.count("'-n': cronie mailed this job's output only when it failed") == 2
    assert a.alert_on == ("failed", "missed", "lost")  # a failed run still alerts


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("-q /bin/x", "command starts with '-q': cronie reads a leading '-' as its options"),
        ("-nx /bin/x", "command starts with '-nx'"),
        ("-n -n /bin/x", "'-n' given twice"),
        ("-n   ", "no command after '-n'"),
        ("--help", "command starts with '--help'"),
    ],
)
def test_other_leading_dash_options_are_refused_as_cronie_does(command: str, reason: str) -> None:
    (bad,) = imported(f"# x\n0 6 * * * {command}\n").bad
    assert bad.lineno == 2 and reason in bad.reason, bad
