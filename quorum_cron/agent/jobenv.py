"""The environment a job or alert command starts with: a short allowlist, never the agent's secrets.

A job used to inherit the agent's whole environment, and with it
``QUORUM_CRON_REDIS_URL`` (the Redis password) and whatever else the agent's
service manager set. A job now gets only:

- the variables in :data:`INHERITED` (and ``LC_*``), taken from the agent's
  environment when set there — what a shell and common tools need to work;
- the agent's variables the job names in ``env_passthrough`` (never a
  ``QUORUM_CRON_*`` one; the config refuses those names, and
  :func:`passthrough` drops them again);
- the job's own ``env`` table from the config (explicit values, per job,
  reviewed with the config);
- the slot's facts (``QUORUM_CRON_JOB`` ... ``QUORUM_CRON_NODE``) or, for an
  alert command, ``QUORUM_CRON_ALERT``.

No other ``QUORUM_CRON_*`` variable is ever inherited: those are the
agent's own settings, the Redis URL among them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["INHERITED", "base_environment", "passthrough"]

INHERITED: Final = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
)
"""Variables passed from the agent's environment to its jobs (plus any ``LC_*``)."""

_DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"


def base_environment(source: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted part of ``source`` (the agent's ``os.environ``); PATH always set."""
    env = {k: source[k] for k in INHERITED if k in source}
    env.update({k: v for k, v in source.items() if k.startswith("LC_")})
    env.setdefault("PATH", _DEFAULT_PATH)
    return env


def passthrough(source: Mapping[str, str], names: tuple[str, ...]) -> dict[str, str]:
    """The variables of ``source`` named in ``names`` that are set there, never ``QUORUM_CRON_*``."""
    return {k: source[k] for k in names if k in source and not k.upper().startswith("QUORUM_CRON_")}
