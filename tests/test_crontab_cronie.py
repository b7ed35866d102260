"""``import-crontab`` against cronie's source, where it was read wrong or not at all.

Each test names the cronie code it transcribes (cronie-crond/cronie, ``src/``):
``entry.c`` (``load_entry``, ``get_range``), ``env.c`` (``load_env``), ``cron.c``
(``find_jobs``, the main loop), ``user.c`` (``load_user``).  Expected values are
written from that code, not computed by the importer.
"""

from __future__ import annotations

import tomllib

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.config.file import parse_config
from quorum_cron.config.settings import JobSpec
from quorum_cron.crontab import parse_crontab
from quorum_cron.crontab.translate import Imported
from tests.test_import_crontab import NOW_S, imported


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


# --------------------------------------------------------------------------- cron.c: the zone


def test_tz_does_not_move_the_schedule_cron_matches_in_cron_tz_or_the_host_zone() -> None:
    """``find_jobs``' ``maketime``: ``CRON_TZ`` if set and not empty, else the daemon's zone.

    ``TZ=Asia/Tokyo`` in a crontab on a UTC host: cron runs ``0 9 * * *`` at 09:00 UTC
    (the job sees TZ in its environment). The importer scheduled it at 09:00 Tokyo,
    00:00 UTC, with only a TOML comment to say so.
    """
    result = imported("TZ=Asia/Tokyo\n0 9 * * * a\nCRON_TZ=Europe/Berlin\n0 9 * * * b\n")
    a, b = jobs_of(result)
    assert (a.timezone, a.env["TZ"]) == ("UTC", "Asia/Tokyo")
    assert a.schedule.next_after(NOW_S * 1000) == (NOW_S + 9 * 3600) * 1000
    assert (b.timezone, b.env["TZ"]) == ("Europe/Berlin", "Asia/Tokyo")
    assert "timezone: TZ='Asia/Tokyo' is only the job's environment: cron schedules by the host zone" in (
        result.toml
    )
    assert "cron schedules by CRON_TZ (Europe/Berlin)" in result.toml
    (note,) = [n for n in result.notes if n.startswith("TZ:")]
    assert note.startswith("TZ: 2 job(s) have a TZ that is not their schedule's zone")
    # TZ equal to the zone the job runs in says nothing.
    quiet = imported("TZ=UTC\n0 9 * * * a\n")
    assert "TZ=" not in "".join(quiet.notes) and "timezone:" not in quiet.toml


@pytest.mark.parametrize("setting", ['CRON_TZ=""', "CRON_TZ=''", 'CRON_TZ = ""'])
def test_empty_cron_tz_is_the_host_zone(setting: str) -> None:
    """``maketime``: ``if (t != NULL && *t != '\\0')`` -- an empty CRON_TZ is no CRON_TZ.

    The importer refused the line: ``CRON_TZ='' is not an IANA zone name``.
    """
    result = imported(f"CRON_TZ=Asia/Tokyo\n{setting}\n30 2 * * * a\n", host_tz="Europe/Berlin")
    assert result.bad == []
    (job,) = jobs_of(result)
    assert job.timezone == "Europe/Berlin" and job.env["CRON_TZ"] == ""
    assert "CRON_TZ is empty, so cron used the host's zone" in result.toml
    # On a Berlin host cron runs 02:30 once at fall-back, right after the jump in spring: no DST note.
    assert "DST" not in result.toml


# --------------------------------------------------------------------------- env.c: load_env


@pytest.mark.parametrize("line", ["MAILTO=", "MAILTO =  ", '"MAILTO"=', "MAILTO=\t\r"])
def test_bare_name_equals_is_refused_with_what_each_cron_does(line: str) -> None:
    """``load_env``: ``state != FINI && state != EQ2 && ...`` -- cronie 1.5.2+ (commit 207f622)
    reads ``NAME=`` as the empty string; Vixie cron and older cronie refuse the line.

    The importer said "cron reads this as neither a setting nor a job", wrong for cronie.
    """
    (bad,) = imported(f"# x\n{line}\n").bad
    assert bad.lineno == 2
    assert bad.reason == (
        "crons disagree on an empty MAILTO=: cronie 1.5.2+ sets it to the empty string, "
        'Vixie cron and older cronie refuse the line (write MAILTO="" or delete the line)'
    )


def test_env_blanks_are_cs_isspace_not_pythons() -> None:
    """``load_env`` trims and splits on C ``isspace``: a no-break space is part of the text.

    Python's ``str.isspace`` counts U+00A0: ``A\\u00a0=1`` set ``A`` (cron sets a variable
    named ``A\\u00a0``), and ``MAILTO=ops@example.com\\u00a0`` lost its last character.
    """
    tab = parse_crontab("A\u00a0=1\nB=x\u00a0 \t\nC = y \x0b\n0 1 * * * a\n")
    assert tab.bad == ()
    (entry,) = tab.entries
    assert entry.env_dict == {"A\u00a0": "1", "B": "x\u00a0", "C": "y"}


# --------------------------------------------------------------------------- bytes


LATIN1 = b"# Gr\xfc\xdfe von M\xfcller\nMAILTO=ops@example.com\n0 1 * * * echo caf\xe9\n0 2 * * * /bin/ok\n"


def test_bytes_that_are_not_utf8_refuse_their_line_by_number_and_comments_pass() -> None:
    """Cron reads bytes: a Latin-1 comment is a comment. The command refused the whole file
    with ``not UTF-8 text (byte 4)`` -- no line number, and the comment was the cause."""
    args = ["import-crontab", "-", "--timezone", "UTC", "--user", "root", "--dst-from", "2026-01-01"]
    out = CliRunner().invoke(main, args, input=LATIN1)
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr.splitlines()[0] == (
        "error: <stdin>: line 3: not UTF-8 (byte 0xe9 at column 19): a config is UTF-8 text and "
        "cannot hold these bytes; write the line in UTF-8 (the program then gets UTF-8 bytes) or "
        "move the command into a script: '0 1 * * * echo caf\\\\xe9'"
    )
    out = CliRunner().invoke(main, [*args, "--skip-bad"], input=LATIN1)
    assert out.exit_code == 0 and 'shell = "/bin/ok"' in out.stdout
    assert "skipped: <stdin>: line 3: not UTF-8" in out.stderr
    assert "imported 1 job(s)" in out.stderr


# --------------------------------------------------------------------------- entry.c: '~'


def test_cronies_random_tilde_becomes_h_in_the_same_range() -> None:
    """``get_range``, ``R_RANDOM`` (cronie 1.6+): ``a~b`` is one value drawn from a..b when
    cron loads the crontab; either end may be left out. The importer refused it as "not
    cron syntax"; ``H(a-b)`` is the same choice, made from the job name on every node."""
    result = imported("0~30 ~ * * * a\n~ 2 * * mon~fri b\n15 3 * jan~mar sun~ c\n5~5 * * * * d\n")
    assert result.bad == []
    a, b, c, d = jobs_of(result)
    assert [j.schedule_expr for j in (a, b, c, d)] == [
        "H(0-30) H(0-23) * * *",
        "H(0-59) 2 * * H(1-5)",
        "15 3 * H(1-3) H(0-7)",
        "5 * * * *",
    ]
    minute, hour = (int(f) for f in a.schedule.resolved_expr.split()[:2])
    assert 0 <= minute <= 30 and 0 <= hour <= 23
    assert result.toml.count("'~': cronie picked each a~b value at random when it loaded the crontab") == 4


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        ("30~10", "random range '30~10' must run upwards within 0-59"),
        ("0~70", "random range '0~70' must run upwards within 0-59"),
        ("1~5/2", "'1~5/2' is not cronie's random 'a~b' (no step, one '~')"),
        ("~~", "'~~' is not cronie's random 'a~b'"),
        ("mon~3", "'mon' in 'mon~3' is not a number or name of this field"),
    ],
)
def test_a_tilde_cronie_refuses_is_refused_with_why(field: str, reason: str) -> None:
    (bad,) = imported(f"{field} * * * * x\n").bad
    assert bad.lineno == 1 and f"minute field {field!r}: {reason}" in bad.reason, bad


# --------------------------------------------------------------------------- entry.c: PATH


def test_the_default_path_is_said_since_cronie_17_changed_it() -> None:
    """``load_entry``: without PATH in the crontab cronie 1.7+ sets ``_PATH_STDPATH``
    (/usr/bin:/bin:/usr/sbin:/sbin, commit 7575e75), Vixie cron and older cronie
    /usr/bin:/bin. A root job calling a /usr/sbin program ran under cronie 1.7 and
    fails after the import, which said nothing."""
    result = imported("0 1 * * * logrotate /etc/lr.conf\n0 2 * * * b\nPATH=/opt/bin\n0 3 * * * c\n")
    assert [j.env["PATH"] for j in jobs_of(result)] == ["/usr/bin:/bin", "/usr/bin:/bin", "/opt/bin"]
    assert (
        "PATH: 2 job(s) get cron's default PATH=/usr/bin:/bin (Vixie cron, cronie before 1.7); "
        "cronie 1.7+ gave /usr/bin:/bin:/usr/sbin:/sbin: if yours did, set PATH in [jobs.env]"
    ) in result.notes
    assert not any(n.startswith("PATH") for n in imported("PATH=/bin\n0 1 * * * a\n").notes)


def test_a_leading_dash_in_a_users_own_crontab_is_refused_as_cronie_does() -> None:
    """``load_entry``: ``if (pw == NULL || pw->pw_uid == 0)`` -- else "Only privileged user
    can disable logging" and the line is refused: alice's ``-0 1 * * * x`` never ran, and
    the importer made a job of it."""
    result = imported("-0 1 * * * x\n0 2 * * * y\n", owner="alice")
    (bad,) = result.bad
    assert bad.lineno == 1 and bad.reason.startswith(
        "a leading '-' (no syslog line) is for root's and system crontabs: cronie refused this line "
        "in alice's crontab, so it never ran"
    )
    assert result.jobs == 1
    assert imported("-0 1 * * * x\n", owner="root").bad == []
    assert imported("-0 1 * * * alice x\n", system=True).bad == []


# --------------------------------------------------------------------------- entry.c: RANDOM_DELAY


@pytest.mark.parametrize(
    ("value", "schedule", "comment"),
    [
        ("10m", "H(40-50) 3 * * *", "RANDOM_DELAY=10: cron started this job 0-10 min late"),
        ('" 7"', "H(40-47) 3 * * *", "RANDOM_DELAY=7:"),
        ("2000", "40 3 * * *", "RANDOM_DELAY='2000' is outside cronie's 0-1440: it logged 'bad value"),
        ("-5", "40 3 * * *", "RANDOM_DELAY='-5' is outside cronie's 0-1440"),
        ("soon", "40 3 * * *", "RANDOM_DELAY='soon' is not a number of minutes: cronie reads it as 0"),
    ],
)
def test_random_delay_is_read_as_cronies_strtol(value: str, schedule: str, comment: str) -> None:
    """``load_entry``: ``val = strtol(p, &endptr, 10)``, endptr unchecked; ``val < 0 ||
    val > 24*60`` is "bad value of RANDOM_DELAY" (no delay). The importer ignored '10m'
    (cronie: 10 minutes) and said cron delayed a job by up to 2000 minutes."""
    result = imported(f"RANDOM_DELAY={value}\n40 3 * * * a\n")
    (job,) = jobs_of(result)
    assert job.schedule_expr == schedule
    assert f"# {comment}" in result.toml
