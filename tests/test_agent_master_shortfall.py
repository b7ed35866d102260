"""One Redis Cluster master without its replica stops its own jobs, not the scheduler.

Real agent processes on a real 3-master Redis Cluster with a replica each
(``wait_replicas = 1``), one job on each master. The replica of one master
is killed: every write there now falls short of ``WAIT`` (the store names
the master). Before the fix each node took that for its own state and
stopped voting for every job, so all three nodes halted every job at once;
and a replicated write to another master ended the state while the bad
master still fell short, so it flapped. Now (quorum_cron/agent/shortmasters.py):

* the jobs on the two healthy masters keep running;
* the job on the bad master is not voted; its slots are recorded missed
  with the shortfall, naming the master;
* each node says it once (one line, one ``store_unavailable`` alert naming
  the master) and keeps voting ("not voting" is never said);
* ``quorum_cron_store_masters_unreplicated`` reads 1 meanwhile, and the
  held-back votes, which never reach the store, are not counted as failed
  store calls (``store_errors``: at most the one round that met the
  shortfall; each ``retry_ms`` counted one before);
* with the replica restarted, one "replicated again" line per node and the
  job runs again.

Every wait is for an event the agents or the servers report. The lines,
alerts and counts are those of the master without its replica: on this
2-core machine under a full test run a healthy master's replica now and
then misses the test's 50 ms ``WAIT`` too, and the node rightly says that
master fell short and, a moment later, replicated again (seen as a third
line in CI on 2026-12-08, and reproduced with four copies of this test at
once). That is the behaviour under test, of another master, not a defect.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.procs import await_until
from quorum_cron.store.embedded.topology import EmbeddedCluster
from tests.agent_cluster import Cluster, free_port, job_toml, now_ms, scrape
from tests.topologies import connected_replicas, own_cluster

pytestmark = pytest.mark.slow

NS = "pm"
NODES = ["n1", "n2", "n3"]
OPTS = 'wait_replicas = 1\nwait_timeout = "50ms"'
JOB_OPTS = {"starting_deadline": '"500ms"', "overlap": '"allow"'}
WAIT_SHORT = "WAIT: 0 of 1 replicas acknowledged within 50 ms"
SHORT = f"not replicated as required: {WAIT_SHORT}"


def _one_job_per_master(cluster: EmbeddedCluster) -> dict[int, str]:
    """A job name per master (its port), by the nodes' own slot map."""
    by_port: dict[int, str] = {}
    for i in range(500):
        by_port.setdefault(cluster.master_of(f"qc:{{{NS}:j{i}}}:meta").port, f"j{i}")
        if len(by_port) == len(cluster.masters()):
            return by_port
    raise AssertionError(f"no job found for every master: {by_port}")


def _since(c: Cluster, name: str, mark: int, event: str, text: str = "") -> list[dict[str, object]]:
    return [e for e in c.nodes[name].events[mark:] if e.get("event") == event and text in str(e.get("msg"))]


def _said_short(c: Cluster, name: str, mark: int, master: str) -> list[dict[str, object]]:
    """The node's lines saying that master's writes fall short (whatever it does about it: before
    the fix, a "trust" line saying "not voting")."""
    said = f"{WAIT_SHORT} on master {master}"
    events = c.nodes[name].events[mark:]
    return [e for e in events if e.get("event") in ("store", "trust") and said in str(e.get("msg"))]


def _of_master(c: Cluster, name: str, mark: int, event: str, master: str) -> list[dict[str, object]]:
    """The node's ``event`` lines since ``mark`` about ``master`` alone (see the module docstring)."""
    return _since(c, name, mark, event, f" to master {master} ")


def _other_episodes(c: Cluster, name: str, master: str) -> int:
    """How many times since it started the node said another master than ``master`` fell short:
    each episode's first vote round is a failed store call (the rest are held back, unsent)."""
    said = _since(c, name, 0, "store", " not replicated: ")
    return len([e for e in said if f" to master {master} " not in str(e["msg"])])


def _ran_after(c: Cluster, jobs: list[str], after: int, count: int) -> bool:
    """Every job in ``jobs`` has ``count`` slots succeeded that fell due after ``after``."""
    return all(len([t for t in c.succeeded(j) if t > after]) >= count for j in jobs)


def test_a_master_without_its_replica_stops_only_the_jobs_on_it(tmp_path: Path) -> None:
    with own_cluster() as cluster:
        jobs = _one_job_per_master(cluster)
        # The bad master is one that holds no cluster-wide key of the namespace (members, alerts):
        # only the job on it is affected, as the test says.
        wide = cluster.master_of(f"qc:{{{NS}}}:members").port
        bad_port = next(p for p in sorted(jobs) if p != wide)
        bad_job = jobs[bad_port]
        good = [j for p, j in sorted(jobs.items()) if p != bad_port]
        master = f"127.0.0.1:{bad_port}"
        replica = cluster.replica_of(cluster.server(bad_port))

        c = Cluster(tmp_path, cluster.url, len(NODES), namespace=NS, cluster_opts=OPTS)
        try:
            cfg = c.config(
                "".join(job_toml(j, "@every 1s", c.out, **JOB_OPTS) for j in sorted(jobs.values()))
            )
            port = free_port()
            for name in NODES:
                extra = ("--metrics-port", str(port), "--metrics-addr", "127.0.0.1") if name == "n1" else ()
                c.start(name, cfg, *extra)
            c.wait_joined(NODES)
            c.running_since(list(jobs.values()))
            mark = {name: len(c.nodes[name].events) for name in NODES}

            replica.kill()
            await_until(
                f"{master} to count no replica", lambda: connected_replicas(cluster, bad_port) == 0, 30.0, 0.1
            )
            # Every node says so (how: checked below); from then on no vote reaches that master.
            begun = [
                c.wait(
                    f"{name} to say {master} falls short",
                    partial(_said_short, c, name, mark[name], master),
                    15,
                )[0]
                for name in NODES
            ]
            began = max(int(str(e["ts"])) for e in begun)

            # The jobs on the healthy masters keep running ...
            c.wait(
                f"{good} to keep running while {master} has no replica",
                lambda: _ran_after(c, good, began + 1_000, 3),
                20,
            )

            # ... the one on the bad master is recorded missed, saying why and where.
            def missed() -> list[int] | None:
                ledger = c.ledger(bad_job)
                late = [t for t, e in ledger.items() if t > began + 1_000 and e.state == SlotState.MISSED]
                return late if len(late) >= 3 else None

            late = c.wait(f"{bad_job} to be recorded missed", missed, 20)
            ledger = c.ledger(bad_job)
            for t in late:
                assert SHORT in ledger[t].reason and f"on master {master}" in ledger[t].reason, ledger[t]
                # (No store refused these votes: they were never sent. It said "store refused".)
                assert "could not vote: vote not sent: its master's" in ledger[t].reason, ledger[t]
            assert not [t for t in c.succeeded(bad_job) if t > began + 1_000], c.describe()
            # (Awaited, not sampled: a healthy master's passing shortfall counts while it lasts.)
            c.wait(
                "the gauge to count the one master without its replica",
                lambda: scrape(port)["quorum_cron_store_masters_unreplicated"] == 1,
                15,
            )
            metrics = scrape(port)
            # (The round that met the shortfall failed as a call; the votes held back since, one
            # round per retry_ms over three missed slots, never reached the store.)
            bound = 2 + _other_episodes(c, "n1", master)
            assert metrics.get('quorum_cron_store_errors_total{op="vote"}', 0) <= bound, metrics

            # Each node said it once, naming the master, with one alert, and never stopped voting.
            for name in NODES:
                said = _since(c, name, mark[name], "store", f"master {master} not replicated")
                assert len(said) == 1, c.describe()
                assert WAIT_SHORT in str(said[0]["msg"]), said
                alerts = _of_master(c, name, mark[name], "alert", master)
                assert len(alerts) == 1, alerts
                assert f"store writes to master {master} not replicated" in str(alerts[0]["msg"]), alerts
                assert not _since(c, name, mark[name], "trust", "not voting"), c.describe()

            # The replica back: one line per node, and the job runs again.
            replica.start()
            for name in NODES:
                c.wait(
                    f"{name} to see {master} replicated again",
                    partial(_since, c, name, mark[name], "store", f"master {master} replicated again"),
                    30,
                )
            back = now_ms()
            c.wait(f"{bad_job} to run again", lambda: _ran_after(c, [bad_job], back, 1), 20)
            c.wait(
                "the gauge to count no master short",
                lambda: scrape(port)["quorum_cron_store_masters_unreplicated"] == 0,
                15,
            )
            for name in NODES:
                lines = [str(e["msg"]) for e in _of_master(c, name, mark[name], "store", master)]
                every = "\n".join(str(e["msg"]) for e in _since(c, name, mark[name], "store"))
                assert len(lines) == 2, every
                assert lines[1].startswith(f"store writes to master {master} replicated again"), every
                assert not _since(c, name, mark[name], "trust"), c.describe()
        finally:
            c.close()
