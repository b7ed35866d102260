"""A Sentinel failover seen from a node's store: where its writes go, and what a bad sentinel list says.

Real servers (:func:`tests.topologies.own_sentinel`: a master, two replicas,
three sentinels); every wait is for an event the servers report, bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.embedded.procs import command
from quorum_cron.store.embedded.topology import EmbeddedSentinel, ServerProc
from quorum_cron.store.redis import RedisStore
from tests.topologies import own_sentinel

pytestmark = pytest.mark.slow


@pytest.fixture
def sentinels() -> Iterator[EmbeddedSentinel]:
    with own_sentinel() as s:
        yield s


def _role(server: ServerProc) -> str:
    c = server.client(decode_responses=True)
    try:
        return str(c.info("replication").get("role"))
    finally:
        c.close()


def test_after_a_sentinel_failover_writes_leave_the_old_master_while_it_still_takes_them(
    sentinels: EmbeddedSentinel,
) -> None:
    """``SENTINEL FAILOVER`` promotes a replica, but the old master stays up, says it is a master
    and takes writes until the sentinels reconfigure it (about 10 s later). A node's pooled
    connections stayed on it that long: its writes (votes, starts) went to a server no replica
    follows and that is about to throw them away, and a node with a new connection wrote to the
    new master meanwhile — two masters. The node must follow the sentinels within about a second."""
    store = RedisStore.from_url(sentinels.url, "fo", **fail_fast())
    old = sentinels.master()
    probe = "qc:{fo}:probe"
    try:
        store.client.set(probe, "0")  # a pooled connection to the old master
        s = sentinels.sentinels[0].client(decode_responses=True)
        try:
            command(s, "SENTINEL", "FAILOVER", sentinels.name)
        finally:
            s.close()
        new = sentinels.await_failover(old)
        assert _role(old) == "master", "the old master was demoted at once: nothing to test"
        fresh = new.client(decode_responses=True)
        landed_while_old_was_master: bool | None = None
        i = 0
        deadline = time.monotonic() + 20.0  # the sentinels demote the old master within this
        try:
            while time.monotonic() < deadline:
                i += 1
                try:
                    store.client.set(probe, str(i))
                except redis.ConnectionError:  # (the old master demoted under the write)
                    continue
                if fresh.get(probe) == str(i):
                    landed_while_old_was_master = _role(old) == "master"
                    break
                if _role(old) != "master":
                    landed_while_old_was_master = False  # the old master had to be demoted first
                    break
                time.sleep(0.02)  # pacing the probe writes (CPU), not waiting for anything
        finally:
            fresh.close()
        assert landed_while_old_was_master, (
            f"after the sentinels named {new.name}:{new.port}, the node's writes went on to the old "
            f"master {old.name}:{old.port} until it was demoted ({i} writes)"
        )
    finally:
        store.close()


def test_a_sentinel_list_with_a_data_server_in_it_still_finds_the_master_through_the_others(
    sentinels: EmbeddedSentinel,
) -> None:
    """A data server's port among the sentinels (a common slip: 6379 for 26379) refuses
    ``SENTINEL MASTERS``; the lookup went no further and failed with Redis's raw "unknown
    command 'SENTINEL'" although the next address was a sentinel that knew the master."""
    data = sentinels.master()
    hosts = f"127.0.0.1:{data.port}," + ",".join(f"127.0.0.1:{x.port}" for x in sentinels.sentinels)
    store = RedisStore.from_url(f"redis+sentinel://{hosts}/{sentinels.name}/0", "fo", **fail_fast())
    try:
        assert store.time_ms() > 0
    finally:
        store.close()


def test_a_sentinel_list_of_data_servers_only_is_one_line_saying_they_are_not_sentinels(
    sentinels: EmbeddedSentinel,
) -> None:
    """Nothing but data servers: refused with one line naming each address as not a sentinel — a
    store error, not "unavailable" (waiting will not turn a data server into a sentinel)."""
    ports = [d.port for d in sentinels.data]
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    store = RedisStore.from_url(f"redis+sentinel://{hosts}/{sentinels.name}", "fo", **fail_fast())
    try:
        with pytest.raises(StoreError) as info:
            store.time_ms()
    finally:
        store.close()
    message = str(info.value)
    assert not isinstance(info.value, StoreUnavailable), message
    assert "\n" not in message, message
    assert "not a sentinel" in message and "26379" in message, message
    for p in ports:
        assert f"127.0.0.1:{p}" in message, message


def test_a_master_name_no_sentinel_monitors_says_which_names_they_monitor(
    sentinels: EmbeddedSentinel,
) -> None:
    """A typo in the master name read "knows no healthy master 'x'", as if the master were down;
    the line says the sentinels monitor no master of that name, and which they do."""
    hosts = ",".join(f"127.0.0.1:{x.port}" for x in sentinels.sentinels)
    store = RedisStore.from_url(f"redis+sentinel://{hosts}/no-such-master", "fo", **fail_fast())
    try:
        with pytest.raises(StoreError) as info:
            store.time_ms()
    finally:
        store.close()
    message = str(info.value)
    assert "\n" not in message, message
    assert "monitors no master 'no-such-master'" in message, message
    assert f"monitors: {sentinels.name!r}" in message or f"({sentinels.name!r})" in message, message
