"""``quorum-cron import-crontab FILE|-``: a crontab in, a quorum-cron config (TOML) out.

Reading and translating are :mod:`quorum_cron.crontab`; this module owns the
command's edges: the file (or stdin), the host's zone, the users' home
directories and the clock (the only facts the translation needs from this
machine; the clock only says where the year of DST changes compared
starts, and ``--dst-from`` fixes it for output that must not change), the
TOML on stdout, and on stderr one line per refused crontab line and per
difference worth knowing.  The generated TOML is validated with the same
parser the agent uses before it is printed, so what comes out loads.

Exit status: 0; 1 when a line could not be imported: the lines and their count on
stderr, nothing on stdout and no "imported" summary. With ``--skip-bad`` the config
is printed without them, the status is 0, and the summary names the lines left out.
"""

from __future__ import annotations

import calendar
import datetime as dt
import getpass
import os
import pwd
import sys
import time
import tomllib
from pathlib import Path

import click

from quorum_cron.commands.common import fail
from quorum_cron.config.file import parse_config
from quorum_cron.config.schedule import check_timezone
from quorum_cron.config.settings import ClusterConfig, InvalidConfig
from quorum_cron.crontab import is_user_name, parse_crontab, translate
from quorum_cron.errors import QuorumCronError
from quorum_cron.printable import first_of

__all__ = ["host_timezone", "import_crontab"]

_MAX_BYTES = 10_000_000


def host_timezone() -> str | None:
    """The IANA name of this host's zone (what cron schedules in without CRON_TZ), if it can be told."""
    try:
        text = Path("/etc/timezone").read_text().strip()
        if text:
            return text
    except OSError:
        pass
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        return None
    marker = "zoneinfo/"
    return target.split(marker, 1)[1] if marker in target else None


def _home_of(user: str) -> str | None:
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return None


def _read(file: str) -> tuple[str, str]:
    if file == "-":
        data = sys.stdin.buffer.read(_MAX_BYTES + 1)
        source = "<stdin>"
    else:
        source = file
        try:
            with open(file, "rb") as fh:
                data = fh.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            fail(f"{file}: no such file")
        except IsADirectoryError:
            fail(f"{file}: is a directory (expected a crontab file)")
        except OSError as exc:
            fail(f"{file}: cannot read: {exc.strerror or exc}")
    if len(data) > _MAX_BYTES:
        fail(f"{source}: larger than {_MAX_BYTES} bytes (expected a crontab)")
    # Cron reads bytes: a comment in Latin-1 is still a comment. Bytes that are not UTF-8
    # become lone surrogates, and parse_crontab refuses the lines (not comments) holding them.
    return source, data.decode("utf-8", "surrogateescape")


@click.command("import-crontab")
@click.argument("file", metavar="FILE|-")
@click.option(
    "--system", is_flag=True, help="System crontab format (/etc/crontab, /etc/cron.d/*): a user column."
)
@click.option(
    "--cluster-name", default="cron", show_default=True, help="[cluster] name of the generated config."
)
@click.option(
    "--timezone",
    "tz",
    metavar="ZONE",
    help="The zone cron ran in (jobs without CRON_TZ). Default: this host's zone.",
)
@click.option("--user", metavar="NAME", help="Owner of a user crontab (HOME, LOGNAME, USER). Default: you.")
@click.option("--skip-bad", is_flag=True, help="Leave out lines that cannot be imported and exit 0.")
@click.option(
    "--dst-from",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    metavar="DATE",
    help="Compare the DST changes of the year from DATE (YYYY-MM-DD, 00:00 UTC). Default: now.",
)
def import_crontab(
    file: str,
    system: bool,
    cluster_name: str,
    tz: str | None,
    user: str | None,
    skip_bad: bool,
    dst_from: dt.datetime | None,
) -> None:
    """Translate a crontab FILE (or - for stdin) into a quorum-cron config on stdout.

    Each job keeps cron's schedule and zone, shell, environment, standard
    input (%) and working directory; what quorum-cron does differently is
    written as comments above the job and summarised on stderr.
    """
    try:
        ClusterConfig(namespace=cluster_name, size=1)
    except QuorumCronError as exc:
        fail(f"--cluster-name {cluster_name!r}: {str(exc).split(': ', 2)[-1]}")
    zone = tz or host_timezone()
    if zone is None:
        zone = "UTC"
        click.echo(
            "note: this host's zone is unknown; jobs without CRON_TZ use UTC (--timezone ZONE)", err=True
        )
    try:
        check_timezone(zone, job="")
    except QuorumCronError:
        what = "--timezone" if tz else "this host's zone"
        fail(f"{what} {zone!r} is not an IANA zone name (expected e.g. 'Europe/Berlin' or 'UTC')")
    if dst_from is not None and not 1970 <= dst_from.year < 9000:  # (a year of DST changes from it)
        fail(
            f"--dst-from {dst_from:%Y-%m-%d} is out of range (expected a date from 1970-01-01 to 8999-12-31)"
        )
    if user is not None and not is_user_name(user):
        fail(f"--user {user!r} is not a user name (expected letters, digits, '.', '_' or '-', at most 32)")
    source, text = _read(file)
    owner = user or getpass.getuser()
    result = translate(
        parse_crontab(text, system=system),
        source=source,
        cluster_name=cluster_name,
        host_tz=zone,
        owner=owner,
        home_of=_home_of,
        now_s=int(time.time()) if dst_from is None else calendar.timegm(dst_from.timetuple()),
    )
    try:
        parse_config(tomllib.loads(result.toml), source="<import-crontab>")
    except (InvalidConfig, tomllib.TOMLDecodeError) as exc:
        # A translation bug, not the user's input: say so in one line.
        fail(f"{source}: the generated config does not load ({exc}); please report this")
    except QuorumCronError as exc:
        fail(f"{source}: the generated config does not load ({exc}); please report this")
    for bad in result.bad:
        click.echo(f"{'skipped' if skip_bad else 'error'}: {source}: {bad}", err=True)
    if result.bad and not skip_bad:
        click.echo(
            f"error: {source}: {len(result.bad)} line(s) not imported; fix them or pass --skip-bad", err=True
        )
        sys.exit(1)
    click.echo(result.toml, nl=False)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    summary = f"imported {result.jobs} job(s) from {source}"
    if result.bad:  # (--skip-bad: the summary alone read as if the whole crontab came in)
        numbers = [str(b.lineno) for b in result.bad]
        summary += f"; {len(numbers)} line(s) not imported (--skip-bad): line(s) {first_of(numbers, 10)}"
    click.echo(summary, err=True)
