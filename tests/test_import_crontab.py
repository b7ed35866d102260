"""``quorum-cron import-crontab``: cron's reading of a crontab, and jobs that keep its meaning.

The expected values here are written from crontab(5) and Vixie cron's /
cronie's source (``load_env``, ``load_entry``, ``child_process``), not
computed by the importer; fire times are checked against ``cronsim``, an
independent cron implementation.
"""

from __future__ import annotations

import calendar
import datetime as dt
import pwd
import random
import re
import shlex
import tomllib
import zoneinfo
from pathlib import Path

import cronsim
import pytest
from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.config.file import load_config, parse_config
from quorum_cron.config.settings import InvalidConfig, JobSpec
from quorum_cron.crontab import parse_crontab, translate
from quorum_cron.crontab.dst import cron_runs
from quorum_cron.crontab.parse import CRON_ALIASES, split_percent
from quorum_cron.errors import ConfigError

NOW_S = calendar.timegm((2026, 1, 1, 0, 0, 0))
HOMES = {"alice": "/home/alice", "root": "/root", "backup": "/var/backups"}


def imported(text: str, *, system: bool = False, host_tz: str = "UTC", owner: str = "alice"):  # type: ignore[no-untyped-def]
    return translate(
        parse_crontab(text, system=system),
        source="crontab",
        cluster_name="cron",
        host_tz=host_tz,
        owner=owner,
        home_of=HOMES.get,
        now_s=NOW_S,
    )


def jobs_of(toml: str) -> dict[str, JobSpec]:
    config = parse_config(tomllib.loads(toml), "imported")
    return {j.name: j for j in config.jobs}


def only_job(text: str, **kw: object) -> JobSpec:
    result = imported(text, **kw)  # type: ignore[arg-type]
    assert result.bad == [], result.bad
    (job,) = jobs_of(result.toml).values()
    return job


def run_cli(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


# --------------------------------------------------------------------------- % and stdin


@pytest.mark.parametrize(
    ("line", "command", "stdin"),
    [
        ("echo hi", "echo hi", None),
        ("mail -s x bob%Hello%World", "mail -s x bob", "Hello\nWorld\n"),  # cron ends it with a newline
        ("date +\\%Y\\%m", "date +%Y%m", None),  # \% in the command is a plain %
        ("cat%100\\% done%", "cat", "100% done\n"),  # \% in the input too; a last % is a newline
        ("cat%a\\b%c", "cat", "a\\b\nc\n"),  # other backslashes are kept
        ("cat%end\\", "cat", "end\\\n"),  # a trailing backslash is kept, the newline still added
        ("cat%\\", "cat", "\\"),  # ... but only after something else was written
        ("echo \\\\%x", "echo \\\\", "x\n"),  # \\ then a bare %: the % ends the command
        ("cat%", "cat", ""),  # an empty input: nothing written, the pipe closed at once
        ("cat%%", "cat", "\n"),
    ],
)
def test_percent_splits_command_and_stdin_like_cron(line: str, command: str, stdin: str | None) -> None:
    assert split_percent(line) == (command, stdin)


# --------------------------------------------------------------------------- lines


def test_environment_lines_apply_to_the_entries_below_them() -> None:
    tab = parse_crontab(
        "# comment\n"
        "   # indented comment\n"
        "\n"
        "A=1\n"
        "0 * * * * first # not a comment: part of the command\n"
        " B = spaced value  \n"
        "C='single quoted'\n"
        'D="double # quoted"\n'
        'E=""\n'
        "A=2\n"
        "1 * * * * second\n"
    )
    assert tab.bad == ()
    first, second = tab.entries
    assert first.command == "first # not a comment: part of the command"
    assert first.env_dict == {"A": "1"}
    assert second.env_dict == {
        "A": "2",
        "B": "spaced value",
        "C": "single quoted",
        "D": "double # quoted",
        "E": "",
    }
    assert (first.lineno, second.lineno) == (5, 11)


def test_aliases_user_column_and_whitespace() -> None:
    tab = parse_crontab(
        "@daily\troot\t/usr/bin/daily\n*/5  1-3\t* jan,MAR mon-fri   backup  /bin/x  y\n", system=True
    )
    assert tab.bad == ()
    a, b = tab.entries
    assert (a.schedule, a.user, a.command) == ("@daily", "root", "/usr/bin/daily")
    assert (b.schedule, b.user, b.command) == ("*/5 1-3 * jan,MAR mon-fri", "backup", "/bin/x  y")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("* * * * echo", "expected 5 time fields and a command"),
        ("H * * * * echo", "'H' is not cron syntax"),
        ("0 12 ? * * echo", "not cron syntax"),
        ("0 12 L * * echo", "'L' is not cron syntax"),
        ("@every 5m echo", "unknown alias '@every'"),
        ("@Daily echo", "unknown alias '@Daily'"),
        ("@hourly", "no command"),
        ("* * * * * %only stdin", "no command before the first '%'"),
    ],
)
def test_bad_lines_are_listed_with_their_number(line: str, reason: str) -> None:
    tab = parse_crontab(f"# header\n{line}\n0 * * * * ok\n")
    assert len(tab.entries) == 1
    (bad,) = tab.bad
    assert bad.lineno == 2 and reason in bad.reason, bad


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("MAILTO=", "crons disagree on an empty MAILTO=: cronie 1.5.2+ sets it to the empty string"),
        ('A="x" y', "expected 5 time fields"),  # text after a closing quote: not a setting
        ("0 12 * * * * /bin/six-fields", "a sixth time field?"),
        ("0 12 * * * /bin/dos\r", "carriage return"),
    ],
)
def test_lines_cronie_refuses(line: str, reason: str) -> None:
    (bad,) = parse_crontab(f"{line}\n").bad
    assert reason in bad.reason, bad


def test_the_last_line_needs_a_newline_and_dash_is_no_syslog() -> None:
    tab = parse_crontab("-0 1 * * * quiet\n# last comment without newline is fine\n0 2 * * * lost")
    (entry,) = tab.entries
    assert entry.quiet and entry.schedule == "0 1 * * *" and entry.command == "quiet"
    (bad,) = tab.bad
    assert bad.lineno == 3 and "no newline at the end of the file" in bad.reason
    assert parse_crontab("0 1 * * * a\n# trailing comment").bad == ()
    result = imported("-@daily quiet\nA-B=1\n0 1 * * * b\n", owner="root")
    assert "'-': cronie wrote no syslog line" in result.toml
    assert "env: A-B not passed" in result.toml and result.jobs == 2


def test_system_crontab_needs_a_user_column() -> None:
    (bad,) = parse_crontab("0 * * * * /bin/true\n", system=True).bad
    assert "user column '/bin/true' is not a user name" in bad.reason


# --------------------------------------------------------------------------- jobs


def test_job_keeps_shell_environment_stdin_and_home() -> None:
    job = only_job('MAILTO=""\nFOO = bar\n30 2 * * 1-5 /usr/bin/report --all%to: ops%done\n')
    assert job.schedule_expr == "30 2 * * 1-5" and job.timezone == "UTC"
    assert job.shell == "/usr/bin/report --all" and job.command is None
    assert job.stdin == "to: ops\ndone\n"
    assert job.inherit_env is False and job.cwd == "/home/alice"
    assert dict(job.env) == {
        "MAILTO": "",
        "FOO": "bar",
        "SHELL": "/bin/sh",
        "HOME": "/home/alice",
        "PATH": "/usr/bin:/bin",
        "LOGNAME": "alice",
        "USER": "alice",
    }
    assert str(job.overlap) == "allow" and job.timeout_ms == 30 * 86_400_000


def test_shell_other_than_sh_runs_with_dash_c_and_crontab_home_wins() -> None:
    job = only_job("SHELL=/bin/bash\nHOME=/srv\nPATH=/opt/bin\nUSER=mallory\n0 0 * * * echo $BASH\n")
    assert job.command == ("/bin/bash", "-c", "echo $BASH") and job.shell is None
    assert job.cwd == "/srv"
    # LOGNAME and USER are always the crontab owner's (cron sets them after the file's settings).
    assert dict(job.env) == {
        "SHELL": "/bin/bash",
        "HOME": "/srv",
        "PATH": "/opt/bin",
        "LOGNAME": "alice",
        "USER": "alice",
    }


def test_system_crontab_runs_as_the_user_column_and_says_so() -> None:
    result = imported("0 4 * * * backup /usr/sbin/dump\n", system=True, owner="root")
    (job,) = jobs_of(result.toml).values()
    assert job.env["USER"] == "backup" and job.env["HOME"] == "/var/backups" and job.cwd == "/var/backups"
    assert "# user: cron ran this as 'backup'; the agent runs it as its own user" in result.toml
    assert any(n.startswith("user: cron ran these jobs as backup") for n in result.notes)


def test_unknown_user_has_no_home_and_the_comment_says_so() -> None:
    result = imported("0 4 * * * nobody-here /bin/true\n", system=True)
    (job,) = jobs_of(result.toml).values()
    assert "HOME" not in job.env and job.cwd is None
    assert "HOME: no home directory known for 'nobody-here' here" in result.toml


def test_cron_tz_sets_the_zone_of_the_lines_below() -> None:
    result = imported("0 9 * * * a\nCRON_TZ=Asia/Tokyo\n0 9 * * * b\nCRON_TZ=Mars/Olympus\n0 9 * * * c\n")
    jobs = jobs_of(result.toml)
    assert sorted(j.timezone for j in jobs.values()) == ["Asia/Tokyo", "UTC"]
    (bad,) = result.bad
    assert bad.lineno == 5 and "CRON_TZ='Mars/Olympus' is not an IANA zone name" in bad.reason
    # TZ is only the job's environment: cron schedules in the host's zone (tests/test_crontab_cronie.py).
    result = imported("TZ=Asia/Tokyo\n0 9 * * * a\n")
    (job,) = jobs_of(result.toml).values()
    assert job.timezone == "UTC" and job.env["TZ"] == "Asia/Tokyo"
    assert "timezone: TZ='Asia/Tokyo' is only the job's environment" in result.toml


def test_names_are_stable_unique_and_editable() -> None:
    text = "0 1 * * * /opt/bin/Backup.sh --x\n0 1 * * * /opt/bin/Backup.sh --x\n"
    a = list(jobs_of(imported(text).toml))
    b = list(jobs_of(imported("# moved\nFOO=1\n\n" + text).toml))
    assert a == b and len(a) == 2 and a[1] == a[0] + "-2"
    assert a[0].startswith("backup.sh-")
    other = list(jobs_of(imported("0 2 * * * /opt/bin/Backup.sh --x\n").toml))
    assert other[0] != a[0]
    edited = imported(text).toml.replace(f'name = "{a[0]}"', 'name = "nightly-backup"')
    assert "nightly-backup" in jobs_of(edited)


def test_reboot_is_refused_with_the_reason() -> None:
    result = imported("@reboot /usr/bin/warm\n0 * * * * ok\n")
    (bad,) = result.bad
    assert bad.lineno == 1 and "@reboot refused" in bad.reason and "not a time on the clock" in bad.reason
    assert result.jobs == 1


def test_a_line_quorum_cron_cannot_run_is_refused_with_its_error() -> None:
    # cronie reads 5/10 as 5-59/10, Vixie refuses it: quorum-cron asks for the explicit form.
    (bad,) = imported("5/10 * * * * x\n").bad
    assert "quorum-cron cannot run it" in bad.reason and "write '5-59/10'" in bad.reason


# --------------------------------------------------------------------------- differences


def test_mailto_is_stated_and_offered_as_the_alert_hook() -> None:
    result = imported('MAILTO=ops@example.com\n0 * * * * a\nMAILTO=""\n0 * * * * b\n')
    assert result.toml.count("# MAILTO: cron mailed its output to ops@example.com") == 1
    assert '\nalert_command = ["/usr/bin/mail", "-s", "quorum-cron alert", "ops@example.com"]' in result.toml
    # The mailed job alerts on its failures; the MAILTO="" one only on the cluster's own failures.
    parsed = parse_config(tomllib.loads(result.toml), "imported")
    assert {j.name: j.alert_on for j in parsed.jobs} == {
        parsed.jobs[0].name: ("failed", "missed", "lost"),
        parsed.jobs[1].name: ("missed", "lost"),
    }
    assert parsed.cluster.alert_command == ("/usr/bin/mail", "-s", "quorum-cron alert", "ops@example.com")
    assert any("1 job(s) had their output mailed to ops@example.com" in n for n in result.notes)
    # Without MAILTO cron mails the owner.
    assert "cron mailed its output to alice" in imported("0 * * * * a\n").toml


def test_random_delay_maps_to_h_within_the_delay() -> None:
    job = only_job("RANDOM_DELAY=15\n40 3 * * * a\n")
    assert job.schedule_expr == "H(40-55) 3 * * *"
    minute = int(job.schedule.resolved_expr.split()[0])
    assert 40 <= minute <= 55
    result = imported("RANDOM_DELAY=30\n@hourly a\n50 3 * * * b\n*/5 * * * * c\n")
    jobs = jobs_of(result.toml)
    assert sorted(j.schedule_expr for j in jobs.values()) == ["*/5 * * * *", "50 3 * * *", "H(0-30) * * * *"]
    assert result.toml.count("RANDOM_DELAY=30: not mapped") == 2


def test_random_delay_of_non_ascii_digits_is_not_a_number() -> None:
    """``'²'.isdigit()`` is true and ``int('²')`` raised: import-crontab died in a traceback."""
    for raw in ("²", "٣"):
        result = imported(f"RANDOM_DELAY={raw}\n40 3 * * * a\n")
        assert f"RANDOM_DELAY={raw!r} is not a number of minutes" in result.toml
        assert [j.schedule_expr for j in jobs_of(result.toml).values()] == ["40 3 * * *"]


TWICE = "on 2026-10-25 cron runs it at 02:30+0200, 02:30+0100, quorum-cron runs it at 02:30+0200."


def test_dst_with_cron_tz_is_stated_and_every_is_offered_when_it_reproduces_cron() -> None:
    # 02:30 Berlin: skipped on 2026-03-29 (cron never runs it; quorum-cron at 03:00),
    # repeated on 2026-10-25 (cron runs it twice; quorum-cron once).
    result = imported("CRON_TZ=Europe/Berlin\n30 2 * * * a\n")
    assert "on 2026-03-29 cron does not run it, quorum-cron runs it at 03:00+0200;" in result.toml
    assert TWICE in result.toml
    assert "No dst setting reproduces this" in result.toml and '# dst = "every"' not in result.toml
    # Every hour at :30: nothing is skipped, the repeated 02:30 runs twice under cron: dst = "every".
    result = imported("CRON_TZ=Europe/Berlin\n30 * * * * a\n")
    assert TWICE in result.toml
    assert '# dst = "every"' in result.toml
    text = result.toml.replace('# dst = "every"', 'dst = "every"')
    (job,) = jobs_of(text).values()
    assert job.dst == "every"
    # Outside the transition hours nothing differs.
    assert "DST" not in imported("CRON_TZ=Europe/Berlin\n0 12 * * * a\n").toml


def test_dst_on_a_host_in_the_zone_follows_crons_own_dst_handling() -> None:
    # cron on a Berlin host runs a fixed-time job skipped by spring-forward right after
    # the jump and does not repeat it at fall-back: what quorum-cron's "once" does.
    assert "DST" not in imported("30 2 * * * a\n", host_tz="Europe/Berlin").toml
    # A job whose hour is '*' runs by the wall clock, so cron runs the repeated 02:30 twice.
    result = imported("30 * * * * a\n", host_tz="Europe/Berlin")
    assert "cron on a host in this zone" in result.toml and TWICE in result.toml
    assert '# dst = "every"' in result.toml
    # Two fixed times in the skipped hour: cron runs both right after the jump, quorum-cron one.
    result = imported("0,30 2 * * * a\n", host_tz="Europe/Berlin")
    assert (
        "on 2026-03-29 cron runs it at 03:00+0200, 03:00+0200, quorum-cron runs it at 03:00+0200."
        in result.toml
    )
    assert "No dst setting reproduces this" in result.toml


def test_cron_runs_models_per_minute_zone_and_host_dst() -> None:
    at = calendar.timegm((2026, 10, 25, 1, 0, 0))  # Berlin 03:00 CEST -> 02:00 CET
    lo, hi = at - 3 * 3600, at + 3 * 3600
    per_minute = cron_runs("30 2 * * *", "Europe/Berlin", lo, hi, per_minute_zone=True)
    assert per_minute == [at - 1800, at + 1800]
    assert cron_runs("30 2 * * *", "Europe/Berlin", lo, hi, per_minute_zone=False) == [at - 1800]


# --------------------------------------------------------------------------- the command


def test_command_writes_a_config_that_validates(tmp_path: Path) -> None:
    tab = tmp_path / "crontab"
    tab.write_text("SHELL=/bin/bash\n0 3 * * * /usr/bin/backup%secret\n@weekly /usr/bin/rotate\n")
    code, out, err = run_cli("import-crontab", str(tab), "--timezone", "UTC", "--cluster-name", "shop")
    assert code == 0, err
    assert err.splitlines()[-1] == f"imported 2 job(s) from {tab}"
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(out)
    config = load_config(cfg)
    assert config.cluster.namespace == "shop" and len(config.jobs) == 2
    code, vout, verr = run_cli("validate", str(cfg))
    assert code == 0 and f"{cfg}: ok" in vout, verr


def test_command_reads_stdin_and_refuses_bad_lines_unless_skipped() -> None:
    text = "0 * * * * ok\n@reboot warm\nbad line\n"
    code, out, err = run_cli("import-crontab", "-", "--timezone", "UTC", stdin=text)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("error: <stdin>: line 2: @reboot refused")
    assert lines[1].startswith("error: <stdin>: line 3: expected 5 time fields")
    assert lines[2] == "error: <stdin>: 2 line(s) not imported; fix them or pass --skip-bad"
    code, out, err = run_cli("import-crontab", "-", "--timezone", "UTC", "--skip-bad", stdin=text)
    assert code == 0 and err.startswith("skipped: <stdin>: line 2: @reboot refused")
    assert len(parse_config(tomllib.loads(out), "x").jobs) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent/crontab"], "error: /nonexistent/crontab: no such file"),
        (["-", "--timezone", "Mars/Olympus"], "error: --timezone 'Mars/Olympus' is not an IANA zone name"),
        (["-", "--cluster-name", "a b"], "error: --cluster-name 'a b': 'a b' is not a valid namespace"),
    ],
)
def test_command_bad_input_is_one_line(args: list[str], message: str) -> None:
    code, out, err = run_cli("import-crontab", *args, stdin="")
    assert code == 1 and out == "" and err.startswith(message) and err.count("\n") == 1, err


def test_command_string_error_points_at_shell(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "n"\nsize = 1\n[[jobs]]\nname = "j"\nschedule = "@hourly"\n')
    cfg.write_text(cfg.read_text() + 'command = "ls -l | wc"\n')
    code, _, err = run_cli("validate", str(cfg))
    assert code == 1
    assert err == (
        f"error: {cfg}: job 'j': field 'command': 'ls -l | wc' is a string (expected an array of strings "
        f'(argv); for a shell command line write shell = "ls -l | wc")\n'
    )
    with pytest.raises(
        ConfigError, match=r"job 'j': field 'command': 'ls' is a string .* write shell = \"ls\""
    ):
        JobSpec.create("j", "@hourly", command="ls")


def test_new_process_fields_validate_and_enter_the_hash_only_when_set() -> None:
    plain = JobSpec.create("j", "@hourly", shell="x")
    assert set(plain.canonical()) == set(JobSpec.create("k", "@hourly", command=["x"]).canonical())
    assert "stdin" not in plain.canonical() and "cwd" not in plain.canonical()
    hashes = {
        plain.spec_hash,
        JobSpec.create("j", "@hourly", shell="x", stdin="").spec_hash,
        JobSpec.create("j", "@hourly", shell="x", inherit_env=False).spec_hash,
        JobSpec.create("j", "@hourly", shell="x", cwd="/").spec_hash,
    }
    assert len(hashes) == 4
    base = '[cluster]\nname = "n"\nsize = 1\n[[jobs]]\nname = "j"\nschedule = "@hourly"\nshell = "x"\n'
    for extra, message in [
        ('cwd = "rel"', "field 'cwd': 'rel' is not an absolute path"),
        ("stdin = 3", "field 'stdin': 3 is an integer (expected a string"),
        ('inherit_env = "no"', "field 'inherit_env': 'no' is a string (expected true or false)"),
    ]:
        with pytest.raises(InvalidConfig, match=re.escape(message)):
            parse_config(tomllib.loads(base + extra + "\n"), "c")


# --------------------------------------------------------------------------- against cronsim

_FIELDS = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, ("jan", "mar", "jun", "dec")),
    (0, 7, ("mon", "fri", "sun")),
)


def _item(rng: random.Random, lo: int, hi: int, names: tuple[str, ...], *, star: bool = True) -> str:
    kind = rng.randrange(7) if star else rng.randrange(2, 7)
    if kind == 0:
        return "*"
    if kind == 1:
        return f"*/{rng.randint(1, (hi - lo) // 2 + 1)}"
    a = rng.randint(lo, hi)
    if kind == 2:
        return str(a)
    if kind == 3 and names:
        return rng.choice(names)
    b = rng.randint(a, hi)
    if kind == 4 or kind == 3:
        return f"{a}-{b}"
    if kind == 5 and b > a:
        # Not a-a/s: cronsim reads a one-value range with a step as 'a/s' (a to the end),
        # Vixie cron and quorum-cron as the value a.
        return f"{a}-{b}/{rng.randint(1, 5)}"
    return ",".join(str(rng.randint(lo, hi)) for _ in range(rng.randint(2, 4)))


def _random_line(rng: random.Random) -> str:
    while True:
        fields = [_item(rng, lo, hi, names) for lo, hi, names in _FIELDS]
        if rng.random() < 0.5:
            # Both day fields restricted: cron's OR rule for day-of-month and day-of-week.
            fields[2] = _item(rng, 1, 31, (), star=False)
            fields[4] = _item(rng, 0, 7, _FIELDS[4][2], star=False)
        expr = " ".join(fields)
        try:
            JobSpec.create("probe", expr, shell="x")
        except ConfigError:
            continue  # never fires (e.g. 30 feb): not a line anyone has in a crontab
        return expr


@pytest.mark.slow
def test_imported_jobs_fire_when_cronsim_says(tmp_path: Path) -> None:
    rng = random.Random(15)
    exprs = [_random_line(rng) for _ in range(200)]
    assert (
        sum(1 for e in exprs if not e.split()[2].startswith("*") and not e.split()[4].startswith("*")) >= 50
    )
    start = dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC)
    # Crontabs of 20 lines: each `next` loads a whole config, so smaller files keep this fast.
    for first in range(0, len(exprs), 20):
        tab = tmp_path / f"crontab{first}"
        tab.write_text("".join(f"{exprs[i]} echo {i}\n" for i in range(first, first + 20)))
        code, out, err = run_cli("import-crontab", str(tab), "--timezone", "UTC")
        assert code == 0, err
        cfg = tmp_path / f"cluster{first}.toml"
        cfg.write_text(out)
        names = {job.shell: job.name for job in load_config(cfg).jobs}
        for i in range(first, first + 20):
            it = cronsim.CronSim(exprs[i], start)
            expected = [next(it).isoformat(timespec="seconds") for _ in range(20)]
            args = [
                "next",
                names[f"echo {i}"],
                "--config",
                str(cfg),
                "-n",
                "20",
                "--after",
                start.isoformat(),
            ]
            code, nout, nerr = run_cli(*args)
            assert code == 0, nerr
            got = [line.split()[1] for line in nout.splitlines()]
            assert got == expected, exprs[i]


# --------------------------------------------------------------------------- system crontabs, end to end

ETC_CRONTAB = """\
# /etc/crontab: system-wide crontab (Debian's)
SHELL=/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin

# m h dom mon dow user\tcommand
17 *\t* * *\troot    cd / && run-parts --report /etc/cron.hourly
25 6\t* * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }
47 6\t* * 7\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }
52 6\t1 * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }
"""

CRON_D_APP = """\
# /etc/cron.d/app: installed by the app's package
MAILTO=""
HOME=/srv/app
CRON_TZ=Europe/Berlin
*/10 6-22 * * 1-5  www-data  [ -x /srv/app/bin/sync ] && /srv/app/bin/sync --quiet
@daily\tapp-batch\t/srv/app/bin/report%to: ops%done
"""


def job_comments(toml: str) -> dict[str, list[str]]:
    """Each job's name and the comment lines written just above its ``[[jobs]]`` table."""
    found: dict[str, list[str]] = {}
    for block in toml.split("\n\n"):
        lines = block.splitlines()
        if "[[jobs]]" not in lines:
            continue
        at = lines.index("[[jobs]]")
        (name,) = re.findall(r'^name = "(.*)"$', lines[at + 1])
        found[name] = [line for line in lines[:at] if line.startswith("# ")]
    return found


def import_system_file(tmp_path: Path, name: str, text: str) -> tuple[str, list[str], dict[str, JobSpec]]:
    """``import-crontab --system`` on ``text``; the config is checked by ``quorum-cron validate``.

    ``--user alice`` is given to show that the user column, not the option, says whose job it is.
    """
    tab = tmp_path / name
    tab.write_text(text)
    args = ["import-crontab", "--system", str(tab), "--timezone", "UTC", "--user", "alice"]
    code, out, err = run_cli(*args, "--dst-from", "2026-01-01")
    assert code == 0, err
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(out)
    vcode, vout, verr = run_cli("validate", str(cfg))
    assert vcode == 0 and f"{cfg}: ok" in vout, verr
    return out, err.splitlines(), {j.name: j for j in load_config(cfg).jobs}


def test_cli_imports_etc_crontab_with_its_user_column(tmp_path: Path) -> None:
    out, err, jobs = import_system_file(tmp_path, "crontab", ETC_CRONTAB)
    root_home = pwd.getpwnam("root").pw_dir
    path = "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin"
    by_schedule = {j.schedule_expr: j for j in jobs.values()}
    assert sorted(by_schedule) == ["17 * * * *", "25 6 * * *", "47 6 * * 7", "52 6 1 * *"]
    assert by_schedule["17 * * * *"].shell == "cd / && run-parts --report /etc/cron.hourly"
    assert by_schedule["52 6 1 * *"].shell == (
        "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }"
    )
    for job in jobs.values():
        assert job.timezone == "UTC" and job.stdin is None and job.cwd == root_home
        assert dict(job.env) == {
            "SHELL": "/bin/sh",
            "PATH": path,
            "HOME": root_home,
            "LOGNAME": "root",
            "USER": "root",
        }
    for name, comments in job_comments(out).items():
        assert "# user: cron ran this as 'root'; the agent runs it as its own user" in comments, name
        assert any(c.startswith("# MAILTO: cron mailed its output to root;") for c in comments), name
    assert (
        "note: user: cron ran these jobs as root; the agent runs every job as the user it runs as "
        "(environment and working directory are kept)"
    ) in err
    assert any(line.startswith("note: MAILTO: 4 job(s) had their output mailed to root;") for line in err)
    assert err[-1].endswith("imported 4 job(s) from " + str(tmp_path / "crontab"))


def test_cli_imports_a_cron_d_file_with_its_user_column(tmp_path: Path) -> None:
    out, err, jobs = import_system_file(tmp_path, "app", CRON_D_APP)
    by_user = {j.env["USER"]: j for j in jobs.values()}
    assert sorted(by_user) == ["app-batch", "www-data"]
    sync, report = by_user["www-data"], by_user["app-batch"]
    assert (sync.schedule_expr, sync.timezone) == ("*/10 6-22 * * 1-5", "Europe/Berlin")
    assert sync.shell == "[ -x /srv/app/bin/sync ] && /srv/app/bin/sync --quiet" and sync.stdin is None
    assert (report.schedule_expr, report.timezone) == ("@daily", "Europe/Berlin")
    assert report.shell == "/srv/app/bin/report" and report.stdin == "to: ops\ndone\n"
    for user, job in by_user.items():
        assert job.cwd == "/srv/app"
        assert dict(job.env) == {
            "MAILTO": "",
            "HOME": "/srv/app",
            "CRON_TZ": "Europe/Berlin",
            "SHELL": "/bin/sh",
            "PATH": "/usr/bin:/bin",
            "LOGNAME": user,
            "USER": user,
        }
    comments = job_comments(out)
    assert "# user: cron ran this as 'www-data'; the agent runs it as its own user" in comments[sync.name]
    assert "# user: cron ran this as 'app-batch'; the agent runs it as its own user" in comments[report.name]
    assert not any("MAILTO" in c for c in comments[sync.name] + comments[report.name])  # MAILTO="": no mail
    assert (
        "note: user: cron ran these jobs as app-batch, www-data; the agent runs every job as the user "
        "it runs as (environment and working directory are kept)"
    ) in err
    assert not any("MAILTO" in line for line in err)


# --------------------------------------------------------------------------- the @ aliases

# crontab(5): what each alias stands for, and (by hand, from a calendar) its first
# fire time after 2026-01-01T00:00:30Z, a Thursday.
CRONTAB5_ALIASES = {
    "@yearly": ("0 0 1 1 *", "2027-01-01T00:00:00+00:00"),
    "@annually": ("0 0 1 1 *", "2027-01-01T00:00:00+00:00"),
    "@monthly": ("0 0 1 * *", "2026-02-01T00:00:00+00:00"),
    "@weekly": ("0 0 * * 0", "2026-01-04T00:00:00+00:00"),
    "@daily": ("0 0 * * *", "2026-01-02T00:00:00+00:00"),
    "@midnight": ("0 0 * * *", "2026-01-02T00:00:00+00:00"),
    "@hourly": ("0 * * * *", "2026-01-01T01:00:00+00:00"),
}


def fire_times(cfg: Path, job: str, after: dt.datetime, n: int = 20) -> list[tuple[str, str]]:
    """``quorum-cron next``: ``(time in the job's zone, time in UTC)`` for the next ``n`` fires."""
    code, out, err = run_cli("next", job, "--config", str(cfg), "-n", str(n), "--after", after.isoformat())
    assert code == 0, err
    return [(zone, utc) for zone, utc in (line.split() for line in out.splitlines())]


def cronsim_times(expr: str, after: dt.datetime, n: int = 20) -> list[tuple[str, str]]:
    it = cronsim.CronSim(expr, after)
    times = [next(it) for _ in range(n)]
    return [(t.isoformat(), t.astimezone(dt.UTC).isoformat()) for t in times]


def test_crontab5_covers_every_alias_cron_accepts() -> None:
    assert set(CRONTAB5_ALIASES) | {"@reboot"} == set(CRON_ALIASES)


@pytest.mark.parametrize("alias", sorted(CRONTAB5_ALIASES))
def test_each_alias_fires_as_crontab5_says(alias: str, tmp_path: Path) -> None:
    fields, first = CRONTAB5_ALIASES[alias]
    code, out, err = run_cli("import-crontab", "-", "--timezone", "UTC", stdin=f"{alias} /usr/bin/job\n")
    assert code == 0, err
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(out)
    (job,) = load_config(cfg).jobs
    assert job.schedule_expr == alias and job.timezone == "UTC"
    start = dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC)
    got = fire_times(cfg, job.name, start)
    assert got[0][1] == first
    assert got == cronsim_times(fields, start)


def test_reboot_is_refused_by_the_command_with_its_reason() -> None:
    code, out, err = run_cli("import-crontab", "-", "--timezone", "UTC", stdin="@reboot /usr/bin/warm\n")
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "error: <stdin>: line 1: @reboot refused: in a cluster it is not a time on the clock (each node "
        "boots at its own time); start it from the node's init system instead: '@reboot /usr/bin/warm'",
        "error: <stdin>: 1 line(s) not imported; fix them or pass --skip-bad",
    ]


# --------------------------------------------------------------------------- against cronsim, under CRON_TZ

BERLIN_CHANGES_S = (calendar.timegm((2026, 3, 29, 1, 0, 0)), calendar.timegm((2026, 10, 25, 1, 0, 0)))
"""Europe/Berlin's DST changes in 2026 (01:00 UTC): 02:00 CET -> 03:00 CEST, 03:00 CEST -> 02:00 CET."""


def _hour_not_2(rng: random.Random) -> str:
    """An hour field that never matches 2: Berlin's skipped and repeated hour.

    At those wall times cronie with CRON_TZ (run twice / never) and cronsim
    (Debian cron on a Berlin host) differ from each other and from
    quorum-cron; what the importer says about them is checked by
    ``test_dst_with_cron_tz_is_stated_and_every_is_offered_when_it_reproduces_cron``.
    """
    hour = _item(rng, 3, 23, (), star=False)
    return f"{rng.choice((0, 1))},{hour}" if rng.random() < 0.3 else hour


@pytest.mark.slow
@pytest.mark.parametrize("zone", ["Asia/Kolkata", "Europe/Berlin"])
def test_imported_jobs_under_cron_tz_fire_when_cronsim_says(zone: str, tmp_path: Path) -> None:
    """60 seeded lines under ``CRON_TZ=zone``, on a UTC host: 20 fire times each equal cronsim's.

    Asia/Kolkata has no DST and a half-hour offset (+05:30).  In Europe/Berlin
    every line starts up to a day before one of the year's DST changes, so
    that its fire times cross it, and its hour field leaves out 2.
    """
    rng = random.Random(f"15 CRON_TZ={zone}")
    tzinfo = zoneinfo.ZoneInfo(zone)
    exprs, starts = [], []
    for _ in range(60):
        expr = _random_line(rng)
        if zone == "Europe/Berlin":
            fields = expr.split()
            fields[1] = _hour_not_2(rng)
            if rng.random() < 0.5:
                fields[0] = str(rng.randint(0, 59))  # sparser lines: more of them reach the change
            expr = " ".join(fields)
            at = rng.choice(BERLIN_CHANGES_S) - rng.randrange(0, 86_400, 60) + 30
        else:
            at = NOW_S + rng.randrange(0, 365 * 86_400, 60) + 30
        try:
            JobSpec.create("probe", expr, shell="x")
        except ConfigError:
            continue  # never fires (e.g. 30 feb)
        exprs.append(expr)
        starts.append(dt.datetime.fromtimestamp(at, tzinfo))
    assert len(exprs) >= 50
    crossed = 0
    for first in range(0, len(exprs), 20):
        chunk = range(first, min(first + 20, len(exprs)))
        tab = tmp_path / f"crontab{first}"
        tab.write_text(f"CRON_TZ={zone}\n" + "".join(f"{exprs[i]} echo {i}\n" for i in chunk))
        code, out, err = run_cli("import-crontab", str(tab), "--timezone", "UTC", "--dst-from", "2026-01-01")
        assert code == 0, err
        cfg = tmp_path / f"cluster{first}.toml"
        cfg.write_text(out)
        jobs = {job.shell: job for job in load_config(cfg).jobs}
        for i in chunk:
            job = jobs[f"echo {i}"]
            assert job.timezone == zone
            got = fire_times(cfg, job.name, starts[i])
            assert got == cronsim_times(exprs[i], starts[i]), (exprs[i], starts[i].isoformat())
            crossed += len({local[-6:] for local, _ in got}) > 1
    if zone == "Europe/Berlin":
        assert crossed >= 10, crossed  # enough lines whose fire times span a change of offset
    else:
        assert crossed == 0


# --------------------------------------------------------------------------- docs/migrating.md

MIGRATING_MD = Path(__file__).resolve().parents[1] / "docs" / "migrating.md"


def worked_example() -> tuple[str, list[tuple[list[str], list[str]]], str]:
    """docs/migrating.md's worked example: the crontab, each command with what it prints, the config."""
    section = MIGRATING_MD.read_text().split("\n## A worked example\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", section, re.S | re.M)
    assert [kind for kind, _ in blocks] == ["text", "console", "console", "toml"], "example reshaped?"
    runs = []
    for _, console in blocks[1:3]:
        command, *printed = console.splitlines()
        assert command.startswith("$ "), command
        runs.append((shlex.split(command[2:]), printed))
    return blocks[0][1], runs, blocks[3][1]


@pytest.mark.skipif(pwd.getpwnam("root").pw_dir != "/root", reason="the example shows root's home as /root")
def test_migrating_md_worked_example_is_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crontab, runs, config = worked_example()
    # The page says: the first run refuses @reboot; the line is deleted; the second run imports.
    without_reboot = "".join(line for line in crontab.splitlines(True) if not line.startswith("@reboot"))
    assert without_reboot != crontab
    monkeypatch.chdir(tmp_path)
    for (argv, printed), text, expected_out in zip(
        runs, [crontab, without_reboot], ["", config], strict=True
    ):
        # The shown command is complete: the zone cron ran in and the DST year are fixed in it.
        assert argv[:3] == ["quorum-cron", "import-crontab", "crontab"] and argv[-2:] == [">", "cluster.toml"]
        assert "--timezone" in argv and "--dst-from" in argv, argv
        Path("crontab").write_text(text)
        code, out, err = run_cli(*argv[1:-2])
        assert err.splitlines() == printed
        assert out == expected_out
        assert code == (1 if printed[0].startswith("error:") else 0)
    Path("cluster.toml").write_text(config)
    code, vout, verr = run_cli("validate", "cluster.toml")
    assert code == 0 and "cluster.toml: ok" in vout, verr


def test_dst_from_fixes_the_year_of_dst_changes_compared() -> None:
    tab = "CRON_TZ=Europe/Berlin\n30 2 * * * /bin/night\n"
    for day, dates in [
        ("2026-01-01", ("2026-03-29", "2026-10-25")),
        ("2026-12-01", ("2027-03-28", "2027-10-31")),
    ]:
        code, out, err = run_cli("import-crontab", "-", "--timezone", "UTC", "--dst-from", day, stdin=tab)
        assert code == 0, err
        assert f"on {dates[0]} cron does not run it" in out and f"on {dates[1]} cron runs it at 02:30" in out
    code, _, err = run_cli("import-crontab", "-", "--dst-from", "1 Dec", stdin=tab)
    assert code == 1 and "'1 Dec' does not match the format '%Y-%m-%d'" in err, err
