"""The ranges the agent's configuration accepts, as plain constants.

Why a module of its own: the simulator refuses a scenario setting the agent
would refuse (a lease of 0 s, 1,000 replicas to wait for), and it may not
import the configuration's loader (docs/architecture.md: the simulator runs
the core on the memory model, nothing of the agent). Both take these.
"""

from __future__ import annotations

from typing import Final

from quorum_cron.clock.policy import MAX_SKEW_LIMIT_MS

__all__ = ["CLUSTER_DURATION_BOUNDS", "JOB_DURATION_BOUNDS", "MAX_RETRIES", "MAX_WAIT_REPLICAS"]

_SECOND: Final = 1_000
_MINUTE: Final = 60 * _SECOND
_HOUR: Final = 60 * _MINUTE
_DAY: Final = 24 * _HOUR

CLUSTER_DURATION_BOUNDS: Final[tuple[tuple[str, int, int], ...]] = (
    ("max_skew_ms", 1, MAX_SKEW_LIMIT_MS),
    ("lease_ms", 1 * _SECOND, _DAY),
    ("start_timeout_ms", 100, _HOUR),
    ("heartbeat_ms", 100, _HOUR),
    ("retention_ms", _HOUR, 366 * _DAY),
    ("clock_check_interval_ms", 1 * _SECOND, _DAY),
    ("wait_timeout_ms", 1, 10 * _SECOND),
)
"""``[cluster]`` durations: (field, least ms, most ms)."""
MAX_WAIT_REPLICAS: Final = 16
"""The most replicas a write may wait for."""
MAX_RETRIES: Final = 100
"""The most retries a job may have."""
JOB_DURATION_BOUNDS: Final[tuple[tuple[str, int, int], ...]] = (
    ("timeout_ms", 1 * _SECOND, 30 * _DAY),
    ("starting_deadline_ms", 1, _DAY),
    ("retry_backoff_ms", 0, _DAY),
)
"""``[[jobs]]`` durations: (field, least ms, most ms)."""
