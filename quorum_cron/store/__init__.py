"""Stores: the contract (:mod:`.base`), the Redis scripts (:mod:`.redis`) and their model (:mod:`.memory`).

Nothing is imported here eagerly: import the module you need
(``quorum_cron.store.memory`` loads without redis-py). ``RedisStore`` and
``MemoryStore`` are still reachable as attributes, loaded on first use.

May import: the model (``core/model.py``, ``core/membership.py``), the shared modules
(errors, redact, printable) and redis-py, which no module outside ``quorum_cron/store/``
imports (docs/architecture.md; ``tests/test_architecture.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["MemoryStore", "RedisStore", "Store"]

_WHERE = {
    "MemoryStore": "quorum_cron.store.memory",
    "RedisStore": "quorum_cron.store.redis",
    "Store": "quorum_cron.store.base",
}

if TYPE_CHECKING:
    from quorum_cron.store.base import Store
    from quorum_cron.store.memory import MemoryStore
    from quorum_cron.store.redis import RedisStore


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'quorum_cron.store' has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)
