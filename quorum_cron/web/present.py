"""How the web face's responses look and what they carry: templates, filters, security headers.

The Jinja2 environment (autoescape on, undefined names an error) with the
filters the templates use — times, durations, "ago", the strip of recent
outcomes built in Python because a page draws hundreds — and the ASGI
middleware that adds the Content-Security-Policy and the other security
headers to every response. Separate from :mod:`.app` (routes and what each
request may do) because none of this depends on a request's rights.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quorum_cron.config.durations import format_duration
from quorum_cron.store.voters import of_doc
from quorum_cron.web import views
from quorum_cron.web.quorum import down_text

__all__ = ["CSP", "SecurityHeaders", "environment", "job_segment"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


class SecurityHeaders:
    """Adds the security headers to every response (a pure ASGI middleware: SSE keeps streaming)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"x-frame-options", b"DENY"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["t"] = views.fmt_ms
    env.filters["dur"] = _fmt_dur
    env.filters["ago"] = _ago
    env.filters["spark"] = _spark
    env.filters["jobseg"] = job_segment
    env.filters["voters"] = _voters
    env.filters["down"] = down_text
    return env


def job_segment(job: str) -> str:
    """A job name as one path segment of a link (``/jobs/<this>``) that every browser keeps as it is.

    A browser resolves the dot segments ``.`` and ``..`` of a link — ``%2E``
    and ``%2e%2e`` too (the URL standard reads them as dots) — before it
    asks for it: ``/jobs/..`` would be ``/``. Job names may be ``.`` and
    ``..`` (``A-Z a-z 0-9 _ . -``), so their dots are written ``%252E``: the
    server decodes that once to ``%2E``, and :mod:`.app` reads a name
    with ``%`` in it (no job name has one) decoded once more.
    """
    if job in (".", ".."):
        return "%252E" * len(job)
    return urllib.parse.quote(job, safe="")


def _spark(states: list[str]) -> Markup:
    """Recent outcomes, oldest first, as a strip of coloured marks (built here: hundreds per page)."""
    counts: dict[str, int] = {}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    label = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    marks = "".join(f'<i class="f-{escape(s)}"></i>' for s in states)
    return Markup(f'<span class="spark" title="last {len(states)}: {escape(label)}">{marks}</span>')


def _voters(entry: Mapping[str, Any]) -> Markup:
    """A ledger entry's voters as ``history`` shows them: the others, then in brackets the ones the
    store can tell did not count, each with why (the entry's ``not_members_at_commit`` and
    ``other_definition``: :mod:`quorum_cron.store.voters`)."""
    apart = of_doc(entry).apart()
    rest = ", ".join(str(v) for v in entry["voters"] if v not in apart)
    said = "; ".join(f"{v}: {why}" for v, why in apart.items())
    if not said:
        return escape(rest or "-")
    return Markup(f'{escape(rest)} <span class="apart dim">[{escape(said)}]</span>'.lstrip())


def _fmt_dur(ms: int | None) -> str:
    if ms is None:
        return "-"
    if abs(ms) < 1000:
        return f"{ms} ms"
    if abs(ms) < 120_000:
        return f"{ms / 1000:.1f} s"
    return format_duration(ms - ms % 1000) if ms % 60_000 else format_duration(ms)


def _ago(ms: int, now: int) -> str:
    delta = now - ms
    text = _fmt_dur(abs(delta))
    return f"{text} ago" if delta >= 0 else f"in {text}"
