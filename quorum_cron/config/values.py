"""Small shared pieces of the config modules: one-line value checks, name rules, output bounds, ``alert_on``.

Kept apart from :mod:`quorum_cron.config.settings` (which imports and re-exports
them) so that module stays within its size bound; nothing here knows a
config's structure. ``alert_on`` names which of a job's outcomes raise an
alert; it is not part of the job's spec hash (who is told does not change
what runs).
"""

from __future__ import annotations

import difflib
import json
import re
import urllib.parse
from collections.abc import Callable
from typing import Final

from quorum_cron.config.durations import format_duration
from quorum_cron.printable import printable

__all__ = [
    "ALERT_ON_KINDS",
    "DEFAULT_ALERT_ON",
    "DEFAULT_HEARTBEAT_MS",
    "DEFAULT_LEASE_MS",
    "DEFAULT_OUTPUT_LOG_LINES",
    "DEFAULT_OUTPUT_LOG_RATE",
    "DEFAULT_OUTPUT_TAIL",
    "alert_on_problem",
    "deadline_vs_skew_problem",
    "heartbeat_vs_lease_problem",
]

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
_MAX_NAME = 100
_MAX_SIZE = 100
"""The largest cluster (``size``, ``quorum``, the number of ``members``)."""

DEFAULT_OUTPUT_TAIL: Final = 2048
"""Bytes of each stream of a run kept in the ledger, by default."""
DEFAULT_OUTPUT_LOG_LINES: Final = 100
DEFAULT_OUTPUT_LOG_RATE: Final = 50
DEFAULT_LEASE_MS: Final = 15_000
DEFAULT_HEARTBEAT_MS: Final = 2_000

_CLUSTER_OUTPUT_BOUNDS: tuple[tuple[str, int, int], ...] = (
    ("output_tail", 0, 65_536),
    ("output_log_lines", 0, 100_000),
    ("output_log_rate", 1, 10_000),
)

ALERT_ON_KINDS: Final = ("failed", "recovered", "missed", "lost")
"""What a job's ``alert_on`` may name: ``job_failed``, ``job_recovered``, ``slot_missed``, ``slot_lost``."""
DEFAULT_ALERT_ON: Final = ALERT_ON_KINDS
"""Every job outcome alert, unless the job says otherwise (``alert_on = []``: none)."""


def alert_on_problem(value: object) -> str | None:
    """One line when ``value`` is not a list of :data:`ALERT_ON_KINDS`; None when it is."""
    expected = "a list of " + ", ".join(repr(k) for k in ALERT_ON_KINDS)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        return f"{value!r} is {_type_name(value)} (expected {expected})"
    for item in value:
        if item not in ALERT_ON_KINDS:
            return f"{item!r} is not an alert kind (expected {expected})"
    return None


def _redact_alert_url(url: str | None) -> str | None:
    # Webhook URLs often carry their secret in the path (Slack, Teams).
    if url is None:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # ('http://[x': nothing of it is shown)
        return f"{printable(url.partition(':')[0], 10)}://***"
    tail = "/***" if parts.path.strip("/") or parts.query else ""
    if not parts.scheme and parts.netloc:
        return f"//{parts.hostname or ''}{tail}"
    if not parts.scheme:
        # No scheme ('' or 'hooks.example/T/B/secret'): '://' or ':///***' named nothing the
        # user wrote. Show what comes before the first '/' (past any '@'), as they wrote it.
        head, slash, _ = url.partition("/")
        head = head.partition("?")[0].rpartition("@")[2]
        return printable(head, 80) + ("/***" if slash or "?" in url else "")
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{tail}"


def _type_name(value: object) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _name_problem(name: object, what: str) -> str | None:
    """Why ``name`` is not a valid namespace, job name or node id (one line), or None."""
    if not isinstance(name, str):
        return f"{name!r} is {_type_name(name)} (expected a string)"
    if not name or len(name) > _MAX_NAME or not _NAME_RE.fullmatch(name):
        return f"{name!r} is not a valid {what} (expected 1-{_MAX_NAME} characters from A-Z a-z 0-9 _ . -)"
    return None


_ALIASES: Final = {"cmd": "command", "commands": "command", "exec": "command", "run": "command"}
"""What other tools call a job's ``command``: suggested before any near spelling (``cmd`` is nearer
``cwd``). Only where the target is a known key, so only for job tables (no other has ``command``)."""


def _suggest(key: str, known: tuple[str, ...]) -> str:
    alias = _ALIASES.get(key)
    close = [alias] if alias in known else difflib.get_close_matches(key, known, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return "expected one of " + ", ".join(repr(k) for k in known)


def _range_problem(value: int, lo: int, hi: int, fmt: Callable[[int], str] = str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):  # (the API's: the file's are checked)
        return f"{value!r} is {_type_name(value)} (expected an integer {fmt(lo)} to {fmt(hi)})"
    if lo <= value <= hi:
        return None
    # A duration is quoted as written ('0s'); a number is not: "'99' is out of range" read like
    # the string "'99' is a string" that a quoted ledger_maxlen = "99" gets.
    shown = str(value) if fmt is str else repr(fmt(value))
    return f"{shown} is out of range (expected {fmt(lo)} to {fmt(hi)})"


def _command_string_problem(value: str) -> str:
    # The suggestion is TOML (a JSON string is a valid TOML basic string).
    return (
        f"{value!r} is a string (expected an array of strings (argv); "
        f"for a shell command line write shell = {json.dumps(value, ensure_ascii=False)})"
    )


def _alert_url_problem(url: str) -> str | None:
    """Why ``url`` cannot take the alert hook's POST (one line, its secret path hidden), or None.

    urllib's POST sends no user or password from a URL: it took ``user:pw@host`` for the host and
    asked the resolver for it (the password included), so such a URL is refused here, as are
    whitespace and control characters and a port no socket has.
    """
    expected = "expected e.g. 'https://alerts.example/hook'"
    if any(not ch.isprintable() or ch.isspace() for ch in url):
        return f"{_redact_alert_url(url)!r} contains whitespace or a control character ({expected})"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{_redact_alert_url(url)!r} is not a valid URL ({exc}; {expected})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{_redact_alert_url(url)!r} is not an http(s) URL ({expected})"
    if "@" in parts.netloc:
        return (
            f"{_redact_alert_url(url)!r} has a user or password before its host, which the hook's "
            f"POST cannot send (put a token in the path or query: {expected})"
        )
    if port == 0:
        return f"{_redact_alert_url(url)!r} has port 0 ({expected})"
    return None


def deadline_vs_skew_problem(
    deadline_ms: int, skew_ms: int, deadline_default: bool, skew_default: bool
) -> str:
    """Why a job's ``starting_deadline`` may not be within the cluster's ``max_skew``.

    A value the user never wrote is named as the default, with what to change: a job without
    ``starting_deadline`` under ``max_skew = "1m"`` was told its '30s' was wrong, as if written.
    """
    deadline, skew = format_duration(deadline_ms), format_duration(skew_ms)
    why = ["the default"] if skew_default else []
    why.append("a node whose clock lags by max_skew could never vote")
    if deadline_default or skew_default:
        why.append(f"set starting_deadline above {skew}, or max_skew below {deadline}")
    shown = f"'{deadline}' (the default for this schedule)" if deadline_default else f"'{deadline}'"
    return f"{shown} must be longer than cluster max_skew '{skew}' ({'; '.join(why)})"


def heartbeat_vs_lease_problem(
    heartbeat_ms: int,
    lease_ms: int,
    *,
    heartbeat_default: bool | None = None,
    lease_default: bool | None = None,
) -> str:
    """Why ``heartbeat`` may not be more than half of ``lease``, naming a value not written as the default.

    ``lease = "3s"`` alone was told "field 'heartbeat': '2s' is more than half of lease '3s'".
    A ``*_default`` of ``None`` (the caller cannot tell): a value equal to the default is one.
    """
    if heartbeat_default is None:
        heartbeat_default = heartbeat_ms == DEFAULT_HEARTBEAT_MS
    if lease_default is None:
        lease_default = lease_ms == DEFAULT_LEASE_MS
    why = ["the default"] if lease_default else []
    why.append("a lease must survive one lost heartbeat")
    if heartbeat_default or lease_default:
        why.append(
            f"set heartbeat to at most {format_duration(lease_ms // 2)}, "
            f"or lease to at least {format_duration(heartbeat_ms * 2)}"
        )
    shown = f"'{format_duration(heartbeat_ms)}'" + (" (the default)" if heartbeat_default else "")
    return f"{shown} is more than half of lease '{format_duration(lease_ms)}' ({'; '.join(why)})"
