"""The Python API refuses a value of the wrong type in one line naming it, as it does for ``size='3'``.

``App(quorum=2.5)`` was taken (the majority check compares numbers: 2.5 is
between 2 and 3) into a cluster config whose quorum is no count of votes;
``App(redis_url=5)``, ``App(ntp_servers=[1])`` and ``App(config='cluster.toml')``
raised ``AttributeError`` and ``App(wait_replicas='1')`` a ``TypeError`` from
deep inside.
"""

from __future__ import annotations

from typing import Any

import pytest

from quorum_cron.app import App
from quorum_cron.config.settings import ClusterConfig
from quorum_cron.errors import ConfigError

URL = "redis://127.0.0.1:1/0"


@pytest.mark.parametrize(
    ("kwargs", "line"),
    [
        ({"size": 3, "quorum": 2.5}, "App quorum: 2.5 is a float (expected an integer 1 to 3)"),
        ({"size": 1, "redis_url": 5}, "App redis_url: int 5 is not a URL (expected a string such as"),
        (
            {"size": 1, "wait_replicas": "1"},
            "App wait_replicas: '1' is a string (expected an integer 0 to 16)",
        ),
        ({"size": 1, "ntp_servers": [1]}, "App ntp_servers: int 1 is not an NTP server (expected a string"),
    ],
)
def test_a_cluster_setting_of_the_wrong_type_is_one_line(kwargs: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        App(namespace="types", **{"redis_url": URL, **kwargs})
    assert str(caught.value).startswith(line) and "\n" not in str(caught.value), caught.value


def test_a_config_that_is_not_a_loaded_one_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^App config=str 'cluster.toml': expected a loaded Config"):
        App(config="cluster.toml")  # type: ignore[arg-type]


def test_the_cluster_config_refuses_a_quorum_that_is_no_count() -> None:
    for quorum in (2.5, True, "2"):
        with pytest.raises(ConfigError, match=r"^cluster: field 'quorum': "):
            ClusterConfig(namespace="types", size=3, quorum=quorum)  # type: ignore[arg-type]
    assert ClusterConfig(namespace="types", size=3, quorum=3).quorum == 3
