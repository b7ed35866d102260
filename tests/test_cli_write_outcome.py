"""A Redis vanishing in the middle of an operator's write never makes a write that was made read as failed.

Real processes (``python -m quorum_cron ...``) against the session's real
redis-server, through :mod:`tests.cut_proxy`, which makes Redis vanish at an
exact command (named by a unique ``--by``): right after the write, or with the
write's reply lost. What the command says is checked against what the store
holds afterwards.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import redis

from quorum_cron.core.model import Configuration
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from tests.cut_proxy import cut_proxy

CLI = [sys.executable, "-m", "quorum_cron"]
NS = "vanish"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def one_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 1, res
    assert "Traceback" not in res.stderr, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


def config(tmp_path: Path) -> str:
    path = tmp_path / "cut.toml"
    path.write_text(
        f'[cluster]\nname = "{NS}"\nmembers = ["a", "b", "c"]\nredis_url = "redis://127.0.0.1:1/0"\n'
        'ntp_unreachable = "store-time"\n\n[[jobs]]\nname = "j"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return str(path)


def triggers(client: redis.Redis) -> list[int]:
    return [int(f) for f in client.zrange(f"qc:{{{NS}:j}}:triggers", 0, -1)]


def test_a_trigger_made_before_redis_vanished_is_reported_made(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    """Redis gone at the command after the trigger: it said "error: cannot trigger 'j' ... Connection
    closed by server", exit 1, of a trigger the store held, and a second try ran the job twice."""
    cfg = config(tmp_path)
    with cut_proxy(redis_server.port, b"by-vanish-after") as proxy:
        res = run("trigger", "j", "--config", cfg, "--redis", proxy.url, "--by", "by-vanish-after")
    assert res.returncode == 0, res
    [made] = triggers(redis_client)
    assert res.stdout.startswith(f"triggered j: slot {made} ("), res.stdout
    assert "Traceback" not in res.stderr and "error" not in res.stderr, res.stderr


def test_a_trigger_whose_reply_is_lost_says_it_may_have_been_made_and_how_to_tell(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    """The trigger ran in Redis, its reply never came back: "cannot trigger" alone invited a second."""
    cfg = config(tmp_path)
    with cut_proxy(redis_server.port, b"by-reply-lost", drop_reply=True) as proxy:
        res = run("trigger", "j", "--config", cfg, "--redis", proxy.url, "--by", "by-reply-lost")
        assert proxy.cut.is_set()
    line = one_error(res)
    assert len(triggers(redis_client)) == 1  # (it was made)
    assert line.startswith(f"error: cannot trigger 'j' through the store at {proxy.url}: unavailable: "), line
    assert line.endswith(
        f"(the store may have made it before the reply was lost: `quorum-cron history --config {cfg} j` "
        "shows its slot, triggered, once the cluster decides it; trigger again only if it does not)"
    ), line


def test_a_trigger_redis_never_answered_says_only_why(tmp_path: Path) -> None:
    line = one_error(run("trigger", "j", "--config", config(tmp_path)))
    said = "error: cannot trigger 'j' through the store at redis://127.0.0.1:1/0: unavailable: "
    said += "Connection refused"
    assert line == said  # (nothing went out: no "may have made it")


def seat_three(redis_server: EmbeddedRedis) -> None:
    """The store's first record: epoch 1, members a, b and c."""
    store = RedisStore.from_url(redis_server.url, NS, socket_timeout=5.0)
    try:
        store.init_membership(Configuration.of(["a", "b", "c"]), "a")
    finally:
        store.close()


def record(client: redis.Redis) -> str:
    return str(client.hget(f"qc:{{{NS}}}:membership", "r"), "utf-8")


def test_a_membership_change_and_finish_made_before_redis_vanished_are_reported_made(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    """Redis gone at the read after the change (the live nodes, for the next steps): it said
    "error: cannot change the membership ...", exit 1, of a joint configuration the store held; a
    second try was refused as "a change is in progress". The same for a finish."""
    cfg = config(tmp_path)
    seat_three(redis_server)
    with cut_proxy(redis_server.port, b"by-add") as proxy:
        res = run(
            "members", "add", "d", "--reason", "grow", "--config", cfg, "--redis", proxy.url, "--by", "by-add"
        )
    assert res.returncode == 0, res
    assert record(redis_client) == "2;4,3,a,b,c,d;3,2,a,b,c"
    assert res.stdout.startswith("membership epoch 2: "), res.stdout
    assert "error" not in res.stderr, res.stderr
    with cut_proxy(redis_server.port, b"by-finish") as proxy:
        args = ("members", "finish", "--force", "--reason", "d is up", "--config", cfg, "--redis", proxy.url)
        res = run(*args, "--by", "by-finish")
    assert res.returncode == 0, res
    assert record(redis_client) == "3;4,3,a,b,c,d"
    assert res.stdout.startswith("membership epoch 3: "), res.stdout


def test_a_membership_change_whose_reply_is_lost_says_it_may_have_been_made_and_how_to_tell(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    cfg = config(tmp_path)
    seat_three(redis_server)
    with cut_proxy(redis_server.port, b"by-lost", drop_reply=True) as proxy:
        args = ("members", "remove", "c", "--reason", "shrink", "--config", cfg, "--redis", proxy.url)
        res = run(*args, "--by", "by-lost")
        assert proxy.cut.is_set()
    line = one_error(res)
    assert record(redis_client) == "2;2,2,a,b;3,2,a,b,c"  # (it was made)
    assert line.startswith(f"error: cannot change the membership through the store at {proxy.url}: "), line
    assert line.endswith(
        f"(the store may have made it before the reply was lost: `quorum-cron members show --config {cfg}` "
        "shows the record it holds)"
    ), line
