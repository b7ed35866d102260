"""The rules of a job's retry policy values (``retry_backoff_max``, ``retry_jitter``), in one place.

The config file, :class:`~quorum_cron.config.settings.JobSpec`'s constructor
and the Python API check the same values; each bad one is reported as one
line naming it and what was expected. What the values do is
:func:`quorum_cron.core.backoff.retry_delay_ms`.
"""

from __future__ import annotations

from typing import Final

from quorum_cron.config.durations import format_duration
from quorum_cron.config.values import _type_name

__all__ = ["DEFAULT_BACKOFF_MAX", "retry_problems"]

DEFAULT_BACKOFF_MAX: Final = -1
"""``retry_backoff_max`` not given: it is ``retry_backoff``, a fixed backoff (the ``AUTO`` sentinel)."""


def retry_problems(backoff_ms: int, max_ms: int, jitter: object) -> list[tuple[str, str]]:
    """(field, problem) for each bad retry policy value (``max_ms`` -1: not given, no check)."""
    problems: list[tuple[str, str]] = []
    if max_ms != DEFAULT_BACKOFF_MAX and max_ms < backoff_ms:
        problems.append(
            (
                "retry_backoff_max",
                f"'{format_duration(max_ms)}' is shorter than retry_backoff '{format_duration(backoff_ms)}' "
                f"(expected at least retry_backoff: it caps the doubling)",
            )
        )
    elif max_ms != DEFAULT_BACKOFF_MAX and max_ms > backoff_ms == 0:
        problems.append(
            (
                "retry_backoff_max",
                f"'{format_duration(max_ms)}' cannot be reached from retry_backoff '0s' "
                f"(expected a retry_backoff above 0 to double, or no retry_backoff_max)",
            )
        )
    if isinstance(jitter, bool) or not isinstance(jitter, int | float):
        # "is a string", as every other field says it ("'20%' is str" named Python's type).
        what = _type_name(jitter)
        problems.append(("retry_jitter", f"{jitter!r} is {what} (expected a fraction 0-1, e.g. 0.2)"))
    elif not 0 <= jitter <= 1:
        problems.append(
            ("retry_jitter", f"{jitter!r} is outside 0-1 (expected a fraction of the wait, e.g. 0.2)")
        )
    return problems
