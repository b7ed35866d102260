"""The store's settings are named once (:class:`StoreOptions`) and both URL openers take them from there.

``RedisStore.from_url`` (settings as keywords, beside the client's) and
``open_store`` (a ``StoreOptions``) must build the same store; a setting added
to the store's constructor but not to ``StoreOptions`` (or the other way
round) fails here. No server is needed: a standalone client connects lazily.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
import redis

from quorum_cron.errors import ConfigError
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.options import open_store
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.redis_options import StoreOptions

URL = "redis://127.0.0.1:1/0"  # never connected to: the tests only build stores
SETTINGS = [f for f in dataclasses.fields(StoreOptions) if f.name != "namespace"]
NOT_SETTINGS = {"self", "client", "namespace", "clock", "cluster"}
"""The constructor's parameters that are not a cluster's store settings (given per store, not per cluster)."""


def settings_of(store: RedisStore) -> dict[str, Any]:
    """What the store keeps of each setting (private: the store exposes none of them, by design)."""
    wait = store._wait
    return {
        "retention_ms": store._retention_ms,
        "ledger_maxlen": store._ledger_maxlen,
        "audit_maxlen": store._audit_maxlen,
        "trigger_maxlen": store._trigger_maxlen,
        "max_batch": store._max_batch,
        "wait_replicas": 0 if wait is None else wait.replicas,
        "wait_timeout_ms": None if wait is None else wait.timeout_ms,
    }


def sent_to_client(store: RedisStore) -> dict[str, Any]:
    """The keywords the store's (standalone) client opens its connections with."""
    client = store._client
    assert isinstance(client, redis.Redis)
    return dict(client.connection_pool.connection_kwargs)


def test_store_options_are_exactly_the_constructors_settings_with_its_defaults() -> None:
    params = inspect.signature(RedisStore.__init__).parameters
    settings = {name: p.default for name, p in params.items() if name not in NOT_SETTINGS}
    assert settings == {f.name: f.default for f in SETTINGS}
    assert set(settings_of(RedisStore.from_url(URL, "ns"))) == set(settings), "settings_of() misses one"


def test_from_url_and_open_store_build_the_same_store_from_every_setting() -> None:
    changed: dict[str, Any] = {f.name: f.default + 7 for f in SETTINGS}  # type: ignore[operator]
    by_keywords = RedisStore.from_url(URL, "ns", socket_timeout=1.5, **changed)
    by_options = open_store(URL, StoreOptions("ns", **changed), socket_timeout=1.5)
    try:
        assert settings_of(by_keywords) == settings_of(by_options) == changed
        for store in (by_keywords, by_options):
            sent = sent_to_client(store)
            assert sent["socket_timeout"] == 1.5  # the rest of the keywords went to the client...
            assert not set(changed) & set(sent)  # ...and none of the store's settings did
    finally:
        by_keywords.close()
        by_options.close()
    defaults = RedisStore.from_url(URL, "ns")
    assert settings_of(defaults)["retention_ms"] == StoreOptions("ns").retention_ms
    defaults.close()


def test_open_store_fails_fast_without_client_keywords() -> None:
    store = open_store(URL, StoreOptions("ns"))
    sent = sent_to_client(store)
    fast = fail_fast()
    assert (sent["socket_timeout"], sent["socket_connect_timeout"]) == (
        fast["socket_timeout"],
        fast["socket_connect_timeout"],
    )
    store.close()


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("retention_ms", 0, "invalid retention_ms 0: expected > 0"),
        ("max_batch", -1, "invalid max_batch -1: expected > 0"),
        ("wait_replicas", -2, "invalid wait_replicas -2: expected >= 0"),
    ],
)
def test_a_bad_setting_is_the_same_one_line_by_either_opener(setting: str, value: int, message: str) -> None:
    with pytest.raises(ConfigError) as by_keywords:
        RedisStore.from_url(URL, "ns", **dict[str, Any]({setting: value}))
    with pytest.raises(ConfigError) as by_options:
        open_store(URL, StoreOptions("ns", **{setting: value}))
    assert str(by_keywords.value) == str(by_options.value) == message


def test_split_keeps_the_store_settings_and_returns_the_rest_untouched() -> None:
    options, rest = StoreOptions.split("ns", {"retention_ms": 5, "socket_timeout": 2.0, "retry": None})
    assert options == StoreOptions("ns", retention_ms=5)
    assert rest == {"socket_timeout": 2.0, "retry": None}
