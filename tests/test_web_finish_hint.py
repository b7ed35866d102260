"""The Cluster page's joint-configuration text gives the ``members finish`` the CLI's hints give.

It said `quorum-cron members finish`, which fails as pasted ("Missing option '--reason'") and
names no config file; ``members show`` and ``status`` print ``members_hint('finish', source)``
since 9b6e8bc. The page now prints the same function's command for this server's config file:
taken from the page, split as a shell splits it and run through the CLI's entry point against a
real redis-server, it parses and reaches the command (refused there: d has not heartbeated).
"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

import redis
from click.testing import CliRunner
from starlette.testclient import TestClient

from quorum_cron.cli import main
from quorum_cron.config.file import load_config
from quorum_cron.config.membership import members_hint
from quorum_cron.core.model import Configuration
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens


def test_the_joint_text_names_a_finish_that_runs_as_pasted(
    redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    path = tmp_path / "my cluster.toml"  # (a space: the command quotes it, as a shell needs)
    path.write_text(
        f'[cluster]\nname = "wfinish"\nmembers = ["a", "b", "c"]\nredis_url = "{redis_server.url}"\n'
    )
    store = RedisStore(redis_client, "wfinish")
    stored = store.init_membership(Configuration.of("abc"), "a")
    assert store.change_membership(stored.record.epoch, Configuration.of("abcd"), "alice", "grow").ok
    app = create_app(WebContext(load_config(path), store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        doc = client.get("/api/cluster").json()
        page = client.get("/cluster").text
    assert doc["finish_hint"] == members_hint("finish", str(path)).strip("`")
    shown = re.search(r'<code id="finish-hint">([^<]*)</code>', page)
    assert shown is not None, page
    args = shlex.split(html.unescape(shown.group(1)))
    assert args == ["quorum-cron", "members", "finish", "--reason", "...", "--config", str(path)]
    res = CliRunner().invoke(main, args[1:], env={"COLUMNS": "250"})
    assert res.exit_code == 1 and "cannot finish the change" in res.output, res.output


def test_the_page_names_the_new_members_the_change_waits_for_and_a_forced_finish_that_runs(
    redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """As ``members show`` and ``status`` say it: ``waiting for d: not running (start them; if one
    never will, `... finish --force ...`, then remove it)``. a, b and c heartbeat; d, the member
    the change added, does not. The page said only that the change ends when every new member
    heartbeats, leaving the reader to find which one had not."""
    path = tmp_path / "cluster.toml"
    path.write_text(
        f'[cluster]\nname = "wwait"\nmembers = ["a", "b", "c"]\nredis_url = "{redis_server.url}"\n'
    )
    store = RedisStore(redis_client, "wwait")
    stored = store.init_membership(Configuration.of("abc"), "a")
    changed = store.change_membership(stored.record.epoch, Configuration.of("abcd"), "alice", "grow")
    assert changed.ok and changed.membership is not None
    for node in "abc":
        assert store.heartbeat(node, f"inc-{node}", 30_000, {}, epoch=changed.membership.record.epoch).ok
    app = create_app(WebContext(load_config(path), store, "redis://x/0", AdminTokens()))
    with TestClient(app) as client:
        doc = client.get("/api/cluster").json()
        page = client.get("/cluster").text
    assert doc["waiting"] == ["d"]
    waiting = re.search(r'<td class="bad" id="membership-waiting">(.*?)</td>', page, re.S)
    assert waiting is not None, page
    assert html.unescape(waiting.group(1)).startswith("d: not running (start them; if one never will, ")
    forced = re.search(r'<code id="force-hint">([^<]*)</code>', waiting.group(1))
    assert forced is not None
    args = shlex.split(html.unescape(forced.group(1)))
    res = CliRunner().invoke(main, args[1:], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    after = store.membership()
    assert after is not None and not after.record.joint and after.reason == "..."
