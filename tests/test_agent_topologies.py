"""Real agents on a real Redis Cluster and through a real Sentinel set, with the failures that matter.

* Cluster: 5 agents, jobs on all three masters, ``wait_replicas = 1``. While
  votes flow one job's hash slot is migrated to another master, held open
  until votes met each stage (the source refusing a script on the MIGRATING
  slot; then ASK, once the job's keys left, until the importing master
  served ASKING calls and the job ran through them; then MOVED), and one master is
  SIGKILLed so that its replica is promoted; the killed node is restarted
  and rejoins as a replica (so WAIT can be satisfied again on that shard).
* Sentinel: 5 agents through ``redis+sentinel://``, ``wait_replicas = 1``,
  the master SIGKILLed, Sentinel promotes a replica, the agents carry on.

In both: no slot runs twice; every run the jobs recorded is in the ledger as
succeeded under the token it ran with (nothing acknowledged was lost by the
failover); every due slot is accounted for (succeeded, or recorded missed
while its shard had no master).
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.topology import EmbeddedCluster, ServerProc
from tests.agent_cluster import Cluster, due, job_toml, now_ms
from tests.topologies import own_cluster, own_sentinel

pytestmark = pytest.mark.slow

# A lease longer than a failover: a run whose finish meets the failover still
# records it afterwards (a shorter lease would make it "lost", correctly).
OPTS = 'lease = "10s"\nstart_timeout = "1s"\nwait_replicas = 1\nwait_timeout = "500ms"'
NODES = [f"n{i}" for i in range(1, 6)]
JOB_OPTS = {"starting_deadline": '"2s"', "overlap": '"allow"'}


@pytest.fixture
def agents() -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for c in made:
        c.close()


def check_accounted(c: Cluster, jobs: list[str], first: int, last: int) -> Counter[str]:
    """No duplicates; every run is in the ledger as succeeded with its token; every due slot is there."""
    states: Counter[str] = Counter()
    for job in jobs:
        runs = [line for line in c.lines("start", job)]
        count = Counter(line.slot for line in runs)
        dups = sorted(t for t, n in count.items() if n > 1)
        assert not dups, f"{job}: slots run more than once: {dups}\n{c.describe()}"
        ledger = c.ledger(job)
        for line in runs:
            if first < line.slot <= last:
                entry = ledger.get(line.slot)
                assert entry is not None and entry.state == SlotState.SUCCEEDED, (job, line, entry)
                assert (entry.token, entry.executor) == (line.token, line.node), (entry, line)
        for t in due(1000, first, last):
            entry = ledger.get(t)
            assert entry is not None, f"{job}: due slot {t} is not in the ledger\n{c.describe()}"
            assert entry.state in (SlotState.SUCCEEDED, SlotState.MISSED), (job, entry)
            if entry.state == SlotState.MISSED:
                assert count[t] == 0, (job, t, "ran but recorded missed")
            states[entry.state.value] += 1
    return states


def spread_jobs(cluster: EmbeddedCluster, ns: str, per_master: int) -> dict[int, list[str]]:
    """Job names, ``per_master`` on each master (by the nodes' own slot map)."""
    by_master: dict[int, list[str]] = {m.port: [] for m in cluster.masters()}
    for i in range(500):
        name = f"j{i}"
        port = cluster.master_of(f"qc:{{{ns}:{name}}}:meta").port
        if len(by_master[port]) < per_master:
            by_master[port].append(name)
        if all(len(v) == per_master for v in by_master.values()):
            return by_master
    raise AssertionError(f"no spread found: {by_master}")


def test_cluster_failover_and_slot_migration_lose_nothing_and_run_nothing_twice(
    tmp_path: Path, agents: list[Cluster]
) -> None:
    with own_cluster() as cluster:
        ns = "cl"
        spread = spread_jobs(cluster, ns, 2)
        jobs = sorted(j for names in spread.values() for j in names)
        c = Cluster(tmp_path, cluster.url, 5, namespace=ns, cluster_opts=OPTS)
        agents.append(c)
        cfg = c.config("".join(job_toml(j, "@every 1s", c.out, **JOB_OPTS) for j in jobs))
        for n in NODES:
            c.start(n, cfg)
        c.wait_joined(NODES)
        # Checked from the first slot after every job (so every master) ran once: the ledger's fact.
        first = c.running_since(jobs)

        # 1. Migrate one job's slot from its master to another, held open at both
        #    stages until votes have met it: while the slot is MIGRATING with the
        #    job's keys still on the source, until the source has refused a script
        #    (the new slot's key is "non local": transient, retried); once the keys
        #    moved (the source answers ASK), until the importing master has served
        #    ASKING calls and the job has run a slot that fell due in that window.
        ports = sorted(spread)
        moved_job = spread[ports[0]][0]
        source, target = cluster.server(ports[0]), cluster.server(ports[1])
        migrating_at = now_ms()
        ask_window: dict[str, int] = {}

        def calls(server: ServerProc, command: str, field: str = "calls") -> int:
            client = server.client()
            try:
                return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get(field, 0))
            finally:
                client.close()

        def hold_migrating() -> None:
            refused = calls(source, "evalsha", "failed_calls")
            c.wait(
                "a script to meet the MIGRATING slot",
                lambda: calls(source, "evalsha", "failed_calls") > refused or None,
                20,
            )

        def hold_asking() -> None:
            held_at, asking = now_ms(), calls(target, "asking")
            ran = c.wait(
                f"{moved_job} to run a slot through ASK",
                lambda: (
                    [x for x in c.lines("start", moved_job) if x.slot >= held_at]
                    if calls(target, "asking") >= asking + 5
                    else None
                ),
                30,
            )
            ask_window.update(asking=calls(target, "asking") - asking, slot=ran[0].slot, held=held_at)

        cluster.migrate_slot(
            f"qc:{{{ns}:{moved_job}}}:meta", target, between=hold_migrating, moved=hold_asking
        )
        assert cluster.master_of(f"qc:{{{ns}:{moved_job}}}:meta") is target
        # The ASK window was held open while votes flowed: redirections really happened.
        assert ask_window["asking"] >= 5 and ask_window["slot"] >= ask_window["held"], ask_window
        moved_at = now_ms()
        c.wait(
            f"{moved_job} to run on its new master",
            lambda: any(x.slot > moved_at + 1000 for x in c.lines("start", moved_job)) or None,
            20,
        )

        # 2. SIGKILL the third master; its replica is promoted; restart the
        #    killed node, which rejoins as the new master's replica.
        victim = cluster.server(ports[2])
        replica = cluster.replica_of(victim)
        with c.between_slots(jobs):  # the master dies with no vote, commit or run in flight
            victim.kill(signal.SIGKILL)
            killed_at = now_ms()
        c.wait(
            "the replica to be promoted",
            lambda: cluster.roles().get(replica.port) == "master" or None,
            30,
        )
        promoted_at = now_ms()
        victim.start()
        cluster.await_healthy(30)
        healed_at = now_ms()
        c.wait(
            "runs on the promoted master",
            lambda: (
                all(any(x.slot > healed_at + 1000 for x in c.lines("start", j)) for j in spread[ports[2]])
                or None
            ),
            30,
        )
        c.wait("a few more slots", lambda: now_ms() >= healed_at + 5000 or None, 10)
        last = now_ms() - 2500
        codes = c.stop()
        assert all(code == 0 for code in codes.values()), (codes, c.describe())
        states = check_accounted(c, jobs, first, last)
        # Slots are missed only while a master is failing over and until its
        # replica is back, or while the slot migrates — by any job in both: a
        # node's vote round spans masters, the members hash lives on one of them,
        # and with wait_replicas = 1 a round that includes a job of the
        # replica-less master counts as lost as a whole (WAIT 1 fails there); a
        # round that meets the MIGRATING slot's refused script (transient,
        # retried) is lost the same way for the other jobs it carried, until the
        # nodes' clients have followed MOVED (5 s). Two clean-clone CI runs saw a
        # job other than the moved one miss a slot, by its time most likely between the migration and the
        # kill, where this test allowed only the moved job; the message now
        # starts with the phases' times and the slot's, to place the next one.
        when = dict(
            first=first,
            migrating=migrating_at,
            moved=moved_at,
            killed=killed_at,
            promoted=promoted_at,
            healed=healed_at,
        )
        for job in jobs:
            for t, e in c.ledger(job).items():
                if first < t <= last and e.state == SlotState.MISSED:
                    in_failover = killed_at - 2000 <= t <= healed_at + 3000
                    in_migration = migrating_at - 1000 <= t <= moved_at + 5000
                    assert in_failover or in_migration, (when, t, job, moved_job, e, spread, c.describe())
        # Every slot outside those windows succeeded (above); every job ran again after the healing.
        for job in jobs:
            after = [e for t, e in c.ledger(job).items() if t > healed_at]
            assert any(e.state == SlotState.SUCCEEDED for e in after), (job, states)
        assert killed_at > first


def test_sentinel_failover_agents_carry_on_without_duplicates(tmp_path: Path, agents: list[Cluster]) -> None:
    with own_sentinel() as sentinels:
        c = Cluster(tmp_path, sentinels.url, 5, namespace="se", cluster_opts=OPTS)
        agents.append(c)
        jobs = ["tick", "tock"]
        cfg = c.config("".join(job_toml(j, "@every 1s", c.out, **JOB_OPTS) for j in jobs))
        for n in NODES:
            c.start(n, cfg)
        c.wait_joined(NODES)
        first = c.running_since(jobs)
        c.wait("runs before the failover", lambda: len(c.lines("start")) >= 6 or None, 20)
        old = sentinels.master()
        with c.between_slots(jobs):  # the master dies with no vote, commit or run in flight
            old.kill(signal.SIGKILL)
            killed_at = now_ms()
        # 60 s: a promotion takes seconds, but a sentinel that saw its own timer stall for 2 s
        # (a loaded machine) enters TILT mode and acts on nothing for 30 s; its first attempt
        # after that may abort for want of a replica whose INFO is fresh, and the retry comes
        # 2 x failover-timeout later (a CI run once timed out at 30 s so).
        new = sentinels.await_failover(old, 60)
        promoted_at = now_ms()
        assert new is not old
        c.wait(
            "every job to run again after the failover",
            lambda: all(any(x.slot > promoted_at + 1000 for x in c.lines("start", j)) for j in jobs) or None,
            30,
        )
        c.wait("a few more slots", lambda: now_ms() >= promoted_at + 5000 or None, 10)
        last = now_ms() - 2500
        # Every node lived through the failover (reconnected through the sentinels) and left cleanly.
        codes = c.stop()
        assert all(code == 0 for code in codes.values()), (codes, c.describe())
        states = check_accounted(c, jobs, first, last)
        for job in jobs:
            for t, e in c.ledger(job).items():
                if first < t <= last and e.state == SlotState.MISSED:
                    assert killed_at - 3000 <= t <= promoted_at + 3000, (job, e)
        for job in jobs:
            after = [e for t, e in c.ledger(job).items() if t > promoted_at]
            assert any(e.state == SlotState.SUCCEEDED for e in after), (job, states)
