"""Secrets out of URLs and text: the one place anything is made safe to show.

Every URL quorum-cron prints — in a repr, a log line, an error message —
goes through :func:`redact_url`, and every log line through
:func:`redact_text`, so a Redis password never reaches a terminal or a log
aggregator.

Why not :func:`urllib.parse.urlsplit`: its netloc stops at the first ``/``,
``?`` or ``#``, so ``redis://:pa/ss@host`` would have an empty userinfo and
the password would be printed as part of the "path". Here the userinfo is
everything between ``://`` and the *last* ``@`` of the URL (a password may
contain ``@`` too); a userinfo without ``:`` (``redis://secret@host``) is
all secret, since Redis URLs commonly carry a bare password there. When the
URL has more ``@`` further on (in the query, say) this over-redacts, which
is the safe side.

Both functions run in linear time in the length of their input: they are
applied to every log line, and a log line may quote a value of any size
read from Redis. No backtracking regular expression is involved.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import unquote_plus

__all__ = ["ECHOED_ARGS", "MASK", "redact_text", "redact_url"]

MASK: Final = "***"

_SECRET_PARAMS: Final = frozenset({"password", "pass", "passwd", "pwd", "token", "secret", "auth"})
_SCHEME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_SPACE: Final = frozenset(" \t\r\n\v\f")


def _secret_param(key: str) -> bool:
    """``password`` and the like, also prefixed: ``sentinel_password`` (a Sentinel URL's) is as secret."""
    name = key.lower()
    return name in _SECRET_PARAMS or name.rpartition("_")[2] in _SECRET_PARAMS


def _redact_query(query: str) -> str:
    """``a=1&password=x&sentinel_password=y`` → ``a=1&password=***&sentinel_password=***``; linear.

    A name is judged percent-decoded, as the client reads it (redis-py's and the Sentinel
    parser's :func:`urllib.parse.parse_qs` decode names): ``pass%77ord=x`` IS a password there,
    so it is masked here, the name kept as written. A secret name holding an encoded ``=``
    (``pass%77ord%3Dx``) carries a value in the name itself: the whole pair is masked.
    """
    out = []
    for pair in query.split("&"):
        key, sep, _value = pair.partition("=")
        name, smuggled, _ = unquote_plus(key).partition("=")
        if not (sep or smuggled) or not _secret_param(name):
            out.append(pair)
        else:
            out.append(MASK if smuggled else f"{key}={MASK}")
    return "&".join(out)


def _redact_after_scheme(rest: str) -> str:
    """Redact one URL's text after its ``scheme://`` (whole span, no whitespace splitting)."""
    at = rest.rfind("@")
    if at >= 0:
        userinfo = rest[:at]
        user, colon, _password = userinfo.partition(":")
        # "user:pw@" keeps the user name; "pw@" (no colon) is all secret.
        shown_user = f"{user}:{MASK}" if colon else MASK
        rest = f"{shown_user}@{rest[at + 1 :]}"
        head_len = len(shown_user) + 1
    else:
        head_len = 0
    q = rest.find("?", head_len)
    if q < 0:
        return rest
    frag = rest.find("#", q)
    end = len(rest) if frag < 0 else frag
    return rest[: q + 1] + _redact_query(rest[q + 1 : end]) + rest[end:]


def redact_url(url: str) -> str:
    """``url`` with any password (userinfo or ``?password=``) replaced by ``***``.

    Used for every URL that is shown: reprs, logs, error messages. A string
    without ``://`` is returned as it is unless it holds an ``@`` (then
    everything before the last ``@`` is masked: it may be a password).
    """
    sep = url.find("://")
    if sep < 0:
        at = url.rfind("@")
        return url if at < 0 else f"{MASK}{url[at:]}"
    return url[: sep + 3] + _redact_after_scheme(url[sep + 3 :])


ECHOED_ARGS: Final = "with args beginning with:"
"""What Redis says before it echoes the arguments of a command it does not know."""


def _without_echoed_args(text: str) -> str:
    """``text`` with what follows each :data:`ECHOED_ARGS`, to the end of its line, masked.

    A server or proxy without ``AUTH`` (renamed, or never offered) answers the client's
    ``AUTH <password>`` with ``unknown command 'AUTH', with args beginning with: '<password>'``:
    the password, in every error line that quoted the reply. Linear, like :func:`redact_text`.
    """
    at = text.find(ECHOED_ARGS)
    if at < 0:
        return text
    out: list[str] = []
    pos = 0
    while at >= 0:
        out.append(text[pos : at + len(ECHOED_ARGS)] + " " + MASK)
        end = text.find("\n", at)
        pos = len(text) if end < 0 else end
        at = text.find(ECHOED_ARGS, pos)
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """``text`` with every ``scheme://...`` URL in it passed through :func:`redact_url`, and the
    arguments a Redis error reply echoes masked (:func:`_without_echoed_args`).

    A URL in free text ends at the next whitespace (a password cannot hold
    whitespace here); quotes and brackets around it stay where they are
    because they come after the last ``@``. Linear time: each character is
    looked at a bounded number of times.
    """
    text = _without_echoed_args(text)
    if "://" not in text:
        return text
    out: list[str] = []
    pos = 0  # everything before pos is already in out
    n = len(text)
    search = 0
    while True:
        sep = text.find("://", search)
        if sep < 0:
            break
        start = sep
        while start > pos and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        end = sep + 3
        while end < n and text[end] not in _SPACE:
            end += 1
        if start == sep:  # "://" without a scheme before it: not a URL
            search = sep + 3
            continue
        out.append(text[pos:start])
        out.append(text[start : sep + 3] + _redact_after_scheme(text[sep + 3 : end]))
        pos = end
        search = end
    out.append(text[pos:])
    return "".join(out)
