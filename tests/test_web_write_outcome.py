"""The dashboard's trigger, with Redis vanishing right after it: answered as made, never as a failure.

The app (Starlette's TestClient) on a store whose Redis sits behind
:mod:`tests.cut_proxy`, which makes it vanish at the first command after the
trigger (named by the admin token's name, the trigger's ``by``).
"""

from __future__ import annotations

from pathlib import Path

import redis
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens
from tests.cut_proxy import cut_proxy

NS = "vanishweb"
TOKEN = "vanisher:correct-horse-battery-staple"


def test_a_trigger_made_before_redis_vanished_is_answered_made(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    """It read the job's pause state after the trigger: Redis gone there answered 503 "cannot
    trigger 'tick' ..." of a trigger the store held."""
    (tmp_path / "tokens").write_text(f"{TOKEN}\n")
    tick = JobSpec.create("tick", "@every 10s", command=("true",))
    config = Config(ClusterConfig(namespace=NS, size=3), (tick,))
    with cut_proxy(redis_server.port, b"vanisher") as proxy:
        store = RedisStore.from_url(proxy.url, NS, **fail_fast())
        app = create_app(WebContext(config, store, proxy.url, AdminTokens(file=tmp_path / "tokens")))
        try:
            with TestClient(app, raise_server_exceptions=False) as client:
                r = client.post("/api/jobs/tick/trigger", headers={"Authorization": f"Bearer {TOKEN}"})
        finally:
            store.close()
    made = [int(f) for f in redis_client.zrange(f"qc:{{{NS}:tick}}:triggers", 0, -1)]
    assert len(made) == 1
    assert r.status_code == 200, r.text
    assert r.json()["slot_ms"] == made[0] and r.json()["paused"] is False
