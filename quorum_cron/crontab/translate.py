"""Turning parsed crontab entries into quorum-cron jobs that mean what cron meant.

Each entry becomes one ``[[jobs]]`` table that keeps cron's behaviour:

* **schedule and zone** — the five fields (or alias) as written, read in
  ``CRON_TZ`` (when set and not empty, else the host's zone; ``TZ`` is only the
  job's environment, as in cron);
* **shell** — ``SHELL`` (default ``/bin/sh``) runs the command line with
  ``-c``, as cron's ``execle(shell, shell, "-c", cmd)`` does: ``shell = ...``
  for ``/bin/sh``, else ``command = [SHELL, "-c", ...]``. A ``SHELL`` without
  a ``/`` is refused: ``execle`` searches no ``PATH``, so cron never started it;
* **environment** — exactly cron's: the crontab's settings, ``SHELL``,
  ``PATH`` (``/usr/bin:/bin``) and ``HOME`` when the file does not set them,
  ``LOGNAME`` and ``USER`` always, and nothing inherited from the agent
  (``inherit_env = false``); the job starts in ``HOME`` (``cwd``);
* **stdin** — the ``%`` part, newlines and all;
* **overlap** ``"allow"`` and the longest ``timeout``: cron starts a run
  while the previous one still runs, and never kills a job.

What quorum-cron does differently is written as ``#`` comments above the
table, and summarised by :class:`Imported` for stderr: DST (computed for
this schedule and zone over the coming year, not guessed), ``MAILTO``,
``RANDOM_DELAY`` (mapped to ``H`` when it can be), the user column.  An
``@reboot`` entry, or one whose job quorum-cron would refuse, becomes a
:class:`BadLine` with the reason.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from quorum_cron.config.schedule import check_timezone
from quorum_cron.config.settings import JobSpec
from quorum_cron.crontab.dst import dst_note, five_fields
from quorum_cron.crontab.fields import random_as_hash
from quorum_cron.crontab.parse import BadLine, CronEntry, Crontab
from quorum_cron.errors import QuorumCronError

__all__ = ["CRONIE_17_PATH", "DEFAULT_PATH", "DEFAULT_SHELL", "Imported", "cron_env", "job_name", "translate"]

DEFAULT_SHELL = "/bin/sh"
DEFAULT_PATH = "/usr/bin:/bin"
"""Vixie cron's and cronie's (before 1.7) ``_PATH_DEFPATH``: a job's PATH when the crontab sets none.

cronie 1.7+ gives ``_PATH_STDPATH``, :data:`CRONIE_17_PATH` (commit 7575e75): the importer
cannot tell which cron ran the file, so it keeps the older, more common default and says so."""
CRONIE_17_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"

LONGEST_TIMEOUT = "30d"
"""quorum-cron's longest timeout: the closest it comes to cron, which never kills a job."""

_STRTOL_RE = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", re.ASCII)
_MAX_RANDOM_DELAY = 24 * 60


@dataclass
class Imported:
    """The result: the TOML text, the summary for stderr, the refused lines."""

    toml: str
    jobs: int
    notes: list[str] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)


# --------------------------------------------------------------------------- small pieces


def toml_str(value: str) -> str:
    """``value`` as a TOML basic string (control characters escaped, the rest kept)."""
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _comment(text: str) -> str:
    """One TOML comment line; characters a comment cannot hold are shown escaped."""
    safe = "".join(
        ch if ch == "\t" or (ord(ch) >= 0x20 and ord(ch) != 0x7F) else repr(ch)[1:-1] for ch in text
    )
    return f"# {safe}".rstrip()


_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_SLUG_RE = re.compile(r"[^A-Za-z0-9_.-]+", re.ASCII)


def job_name(entry: CronEntry) -> str:
    """``<program>-<6 hex>``: the program's base name and a hash of the line's meaning.

    Stable: the same schedule, user and command give the same name wherever
    the line sits and however it is spaced; edit the name freely afterwards
    (only ``H`` depends on it).
    """
    words = entry.command.split()
    program = next((w for w in words if "=" not in w), words[0] if words else "job")
    slug = _SLUG_RE.sub("-", program.rsplit("/", 1)[-1]).strip("-.").lower()[:40] or "job"
    key = "\x00".join([entry.schedule, entry.user or "", entry.command, entry.stdin or ""])
    return f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:6]}"


def cron_env(entry: CronEntry, user: str, home: str | None) -> dict[str, str]:
    """The environment cron gives this entry's process (cronie's ``load_entry`` defaults)."""
    env = entry.env_dict
    env.setdefault("SHELL", DEFAULT_SHELL)
    if home is not None:
        env.setdefault("HOME", home)
    env.setdefault("PATH", DEFAULT_PATH)
    env["LOGNAME"] = user
    env["USER"] = user
    return env


def _random_delay(entry: CronEntry, schedule: str) -> tuple[str, str | None]:
    """The schedule with ``RANDOM_DELAY`` mapped to ``H``, and the comment saying what was done."""
    raw = entry.env_dict.get("RANDOM_DELAY")
    if raw is None:
        return schedule, None
    # cronie's load_entry: strtol(p, &endptr, 10), endptr unchecked, so the leading number
    # counts ('10m' is 10, 'x' is 0); outside 0..24*60 it logs "bad value of RANDOM_DELAY"
    # and the job starts on time.
    number = _STRTOL_RE.match(raw)
    if number is None:
        return (
            schedule,
            f"RANDOM_DELAY={raw!r} is not a number of minutes: cronie reads it as 0 (no delay), "
            f"and so does this job",
        )
    delay = int(number.group(1))
    if not 0 <= delay <= _MAX_RANDOM_DELAY:
        return (
            schedule,
            f"RANDOM_DELAY={raw!r} is outside cronie's 0-{_MAX_RANDOM_DELAY}: it logged 'bad value "
            f"of RANDOM_DELAY' and started the job on time, as this job does",
        )
    if delay == 0:
        return schedule, None
    fields = five_fields(schedule).split()
    minute = fields[0]
    if minute.isascii() and minute.isdecimal() and int(minute) + delay <= 59:
        lo, hi = int(minute), int(minute) + delay
        fields[0] = f"H({lo}-{hi})"
        return " ".join(fields), (
            f"RANDOM_DELAY={delay}: cron started this job 0-{delay} min late (a random factor fixed when "
            f"the daemon started); H({lo}-{hi}) picks one minute in that range from the job name, "
            f"the same on every node"
        )
    return schedule, (
        f"RANDOM_DELAY={delay}: not mapped (H can only spread a single minute within its hour, "
        f"and minute field {minute!r} + {delay} min does not fit); this job starts on time"
    )


# --------------------------------------------------------------------------- the translation


@dataclass
class _Job:
    entry: CronEntry
    spec: JobSpec
    comments: list[str]
    offer_every: bool
    mailed: bool = False
    """cron mailed this job's output (MAILTO not empty): its failures raise alerts here."""


def translate(
    crontab: Crontab,
    *,
    source: str,
    cluster_name: str,
    host_tz: str,
    owner: str,
    home_of: Callable[[str], str | None],
    now_s: int,
) -> Imported:
    """Translate a parsed crontab; ``owner`` is the crontab's user (system crontabs name their own).

    ``home_of`` looks up a user's home directory (``None``: unknown here);
    ``now_s`` is where the coming year of DST changes starts.
    """
    bad = list(crontab.bad)
    notes: list[str] = []
    jobs: list[_Job] = []
    used: set[str] = set()
    mail: dict[str, int] = {}
    for entry in crontab.entries:
        if entry.schedule == "@reboot":
            bad.append(
                BadLine(
                    entry.lineno,
                    entry.text,
                    "@reboot refused: in a cluster it is not a time on the clock (each node boots at its "
                    "own time); start it from the node's init system instead",
                )
            )
            continue
        if entry.quiet and entry.user is None and owner != "root":
            # cronie's load_entry: "Only privileged user can disable logging" (pw_uid != 0).
            bad.append(
                BadLine(
                    entry.lineno,
                    entry.text,
                    f"a leading '-' (no syslog line) is for root's and system crontabs: cronie refused "
                    f"this line in {owner}'s crontab, so it never ran (pass --user root if this is "
                    f"root's crontab)",
                )
            )
            continue
        job = _translate_entry(entry, host_tz, owner, home_of, now_s, used)
        if isinstance(job, BadLine):
            bad.append(job)
            continue
        used.add(job.spec.name)
        jobs.append(job)
        target = _mail_target(entry, owner)
        if target:
            mail[target] = mail.get(target, 0) + 1
    for target, count in sorted(mail.items()):
        notes.append(
            f"MAILTO: {count} job(s) had their output mailed to {target}; quorum-cron sends no mail "
            f"(failed runs and missed/lost slots: the cluster's alert hook, per job alert_on; output's end: "
            f"`quorum-cron history JOB`)"
        )
    users = sorted({j.entry.user or owner for j in jobs})
    if users:
        notes.append(
            f"user: cron ran these jobs as {', '.join(users)}; the agent runs every job as the user it "
            f"runs as (environment and working directory are kept)"
        )
    dst_jobs = [j.spec.name for j in jobs if any(c.startswith("DST") for c in j.comments)]
    if dst_jobs:
        notes.append(f"DST: {len(dst_jobs)} job(s) run differently at DST changes: {', '.join(dst_jobs)}")
    default_path = sum(1 for j in jobs if "PATH" not in j.entry.env_dict)
    if default_path:
        notes.append(
            f"PATH: {default_path} job(s) get cron's default PATH={DEFAULT_PATH} (Vixie cron, cronie "
            f"before 1.7); cronie 1.7+ gave {CRONIE_17_PATH}: if yours did, set PATH in [jobs.env]"
        )
    tz_jobs = [j.spec.name for j in jobs if any(c.startswith("timezone: TZ=") for c in j.comments)]
    if tz_jobs:
        notes.append(
            f"TZ: {len(tz_jobs)} job(s) have a TZ that is not their schedule's zone; cron schedules by "
            f"CRON_TZ or the host's zone, not TZ (set CRON_TZ or --timezone if yours did): "
            f"{', '.join(tz_jobs)}"
        )
    delayed = [j.spec.name for j in jobs if any(c.startswith("RANDOM_DELAY") for c in j.comments)]
    if delayed:
        notes.append(f"RANDOM_DELAY: see the comments of {', '.join(delayed)}")
    text = _render(jobs, source=source, cluster_name=cluster_name, mail=sorted(mail))
    return Imported(text, len(jobs), notes, sorted(bad, key=lambda b: b.lineno))


def _mail_target(entry: CronEntry, owner: str) -> str:
    env = entry.env_dict
    return env.get("MAILTO", entry.user or owner)


def _translate_entry(
    entry: CronEntry,
    host_tz: str,
    owner: str,
    home_of: Callable[[str], str | None],
    now_s: int,
    used: set[str],
) -> _Job | BadLine:
    env_in = entry.env_dict
    user = entry.user or owner
    # cronie's find_jobs: an entry is matched in CRON_TZ when it is set and not empty, else in
    # the daemon's own zone. TZ in the crontab is only the job's environment (cronie and
    # Vixie cron alike): scheduling by it would move every fire time.
    cron_tz = env_in.get("CRON_TZ", "")
    zone_key = "CRON_TZ" if cron_tz else None
    tz = cron_tz or host_tz
    try:
        check_timezone(tz, job="")
    except QuorumCronError:
        where = f"CRON_TZ={tz!r}" if zone_key else f"host zone {tz!r}"
        return BadLine(
            entry.lineno, entry.text, f"{where} is not an IANA zone name (expected e.g. 'Europe/Berlin')"
        )
    comments: list[str] = [f"line {entry.lineno}: {entry.text.strip()}"]
    base = job_name(entry)
    name, n = base, 2
    while name in used:
        name, n = f"{base}-{n}", n + 1
    hashed = random_as_hash(entry.schedule)
    schedule, delay_note = _random_delay(entry, hashed or entry.schedule)
    home = env_in.get("HOME") or home_of(user)
    env = cron_env(entry, user, home)
    dropped = sorted(k for k in env if not _ENV_NAME_RE.fullmatch(k))
    for key in dropped:
        del env[key]
    shell_path = env["SHELL"]
    if "/" not in shell_path:
        # cron's child_process: execle(shell, ...) takes SHELL as a path, relative to HOME, and
        # searches no PATH; the agent's exec would find 'bash' on PATH and run what never ran.
        return BadLine(
            entry.lineno,
            entry.text,
            f"SHELL={shell_path!r} is not a path: cron executes SHELL as a path (relative to HOME) and "
            f'searches no PATH, so under cron this job failed to start ("couldn\'t exec"); set SHELL '
            f"to the shell's full path (e.g. SHELL=/bin/bash)",
        )
    options: dict[str, Any] = {
        "env": env,
        "stdin": entry.stdin,
        "inherit_env": False,
        "cwd": home if home and home.startswith("/") else None,
        "overlap": "allow",
        "timeout_ms": 30 * 86_400_000,
    }
    if shell_path == DEFAULT_SHELL:
        options["shell"] = entry.command
    else:
        options["command"] = (shell_path, "-c", entry.command)
    try:
        spec = JobSpec.create(name, schedule, timezone=tz, **options)
    except QuorumCronError as exc:
        return BadLine(entry.lineno, entry.text, f"quorum-cron cannot run it: {exc}")
    if dropped:
        comments.append(
            f"env: {', '.join(dropped)} not passed (quorum-cron takes names of letters, digits and _)"
        )
    if entry.quiet:
        comments.append("'-': cronie wrote no syslog line for this job; the agent logs every run")
    if entry.mail_on_error:
        comments.append(
            "'-n': cronie mailed this job's output only when it failed; here too only a failed run "
            "raises an alert (a successful run's output is in the log and `quorum-cron history`)"
        )
    if "CRON_TZ" in env_in and not cron_tz:
        comments.append("timezone: CRON_TZ is empty, so cron used the host's zone, as this job does")
    if env_in.get("TZ", tz) != tz:
        comments.append(
            f"timezone: TZ={env_in['TZ']!r} is only the job's environment: cron schedules by "
            f"{'CRON_TZ' if zone_key else 'the host zone'} ({tz}), as this job does"
        )
    if hashed:
        comments.append(
            f"'~': cronie picked each a~b value at random when it loaded the crontab, anew on each "
            f"host; here H(a-b) picks one from the job name, the same on every node: {hashed!r}"
        )
    if delay_note:
        comments.append(delay_note)
    note = dst_note(spec, now_s, per_minute_zone=zone_key is not None)
    offer_every = False
    if note:
        comments.append(note)
        offer_every = "reproduces cron" in note
    target = _mail_target(entry, owner)
    if target:
        comments.append(
            f"MAILTO: cron mailed its output to {target}; here a failed run (exit code, the end of its "
            f"output) and a missed or lost slot raise an alert (alert_on), sent by the cluster's "
            f"alert_command; the output's end is also in `quorum-cron history {name}`"
        )
    if entry.user is not None:
        comments.append(f"user: cron ran this as {entry.user!r}; the agent runs it as its own user")
    if home is None:
        comments.append(f"HOME: no home directory known for {user!r} here; set env.HOME and cwd")
    return _Job(entry, spec, comments, offer_every, bool(target))


def _render(jobs: Iterable[_Job], *, source: str, cluster_name: str, mail: list[str]) -> str:
    lines = [
        _comment(f"Imported from {source} by `quorum-cron import-crontab`."),
        "# Every node runs this same file. Check it with `quorum-cron validate FILE`.",
        "#",
        "# Kept from cron in every job: the schedule and its zone, the shell (SHELL -c),",
        "# exactly cron's environment (inherit_env = false: nothing from the agent but the",
        "# QUORUM_CRON_* facts of the run), the % standard input, HOME as working directory,",
        '# overlap = "allow" (cron starts a run while the last one still runs) and the',
        '# longest timeout (cron never kills a job). Consider overlap = "forbid" and a',
        "# real timeout. What differs is said above each job (see docs/migrating.md).",
        "",
        "[cluster]",
        f"name = {toml_str(cluster_name)}",
        "size = 3  # N: how many nodes run this file (edit)",
        'redis_url = "redis://localhost:6379/0"  # or QUORUM_CRON_REDIS_URL',
    ]
    if len(mail) == 1 and "@" in mail[0]:
        # One address for every job: cron's mail becomes the cluster's alert hook (the alert's
        # JSON document is the mail's body). Several addresses: the hook is one, so it is offered.
        lines.append(
            f'alert_command = ["/usr/bin/mail", "-s", "quorum-cron alert", {toml_str(mail[0])}]'
            "  # MAILTO: failed runs, missed/lost slots by mail"
        )
    elif mail:
        lines.append(
            _comment(
                f'alert_command = ["/usr/bin/mail", "-s", "quorum-cron alert", {toml_str(mail[0])}]'
                "  # MAILTO (several addresses: one hook; pick or write a script)"
            )
        )
    for job in jobs:
        spec = job.spec
        lines.append("")
        lines.extend(_comment(c) for c in job.comments)
        lines.append("[[jobs]]")
        lines.append(f"name = {toml_str(spec.name)}")
        lines.append(f"schedule = {toml_str(spec.schedule_expr)}")
        lines.append(f"timezone = {toml_str(spec.timezone)}")
        if job.offer_every:
            lines.append('# dst = "every"')
        if spec.shell is not None:
            lines.append(f"shell = {toml_str(spec.shell)}")
        else:
            lines.append("command = [" + ", ".join(toml_str(a) for a in spec.command or ()) + "]")
        if spec.stdin is not None:
            lines.append(f"stdin = {toml_str(spec.stdin)}")
        if spec.cwd is not None:
            lines.append(f"cwd = {toml_str(spec.cwd)}")
        lines.append("inherit_env = false")
        lines.append('overlap = "allow"')
        lines.append(f'timeout = "{LONGEST_TIMEOUT}"')
        # cron mailed a job's output (its failure mail) unless MAILTO=""; missed and lost slots are
        # the cluster's own failures, alerted either way.
        lines.append(
            'alert_on = ["failed", "missed", "lost"]' if job.mailed else 'alert_on = ["missed", "lost"]'
        )
        lines.append("[jobs.env]")
        lines.extend(f"{k} = {toml_str(v)}" for k, v in spec.env.items())
    return "\n".join(lines) + "\n"
