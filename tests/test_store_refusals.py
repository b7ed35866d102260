"""What a real Redis says when it refuses a running node, beyond "connection refused".

Each refusal here holds for every call until someone fixes the server —
``MISCONF`` (an RDB save failed, ``stop-writes-on-bgsave-error``), ``NOPERM``
(an ACL change), ``NOAUTH``/``WRONGPASS`` (a password rotated) — and must
reach the agent as an outage (:class:`~quorum_cron.errors.StoreRefusing`,
a ``StoreUnavailable``): retried with backoff, said once, never taken for a
corrupt value of one slot. Before, a refused write inside ``vote.lua`` was
answered as that slot's "bad value" (the node dropped its vote for good and
raised ``bad_value``), and the others were plain ``StoreError`` (an ERROR
line per call, no alert). Each test makes the server refuse for real.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from quorum_cron.errors import StoreRefusing
from quorum_cron.store.base import VoteRequest, VoteStatus
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.redis_base import without_script

T0 = 1_700_000_000_000


def _req(job: str, node: str = "n1") -> VoteRequest:
    return VoteRequest(job, T0, node, "h1", quorum=2, max_skew_ms=250, deadline_ms=30_000)


def _clock() -> int:
    return T0


def _until(what: str, check: object, timeout_s: float = 10.0) -> None:
    """Poll a server fact (there is no event for it) until it holds; fail naming ``what``."""
    assert callable(check)
    end = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.02)


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    """A server of its own: these tests change its config, its ACL and its password."""
    with EmbeddedRedis(extra_args=("--enable-protected-configs", "yes")) as srv:
        yield srv


def _misconf(admin: redis.Redis) -> str:
    """Make the server refuse writes with MISCONF (a save point, and an RDB save that fails:
    nobody may create a file in /proc); returns the dir to put back."""
    old = str(admin.config_get("dir")["dir"])
    admin.config_set("save", "3600 1")
    admin.config_set("dir", "/proc")
    admin.bgsave()

    def refused() -> bool:
        try:
            admin.set("qc-probe", "1")
        except redis.ResponseError as exc:
            return str(exc).startswith("MISCONF")
        return False

    _until("the server to refuse writes with MISCONF", refused)
    return old


def test_misconf_is_an_outage_of_the_whole_call_not_a_bad_value(server: EmbeddedRedis) -> None:
    admin = server.client()
    store = RedisStore(server.client(), "mc", clock=_clock)
    try:
        old = _misconf(admin)
        for call in (
            lambda: store.vote([_req("a")]),  # one call
            lambda: store.vote([_req("a"), _req("b")]),  # pipelined
            lambda: store.heartbeat("n1", "inc", 5_000, {}),
        ):
            with pytest.raises(StoreRefusing) as got:
                call()
            msg = str(got.value)
            assert "MISCONF" in msg and "stop-writes-on-bgsave-error" in msg and "\n" not in msg, msg
            assert "@user_script" not in msg, msg
        assert store.bad_values == 0
        admin.config_set("dir", old)
        admin.bgsave()
        _until("writes accepted again", lambda: _writes(admin))
        [res] = store.vote([_req("a")])
        assert res.status == VoteStatus.RECORDED
    finally:
        store.close()
        admin.close()


def test_members_are_listed_while_writes_are_refused(server: EmbeddedRedis) -> None:
    """Listing the members deletes the expired ones on the way. Under MISCONF that delete failed
    the whole list once any heartbeat had expired, so `quorum-cron status` exited 1 while the
    server still answered every read (the Redis refusals audit). The list now comes, and the
    expired entry goes once writes are accepted again."""
    admin = server.client()
    now = [T0]
    store = RedisStore(server.client(), "ml", clock=lambda: now[0])
    try:
        store.heartbeat("n1", "inc-1", 5_000, {})
        store.heartbeat("n2", "inc-2", 60_000, {})
        old = _misconf(admin)
        now[0] = T0 + 10_000  # n1's heartbeat has expired
        assert [m.node for m in store.members()] == ["n2"]
        assert admin.hexists("qc:{ml}:members", "n1")  # (kept: the delete was refused)
        admin.config_set("dir", old)
        admin.bgsave()
        _until("writes accepted again", lambda: _writes(admin))
        assert [m.node for m in store.members()] == ["n2"]
        assert not admin.hexists("qc:{ml}:members", "n1")
    finally:
        store.close()
        admin.close()


def _writes(admin: redis.Redis) -> bool:
    try:
        admin.set("qc-probe", "1")
    except redis.ResponseError:
        return False
    return True


def test_noperm_mid_run_is_an_outage_naming_the_acl(server: EmbeddedRedis) -> None:
    admin = server.client()
    admin.acl_setuser("qc", enabled=True, passwords=["+pw-1"], keys=["*"], channels=["*"], commands=["+@all"])
    store = RedisStore(
        redis.Redis(host="127.0.0.1", port=server.port, username="qc", password="pw-1"), "np", clock=_clock
    )
    try:
        [res] = store.vote([_req("a")])
        assert res.status == VoteStatus.RECORDED
        # A command a script calls (the vote's ledger write is an XADD; its HSET of the slot) ...
        admin.acl_setuser("qc", commands=["-hset"])
        with pytest.raises(StoreRefusing) as got:
            store.vote([_req("b"), _req("c")])
        assert "NOPERM" in str(got.value) and "Least-privilege ACL" in str(got.value), got.value
        assert store.bad_values == 0
        # ... and the script command itself.
        admin.acl_setuser("qc", commands=["+hset", "-evalsha"])
        with pytest.raises(StoreRefusing) as got:
            store.vote([_req("b")])
        assert "NOPERM" in str(got.value) and "evalsha" in str(got.value), got.value
        admin.acl_setuser("qc", commands=["+evalsha"])
        assert [r.status for r in store.vote([_req("b")])] == [VoteStatus.RECORDED]
    finally:
        store.close()
        admin.close()


def test_a_password_rotated_mid_run_is_an_outage_without_the_secret(server: EmbeddedRedis) -> None:
    admin = server.client()
    admin.acl_setuser(
        "qc", enabled=True, passwords=["+old-secret-1"], keys=["*"], channels=["*"], commands=["+@all"]
    )
    client = redis.Redis(host="127.0.0.1", port=server.port, username="qc", password="old-secret-1")
    store = RedisStore(client, "pw", clock=_clock)
    try:
        store.vote([_req("a")])
        admin.acl_setuser("qc", reset_passwords=True, passwords=["+new-secret-2"])
        assert admin.client_kill_filter(_type="normal", skipme=True, user="qc") >= 1
        with pytest.raises(StoreRefusing) as got:
            store.vote([_req("b")])
        msg = str(got.value)
        assert "password or user was refused" in msg and "of that server in the URL" in msg, msg
        assert "secret" not in msg, msg
    finally:
        store.close()
        admin.close()


def test_the_script_location_is_left_out_of_messages() -> None:
    said = (
        "You can't write against a read only replica. script: c74dc5f5b30a5765aa36efefcfaabf9f4aa1979d, "
        "on @user_script:298."
    )
    assert without_script(said) == "You can't write against a read only replica."


def test_a_node_turned_replica_is_an_outage_saying_readonly(server: EmbeddedRedis) -> None:
    admin = server.client()
    store = RedisStore(server.client(), "ro", clock=_clock)
    with EmbeddedRedis() as master:
        try:
            store.vote([_req("a")])
            admin.replicaof("127.0.0.1", master.port)
            with pytest.raises(StoreRefusing) as got:
                store.vote([_req("b"), _req("c")])
            msg = str(got.value)
            assert "READONLY" in msg and "master" in msg and "@user_script" not in msg, msg
            assert store.bad_values == 0
            admin.replicaof("NO", "ONE")
            assert [r.status for r in store.vote([_req("b")])] == [VoteStatus.RECORDED]
        finally:
            admin.replicaof("NO", "ONE")
            store.close()
            admin.close()
