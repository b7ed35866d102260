"""Stores: the contract (:mod:`.base`), the Redis scripts (:mod:`.redis`) and their model (:mod:`.memory`)."""

from quorum_cron.store.base import *  # noqa: F403
from quorum_cron.store.base import __all__ as _base_all
from quorum_cron.store.memory import MemoryStore

__all__ = [*_base_all, "MemoryStore"]
