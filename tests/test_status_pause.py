"""``status`` shows a paused job's pause: by whom and since when in the jobs table, why below it.

docs/operations.md says status shows a paused job "by whom, since when and why"; the jobs
table's control cell said only ``paused by root@vm`` (a newcomer audit). The cell now says
since when, in the time format of the PAUSED line under the tables, which says why (a reason
of up to 500 characters, from Redis: escaped and bounded there, not in a cell). Real
redis-server; the pause is the store's own call, or a value written into Redis by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from quorum_cron.commands.common import fmt_ms
from quorum_cron.commands.status import status
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore

NS = "pausedsince"


def _config(tmp_path: Path, url: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nname = "{NS}"\nsize = 1\nredis_url = "{url}"\n\n'
        '[[jobs]]\nname = "backup"\nschedule = "@hourly"\ncommand = ["true"]\n'
        '\n[[jobs]]\nname = "report"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return str(path)


@pytest.mark.parametrize("fmt", ["plain", "table"])
def test_the_jobs_table_says_since_when_and_the_line_below_why(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis, fmt: str
) -> None:
    store = RedisStore(redis_client, NS)
    paused = store.pause("backup", "root@vm", "disk full")
    no_reason = store.pause("report", "ops", "")
    res = CliRunner().invoke(
        status, ["--config", _config(tmp_path, redis_server.url), "--format", fmt], env={"COLUMNS": "300"}
    )
    jobs = res.output.split("jobs", 1)[1]
    row = next(line for line in jobs.splitlines() if "backup" in line)
    assert f"paused by root@vm since {fmt_ms(paused.at_ms)}" in row, res.output
    row = next(line for line in jobs.splitlines() if "report" in line)
    assert f"paused by ops since {fmt_ms(no_reason.at_ms)}" in row, res.output
    lines = res.output.splitlines()
    assert f"backup is PAUSED: paused by root@vm at {fmt_ms(paused.at_ms)}: disk full" in lines
    assert f"report is PAUSED: paused by ops at {fmt_ms(no_reason.at_ms)}" in lines  # (no reason given)


def test_a_reason_written_into_redis_is_escaped_and_bounded(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    redis_client.hset(
        f"qc:{{{NS}:backup}}:meta",
        mapping={"p": "1", "pb": "root@vm", "pa": "1765000000000", "pr": "\x1b[2J" + "x" * 5000},
    )
    res = CliRunner().invoke(status, ["--config", _config(tmp_path, redis_server.url), "--format", "plain"])
    assert "\x1b" not in res.output
    line = next(line for line in res.output.splitlines() if line.startswith("backup is PAUSED"))
    assert line.startswith(f"backup is PAUSED: paused by root@vm at {fmt_ms(1765000000000)}: \\x1b[2Jxxx")
    assert len(line) < 700 and line.endswith("(5004 chars)"), line
    assert f"paused by root@vm since {fmt_ms(1765000000000)}" in res.output
