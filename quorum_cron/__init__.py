"""quorum-cron: leaderless distributed cron — every job runs once across N servers, by majority quorum.

The public surface is small on purpose; everything else is internal and may
change. See ``docs/`` for the protocol, the store contract and operations.

Names are imported lazily (PEP 562): ``import quorum_cron.core.node`` loads the
pure core and what it needs, not the Redis client behind the store package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Clock",
    "ConfigError",
    "ManualClock",
    "MemoryStore",
    "QuorumCronError",
    "ScheduleError",
    "SlotState",
    "SlotView",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "SystemClock",
    "__version__",
]

_WHERE = {
    "Clock": "quorum_cron.clock.base",
    "ManualClock": "quorum_cron.clock.base",
    "SystemClock": "quorum_cron.clock.base",
    "ConfigError": "quorum_cron.errors",
    "QuorumCronError": "quorum_cron.errors",
    "ScheduleError": "quorum_cron.errors",
    "StoreError": "quorum_cron.errors",
    "StoreUnavailable": "quorum_cron.errors",
    "SlotState": "quorum_cron.core.model",
    "SlotView": "quorum_cron.core.model",
    "Store": "quorum_cron.store.base",
    "MemoryStore": "quorum_cron.store.memory",
}

if TYPE_CHECKING:
    from quorum_cron.clock.base import Clock, ManualClock, SystemClock
    from quorum_cron.core.model import SlotState, SlotView
    from quorum_cron.errors import ConfigError, QuorumCronError, ScheduleError, StoreError, StoreUnavailable
    from quorum_cron.store.base import Store
    from quorum_cron.store.memory import MemoryStore


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'quorum_cron' has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)


def __dir__() -> list[str]:
    return sorted(__all__)
