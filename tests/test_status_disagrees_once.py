"""``status`` says once that its config disagrees with the store's membership record.

The problem list said ``CONFIG DISAGREES with the store's membership: ...`` and the membership
facts (shared with ``members show``) said ``CONFIG DISAGREES: ...`` again, the same long line
twice in one output. Real redis-server: a record of n1, n2, n3 and a config of n1, n2, n4.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from quorum_cron.commands.status import status
from quorum_cron.core.model import Configuration
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore

NS = "disagrees"


@pytest.mark.parametrize("fmt", ["plain", "table", "json"])
def test_a_config_that_disagrees_is_said_once(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis, fmt: str
) -> None:
    store = RedisStore(redis_client, NS)
    store.init_membership(Configuration.of(["n1", "n2", "n3"]), "n1")
    for node in ("n1", "n2", "n3"):
        assert store.heartbeat(node, f"inc-{node}", 30_000, {"voting": "yes"}, epoch=1).ok
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[cluster]\nname = "{NS}"\nmembers = ["n1", "n2", "n4"]\nredis_url = "{redis_server.url}"\n'
    )
    res = CliRunner().invoke(status, ["--config", str(cfg), "--format", fmt], env={"COLUMNS": "300"})
    assert res.exit_code == 1  # (as before: a config that disagrees cannot be trusted to run slots)
    if fmt == "json":
        doc = json.loads(res.output)
        assert [p for p in doc["problems"] if "DISAGREES" in p] == [
            f"CONFIG DISAGREES with the store's membership: {doc['config_problem']}"
        ]
        return
    said = [line for line in res.output.splitlines() if "DISAGREES" in line]
    assert len(said) == 1, res.output
    assert said[0].startswith("CONFIG DISAGREES with the store's membership: ")
    assert "proposes members n1, n2, n4 (quorum 2 of 3)" in said[0]
    assert "membership epoch 1: n1, n2, n3 (quorum 2 of 3)" in res.output  # (the other facts stay)
