"""heartbeat checked against lease names a value the user never wrote as the default.

``lease = "3s"`` alone was refused as "field 'heartbeat': '2s' is more than half of lease '3s'":
a heartbeat its author never wrote, and nothing said what to change. The file and
:class:`ClusterConfig` (the Python API's ``App(lease=...)``) share the rule.
"""

from __future__ import annotations

import pytest

from quorum_cron.app import App
from quorum_cron.config.file import parse_config
from quorum_cron.config.settings import ClusterConfig, InvalidConfig
from quorum_cron.errors import ConfigError

_WHY = "a lease must survive one lost heartbeat"


def _cluster_errors(**cluster: object) -> tuple[str, ...]:
    with pytest.raises(InvalidConfig) as info:
        parse_config({"cluster": {"name": "prod", "size": 3, **cluster}}, "c.toml")
    return info.value.errors


def test_a_defaulted_heartbeat_is_named_the_default() -> None:
    assert _cluster_errors(lease="3s") == (
        "c.toml: cluster: field 'heartbeat': '2s' (the default) is more than half of lease '3s' "
        f"({_WHY}; set heartbeat to at most 1s500ms, or lease to at least 4s)",
    )


def test_a_defaulted_lease_is_named_the_default() -> None:
    assert _cluster_errors(heartbeat="10s") == (
        "c.toml: cluster: field 'heartbeat': '10s' is more than half of lease '15s' "
        f"(the default; {_WHY}; set heartbeat to at most 7s500ms, or lease to at least 20s)",
    )


def test_both_written_read_as_before() -> None:
    assert _cluster_errors(lease="3s", heartbeat="2s") == (
        f"c.toml: cluster: field 'heartbeat': '2s' is more than half of lease '3s' ({_WHY})",
    )


def test_the_constructor_names_the_default_too() -> None:
    with pytest.raises(ConfigError) as refused:
        ClusterConfig(namespace="x", size=1, lease_ms=3_000)
    assert str(refused.value) == (
        "cluster: field 'heartbeat': '2s' (the default) is more than half of lease '3s' "
        f"({_WHY}; set heartbeat to at most 1s500ms, or lease to at least 4s)"
    )
    with pytest.raises(ConfigError, match=r"'2s' \(the default\) is more than half of lease '3s'"):
        App(namespace="x", size=1, redis_url="redis://localhost:1/0", node_id="n", lease="3s")
