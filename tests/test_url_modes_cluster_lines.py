"""A Redis Cluster store's error lines name the URL the operator configured (redacted) and the node that
refused, not every node the client discovered (six addresses of a 3 + 3 cluster in every line).

Against the suite's real cluster (tests/topologies.py).
"""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from quorum_cron.errors import StoreError
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.embedded.topology import EmbeddedCluster
from quorum_cron.store.redis import RedisStore
from tests.topologies import cluster_client

pytestmark = pytest.mark.slow


def test_a_cluster_stores_lines_name_the_configured_url_and_the_refusing_node(
    redis_cluster: EmbeddedCluster,
) -> None:
    seed = f"127.0.0.1:{redis_cluster.ports[0]}"
    store = RedisStore.from_url(f"redis+cluster://:url-s3cret@{seed}", "cl3", **fail_fast())
    raw = cluster_client(redis_cluster)
    members = "qc:{cl3}:members"
    try:
        assert repr(store).startswith(f"RedisStore(redis+cluster://:***@{seed},")
        raw.set(members, "not a hash")  # the membership script then meets a key of the wrong type
        with pytest.raises(StoreError) as info:
            store.members()
        owner = raw.nodes_manager.get_node_from_slot(key_slot(members.encode()))
        message = str(info.value)
        assert message.startswith(f"redis at redis+cluster://:***@{seed} failed members: "), message
        assert f"node {owner.host}:{owner.port}: WRONGTYPE" in message, message
        others = [p for p in redis_cluster.ports if p not in (redis_cluster.ports[0], owner.port)]
        assert not any(f"127.0.0.1:{p}" in message for p in others), message
        assert "url-s3cret" not in message and "\n" not in message
    finally:
        raw.delete(members)
        raw.close()
        store.close()
