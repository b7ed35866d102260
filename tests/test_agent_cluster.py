"""Real agent processes on a real redis-server: every due slot runs exactly once, faults included.

Ground truth is what the jobs append to a file (``examples/record_slot.sh``);
the ledger must agree with it. Each test waits for log events, ledger
entries or ground-truth lines with bounded deadlines; a fault is injected
between slots as the store shows them (``Cluster.between_slots``), never at
a time of day the test hopes is quiet.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from quorum_cron.store.base import LedgerEntry, SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import RECORD, Cluster, OwnedRedis, due, job_toml, now_ms

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster_factory(tmp_path: Path, redis_server: EmbeddedRedis) -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for c in made:
        c.close()


def make(made: list[Cluster], tmp_path: Path, url: str, size: int, ns: str, opts: str = "") -> Cluster:
    c = Cluster(tmp_path, url, size, namespace=ns, cluster_opts=opts)
    made.append(c)
    return c


def ledger_entry(c: Cluster, slot: int, state: SlotState, job: str = "slow") -> LedgerEntry | None:
    entry = c.ledger(job).get(slot)
    return entry if entry is not None and entry.state == state else None


def check_exactly_once(c: Cluster, jobs: dict[str, int], first: int, last: int) -> int:
    """Every slot due in (first, last] ran exactly once, and the ledger says succeeded for exactly those."""
    total = 0
    for job, period in jobs.items():
        want = due(period, first, last)
        runs = Counter(line.slot for line in c.lines("start", job))
        dups = sorted(t for t, n in runs.items() if n > 1)
        assert not dups, f"{job}: slots run more than once: {dups}\n{c.describe()}"
        missing = [t for t in want if runs[t] == 0]
        ledger = c.ledger(job)
        said = {t: ledger.get(t) for t in missing}
        assert not missing, f"{job}: due slots that never ran: {missing}; the ledger: {said}\n{c.describe()}"
        for t in want:
            entry = ledger.get(t)
            assert entry is not None and entry.state == SlotState.SUCCEEDED, (job, t, entry)
            started = [line for line in c.lines("start", job) if line.slot == t]
            assert entry.token == started[0].token and entry.executor == started[0].node, (entry, started)
        # Nothing ran in the window that the ledger does not know of.
        window = {t for t in runs if first < t <= last}
        assert window <= set(ledger), window - set(ledger)
        total += len(want)
    return total


@pytest.mark.parametrize("size", [3, 5])
def test_every_due_slot_runs_exactly_once_with_a_minority_killed(
    size: int, tmp_path: Path, redis_server: EmbeddedRedis, cluster_factory: list[Cluster]
) -> None:
    c = make(
        cluster_factory, tmp_path, redis_server.url, size, f"eo{size}", 'lease = "3s"\nstart_timeout = "1s"'
    )
    jobs = {"tick": 1000, "tock": 1000}
    # overlap = "allow": with the default ("forbid") a slot is skipped, correctly, while the run
    # of the slot before it is still going, and on a loaded machine a 0 s job's run (vote, start,
    # bash, finish) can take more than its 1 s period. Overlap has tests of its own; this one
    # is about every slot running exactly once.
    cfg = c.config(
        job_toml("tick", "@every 1s", c.out, starting_deadline='"2s"', overlap='"allow"')
        + job_toml("tock", "@every 1s", c.out, starting_deadline='"2s"', overlap='"allow"')
    )
    names = [f"n{i}" for i in range(1, size + 1)]
    for n in names:
        c.start(n, cfg)
    c.wait_joined(names)
    # Checked from the first slot after every job ran once (the ledger's fact that a quorum
    # votes and executors start), not from a time after the last node joined.
    first = c.running_since(jobs)
    minority = names[-(size - 1) // 2 :]  # 1 of 3, 2 of 5
    target_end = first + 33_000
    kill_times = [first + (i + 1) * 30_000 // (len(minority) + 1) for i in range(len(minority))]
    for victim, at in zip(minority, kill_times, strict=True):
        c.wait(f"time to kill {victim}", lambda at=at: now_ms() >= at or None, 40)  # type: ignore[misc]
        # Killed while it holds no slot: no vote of its own pending, nothing committed to it or running.
        with c.between_slots(jobs, [victim], involving=victim):
            c.signal(victim, signal.SIGKILL)
    c.wait("the run to end", lambda: now_ms() >= target_end or None, 40)
    last = now_ms() - 1500
    survivors = [n for n in names if n not in minority]
    codes = c.stop(survivors)
    assert all(code == 0 for code in codes.values()), (codes, c.describe())
    slots = check_exactly_once(c, jobs, first, last)
    assert slots >= 60
    # Work spreads over the nodes that were alive the whole time.
    by_node = Counter(line.node for line in c.lines("start"))
    assert all(by_node[n] > 0 for n in survivors), by_node


@pytest.mark.parametrize("delivery", ["at-most-once", "at-least-once"])
def test_paused_executor_is_fenced(
    delivery: str, tmp_path: Path, redis_server: EmbeddedRedis, cluster_factory: list[Cluster]
) -> None:
    c = make(
        cluster_factory,
        tmp_path,
        redis_server.url,
        3,
        f"pause-{delivery}",
        'lease = "1500ms"\nstart_timeout = "1s"',
    )
    cfg = c.config(
        job_toml("slow", "@every 10s", c.out, secs=4, delivery=f'"{delivery}"', starting_deadline='"9s"')
    )
    names = ["n1", "n2", "n3"]
    for n in names:
        c.start(n, cfg)
    c.wait_joined(names)
    # The first slot may be a catch-up slot from before the nodes started; any slot will do.
    first = c.wait("a slow run to start", lambda: c.lines("start", "slow"), 75)[0]
    victim = first.node
    # Pause the whole machine: the agent and its job's process group.
    c.signal(victim, signal.SIGSTOP)
    os.killpg(first.pid, signal.SIGSTOP)
    try:
        if delivery == "at-most-once":
            entry = c.wait(
                "the slot to be declared lost", lambda: ledger_entry(c, first.slot, SlotState.LOST), 20
            )
            assert first.node in entry.reason
        else:
            rerun = c.wait(
                "another node to re-run the slot",
                lambda: [x for x in c.lines("start", "slow") if x.slot == first.slot and x.node != victim],
                20,
            )[0]
            assert rerun.token > first.token
    finally:
        os.killpg(first.pid, signal.SIGCONT)
        c.signal(victim, signal.SIGCONT)
    # The stale executor learns it lost the slot: its renew or finish is refused, its job stopped.
    c.wait(
        f"{victim} to be refused",
        lambda: c.nodes[victim].logged("renew_refused") or c.nodes[victim].logged("finish_refused"),
        20,
    )
    if delivery == "at-least-once":
        entry = c.wait("the re-run to succeed", lambda: ledger_entry(c, first.slot, SlotState.SUCCEEDED), 20)
        assert entry.executor != victim and entry.token > first.token
    starts = [x for x in c.lines("start", "slow") if x.slot == first.slot]
    if delivery == "at-most-once":
        assert len(starts) == 1, starts
        entry = c.ledger("slow")[first.slot]
        assert entry.state == SlotState.LOST and entry.token == first.token
    else:
        assert len(starts) == 2 and starts[1].token > starts[0].token, starts
        # Only the current token's run may have finished normally... the stale one was killed.
        ends = [x for x in c.lines("end", "slow") if x.slot == first.slot]
        assert any(x.token == starts[1].token for x in ends)
    assert all(code == 0 for code in c.stop().values()), c.describe()


def test_redis_outage_no_duplicates_and_missed_slots_recorded(
    tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    # A server this test owns, restarted on the same port (the embedded one picks a new port);
    # its start fails with the server's own words if the port was taken meanwhile.
    server = OwnedRedis(tmp_path)
    server.start()
    try:
        c = make(cluster_factory, tmp_path, server.url, 3, "outage", 'lease = "3s"\nstart_timeout = "1s"')
        # overlap = "allow": every slot after the outage must run, even one due while the
        # run before it is still going (see the minority test).
        cfg = c.config(job_toml("tick", "@every 1s", c.out, starting_deadline='"1s"', overlap='"allow"'))
        for n in ("n1", "n2", "n3"):
            c.start(n, cfg)
        c.wait_joined(["n1", "n2", "n3"])
        c.wait("runs before the outage", lambda: len(c.lines("start", "tick")) >= 3 or None, 20)
        with c.between_slots(["tick"]):  # no vote, commit or run for Redis to take down with it
            server.kill()
            down_at = now_ms()
        c.wait(
            "every node to notice",
            lambda: all(n.logged("abstain") for n in c.nodes.values()) or None,
            15,
        )
        c.wait("a 4 s outage", lambda: now_ms() >= down_at + 4000 or None, 10)
        server.start()
        up_at = now_ms()
        c.wait(
            "runs after the outage",
            lambda: len([x for x in c.lines("start", "tick") if x.slot > up_at + 1000]) >= 3 or None,
            30,
        )
        outage = due(1000, down_at + 500, up_at - 2500)
        c.wait(
            "the outage slots to be recorded missed",
            lambda: all(t in c.ledger("tick") for t in outage) or None,
            20,
        )
        last = now_ms() - 1500
        assert all(code == 0 for code in c.stop().values()), c.describe()
        runs = Counter(x.slot for x in c.lines("start", "tick"))
        assert max(runs.values()) == 1, runs
        ledger = c.ledger("tick")
        for t in outage:
            assert runs[t] == 0
            assert ledger[t].state == SlotState.MISSED and "store unreachable" in ledger[t].reason, ledger[t]
        # Once the nodes are back (reconnect, the deadline and start timeout of
        # slots decided in the first moments), every slot due ran exactly once.
        check_exactly_once(c, {"tick": 1000}, up_at + 3000, last)
    finally:
        server.kill()


def test_a_node_with_a_different_definition_cannot_fire_it(
    tmp_path: Path, redis_server: EmbeddedRedis, cluster_factory: list[Cluster]
) -> None:
    c = make(cluster_factory, tmp_path, redis_server.url, 3, "mismatch", 'start_timeout = "1s"')
    good = c.config(job_toml("tick", "@every 1s", c.out, mark="A", starting_deadline='"1s"'))
    odd = c.config(job_toml("tick", "@every 1s", c.out, mark="B", starting_deadline='"1s"'), name="odd.toml")
    c.start("n1", good)
    c.start("n3", odd)
    c.wait_joined(["n1", "n3"])
    # Two nodes, two definitions: no quorum on either, so nothing runs and the slots are missed.
    t0 = now_ms()
    c.wait(
        "a missed slot",
        lambda: [e for t, e in c.ledger("tick").items() if t > t0 and e.state == SlotState.MISSED],
        15,
    )
    c.wait("the mismatch alert", lambda: c.nodes["n1"].logged("alert", kind="spec_mismatch"), 10)
    assert c.lines("start", "tick") == []
    # A second node with definition A makes a quorum for A; B still never runs.
    c.start("n2", good)
    c.wait_joined(["n2"])
    c.wait("runs of definition A", lambda: len(c.lines("start", "tick")) >= 3 or None, 20)
    assert {x.mark for x in c.lines("start", "tick")} == {"A"}
    assert {x.node for x in c.lines("start", "tick")} <= {"n1", "n2"}
    c.stop()


def test_second_process_with_the_same_node_id_is_refused(
    tmp_path: Path, redis_server: EmbeddedRedis, cluster_factory: list[Cluster]
) -> None:
    c = make(cluster_factory, tmp_path, redis_server.url, 3, "dupid")
    cfg = c.config(job_toml("tick", "@every 1m", c.out))
    c.start("n1", cfg)
    c.wait_joined(["n1"])
    twin = subprocess.run([*_agent_cmd(cfg), "--node-id", "n1"], capture_output=True, timeout=30, text=True)
    assert twin.returncode == 3, twin
    assert "node id 'n1' is held by another live process" in twin.stderr
    assert c.stop()["n1"] == 0


def test_a_node_killed_and_restarted_at_once_waits_out_its_old_entry_and_joins(
    tmp_path: Path, redis_server: EmbeddedRedis, cluster_factory: list[Cluster]
) -> None:
    """SIGKILL (the OOM killer, a crash) leaves the process's heartbeat entry live for its TTL, and
    a supervisor restarts sooner (the shipped unit: 2 s against 3 heartbeats of 2 s). The new
    process used to exit 3 at once, which the unit does not restart: the node stayed down."""
    c = make(cluster_factory, tmp_path, redis_server.url, 3, "killed")
    cfg = c.config(job_toml("tick", "@every 1m", c.out))
    # (An entry that lives 12 s: the restart comes well inside it, however slow the machine.)
    cfg.write_text(cfg.read_text().replace('heartbeat = "500ms"', 'heartbeat = "4s"'))
    old = c.start("n1", cfg)
    c.wait_joined(["n1"])
    os.killpg(old.proc.pid, signal.SIGKILL)
    old.proc.wait(timeout=10)
    held = [m.incarnation for m in c.store.members() if m.node == "n1"]
    assert held, "the killed process's entry should still be live"
    new = c.start("n1", cfg)
    c.wait_joined(["n1"], timeout=60)
    (waited,) = [e for e in new.logged("membership") if "asking again in" in str(e.get("msg", ""))]
    assert "node id 'n1' is held by another live process" in str(waited["msg"]), waited
    assert [m.incarnation for m in c.store.members() if m.node == "n1"] != held
    assert c.stop()["n1"] == 0


def test_sigterm_lets_the_running_job_finish_and_records_it(
    tmp_path: Path, redis_server: EmbeddedRedis, cluster_factory: list[Cluster]
) -> None:
    c = make(cluster_factory, tmp_path, redis_server.url, 1, "term", 'lease = "2s"')
    cfg = c.config(job_toml("slow", "@every 1m", c.out, secs=2, starting_deadline='"59s"'))
    c.start("n1", cfg)
    run = c.wait("the job to start", lambda: c.lines("start", "slow"), 75)[0]
    c.signal("n1", signal.SIGTERM)
    assert c.nodes["n1"].proc.wait(timeout=20) == 0, c.describe()
    assert [x.slot for x in c.lines("end", "slow")] == [run.slot]
    entry = c.ledger("slow")[run.slot]
    assert entry.state == SlotState.SUCCEEDED and entry.token == run.token
    assert [m.node for m in c.store.members()] == []


def test_a_failed_run_is_retried_under_a_new_token(
    tmp_path: Path, redis_server: EmbeddedRedis, cluster_factory: list[Cluster]
) -> None:
    c = make(cluster_factory, tmp_path, redis_server.url, 3, "retry", 'start_timeout = "1s"')
    flag = tmp_path / "failed-once"
    # Appends its start line, then fails the first time it ever runs.
    record = f"{RECORD} {c.out} 0 -; test -e {flag} || {{ touch {flag}; exit 1; }}"
    cfg = c.config(
        "[[jobs]]\n"
        'name = "flaky"\n'
        'schedule = "@every 1m"\n'
        f"shell = '{record}'\n"
        'starting_deadline = "59s"\n'
        "retries = 2\n"
        'retry_backoff = "500ms"\n'
    )
    for n in ("n1", "n2", "n3"):
        c.start(n, cfg)
    c.wait_joined(["n1", "n2", "n3"])
    first = c.wait("the first run", lambda: c.lines("start", "flaky"), 75)[0]
    entry = c.wait(
        "the retry to succeed", lambda: ledger_entry(c, first.slot, SlotState.SUCCEEDED, "flaky"), 20
    )
    starts = [x for x in c.lines("start", "flaky") if x.slot == first.slot]
    assert len(starts) == 2 and starts[1].token > starts[0].token, starts
    assert (entry.token, entry.executor) == (starts[1].token, starts[1].node)
    history = [e for e in c.store.ledger("flaky", 10) if e.fire_ms == first.slot]
    assert [e.state for e in history] == [SlotState.SUCCEEDED, SlotState.RETRYING], history
    assert entry.started_ms - history[1].finished_ms >= 500  # the backoff was kept
    assert all(code == 0 for code in c.stop().values()), c.describe()


def _agent_cmd(cfg: Path) -> list[str]:
    from tests.agent_cluster import AGENT

    return [*AGENT, "--config", str(cfg), "--log-json"]


def test_run_local_runs_during_an_outage_and_is_recorded_when_redis_returns(
    tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    server = OwnedRedis(tmp_path)
    server.start()
    try:
        c = make(cluster_factory, tmp_path, server.url, 1, "local")
        job = job_toml(
            "tick", "@every 2s", c.out, secs=0.5, starting_deadline='"3s"', on_store_unavailable='"run-local"'
        )
        c.start("n1", c.config(job))
        c.wait("a run through the store", lambda: c.succeeded("tick"), 20)
        with c.between_slots(["tick"]):
            server.kill()
        # The slot due while Redis is down runs here, alone (token 0: no store, no token).
        local = c.wait("a local run", lambda: [x for x in c.lines("start", "tick") if x.token == 0], 10)[0]
        server.start()
        # Redis is back inside the slot's deadline: the node votes, the slot is committed to it,
        # and the local run (finished or still going) is recorded as the slot's result, not re-run.
        entry = c.wait(
            "the local run in the ledger",
            lambda: ledger_entry(c, local.slot, SlotState.SUCCEEDED, "tick"),
            15,
        )
        assert entry.detail.startswith("ran locally while the store was unreachable: exit 0"), entry
        assert entry.executor == "n1" and entry.token > 0
        c.wait(
            "a run through the store again",
            lambda: [x for x in c.lines("start", "tick") if x.token > 0 and x.slot > local.slot],
            10,
        )
        assert c.stop() == {"n1": 0}, c.describe()
        runs = Counter(x.slot for x in c.lines("start", "tick"))
        assert runs[local.slot] == 1 and max(runs.values()) == 1, runs
        assert c.nodes["n1"].logged("run_local", job="tick", slot=local.slot)
    finally:
        server.kill()
