"""Admin tokens: who may trigger, pause and resume from the web face.

A token is ``NAME:SECRET``; ``NAME`` is what the audit records as ``by``
for every action taken with it, ``SECRET`` is at least 16 characters. Tokens come from a file
(one per line, ``#`` comments) or from the environment — never from the
command line, where every user of the machine can read them in the process
list. Without any token the server is read-only.

The file is read again on every check, so removing a line revokes the token
(and every session opened with it) without a restart. Secrets are compared
in constant time and kept only as SHA-256 digests in memory.

A file that stops reading (a malformed line saved while the server runs, a
file removed or made unreadable) refuses every token, as at start — and
says so: one warning in the server's log naming the file and line (once per
problem, again when it changes), and :meth:`AdminTokens.problem` for the
refusal the user sees, instead of "not a current admin token".
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from quorum_cron.errors import ConfigError

__all__ = ["ENV_TOKEN", "ENV_TOKEN_FILE", "AdminTokens", "parse_token"]

ENV_TOKEN = "QUORUM_CRON_WEB_TOKEN"
"""An admin token ``NAME:SECRET`` in the environment."""
ENV_TOKEN_FILE = "QUORUM_CRON_WEB_TOKEN_FILE"
"""A file of admin tokens, one ``NAME:SECRET`` per line."""

log = logging.getLogger(__name__)
_said = {"problem": ""}
_said_lock = threading.Lock()

_NAME_RE = re.compile(r"[A-Za-z0-9_.@-]{1,64}", re.ASCII)
_MIN_SECRET = 16
_MAX_SECRET = 512
_MAX_FILE_BYTES = 1 << 20
"""The largest admin token file read (1 MiB: thousands of tokens)."""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_token(text: str, where: str) -> tuple[str, str]:
    """``NAME:SECRET`` → (name, SHA-256 of secret); a one-line ConfigError naming ``where`` otherwise."""
    name, sep, secret = text.strip().partition(":")
    if not sep or not _NAME_RE.fullmatch(name):
        raise ConfigError(
            f"admin token in {where} is not NAME:SECRET "
            f"(expected NAME of 1-64 characters from A-Z a-z 0-9 _ . @ -)"
        )
    if not _MIN_SECRET <= len(secret) <= _MAX_SECRET or any(c.isspace() for c in secret):
        raise ConfigError(
            f"admin token {name!r} in {where}: secret has {len(secret)} characters "
            f"(expected {_MIN_SECRET}-{_MAX_SECRET} without spaces)"
        )
    return name, _digest(secret)


@dataclass(frozen=True)
class AdminTokens:
    """Where the admin tokens come from; :meth:`current` reads them (again) at each check.

    ``env_value`` is a whole ``NAME:SECRET`` in clear: it stays out of ``repr`` (the web
    context that holds this object, a log line or a traceback's locals would print it).
    """

    file: Path | None = None
    env_value: str | None = field(default=None, repr=False)

    @classmethod
    def from_environment(cls, file: Path | None = None) -> AdminTokens:
        """Tokens from ``file`` (or ``$QUORUM_CRON_WEB_TOKEN_FILE``) and ``$QUORUM_CRON_WEB_TOKEN``."""
        env_file = os.environ.get(ENV_TOKEN_FILE)
        chosen = file if file is not None else (Path(env_file) if env_file else None)
        tokens = cls(file=chosen, env_value=os.environ.get(ENV_TOKEN) or None)
        tokens.current()  # fail at start, not at the first click
        return tokens

    @property
    def enabled(self) -> bool:
        """Whether any source of tokens was given (else the server is read-only)."""
        return self.file is not None or self.env_value is not None

    def current(self) -> dict[str, str]:
        """Token name → secret digest, as the sources say right now."""
        out: dict[str, str] = {}
        where: dict[str, str] = {}
        # A name is who did an action in the audit: two secrets under one name would make the
        # first line silently dead (an operator believing it revoked or still valid), so a
        # repeated name is refused rather than the last line winning.
        if self.env_value is not None:
            name, digest = parse_token(self.env_value, f"${ENV_TOKEN}")
            out[name], where[name] = digest, f"${ENV_TOKEN}"
        if self.file is not None:
            try:
                with self.file.open("rb") as fh:  # (bounded: /dev/zero was read until memory ran out)
                    raw = fh.read(_MAX_FILE_BYTES + 1)
                if len(raw) > _MAX_FILE_BYTES:
                    raise ConfigError(
                        f"admin token file {str(self.file)!r} is larger than {_MAX_FILE_BYTES >> 20} MiB "
                        "(expected NAME:SECRET lines)"
                    )
                text = raw.decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read admin token file {str(self.file)!r}: {exc}") from None
            for number, line in enumerate(text.splitlines(), 1):
                if line.strip() and not line.lstrip().startswith("#"):
                    at = f"{self.file}:{number}"
                    name, digest = parse_token(line, at)
                    if name in out:
                        raise ConfigError(
                            f"admin token name {name!r} appears twice ({where[name]} and {at}): "
                            "expected one token per name"
                        )
                    out[name], where[name] = digest, at
        return out

    def _readable(self) -> dict[str, str] | None:
        """:meth:`current`, or None when the sources do not read (logged once per problem)."""
        try:
            known = self.current()
        except ConfigError as exc:
            with _said_lock:
                if _said["problem"] != str(exc):
                    _said["problem"] = str(exc)
                    log.warning("admin tokens refused until this is fixed: %s", exc)
            return None
        with _said_lock:
            if _said["problem"]:
                _said["problem"] = ""
                log.warning("admin tokens read again: %s", ", ".join(sorted(known)) or "none")
        return known

    def problem(self) -> str:
        """Why no token is accepted right now ("" when the sources read fine); names no secret."""
        if not self.enabled:
            return ""
        try:
            self.current()
        except ConfigError as exc:
            return str(exc)
        return ""

    def check(self, presented: str) -> str | None:
        """The token's name when ``presented`` (``NAME:SECRET``) is a current token, else None."""
        name, sep, secret = presented.strip().partition(":")
        if not sep:
            return None
        known = self._readable()
        if known is None:
            return None
        want = known.get(name)
        if want is None:
            # Same work either way: no timing difference between a wrong name and a wrong secret.
            hmac.compare_digest(_digest(secret), _digest(""))
            return None
        return name if hmac.compare_digest(_digest(secret), want) else None

    def still_valid(self, name: str, digest: str) -> bool:
        """Whether the token a session was opened with is still configured (revocation)."""
        known = self._readable()
        if known is None:
            return False
        want = known.get(name)
        return want is not None and hmac.compare_digest(want, digest)

    @staticmethod
    def digest_of(presented: str) -> str:
        """The digest a session remembers (never the secret itself)."""
        return _digest(presented.strip().partition(":")[2])
