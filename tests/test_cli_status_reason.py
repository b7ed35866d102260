"""``status``'s last outcomes say why a run failed, as ``history`` does.

The store ends a failed slot with the reason "job failed"; the cause (exit
status, timeout, signal) is the first line of the run's detail. ``history``
shows ``job failed: exit 3``; ``status`` showed only ``job failed``, the
same for every failure (found following the README as a new user).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from quorum_cron.commands.status import status
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore

NS = "why"


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nname = "{NS}"\nsize = 1\nredis_url = "{url}"\n\n'
        '[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


def _failed(client: redis.Redis, now_ms: int, detail: str) -> None:
    client.xadd(
        f"qc:{{{NS}:a}}:ledger",
        {
            "fire": str(now_ms - 1000),
            "state": "failed",
            "reason": "job failed",
            "executor": "n1",
            "token": "7",
            "started": str(now_ms - 900),
            "finished": str(now_ms - 800),
            "detail": detail,
        },
    )


@pytest.mark.parametrize("fmt", ["plain", "table"])
def test_status_shows_the_cause_of_a_failed_last_run(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis, fmt: str
) -> None:
    _failed(redis_client, RedisStore(redis_client, NS).time_ms(), "exit 3\n--- stderr ---\noops")
    res = CliRunner().invoke(
        status,
        ["--config", str(_config(tmp_path, redis_server.url)), "--format", fmt],
        env={"COLUMNS": "300"},  # the table's cells whole on one line
    )
    outcomes = res.output.split("last outcomes", 1)[1] if fmt == "plain" else res.output
    assert "job failed: exit 3" in outcomes, res.output
    assert "oops" not in res.output  # the first line of the detail only


def test_status_masks_a_password_in_the_cause_and_json_keeps_the_ledger_reason(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    _failed(redis_client, RedisStore(redis_client, NS).time_ms(), "cannot reach redis://:hunter2@db:6379/0")
    cfg = str(_config(tmp_path, redis_server.url))
    res = CliRunner().invoke(status, ["--config", cfg, "--format", "plain"])
    assert "job failed: cannot reach redis://:***@db:6379/0" in res.output, res.output
    assert "hunter2" not in res.output
    doc = json.loads(CliRunner().invoke(status, ["--config", cfg, "--json"]).stdout)
    assert doc["jobs"][0]["last"]["reason"] == "job failed"


def test_a_password_past_the_cut_of_the_cause_is_masked_not_shown_in_part(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    # The cause is the detail's first line cut to 120 characters. Cut first, then masked, a URL
    # whose '@' fell past the cut had no userinfo to mask: the password's start was shown.
    detail = "cannot reach the store, " + "x" * 80 + " redis://admin:hunter2hunter2@db.internal:6379/0"
    _failed(redis_client, RedisStore(redis_client, NS).time_ms(), detail)
    res = CliRunner().invoke(
        status, ["--config", str(_config(tmp_path, redis_server.url)), "--format", "plain"]
    )
    assert "job failed: cannot reach the store, " in res.output and " redis://admin:*" in res.output
    assert "hunter" not in res.output, res.output
