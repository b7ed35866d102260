"""A cluster master's replication probe finds a slot it owns from the slot map.

``RedisWrites.probe_master`` ends a short master's state when the master owns
no slot any more (agent/shortmasters.py). It used to decide that from whether
one of the keys ``qc:probe:{<ns>:0..4095}`` landed on the master; those keys
cover about a fifth of the 16384 slots, so a master owning only other slots
(a small master, one being drained) was taken for one owning none: its state
ended while its writes still fell short, and began again at the next write,
line and alert each time. Real 3 + 3 cluster of its own: the slots of one
master that those keys land on are handed to another master (empty slots,
``CLUSTER SETSLOT ... NODE``); the master keeps thousands of slots and its
replica, and the probe must say its write there was replicated.
"""

from __future__ import annotations

import pytest

from quorum_cron.store.embedded.procs import await_until
from quorum_cron.store.redis import RedisStore
from tests.topologies import cluster_client, own_cluster

pytestmark = pytest.mark.slow

NS = "pq"
OLD_PROBE_KEYS = 4_096


def test_a_master_whose_slots_no_early_probe_key_lands_on_is_probed_not_dropped() -> None:
    with own_cluster() as cluster:
        client = cluster_client(cluster)
        store = RedisStore(client, NS, wait_replicas=1, wait_timeout_ms=1_000)
        try:
            nm = client.nodes_manager
            masters = sorted({nodes[0].name for nodes in nm.slots_cache.values()})
            master, other = masters[0], masters[1]
            early = {client.keyslot(f"qc:probe:{{{NS}:{i}}}") for i in range(OLD_PROBE_KEYS)}
            move = sorted(s for s, nodes in nm.slots_cache.items() if nodes[0].name == master and s in early)
            ids = {}
            for name in masters:
                c = cluster.server(int(name.rsplit(":", 1)[1])).client()
                try:
                    ids[name] = c.execute_command("CLUSTER", "MYID")
                finally:
                    c.close()
            for name in (other, *(m for m in masters if m != other)):  # (the new owner first)
                c = cluster.server(int(name.rsplit(":", 1)[1])).client()
                try:
                    pipe = c.pipeline(transaction=False)
                    for s in move:
                        pipe.execute_command("CLUSTER", "SETSLOT", s, "NODE", ids[other])
                    assert not [r for r in pipe.execute(raise_on_error=False) if isinstance(r, Exception)]
                    if name == other:
                        c.execute_command("CLUSTER", "BUMPEPOCH")
                finally:
                    c.close()

            def settled() -> bool:
                nm.initialize()
                owned = [s for s, nodes in nm.slots_cache.items() if nodes[0].name == master]
                return bool(owned) and not set(owned) & early

            await_until(f"{master} to own only slots no early probe key lands on", settled, 30.0, 0.1)
            assert store.probe_master(master) is True
            # A master that owns nothing is still told apart.
            assert store.probe_master("127.0.0.1:1") is False
        finally:
            store.close()
