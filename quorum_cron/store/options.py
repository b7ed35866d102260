"""Opening a Redis store from a URL and its settings: the one place every caller goes through.

The agent, the Python API and every operator command open the cluster's
store with :func:`open_store` and a :class:`StoreOptions` (built from the
cluster's settings by :func:`quorum_cron.agent.startup.store_options`), so
the store's settings are named once — in :mod:`.redis_options`, which
:meth:`RedisStore.from_url <quorum_cron.store.redis.RedisStore.from_url>`
reads too — instead of being passed on, one keyword at a time, through each
layer. The URL is parsed by :mod:`.urls`, the client built by :mod:`.connect`
(fail-fast by default).
"""

from __future__ import annotations

from typing import Any

from quorum_cron.store.connect import fail_fast
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.redis_options import StoreOptions

__all__ = ["StoreOptions", "open_store"]


def open_store(url: str, options: StoreOptions, **client_kwargs: Any) -> RedisStore:
    """A :class:`RedisStore` for ``url`` (any form of :mod:`.urls`) with ``options``.

    ``client_kwargs`` go to every connection; without them the client fails
    fast (:func:`~quorum_cron.store.connect.fail_fast`), as a node's must.
    A bad URL raises :class:`~quorum_cron.errors.ConfigError` (one line);
    a cluster URL connects at once (to learn the slot map), so an
    unreachable cluster raises :class:`~quorum_cron.errors.StoreUnavailable`.
    """
    return RedisStore.from_options(url, options, **(client_kwargs or fail_fast()))
