"""quorum-cron: leaderless distributed cron — every job runs once across N servers, by majority quorum.

The public surface is small on purpose; everything else is internal and may
change. See ``docs/`` for the protocol, the store contract and operations.
"""

from quorum_cron.clock import Clock, ManualClock, SystemClock
from quorum_cron.errors import ConfigError, QuorumCronError, ScheduleError, StoreError, StoreUnavailable
from quorum_cron.store.base import SlotState, SlotView, Store
from quorum_cron.store.memory import MemoryStore

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
