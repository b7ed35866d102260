"""A config reload swaps a changed job into a running agent, in process on a real redis-server.

What SIGHUP does (:meth:`ConfigReload.reload` on the loop's thread, as the
signal handler calls it), with a job whose command changes: the run going
at the reload finishes under the old command and is recorded; the slots
after it run the new command and are voted under the new spec hash; the
node never restarts. Each wait is on a fact (a line the job wrote, a ledger
entry), never a sleep that hopes.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import redis

from quorum_cron.agent.build import agent_job, agent_settings
from quorum_cron.agent.reload import ConfigReload
from quorum_cron.agent.runtime import Agent
from quorum_cron.config.settings import AUTO, ClusterConfig, Config, JobSpec
from quorum_cron.core.model import SlotState
from quorum_cron.store.redis import RedisStore
from tests.agent_inproc import run_agent
from tests.polling import until


def lines(path: Path) -> list[tuple[str, int]]:
    """``(word, slot)`` per line the job wrote."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        word, slot = line.split()
        out.append((word, int(slot)))
    return out


def test_sighup_with_a_changed_command_runs_the_new_one_from_the_next_slot(
    redis_client: redis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "runs.txt"
    cluster = ClusterConfig(namespace="reload", size=AUTO, members=("a",), heartbeat_ms=200, lease_ms=5_000)

    def spec(script: str) -> JobSpec:
        return JobSpec.create("tick", "@every 1s", command=("sh", "-c", script), starting_deadline_ms=900)

    old = spec(f"echo start $QUORUM_CRON_SLOT_MS >> {out}; sleep 0.5; echo end $QUORUM_CRON_SLOT_MS >> {out}")
    new = spec(f"echo new $QUORUM_CRON_SLOT_MS >> {out}")
    assert old.spec_hash != new.spec_hash
    store = RedisStore(redis_client, "reload")
    agent = Agent(agent_settings(cluster, "a"), [agent_job(old)], store)
    reloader = ConfigReload(
        Config(cluster, (old,), source="cluster.toml"),
        lambda: Config(cluster, (new,), source="cluster.toml"),
        jobs=agent.jobs,
        alerts=agent.alerts,
        runs=agent.runs,
        agent=agent,
    )
    verdicts: list[str] = []
    in_flight: list[int] = []

    def running_now() -> bool:
        seen = lines(out)
        started = {s for w, s in seen if w == "start"}
        ended = {s for w, s in seen if w == "end"}
        going = sorted(started - ended)
        if len(started) >= 2 and going and agent.runs.running("tick", going[-1]):
            in_flight.append(going[-1])
            return True
        return False

    async def scenario() -> None:
        await until("an old run going (after a first one ended)", running_now)
        verdicts.append(reloader.reload())  # what the SIGHUP handler does, on the loop's thread
        await until("two runs of the new command", lambda: [w for w, _ in lines(out)].count("new") >= 2)
        await until("the run going at the reload recorded", lambda: ledger_state(in_flight[0]) is not None)

    def ledger_state(slot: int) -> SlotState | None:
        view = store.slot("tick", slot)
        return view.state if view.state in (SlotState.SUCCEEDED, SlotState.FAILED) else None

    with caplog.at_level(logging.INFO, logger="quorum_cron.agent"):
        run_agent(agent, scenario)
    assert verdicts == ["applied"]
    seen = lines(out)
    going = in_flight[0]
    # The run going at the reload kept its old command to the end, and was recorded succeeded.
    assert ("end", going) in seen and store.slot("tick", going).state == SlotState.SUCCEEDED
    old_slots = {s for w, s in seen if w in ("start", "end")}
    new_slots = {s for w, s in seen if w == "new"}
    assert max(old_slots) == going < min(new_slots), seen
    # Votes follow the definition: the old hash up to the reload, the new one after.
    assert store.slot("tick", going).spec_hash == old.spec_hash
    for slot in new_slots:
        view = store.slot("tick", slot)
        assert (view.state, view.spec_hash) == (SlotState.SUCCEEDED, new.spec_hash), view
    # Every slot after the in-flight one ran the new command (none skipped or missed by the swap).
    ledger = {v.fire_ms: v for v in store.ledger("tick", 100)}
    after = sorted(t for t in ledger if going < t <= max(new_slots))
    assert after == sorted(new_slots), (after, sorted(new_slots))
    reloaded = [r.getMessage() for r in caplog.records if getattr(r, "qc_event", "") == "config_reloaded"]
    assert reloaded == ["cluster.toml reloaded: redefined: tick"], reloaded
    assert not [r for r in caplog.records if getattr(r, "qc_event", "") == "kill"]
    stops = [r.getMessage() for r in caplog.records if getattr(r, "qc_event", "") == "stopping"]
    assert stops and all(m.startswith("test over") for m in stops), stops  # no restart for a job change


def test_a_reload_adds_a_job_that_runs_and_removes_one_whose_running_slot_finishes(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    cluster = ClusterConfig(namespace="swap", size=AUTO, members=("a",), heartbeat_ms=200, lease_ms=5_000)

    def spec(name: str, schedule: str, script: str) -> JobSpec:
        return JobSpec.create(name, schedule, command=("sh", "-c", script), starting_deadline_ms=900)

    gone = spec(
        "gone", "@every 1s", f"echo start $QUORUM_CRON_SLOT_MS >> {out}; sleep 0.5; echo end 0 >> {out}"
    )
    added = spec("added", "@every 1h", f"echo new $QUORUM_CRON_SLOT_MS >> {out}")
    store = RedisStore(redis_client, "swap")
    agent = Agent(agent_settings(cluster, "a"), [agent_job(gone)], store, notices=True)
    reloader = ConfigReload(
        Config(cluster, (gone,)),
        lambda: Config(cluster, (added,)),
        jobs=agent.jobs,
        alerts=agent.alerts,
        runs=agent.runs,
        agent=agent,
    )
    in_flight: list[int] = []
    triggered: list[int] = []

    def gone_running() -> bool:
        going = sorted(s for w, s in lines(out) if w == "start" and agent.runs.running("gone", s))
        in_flight.extend(going[-1:])
        return bool(going)

    async def scenario() -> None:
        await until("a run of the job to remove going", gone_running)
        assert reloader.reload() == "applied"
        assert sorted(agent.jobs) == ["added"] and agent.core.job_names == ("added",)
        await until(
            "the removed job's run recorded", lambda: store.slot("gone", in_flight[0]).finished_ms > 0
        )
        triggered.append(store.trigger("added", "op"))  # heard on the notice channel, like any job's
        await until("the added job's triggered run", lambda: ("new", triggered[0]) in lines(out))
        await until(
            "the triggered run recorded",
            lambda: store.slot("added", triggered[0]).state == SlotState.SUCCEEDED,
        )

    run_agent(agent, scenario)
    assert store.slot("gone", in_flight[0]).state == SlotState.SUCCEEDED  # its old command ran to the end
    starts = [s for w, s in lines(out) if w == "start"]
    assert max(starts) == in_flight[0], starts  # no slot of the removed job after the reload
    assert [v.fire_ms for v in store.ledger("gone", 100) if v.fire_ms > in_flight[0]] == []
