"""A URL option the socket or redis-py refuses is one line before any connection, never a traceback.

``?socket_timeout=-1`` (or ``nan``, ``inf``, ``1e300``; ``socket_connect_timeout`` alike) passed
redis-py's constructor and failed the first connect with ``ValueError: Timeout value out of range``
or ``OverflowError`` in a traceback, from ``status`` and the agent alike; ``?protocol=9`` failed the
constructor with a ``ConnectionError`` that the check did not catch (a traceback too); ``0`` made the
socket non-blocking.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from quorum_cron.store.connect import options_problem
from quorum_cron.store.urls import parse_redis_url


@pytest.mark.parametrize(
    ("query", "said"),
    [
        (
            "socket_timeout=-1",
            "has socket_timeout=-1.0 (expected a number of seconds above 0 and at most 86400",
        ),
        ("socket_timeout=0", "has socket_timeout=0.0 (expected a number of seconds above 0"),
        ("socket_timeout=nan", "has socket_timeout=nan (expected"),
        ("socket_timeout=inf", "has socket_timeout=inf (expected"),
        ("socket_timeout=1e300", "has socket_timeout=1e+300 (expected"),
        ("socket_connect_timeout=-1", "has socket_connect_timeout=-1.0 (expected"),
        ("protocol=9", "has a parameter redis-py refuses (protocol must be either 2 or 3)"),
    ],
)
def test_an_option_the_socket_refuses_is_one_line(tmp_path: Path, query: str, said: str) -> None:
    url = f"redis://:hunter2@127.0.0.1:1/0?{query}"
    problem = options_problem(parse_redis_url(url))
    assert problem is not None and problem.startswith(f"'redis://:***@127.0.0.1:1/0?{query}' {said}"), problem
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "u"\nsize = 1\nntp_unreachable = "store-time"\n')
    for args in (["status"], ["agent", "--node-id", "n1"]):
        res = subprocess.run(
            [sys.executable, "-m", "quorum_cron", args[0], "--config", str(cfg), "--redis", url, *args[1:]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.splitlines() == [f"error: --redis / QUORUM_CRON_REDIS_URL: {problem}"], res.stderr


def test_timeouts_a_socket_takes_are_accepted() -> None:
    for query in ("socket_timeout=5", "socket_timeout=0.25&socket_connect_timeout=86400"):
        assert options_problem(parse_redis_url(f"redis://r/0?{query}")) is None, query
