"""What a request to the web face may carry, checked where it enters: query arguments, bodies, forms, origin.

Each check either returns the value or raises :class:`Refused` with the
HTTP status and a message that names the offending value and what was
expected; :mod:`.app` turns a refusal into an error page or JSON. Bodies
are bounded before they are read whole. Separate from :mod:`.app` so that
every rule on untrusted input is in one short module, next to its limits.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request

from quorum_cron.config.durations import parse_duration
from quorum_cron.errors import ConfigError
from quorum_cron.printable import first_of
from quorum_cron.store.base import MAX_REASON

__all__ = [
    "KNOWN_SHOWN",
    "MAX_BODY",
    "MAX_MS",
    "MAX_NEXT",
    "MAX_PAGE",
    "MAX_WINDOW_MS",
    "MIN_WINDOW_MS",
    "WINDOW_EXPECTED",
    "Refused",
    "body_of",
    "check_reason",
    "form_of",
    "job_args",
    "safe_next",
    "same_origin",
    "slot_ms",
    "unknown_job",
    "window_ms",
]

MIN_WINDOW_MS = 60_000
MAX_WINDOW_MS = 31 * 86_400_000
WINDOW_EXPECTED = "expected a duration with its unit from 1m to 31d, e.g. 10m, 1h, 1d, 7d or 1h30m"
MAX_PAGE = 1000
MAX_MS = 10**14
"""The latest time a URL may name (``to``, a slot): year 5138. A schedule's fire times are computed
around it, and a zoned calendar cannot go past year 9999: ``to=999999999999999`` was a 500."""
MAX_BODY = 16 * 1024
"""Forms and JSON bodies are small; a larger body is refused before it is read whole."""
MAX_NEXT = 2000
"""The longest page address a login carries to go back to (``next``): a page's path and query."""
KNOWN_SHOWN = 20
"""Job names an unknown job's 404 lists, then ``and N more``: a config of 10,000 jobs stays one line."""


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def unknown_job(job: str, jobs: Sequence[str]) -> Refused:
    """The 404 of a job this server's config does not define, worded as ``trigger`` and ``history``
    word it: the name asked for (``repr`` escapes it; cut) and the names the config defines, so a
    typo or a job of another node's config is seen at once, without opening the jobs page."""
    known = first_of(list(jobs), KNOWN_SHOWN) or "(none configured)"
    return Refused(404, f"unknown job {job[:200]!r}: expected one of {known}")


def job_args(request: Request) -> dict[str, Any]:
    q = request.query_params
    out: dict[str, Any] = {}
    if q.get("window"):
        out["window_ms"] = window_ms(q["window"])
    for key, name, lo, hi in (("to", "to_ms", 1, MAX_MS), ("page", "page", 0, MAX_PAGE)):
        if q.get(key):
            raw = q[key]
            if not (raw.isascii() and raw.isdecimal()) or len(raw) > 15 or not lo <= int(raw) <= hi:
                raise Refused(400, f"{key} {raw[:40]!r} is not a whole number from {lo} to {hi}")
            out[name] = int(q[key])
    return out


def window_ms(raw: str) -> int:
    """The job page's ``?window=``: a duration with its unit, :data:`MIN_WINDOW_MS` to :data:`MAX_WINDOW_MS`.

    Every refusal says what is accepted here (:data:`WINDOW_EXPECTED`), not the
    configuration's rule, whose "or an integer number of seconds" (a TOML
    integer) a URL cannot give: ``?window=600`` is text, refused for its missing unit.
    """
    # A long one is refused before it is parsed: int() of a 5 000-digit count raised
    # ValueError past Python's digit limit (a 500), and each error echoed the whole value.
    if len(raw) > 32:
        raise Refused(400, f"window {raw[:32]!r}... is too long ({WINDOW_EXPECTED})")
    if raw.isascii() and raw.isdecimal():
        raise Refused(400, f"window {raw!r} has no unit ({WINDOW_EXPECTED})")
    try:
        ms = parse_duration(raw, what="window")
    except ConfigError:
        raise Refused(400, f"window {raw!r} is not a duration ({WINDOW_EXPECTED})") from None
    if not MIN_WINDOW_MS <= ms <= MAX_WINDOW_MS:
        raise Refused(400, f"window {raw!r} is out of range ({WINDOW_EXPECTED})")
    return ms


async def body_of(request: Request) -> bytes:
    size = request.headers.get("content-length", "")
    if size.isascii() and size.isdecimal() and int(size) > MAX_BODY:
        raise Refused(413, f"request body of {size} bytes is too large (expected at most {MAX_BODY})")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_BODY:
            raise Refused(413, f"request body is too large (expected at most {MAX_BODY} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


async def form_of(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (what the pages' forms send), bounded."""
    text = (await body_of(request)).decode("utf-8", errors="replace")
    try:
        return dict(urllib.parse.parse_qsl(text, keep_blank_values=True, max_num_fields=20))
    except ValueError:
        raise Refused(400, "form has more than 20 fields (expected a page's form)") from None


def slot_ms(raw: str) -> int:
    """A slot's fire time from a URL: epoch milliseconds from 0 to :data:`MAX_MS`."""
    if not (raw.isascii() and raw.isdecimal()) or len(raw) > 15 or int(raw) > MAX_MS:
        raise Refused(400, f"slot {raw[:40]!r} is not a fire time in epoch milliseconds (0 to {MAX_MS})")
    return int(raw)


def safe_next(raw: str) -> str:
    """Where to go after logging in: ``raw`` when it is a page of this server, else ``/``.

    Only a path relative to the server's root (the proxy prefix is added on
    redirect) is kept: ``/`` then a segment, ASCII without spaces or control
    characters (a browser drops tabs and newlines from a URL: ``/<TAB>/evil``
    would be ``//evil``), no backslash (read as ``/``), no ``//`` (another
    host), no scheme, no dot segment (out of the prefix), not the login or
    logout itself. Anything else is not refused with an error — the login
    still works — it just lands on the jobs page, never on another site.
    """
    if not raw or len(raw) > MAX_NEXT or not raw.isascii() or not raw.startswith("/"):
        return "/"
    if raw.startswith("//") or "\\" in raw or any(c <= " " or c == "\x7f" for c in raw):
        return "/"
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme or parts.netloc or parts.fragment:
        return "/"
    segments = urllib.parse.unquote(parts.path).split("/")
    if any(seg in (".", "..") for seg in segments) or parts.path.rstrip("/") in ("/login", "/logout"):
        return "/"
    return raw


def same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser, or an old one: the CSRF token still decides
    return origin == f"{request.url.scheme}://{request.url.netloc}"


def check_reason(reason: str) -> str:
    """One line of printable text, as ``quorum-cron pause --reason`` takes it.

    A control character (NUL, ESC, a tab) was stored as given, and a lone surrogate
    (``{"reason": "\\ud800"}``, valid JSON) could not be encoded for the store: a 503
    "store unavailable" for a bad parameter.
    """
    reason = reason.strip()
    if len(reason) > MAX_REASON or "\n" in reason or "\r" in reason:
        raise Refused(400, f"reason is {len(reason)} characters: expected one line of at most {MAX_REASON}")
    bad = next((ch for ch in reason if not ch.isprintable()), None)
    if bad is not None:
        raise Refused(400, f"reason contains the character U+{ord(bad):04X}: expected printable text")
    return reason
