"""Secrets out of URLs: the one place a URL is made safe to show.

Every URL quorum-cron prints — in a repr, a log line, an error message —
goes through :func:`redact_url` first, so a Redis password never reaches a
terminal or a log aggregator.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["redact_url"]


def redact_url(url: str) -> str:
    """``url`` with any password (userinfo or ``?password=``) replaced by ``***``.

    Used for every URL that is shown: reprs, logs, error messages.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        if sep:  # "user:password@" or ":password@"
            netloc = f"{user}:***@{hostport}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query = "&".join(
            f"{k}={'***' if k.lower() in ('password', 'pass', 'token', 'secret') else v}" for k, v in pairs
        )
    if netloc == parts.netloc and query == parts.query:
        return url
    # Rebuilt by hand: urlunsplit would turn "unix:///path" into "unix:/path".
    rebuilt = f"{parts.scheme}://{netloc}{parts.path}"
    return rebuilt + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
