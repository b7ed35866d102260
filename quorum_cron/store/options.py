"""Opening a Redis store from a URL and its settings: the one place every caller goes through.

The agent, the Python API and every operator command open the cluster's
store with :func:`open_store` and a :class:`StoreOptions` (built from the
cluster's settings by :func:`quorum_cron.agent.startup.store_options`), so
the store's settings are named once here instead of being passed on, one
keyword at a time, through each layer. The URL is parsed by
:mod:`.urls`, the client built by :mod:`.connect` (fail-fast by default).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisClusterException, RedisError

from quorum_cron.errors import StoreUnavailable
from quorum_cron.store.connect import fail_fast, open_client
from quorum_cron.store.keys import (
    DEFAULT_AUDIT_MAXLEN,
    DEFAULT_LEDGER_MAXLEN,
    DEFAULT_RETENTION_MS,
    DEFAULT_TRIGGER_MAXLEN,
)
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.redis_base import DEFAULT_MAX_BATCH, DEFAULT_WAIT_TIMEOUT_MS
from quorum_cron.store.urls import parse_redis_url

__all__ = ["StoreOptions", "open_store"]


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


def open_store(url: str, options: StoreOptions, **client_kwargs: Any) -> RedisStore:
    """A :class:`RedisStore` for ``url`` (any form of :mod:`.urls`) with ``options``.

    ``client_kwargs`` go to every connection; without them the client fails
    fast (:func:`~quorum_cron.store.connect.fail_fast`), as a node's must.
    A bad URL raises :class:`~quorum_cron.errors.ConfigError` (one line);
    a cluster URL connects at once (to learn the slot map), so an
    unreachable cluster raises :class:`~quorum_cron.errors.StoreUnavailable`.
    """
    target = parse_redis_url(url)
    try:
        client = open_client(target, **(client_kwargs or fail_fast()))
    except (RedisError, RedisClusterException) as exc:
        raise StoreUnavailable(f"redis at {target.shown} unavailable: {exc}") from exc
    settings = {
        f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name != "namespace"
    }
    return RedisStore(client, options.namespace, **settings)
