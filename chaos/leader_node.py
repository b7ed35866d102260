"""One node of the leader-lease baseline under the harness: ``benchmarks/leader_baseline.py --scheduler``.

Under libfaketime with a real monotonic clock (``FAKETIME_DONT_FAKE_MONOTONIC``),
CPython's ``time.sleep`` fails with ``EINVAL`` (its ``clock_nanosleep`` on the
monotonic clock is intercepted), and the baseline's loop sleeps between polls.
This shim replaces ``time.sleep`` with a ``select`` timeout — the same wait,
through a call libfaketime passes through — and then runs the baseline's
scheduler unchanged, so the harness measures the baseline as written.
"""

from __future__ import annotations

import importlib.util
import select
import sys
import time
from pathlib import Path
from typing import SupportsIndex

__all__ = ["main"]

BASELINE = Path(__file__).resolve().parent.parent / "benchmarks" / "leader_baseline.py"


def _sleep(seconds: float | SupportsIndex) -> None:
    wait = float(seconds) if isinstance(seconds, float | int) else float(seconds.__index__())
    if wait > 0:
        select.select([], [], [], wait)


def main(argv: list[str]) -> int:
    time.sleep = _sleep
    sys.path.insert(0, str(BASELINE.parent))
    spec = importlib.util.spec_from_file_location("leader_baseline", BASELINE)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load the leader baseline from {BASELINE}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    code: int = module.main(["--scheduler", *argv])
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
