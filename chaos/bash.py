"""The bash the jobs run under: found one way for the harness and its check, its version checked.

Each job is ``bash -c 'printf ... "$EPOCHREALTIME" ...'`` (``chaos.run``; the
leader baseline's job is the same one-liner, ``benchmarks/fire_latency.py``).
``$EPOCHREALTIME`` came in bash 5.0: an older bash expands it to nothing, the
ground-truth line loses its start time, and the checker read the token as the
start. So the harness refuses to run, on one line, without bash >= 5.0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

__all__ = ["MIN_VERSION", "bash_problem", "find_bash", "parse_version"]

MIN_VERSION = (5, 0)
_FALLBACK = "/bin/bash"


def find_bash() -> str | None:
    """The bash the jobs run: the first on PATH, else /bin/bash; None if there is neither."""
    found = shutil.which("bash")
    if found is not None:
        return found
    return _FALLBACK if os.access(_FALLBACK, os.X_OK) else None


def parse_version(text: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``$BASH_VERSION`` such as ``5.2.15(1)-release``; None if it is not one."""
    m = re.match(r"\s*(\d{1,4})\.(\d{1,4})", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def bash_problem() -> str | None:
    """Why the jobs cannot run under this machine's bash, as a phrase for the harness's one-line
    error (what was found, what is expected), or None when it is bash >= 5.0."""
    want = f"bash >= {MIN_VERSION[0]}.{MIN_VERSION[1]} (for $EPOCHREALTIME, the jobs' start time)"
    bash = find_bash()
    if bash is None:
        return f"{want}: none on PATH or at {_FALLBACK}"
    try:
        done = subprocess.run(
            [bash, "-c", 'printf "%s" "$BASH_VERSION"'],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError) as exc:
        return f"{want}: {bash} did not run ({type(exc).__name__})"
    version = parse_version(done.stdout)
    if version is not None and version >= MIN_VERSION:
        return None
    said = done.stdout.strip().splitlines()[0][:40] if done.stdout.strip() else ""
    return f"{want}: {bash} is version {said!r}" if said else f"{want}: {bash} reports no $BASH_VERSION"
