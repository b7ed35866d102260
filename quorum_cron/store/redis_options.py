"""The store settings a :class:`~quorum_cron.store.redis.RedisStore` takes besides its client, named once.

:class:`StoreOptions` lists them with their defaults. Both ways of opening a
store from a URL go through it: :meth:`RedisStore.from_url
<quorum_cron.store.redis.RedisStore.from_url>` (the settings as keywords,
next to the client's) and :func:`quorum_cron.store.options.open_store` (a
``StoreOptions`` built from a cluster's settings). It sits apart from both
because ``options.py`` imports ``redis.py``: adding a setting is one field
here, not one keyword per layer. The values are checked by the store when it
is built, so an opening path cannot skip a check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quorum_cron.store.keys import (
    DEFAULT_AUDIT_MAXLEN,
    DEFAULT_LEDGER_MAXLEN,
    DEFAULT_RETENTION_MS,
    DEFAULT_TRIGGER_MAXLEN,
)
from quorum_cron.store.redis_base import DEFAULT_MAX_BATCH, DEFAULT_WAIT_TIMEOUT_MS

__all__ = ["StoreOptions"]


@dataclass(frozen=True)
class StoreOptions:
    """A cluster's store settings: what :class:`~quorum_cron.store.redis.RedisStore` takes besides its client.

    Field names are the store's keywords (see its docstring for each);
    values are checked by the store when it is built.
    """

    namespace: str
    retention_ms: int = DEFAULT_RETENTION_MS
    ledger_maxlen: int = DEFAULT_LEDGER_MAXLEN
    audit_maxlen: int = DEFAULT_AUDIT_MAXLEN
    trigger_maxlen: int = DEFAULT_TRIGGER_MAXLEN
    max_batch: int = DEFAULT_MAX_BATCH
    wait_replicas: int = 0
    wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS

    def settings(self) -> dict[str, Any]:
        """The store's keywords besides the namespace, by name (what its constructor takes)."""
        return {name: getattr(self, name) for name in _SETTINGS}

    @classmethod
    def split(cls, namespace: str, keywords: Mapping[str, Any]) -> tuple[StoreOptions, dict[str, Any]]:
        """The store's settings among ``keywords`` (the rest are the client's, returned as they came).

        Why one mapping: :meth:`RedisStore.from_url
        <quorum_cron.store.redis.RedisStore.from_url>` takes both kinds as
        keywords, and which are the store's is decided by this class alone.
        """
        mine = {k: v for k, v in keywords.items() if k in _SETTINGS}
        rest = {k: v for k, v in keywords.items() if k not in _SETTINGS}
        return cls(namespace, **mine), rest


_SETTINGS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(StoreOptions) if f.name != "namespace")
"""The fields that are store keywords (the namespace is the store's positional argument)."""
