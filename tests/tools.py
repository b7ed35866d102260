"""System tools and optional packages some tests need (chronyd, faketime, matplotlib).

Outside CI a test whose tool is missing skips with a reason naming it; in CI
(``CI`` set, as ``.ci/run`` does) it fails instead, because ``.ci/run``
installs every tool and a skip there would hide a missing install step.
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import NoReturn

import pytest

__all__ = ["faketime_env", "missing", "require_tool"]


def require_tool(name: str, *, extra_paths: tuple[str, ...] = ("/usr/sbin", "/sbin")) -> str:
    """The path of executable ``name``; skip (locally) or fail (in CI) when it is missing."""
    path = shutil.which(name) or next(
        (p for d in extra_paths if os.access(p := os.path.join(d, name), os.X_OK)), None
    )
    if path is not None:
        return path
    missing(f"{name} is not installed (apt-get install the package providing {name!r})")


def missing(message: str) -> NoReturn:
    """Skip (locally) or fail (in CI) for a missing tool or package ``message`` names."""
    if os.environ.get("CI"):
        pytest.fail(f"{message}; .ci/run must install it", pytrace=False)
    pytest.skip(message)


def faketime_env(offset: str) -> dict[str, str]:
    """Environment that runs a process under libfaketime ``offset`` (e.g. ``"+5s"``), preloaded.

    Not through the ``faketime`` wrapper: it makes a POSIX semaphore and a shared-memory segment
    named by its pid for the process tree to share, and a wrapper killed leaves them in /dev/shm.
    Once a later wrapper got a pid one of those had, it died with "faketime: sem_open: File
    exists" before the process under test started (a CI run on this machine, whose /dev/shm held
    a thousand such leftovers). A fixed offset needs no sharing: the library alone reads
    ``FAKETIME``, as ``faketime -f`` sets it.
    """
    require_tool("faketime")  # (the package that ships the library: a missing one is named so)
    found = sorted(
        glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob("/usr/lib/faketime/libfaketime.so.1")
    )
    if not found:
        missing("libfaketime.so.1 is not installed (apt-get install the package providing 'faketime')")
    return {"LD_PRELOAD": found[0], "FAKETIME": offset}
