"""``App(...)``'s cluster keywords are refused as its other arguments are: ``App <keyword>: ...``.

``App(namespace="a b")`` said "cluster: field 'namespace': ...", the wording of a config file's
table, where every other App refusal starts with ``App`` (``App max_skew: 'x' is not a
duration``, ``App size=0 is out of range``). A config file's lines keep their own wording.
"""

from __future__ import annotations

from typing import Any

import pytest

from quorum_cron.app import App
from quorum_cron.config.file import parse_config
from quorum_cron.config.settings import InvalidConfig
from quorum_cron.errors import ConfigError

_NAME = "expected 1-100 characters from A-Z a-z 0-9 _ . -"


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ({"namespace": "a b"}, f"App namespace: 'a b' is not a valid namespace ({_NAME})"),
        ({"lease": "1ms"}, "App lease: '1ms' is out of range (expected 1s to 1d)"),
        ({"quorum": 1, "size": 3}, "App quorum: 1 is not a majority of size 3 (expected 2 to 3)"),
        ({"members": ["a b"], "size": None}, f"App members: 'a b' is not a valid node id ({_NAME})"),
        ({"wait_replicas": 99}, "App wait_replicas: 99 is out of range (expected 0 to 16)"),
        (
            {"max_skew": "x"},
            "App max_skew: 'x' is not a duration (expected e.g. '30s', '5m', '1h30m', '250ms' or '2d')",
        ),
    ],
)
def test_cluster_keywords_are_refused_as_app_arguments(given: dict[str, Any], line: str) -> None:
    kw: dict[str, Any] = {"namespace": "x", "size": 1, "redis_url": "redis://localhost:1/0", "node_id": "n"}
    with pytest.raises(ConfigError) as refused:
        App(**{**kw, **given})
    assert str(refused.value) == line


def test_the_config_file_keeps_its_wording() -> None:
    with pytest.raises(InvalidConfig) as refused:
        parse_config({"cluster": {"namespace": "a b", "size": 1}}, "c.toml")
    assert refused.value.errors == (
        f"c.toml: cluster: field 'namespace': 'a b' is not a valid namespace ({_NAME})",
    )
