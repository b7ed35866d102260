"""benchmarks/chunk_probe.py on a few jobs: the prototype of chunked slot records runs the
slot's whole life (three votes, a commit that folds the start in, a finish, sweeps) once
per slot in both of its value formats, with the commands shared by a chunk's jobs.

Its timings are not asserted (performance is measured in benchmarks/); what is asserted
is what cannot vary: every slot committed with its start folded in and finished once with
the token its commit handed out (``run_chunked`` raises otherwise), one ledger entry per slot, and one
call's reads and writes for all of a chunk's jobs.
"""

from __future__ import annotations

import pytest
import redis

from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.benchmark_module import load_benchmark

probe = load_benchmark("chunk_probe.py", "bench_chunk_probe")

JOBS = [f"job-{i}" for i in range(20)]


@pytest.mark.parametrize("layout", ["cjson", "packed", "fields"])
def test_the_prototype_runs_every_slot_once_with_a_chunks_commands_shared(
    redis_server: EmbeddedRedis, redis_client: redis.Redis, layout: str
) -> None:
    redis_client.flushall()
    sec, usec = redis_client.time()
    base = int(sec) * 1000 + int(usec) // 1000 - 60_000
    got = probe.run_chunked(redis_server.port, JOBS, 2, 3, 2, base, 7, layout=layout)
    calls = got["calls_per_slot"]  # (rounded to 2 decimals)
    slots = len(JOBS) * 2
    near = pytest.approx
    # 3 chunks (7, 7, 6 jobs); per round and chunk each node's passes read the jobs' meta
    # and slot values with one HMGET each, whatever the number of jobs.
    assert calls["vote"]["evalsha"] * slots <= 3 * 3 * 3 * 2, calls["vote"]
    assert calls["vote"]["hmget"] == near(2 * calls["vote"]["evalsha"], abs=0.011), calls["vote"]
    assert calls["finish"]["xadd"] == 1.0, calls["finish"]  # a ledger entry per slot
    assert calls["finish"]["hmget"] == near(2 * calls["finish"]["evalsha"], abs=0.011), calls["finish"]
    assert calls["finish"]["evalsha"] < 0.5, calls["finish"]  # per executor and chunk, not per slot
    assert calls["sweep"] == {"evalsha": 0.3, "zrangebyscore": 0.3}, calls["sweep"]  # 3 chunks x 2 x 2 / 40


def test_a_chunk_of_no_jobs_is_refused_before_a_server_starts() -> None:
    with pytest.raises(SystemExit, match="must be >= 1"):
        probe.main(["--chunk", "0"])
