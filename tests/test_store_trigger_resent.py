"""A trigger redis-py sends again after its reply was lost is one trigger, and the answer names it.

redis-py's client (:func:`~quorum_cron.store.connect.fail_fast`: one retry on a
connection error) sends a command again on a new connection when the first
one's reply is lost. Pause and resume were safe to send twice; a trigger was
not: one ``quorum-cron trigger`` (or one click on the dashboard) recorded two
triggers, two slots, and the job ran twice, while the command named one.
Against the session's real redis-server behind :mod:`tests.cut_proxy`, which
drops the trigger's reply and lets the reconnect through.
"""

from __future__ import annotations

import redis

from quorum_cron.store.base import AuditAction
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from tests.cut_proxy import cut_proxy

NS = "resent"


def test_a_trigger_sent_again_after_a_lost_reply_triggers_once(
    redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    with cut_proxy(redis_server.port, b"by-resent", drop_reply=True, blip=True) as proxy:
        store = RedisStore.from_url(proxy.url, NS, **fail_fast())
        try:
            fire_ms = store.trigger("j", "by-resent")
            assert proxy.cut.is_set()  # (the first reply was lost: the answer came from the second send)
            audit = store.audit("j", 10)
        finally:
            store.close()
    kept = [int(f) for f in redis_client.zrange(f"qc:{{{NS}:j}}:triggers", 0, -1)]
    assert kept == [fire_ms]
    assert [(a.action, a.by, a.detail) for a in audit] == [(AuditAction.TRIGGER, "by-resent", str(fire_ms))]
