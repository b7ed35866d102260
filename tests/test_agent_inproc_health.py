"""Node health (quorum_cron/agent/health.py) in-process: store up/down, clock trust, quorum health.

On the memory store (:class:`OutageStore`, whose outage switch is the fault
the agent tells apart) and a manual clock: the store's clock is the node's,
so the clock is trusted unless a test jumps it. The heartbeat interval is an
hour, so the heartbeat loop runs one round and then only when something
wakes it (a store outage does); backoff rounds after a failure are real but
short (50-150 ms), and the tests wait for the store calls they expect, never
for time. The membership record (``settings.membership``) is covered by
``tests/test_agent_membership_inproc.py``; here no record is configured.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from quorum_cron.agent import health
from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.health import NodeHealth
from quorum_cron.agent.jobtables import REPUBLISH_BEATS, JobTableSync, table_digest
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.membership import NodeIdTaken
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.observe import Observer
from quorum_cron.agent.storeio import StoreWorker
from quorum_cron.clock.base import ManualClock
from quorum_cron.core.membership import Configuration, MembershipRecord
from quorum_cron.core.model import Member
from quorum_cron.errors import StoreError, StoreOutOfMemory, StoreRefusing
from tests.agent_inproc import T0, OutageStore, Signal, agent_job, alerts_of, events, metric, settings, until

OOM = StoreOutOfMemory.PREFIX + "command not allowed when used memory > 'maxmemory'"


class Node:
    """One node's :class:`NodeHealth` (n1 of 3, quorum 2) with what it tells the core recorded."""

    def __init__(self, *, info: dict[str, str] | None = None) -> None:
        self.signal = Signal()
        self.clock = ManualClock(wall_ms=T0, monotonic_ms=0)
        self.store = OutageStore(self.clock)
        self.store.signal = self.signal
        self.worker = StoreWorker(self.store, "n1")
        self.metrics = Metrics()
        self.alerts = AlertHook("n1")
        jobs = {j.name: j for j in (agent_job("b", spec_hash="hash-b"), agent_job("a", spec_hash="hash-a"))}
        self.observer = Observer("n1", jobs, self.metrics, self.alerts)
        self.trust: list[tuple[bool, str]] = []
        self.pokes = 0
        self.back = 0
        self.down: list[str] = []
        cfg = settings("n1")
        if info is not None:
            cfg = replace(cfg, info=info)
        self.health = NodeHealth(
            cfg,
            jobs,
            self.store,
            self.worker,
            clock=self.clock,
            metrics=self.metrics,
            alerts=self.alerts,
            observer=self.observer,
            set_trust=self._set_trust,
            poke=self._poke,
        )
        self.health.on_store_back = self._back
        self.health.on_store_down = self.down.append

    def _set_trust(self, trusted: bool, reason: str) -> None:
        self.trust.append((trusted, reason))
        self.signal.set()

    def _poke(self) -> None:
        self.pokes += 1

    def _back(self) -> None:
        self.back += 1
        self.signal.set()

    @property
    def trusted(self) -> bool:
        return self.trust[-1][0]

    def peer(self, node: str, *, jobs: str = "", ttl_ms: int = 10_000) -> None:
        """A peer's heartbeat, straight into the store."""
        assert self.store.heartbeat(node, f"inc-{node}", ttl_ms, {"jobs": jobs}).ok


def inproc(test: Callable[[Node], Awaitable[None]]) -> Callable[[pytest.LogCaptureFixture], None]:
    """Run ``test`` on a fresh loop with a fresh :class:`Node`, the agent's events captured."""

    def run(caplog: pytest.LogCaptureFixture) -> None:
        caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)

        async def main() -> None:
            node = Node()
            try:
                await test(node)
            finally:
                node.health.trust.close()
                node.worker.shutdown()

        asyncio.run(main())

    run.__name__ = test.__name__
    run.__doc__ = test.__doc__
    return run


# -- first contact ---------------------------------------------------------------


@inproc
async def test_first_contact_heartbeats_checks_the_clock_and_lets_the_node_vote(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    [me] = node.store.members()
    assert me.node == "n1" and me.incarnation == node.health.membership.incarnation
    # The table beside the heartbeat, the heartbeat naming it by digest (issue 27: not inline).
    assert "jobs" not in me.info and me.info["jobs_digest"] == table_digest("a=hash-a,b=hash-b")
    assert node.store.published_jobs(["n1", "n2"]) == {"n1": "a=hash-a,b=hash-b"}
    assert me.info["voting"] == "no" and me.info["clock"] == "cannot tell"  # the beat came before the probe
    assert node.trust[-1][0] and node.trust[-1][1].startswith("clock trusted: store TIME bound 0.0 ms")
    assert metric(node.metrics, "quorum_cron_store_up") == 1
    assert metric(node.metrics, "quorum_cron_clock_trusted") == 1
    assert node.health.info()["voting"] == "yes"
    assert node.alerts.sent == []


@inproc
async def test_first_contact_with_the_store_down_gives_up_when_asked_to_stop(node: Node) -> None:
    node.store.down = "connection refused"
    assert not await node.health.first_contact(lambda: True)
    assert node.store.count("heartbeat") == 1
    assert node.trust == [(False, "store unreachable (connection refused)")]
    [alert] = alerts_of(node.alerts, AlertKind.STORE_UNAVAILABLE)
    assert alert.message == "store unreachable: connection refused; not voting"
    assert node.down == ["connection refused"]


@inproc
async def test_first_contact_keeps_trying_until_the_store_answers(node: Node) -> None:
    node.store.down = "connection refused"
    joining = asyncio.ensure_future(node.health.first_contact(lambda: False))
    await until(node.signal, lambda: node.store.count("heartbeat") >= 2, "a second heartbeat attempt")
    node.store.down = ""
    assert await asyncio.wait_for(joining, 10)
    assert node.back == 1 and node.trusted
    assert [m.node for m in node.store.members()] == ["n1"]
    assert len(alerts_of(node.alerts, AlertKind.STORE_UNAVAILABLE)) == 1  # once per outage, not per try


@inproc
async def test_first_contact_refuses_a_node_id_another_live_process_holds(node: Node) -> None:
    """Asked once more when the holder's entry would have expired (a killed process's would be
    gone: see test_agent_cluster), the id is still held here (the store's clock stands still, as
    a live holder's renewals keep it): refused, after exactly two heartbeats."""
    assert node.store.heartbeat("n1", "someone-else", 200, {}).ok
    with pytest.raises(NodeIdTaken, match="held by another live process"):
        await asyncio.wait_for(node.health.first_contact(lambda: False), 10)
    assert node.store.count("heartbeat") == 1 + 2  # (the holder's, then this node's two)


@inproc
async def test_first_contact_refuses_at_once_a_holder_whose_entry_outlives_its_own(node: Node) -> None:
    """An entry that lasts longer than this node's would (another config's heartbeat) is no
    process of this node's killed moments ago: no wait."""
    ttl = node.health.settings.heartbeat_ttl_ms
    assert node.store.heartbeat("n1", "someone-else", ttl + 1_000, {}).ok
    with pytest.raises(NodeIdTaken, match="held by another live process"):
        await asyncio.wait_for(node.health.first_contact(lambda: False), 10)
    assert node.store.count("heartbeat") == 1 + 1


# -- the store going down and coming back ------------------------------------------


@inproc
async def test_a_store_outage_stops_voting_once_and_its_end_restores_it(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    pokes = node.pokes
    node.health.store_down("connection reset")
    node.health.store_down("connection reset")  # every failed call says so: one transition
    assert node.down == ["connection reset"] and not node.health.store_up
    assert node.health.down_reason == "connection reset"
    assert node.trust[-1] == (False, "store unreachable (connection reset)")
    assert metric(node.metrics, "quorum_cron_store_up") == 0
    assert len(alerts_of(node.alerts, AlertKind.STORE_UNAVAILABLE)) == 1
    assert node.pokes == pokes + 1
    assert node.health.info()["voting"] == "no"
    node.health.store_ok()
    node.health.store_ok()
    assert node.back == 1 and node.health.store_up and node.trusted
    assert metric(node.metrics, "quorum_cron_store_up") == 1


def test_the_outage_and_the_return_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)

    async def main() -> None:
        node = Node()
        assert await node.health.first_contact(lambda: False)
        node.health.store_down("connection reset")
        node.health.store_ok()
        node.health.trust.close()
        node.worker.shutdown()

    asyncio.run(main())
    trust = [(r.qc_fields["trusted"], r.getMessage()) for r in events(caplog.records, "trust")]  # type: ignore[attr-defined]
    assert trust[-2] == (False, "not voting: store unreachable (connection reset)")
    assert trust[-1][0] is True and trust[-1][1].startswith("voting: clock trusted")
    assert [r.getMessage() for r in events(caplog.records, "store")] == ["store reachable again"]


@inproc
async def test_out_of_memory_is_its_own_alert_and_is_held_until_writes_succeed_for_a_while(
    node: Node,
) -> None:
    assert await node.health.first_contact(lambda: False)
    node.health.store_down(OOM)
    [alert] = alerts_of(node.alerts, AlertKind.STORE_OOM)
    assert "free memory or raise maxmemory" in alert.message
    assert alerts_of(node.alerts, AlertKind.STORE_UNAVAILABLE) == []
    assert metric(node.metrics, "quorum_cron_store_oom") == 1
    node.health.store_ok()  # a read succeeded: Redis still refuses writes
    assert not node.health.store_up and node.back == 0
    node.clock.advance(2 * node.health.settings.heartbeat_ms)
    node.health.store_ok()
    assert node.health.store_up and node.back == 1
    assert metric(node.metrics, "quorum_cron_store_oom") == 0


@inproc
async def test_a_refusal_of_writes_is_held_down_like_out_of_memory_not_flapped_by_reads(node: Node) -> None:
    """MISCONF and READONLY refuse writes while reads succeed: each read said "store reachable
    again" and the next write raised a new store_unavailable alert, about once a second (the
    Redis refusals audit). Held as out of memory is, one alert each, until writes stop failing."""
    assert await node.health.first_contact(lambda: False)
    refusals = [
        "MISCONF: its last RDB save failed and stop-writes-on-bgsave-error holds writes back",
        "READONLY: it is a replica now (a failover, or REPLICAOF): expected the master in the URL",
    ]
    for n, refusal in enumerate(refusals, 1):
        reason = f"redis at 127.0.0.1:6379 {StoreRefusing.WRITES}heartbeat: {refusal}"
        for _ in range(3):
            node.health.store_down(reason)
            node.health.store_ok()  # a read succeeded: Redis still refuses writes
            assert not node.health.store_up and node.back == n - 1
        assert len(alerts_of(node.alerts, AlertKind.STORE_UNAVAILABLE)) == n
        assert metric(node.metrics, "quorum_cron_store_oom") == 0  # (not out of memory)
        node.clock.advance(2 * node.health.settings.heartbeat_ms)
        node.health.store_ok()
        assert node.health.store_up and node.back == n
    node.health.store_down("connection refused")  # a plain outage is not held
    node.health.store_ok()
    assert node.health.store_up and node.back == 3


@inproc
async def test_an_outage_that_turns_into_out_of_memory_is_alerted_as_such_once(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    node.health.store_down("connection refused")
    node.health.store_down(OOM)
    node.health.store_down(OOM)
    assert len(alerts_of(node.alerts, AlertKind.STORE_UNAVAILABLE)) == 1
    [oom] = alerts_of(node.alerts, AlertKind.STORE_OOM)
    assert oom.message == f"store {OOM}; not voting"
    node.health.store_down("connection refused")  # back to a plain outage: the OOM state ends
    assert metric(node.metrics, "quorum_cron_store_oom") == 0


# -- clock trust -------------------------------------------------------------------


@inproc
async def test_a_heartbeat_never_says_voting_beside_a_clock_it_says_is_not_trusted(node: Node) -> None:
    """A heartbeat reads the clock's verdict afresh; the node's trust is updated on its loop's
    next turn. A beat between the two said `clock: not trusted: wall clock jumped ...` and
    `voting: yes` at once (a newcomer's `status` on a loaded machine): it now says no."""
    assert await node.health.first_contact(lambda: False)
    assert node.health.info()["voting"] == "yes"
    node.clock.jump(5_000)
    info = node.health.info()  # (before update_trust: the core still votes until then)
    assert info["clock"] == "not trusted" and "wall clock jumped" in info["clock_reason"], info
    assert info["voting"] == "no", info


@inproc
async def test_a_clock_that_stops_being_trusted_is_alerted_and_its_return_too(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    node.clock.jump(5_000)
    node.health.update_trust()
    assert not node.trusted and "wall clock jumped +5000 ms" in node.trust[-1][1]
    [abstain] = alerts_of(node.alerts, AlertKind.CLOCK_ABSTAIN)
    assert abstain.fields == {"offset_ms": "unknown"}  # the jump voided the store's figure
    node.health.update_trust()  # no news: no second alert
    assert len(alerts_of(node.alerts, AlertKind.CLOCK_ABSTAIN)) == 1
    node.clock.advance(1)
    await node.health.trust.check(node.store.time_ms, node.worker.background)
    node.health.update_trust()
    assert node.trusted
    [trusted] = alerts_of(node.alerts, AlertKind.CLOCK_TRUSTED)
    assert trusted.message.startswith("clock trusted: store TIME bound")


@inproc
async def test_a_clock_alert_waits_while_the_store_is_down(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    node.health.store_down("connection refused")
    node.clock.jump(5_000)
    node.health.update_trust()
    assert alerts_of(node.alerts, AlertKind.CLOCK_ABSTAIN) == []  # the store outage is the news
    node.health.store_ok()
    assert len(alerts_of(node.alerts, AlertKind.CLOCK_ABSTAIN)) == 1 and not node.trusted


def test_the_heartbeat_info_says_whether_the_node_votes_and_carries_the_configured_extras() -> None:
    async def main() -> None:
        node = Node(info={"version": "9.9"})
        assert await node.health.first_contact(lambda: False)
        info = node.health.info()
        assert info["version"] == "9.9" and info["voting"] == "yes"
        assert info["jobs_digest"] == table_digest("a=hash-a,b=hash-b") and "jobs" not in info
        assert info["host"]
        node.health.voting_stopped = True  # a graceful stop
        assert node.health.info()["voting"] == "no"
        node.health.trust.close()
        node.worker.shutdown()

    asyncio.run(main())


# -- quorum health and peers -------------------------------------------------------


def _member(node: str, jobs: str = "") -> Member:
    return Member(node, f"inc-{node}", T0, T0 + 10_000, {"jobs": jobs})


@inproc
async def test_quorum_lost_and_restored_are_alerted_once_per_change(node: Node) -> None:
    node.health.observe_members([_member("n1"), _member("n2")])
    assert node.alerts.sent == []  # a quorum from the start is no news
    node.health.observe_members([_member("n1")])
    node.health.observe_members([_member("n1")])
    [lost] = alerts_of(node.alerts, AlertKind.QUORUM_LOST)
    assert lost.message == "quorum lost: 1 of 3 alive, need 2" and lost.fields == {"alive": "1"}
    assert metric(node.metrics, "quorum_cron_members_alive") == 1
    node.health.observe_members([_member("n1"), _member("n3")])
    [restored] = alerts_of(node.alerts, AlertKind.QUORUM_RESTORED)
    assert restored.message == "quorum restored: 2 of 3 alive, need 2"


@inproc
async def test_no_quorum_lost_alert_while_a_new_cluster_is_still_joining(node: Node) -> None:
    node.health.observe_members([_member("n1")])
    assert node.alerts.sent == []
    node.clock.advance(2 * node.health.settings.heartbeat_ttl_ms)  # the others had their time
    node.health.observe_members([_member("n1")])
    assert len(alerts_of(node.alerts, AlertKind.QUORUM_LOST)) == 1
    node.health.observe_members([_member("n1"), _member("n2")])
    assert len(alerts_of(node.alerts, AlertKind.QUORUM_RESTORED)) == 1


@inproc
async def test_a_peer_running_another_definition_of_a_job_is_alerted(node: Node) -> None:
    node.health.observe_members(
        [_member("n1", "a=hash-a,b=hash-b"), _member("n2", "a=hash-new,b=hash-b,zzz=other"), _member("n3")]
    )
    [mismatch] = alerts_of(node.alerts, AlertKind.SPEC_MISMATCH)
    assert mismatch.fields["job"] == "a" and mismatch.fields["theirs"] == "hash-new"
    assert mismatch.fields["nodes"] == "n2" and "node(s) n2 run definition" in mismatch.message


@inproc
async def test_a_reload_rebuilds_the_heartbeat_jobs_and_compares_unchanged_peers_anew(node: Node) -> None:
    """The heartbeat's job list and the peers' lists compared are cached per job table (issue 27):
    a reload (the table replaced in place, then ``jobs_changed``) must not leave either stale."""
    peer = [_member("n1"), _member("n2", "a=hash-a,b=hash-b,c=hash-c")]  # n2 already runs a job c
    node.health.observe_members(peer)
    assert node.health.tables.table == "a=hash-a,b=hash-b" and node.alerts.sent == []
    before = node.health.info()["jobs_digest"]
    node.health.jobs["c"] = agent_job("c", spec_hash="hash-c-mine")  # a reload adds c, defined otherwise
    node.health.jobs_changed()
    assert node.health.tables.table == "a=hash-a,b=hash-b,c=hash-c-mine"
    assert node.health.info()["jobs_digest"] == table_digest(node.health.tables.table) != before
    assert node.health.tables.publish_due()  # (written again before the next heartbeat)
    node.health.observe_members(peer)  # within two heartbeats: a peer reloading too may not have
    assert node.alerts.sent == []  # published yet (a day-2 audit's `kill -HUP` of every node)
    node.clock.advance(2 * node.health.settings.heartbeat_ms)
    node.health.observe_members(peer)  # the same list as before: compared again all the same
    [mismatch] = alerts_of(node.alerts, AlertKind.SPEC_MISMATCH)
    assert mismatch.fields["job"] == "c" and mismatch.fields["theirs"] == "hash-c"
    node.health.observe_members(peer)
    assert len(alerts_of(node.alerts, AlertKind.SPEC_MISMATCH)) == 1


@inproc
async def test_peers_reloaded_at_the_same_moment_raise_no_mismatch(node: Node) -> None:
    """Every node reloaded together: each one's table is the old one until its next heartbeat
    publishes the new; within two heartbeats of this node's reload, that is no mismatch."""
    old = [_member("n1"), _member("n2", "a=hash-a,b=hash-b")]
    node.health.observe_members(old)
    node.health.jobs["a"] = agent_job("a", spec_hash="hash-a2")  # the reload changes a's command
    node.health.jobs_changed()
    node.health.observe_members(old)  # n2 reloaded too, not yet published
    node.clock.advance(node.health.settings.heartbeat_ms)
    node.health.observe_members([_member("n1"), _member("n2", "a=hash-a2,b=hash-b")])  # published
    node.clock.advance(2 * node.health.settings.heartbeat_ms)
    node.health.observe_members([_member("n1"), _member("n2", "a=hash-a2,b=hash-b")])
    assert alerts_of(node.alerts, AlertKind.SPEC_MISMATCH) == []


# -- the heartbeat loop ------------------------------------------------------------


@inproc
async def test_the_loop_heartbeats_reads_members_and_judges_the_quorum(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    node.peer("n2", jobs="a=hash-other")
    taken: list[NodeIdTaken] = []
    loop = asyncio.ensure_future(node.health.loop(taken.append))
    try:
        await until(
            node.signal, lambda: metric(node.metrics, "quorum_cron_members_alive") == 2, "2 members seen"
        )
        assert node.store.count("members") == 1
        me = next(m for m in node.store.members() if m.node == "n1")
        assert me.info["voting"] == "yes" and me.info["clock"] == "trusted"  # this round's beat
        assert [a.fields["theirs"] for a in alerts_of(node.alerts, AlertKind.SPEC_MISMATCH)] == ["hash-other"]
        assert node.trusted and not loop.done()
    finally:
        loop.cancel()


@inproc
async def test_the_loop_probes_at_once_when_the_store_goes_down_and_notices_its_return(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    loop = asyncio.ensure_future(node.health.loop(lambda exc: None))
    try:
        # The round's last step is its trust verdict; right after it the loop waits (an hour).
        await until(node.signal, lambda: len(node.trust) == 2, "the first round's verdict")
        node.store.down = "connection refused"
        beats = node.store.count("heartbeat")
        node.health.store_down("connection refused")  # e.g. a vote failed: the loop does not wait an hour
        await until(node.signal, lambda: node.store.count("heartbeat") >= beats + 2, "two probes")
        assert node.back == 0 and not node.trusted
        node.store.down = ""
        await until(node.signal, lambda: node.back == 1, "the store back")
        assert node.trusted and node.health.store_up
        assert len(alerts_of(node.alerts, AlertKind.STORE_UNAVAILABLE)) == 1
    finally:
        loop.cancel()


@inproc
async def test_the_loop_stops_and_says_so_when_its_node_id_is_taken_over(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    assert node.store.heartbeat("n1", "someone-else", 10_000, {}).ok is False  # we hold it: refused
    node.clock.advance(node.health.settings.heartbeat_ttl_ms + 1)  # our entry expired (we were paused)
    assert node.store.heartbeat("n1", "someone-else", 60_000, {}).ok
    taken: list[NodeIdTaken] = []
    await asyncio.wait_for(node.health.loop(taken.append), 10)  # returns
    [exc] = taken
    assert "someone-else" in str(exc)


def test_the_loop_survives_store_errors_and_its_own_bugs(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)
    monkeypatch.setattr(health, "BACKOFF_MAX_MS", 10)  # four failed rounds in, not 1.5 s

    async def main() -> None:
        node = Node()
        assert await node.health.first_contact(lambda: False)
        node.store.broken = StoreError("NOSCRIPT No matching script")
        loop = asyncio.ensure_future(node.health.loop(lambda exc: None))
        try:
            await until(node.signal, lambda: node.store.count("heartbeat") >= 3, "two retries")
            node.store.broken = RuntimeError("a bug")
            beats = node.store.count("heartbeat")
            await until(node.signal, lambda: node.store.count("heartbeat") >= beats + 2, "two more")
            node.store.broken = None
            await until(node.signal, lambda: len(node.trust) >= 2, "a good round's verdict")
            assert node.health.store_up and node.trusted  # an error reply is not an outage
        finally:
            loop.cancel()
            node.health.trust.close()
            node.worker.shutdown()

    asyncio.run(main())
    failed = [r.getMessage() for r in events(caplog.records, "membership")]
    assert failed and all(m == "heartbeat failed: NOSCRIPT No matching script" for m in failed)
    bugs = [r for r in caplog.records if r.getMessage() == "heartbeat loop: unexpected error (retrying)"]
    assert bugs and all(r.exc_info is not None and str(r.exc_info[1]) == "a bug" for r in bugs)


@inproc
async def test_leaving_drops_the_membership(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    node.peer("n2")
    await node.health.leave()
    assert [m.node for m in node.store.members()] == ["n2"]


@inproc
async def test_leaving_with_the_store_down_does_not_raise(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    node.store.down = "connection refused"
    await node.health.leave()
    assert node.store.count("leave") == 1


def _digest_member(node: str, table: str) -> Member:
    return Member(node, f"inc-{node}", T0, T0 + 10_000, {"jobs_digest": table_digest(table)})


@inproc
async def test_a_peer_naming_its_table_by_digest_is_read_once_per_digest_and_compared(node: Node) -> None:
    """A heartbeat carries the job table's digest; the table is read from the store only when a
    peer's digest moved, and a table that does not match the digest yet waits for the next beat."""
    theirs = "a=hash-new,b=hash-b"
    node.store.publish_jobs("n2", "a=hash-a,b=hash-b")  # (the write of its new table not landed yet)
    live = [_member("n1"), _digest_member("n2", theirs)]
    assert node.health.tables.to_read(live) == ["n2"]
    node.health.observe_members(live, node.store.published_jobs(["n2"]))
    assert node.alerts.sent == [] and node.health.tables.to_read(live) == ["n2"]  # (read again next beat)
    node.store.publish_jobs("n2", theirs)
    node.health.observe_members(live, node.store.published_jobs(node.health.tables.to_read(live)))
    [mismatch] = alerts_of(node.alerts, AlertKind.SPEC_MISMATCH)
    assert mismatch.fields["job"] == "a" and mismatch.fields["theirs"] == "hash-new"
    assert node.health.tables.to_read(live) == []  # (compared: not read again while it stays)
    node.health.observe_members(live, {})
    assert len(alerts_of(node.alerts, AlertKind.SPEC_MISMATCH)) == 1


def test_the_table_is_written_before_the_first_heartbeat_again_when_changed_and_every_so_often() -> None:
    jobs = {"a": agent_job("a", spec_hash="h")}
    sync = JobTableSync("n1", jobs)
    assert sync.publish_due()  # (never written)
    sync.published()
    assert [sync.publish_due() for _ in range(REPUBLISH_BEATS)] == [False] * (REPUBLISH_BEATS - 1) + [True]
    sync.published()
    assert not sync.publish_due()
    jobs["b"] = agent_job("b", spec_hash="h")  # (a reload replaces the table in place)
    sync.changed()
    assert sync.table == "a=h,b=h" and sync.publish_due()


@inproc
async def test_while_seats_fill_at_the_start_the_heartbeat_comes_often(node: Node) -> None:
    """Each seat filled is a new epoch a job takes only from one of its members, who hear of it
    by heartbeat: at a cluster's first start the first slots waited a whole heartbeat per seat."""
    h = node.health
    hour = h.settings.heartbeat_ms
    assert hour == 3_600_000 and h.beat_interval_ms() == hour  # no record held yet
    h.record = MembershipRecord(2, Configuration.of(["n1"], size=3))
    assert h.beat_interval_ms() == health.SEAT_FILLING_BEAT_MS  # seats open, the node just started
    h.record = MembershipRecord(4, Configuration.of(["n1", "n2", "n3"]))
    assert h.beat_interval_ms() == hour  # every seat filled
    h.record = MembershipRecord(5, Configuration.of(["n1", "n2"], size=3))
    node.clock.advance(2 * h.settings.heartbeat_ttl_ms)  # past the start: a seat open for good
    assert h.beat_interval_ms() == hour


@inproc
async def test_the_loop_beats_at_that_pace_while_seats_fill(node: Node) -> None:
    assert await node.health.first_contact(lambda: False)
    node.health.record = MembershipRecord(2, Configuration.of(["n1"], size=3))
    beats = node.store.count("heartbeat")
    loop = asyncio.ensure_future(node.health.loop(lambda exc: None))
    try:  # (the configured heartbeat is an hour: only the seat-filling pace beats again)
        await until(node.signal, lambda: node.store.count("heartbeat") >= beats + 3, "three heartbeats")
    finally:
        loop.cancel()
