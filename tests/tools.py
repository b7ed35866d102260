"""System tools and optional packages some tests need (chronyd, faketime, matplotlib).

Outside CI a test whose tool is missing skips with a reason naming it; in CI
(``CI`` set, as ``.ci/run`` does) it fails instead, because ``.ci/run``
installs every tool and a skip there would hide a missing install step.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

__all__ = ["missing", "require_tool"]


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
