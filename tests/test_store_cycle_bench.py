"""benchmarks/store_cycle.py on a few jobs: the cycle it drives is the store's real one, and
the command counts it reports are the scripts' (the figures the docs cite per phase).

The benchmark's timings are not asserted (performance is measured in benchmarks/, not
by timed tests); what is asserted is what cannot vary: every slot committed, started,
finished and swept once, and the commands each phase ran per slot.
"""

from __future__ import annotations

import pytest
import redis

from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.benchmark_module import load_benchmark

cycle = load_benchmark("store_cycle.py", "bench_store_cycle")

JOBS = [f"job-{i}" for i in range(20)]


def _base(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000 - 60_000


def test_the_store_cycle_runs_every_slot_once_and_counts_each_phase_commands(
    redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    redis_client.flushall()
    got = cycle.run_store(redis_server.port, JOBS, 2, 3, 2, _base(redis_client))
    calls = got["calls_per_slot"]
    # A finish checks the ledger's type once and the indexes through their own commands
    # (the trim's read, the ZREM): one TYPE per ended slot, not three.
    assert calls["finish"].get("type") == 1.0, calls["finish"]
    for cmd in ("get", "set", "zrem", "zadd", "xadd", "zrangebyscore"):
        assert calls["finish"].get(cmd) == 1.0, (cmd, calls["finish"])
    assert calls["start"].get("get") == 1.0 and calls["start"].get("set") == 1.0, calls["start"]
    assert calls["sweep"].get("zrange") == 2.0, calls["sweep"]  # 2 sweeps of a job with nothing open
    assert calls["vote"].get("get") == 3.0 and calls["vote"].get("publish") == 1.0, calls["vote"]
    assert set(got["redis_cpu_us_per_slot"]) == {*cycle.PHASES, "total"}
    assert "redis_instructions_per_slot" not in got  # only under --callgrind


def test_the_floor_does_the_bare_writes(redis_server: EmbeddedRedis, redis_client: redis.Redis) -> None:
    redis_client.flushall()
    got = cycle.run_floor(redis_server.port, JOBS, 2, 3, 2, _base(redis_client))
    calls = got["calls_per_slot"]
    assert calls["vote"].get("set") == 3.0 and calls["finish"].get("xadd") == 1.0, calls
    assert calls["sweep"].get("zrangebyscore") == 2.0, calls["sweep"]


def test_callgrind_counters_are_summed_over_threads() -> None:
    out = "PID 7: redis-server\n\n  Totals:        Ir \n   Th 1  24,682,362 \n   Th 2         518 \n"
    assert cycle.ir_total(out, 7) == 24_682_880
    with pytest.raises(SystemExit, match="no counters"):
        cycle.ir_total("no such process", 7)


@pytest.mark.parametrize("argv", [["--jobs", "0"], ["--rounds", "0"], ["--sweeps", "-1"]])
def test_bad_sizes_are_refused_before_a_server_starts(argv: list[str]) -> None:
    with pytest.raises(SystemExit, match="must be >= 1"):
        cycle.main(argv)
