"""``status`` names the members of the store's record that have no live heartbeat.

After n2 stops, status said ``2 of 3 alive, need 2`` and listed only the live nodes: the
operator had to work out who was missing (a newcomer audit on a 3-node cluster). Real
redis-server; a node is alive while its heartbeat (sent with the store's own call) lasts, and a
stopped one simply sends none.
"""

from __future__ import annotations

import json
from pathlib import Path

import redis
from click.testing import CliRunner

from quorum_cron.commands.status import status
from quorum_cron.config.membership import DOWN_SHOWN
from quorum_cron.core.model import Configuration
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore


def _config(tmp_path: Path, url: str, ns: str, members: list[str]) -> str:
    path = tmp_path / f"{ns}.toml"
    names = ", ".join(f'"{m}"' for m in members)
    path.write_text(
        f'[cluster]\nname = "{ns}"\nmembers = [{names}]\nredis_url = "{url}"\n\n'
        '[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return str(path)


def _beat(store: RedisStore, node: str, epoch: int = 1) -> None:
    assert store.heartbeat(node, f"inc-{node}", 30_000, {"voting": "yes"}, epoch=epoch).ok


def test_the_members_without_a_heartbeat_are_named_and_a_stranger_is_not(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_client, "down1")
    store.init_membership(Configuration.of(["n1", "n2", "n3"]), "n1")
    for node in ("n1", "n3"):
        _beat(store, node)
    _beat(store, "stranger")  # (live, not a member: refused, not down)
    cfg = _config(tmp_path, redis_server.url, "down1", ["n1", "n2", "n3"])

    res = CliRunner().invoke(status, ["--config", cfg, "--format", "plain"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0].endswith(": 2 of 3 alive, need 2 (down: n2)"), res.output
    doc = json.loads(CliRunner().invoke(status, ["--config", cfg, "--json"]).output)
    assert doc["down"] == ["n2"]


def test_quorum_lost_names_who_is_down(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_client, "down2")
    store.init_membership(Configuration.of(["n1", "n2", "n3"]), "n1")
    _beat(store, "n1")
    cfg = _config(tmp_path, redis_server.url, "down2", ["n1", "n2", "n3"])
    res = CliRunner().invoke(status, ["--config", cfg, "--format", "plain"])
    assert res.exit_code == 1
    assert "QUORUM LOST: 1 of 3 alive, need 2 (down: n2, n3): no slot can run" in res.output.splitlines()
    doc = json.loads(CliRunner().invoke(status, ["--config", cfg, "--json"]).output)
    assert doc["down"] == ["n2", "n3"]


def test_while_joint_both_configurations_members_are_named_once_each(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_client, "down3")
    store.init_membership(Configuration.of(["n1", "n2", "n3"]), "n1")
    assert store.change_membership(1, Configuration.of(["n1", "n2", "n3", "n4"]), "ops", "grow").ok
    _beat(store, "n1", 2)
    _beat(store, "n3", 2)
    cfg = _config(tmp_path, redis_server.url, "down3", ["n1", "n2", "n3", "n4"])
    doc = json.loads(CliRunner().invoke(status, ["--config", cfg, "--json"]).output)
    assert doc["membership"]["joint"], doc
    assert doc["down"] == ["n2", "n4"]  # (n2 in both configurations, n4 in the new one: once each)


def test_a_long_list_of_down_members_stays_one_bounded_line(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    members = [f"n{i:02}" for i in range(DOWN_SHOWN + 5)]
    store = RedisStore(redis_client, "down4")
    store.init_membership(Configuration.of(members), "n00")
    _beat(store, "n00")
    cfg = _config(tmp_path, redis_server.url, "down4", members)
    res = CliRunner().invoke(status, ["--config", cfg, "--format", "plain"])
    down = members[1:]
    shown = ", ".join(down[:DOWN_SHOWN])
    assert f"(down: {shown} and {len(down) - DOWN_SHOWN} more)" in res.output.splitlines()[0], res.output
    doc = json.loads(CliRunner().invoke(status, ["--config", cfg, "--json"]).output)
    assert doc["down"] == down
