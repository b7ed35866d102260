"""benchmarks/chunk_probe.py on a few jobs: the prototype of chunked slot records runs the
slot's whole life (three votes, a commit that folds the start in, a finish, sweeps) once
per slot in each of its three layouts, with the commands shared by a chunk's jobs.

Its timings are not asserted (performance is measured in benchmarks/); what is asserted
is what cannot vary. ``run_chunked`` itself raises unless each slot's votes were recorded,
committed (its start folded in) and decided as the quorum says, each slot finished once
with the token its commit handed out, and the ledger holds one entry per slot; the test
asserts the commands: one call's reads and writes for all of a chunk's jobs.
"""

from __future__ import annotations

import pytest
import redis

from quorum_cron.core.membership import MembershipRecord
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.benchmark_module import load_benchmark

probe = load_benchmark("chunk_probe.py", "bench_chunk_probe")

JOBS = [f"job-{i}" for i in range(20)]


def _base(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000 - 60_000


@pytest.mark.parametrize("layout", probe.LAYOUTS)
def test_the_prototype_runs_every_slot_once_with_a_chunks_commands_shared(
    redis_server: EmbeddedRedis, redis_client: redis.Redis, layout: str
) -> None:
    redis_client.flushall()
    got = probe.run_chunked(redis_server.port, JOBS, 2, 3, 2, _base(redis_client), 7, layout=layout)
    calls = got["calls_per_slot"]  # (rounded to 2 decimals)
    near = pytest.approx
    # 3 chunks (7, 7, 6 jobs); per round and chunk each node's passes read the jobs' meta
    # and state with one HMGET each and write them with one HSET each, whatever the
    # number of jobs.
    vote, finish = calls["vote"], calls["finish"]
    assert vote["evalsha"] * 40 <= 3 * 3 * 3 * 2, vote
    assert vote["hmget"] == near(2 * vote["evalsha"], abs=0.011), vote
    assert vote["hset"] <= 2 * vote["evalsha"] + 0.011, vote
    assert vote["time"] == vote["evalsha"], vote  # the server's clock, read once per call
    assert finish["xadd"] == 1.0, finish  # a ledger entry per slot
    assert finish["hmget"] == near(2 * finish["evalsha"], abs=0.011), finish
    assert finish["evalsha"] < 0.5, finish  # per executor and chunk, not per slot
    assert calls["sweep"] == {"evalsha": 0.3, "zrangebyscore": 0.3}, calls["sweep"]  # 3 chunks x 2 x 2 / 40


@pytest.mark.parametrize("layout", probe.LAYOUTS)
def test_a_job_that_fails_its_vote_is_not_counted_open(redis_client: redis.Redis, layout: str) -> None:
    """A vote that fails for one job (here its meta is not a count) fails that job only
    (code X), and the chunk's count of open slots holds the slots written, not it."""
    redis_client.flushall()
    sha = redis_client.script_load(probe.chunk_script(layout))
    prefix = "qc:{t:c0}:"
    redis_client.hset(
        prefix + "meta", mapping={"mr": MembershipRecord.decode("1;1,1,n1").encode(), "bad": "x"}
    )
    fire = str(_base(redis_client))
    reply = redis_client.evalsha(sha, 1, prefix, "v", fire, "", "n1", "60000", "i-1", "ok", "h1", "bad", "h1")
    assert reply[1] == b"CX", reply
    assert redis_client.hget(prefix + "slot:" + fire, "#open") == b"1"


def test_a_chunk_of_no_jobs_is_refused_before_a_server_starts() -> None:
    with pytest.raises(SystemExit, match="must be >= 1"):
        probe.main(["--chunk", "0"])
