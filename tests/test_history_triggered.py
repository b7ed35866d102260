"""``history`` marks the slots an operator triggered, from the job's audit stream, on a real Redis.

``quorum-cron trigger JOB`` makes the store pick the slot (the job at store
time, in ms) and audit it (``action=trigger``, ``by``, ``detail=<fire ms>``);
neither the slot nor its ledger entry says it was triggered, so ``history``
showed a manual run exactly as a scheduled one. Now the ``triggered`` column
(table, plain) and the ``triggered`` / ``triggered_by`` fields (``--json``)
say which ran because of whom. Values read from Redis are untrusted: a
forged or garbled audit entry harms only the entry it names, a name with
control characters is escaped, and a job whose audit is not a stream is
a warning with its entries untold while the others are still marked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis
from click.testing import CliRunner

from quorum_cron.commands.history import history
from quorum_cron.core.model import VoteRequest, VoteStatus
from quorum_cron.store import keys as store_keys
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.triggered import AUDIT_READ

NS = "trighist"
T0 = 1_800_000_000_000  # on the hour


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _run(store: RedisStore, clock: Clock, job: str, fire: int, ok: bool = True) -> None:
    """Two of three nodes vote the slot, it starts and finishes: one ledger entry."""
    clock.now = fire + 10
    res = store.vote([VoteRequest(job, fire, n, "h", 2, 250, 60_000) for n in ("n1", "n2")])[-1]
    assert res.status == VoteStatus.COMMITTED, res
    view = res.slot
    clock.now = fire + 40
    assert store.start(job, fire, view.executor, view.token, 60_000).ok
    clock.now = fire + 900
    assert store.finish(job, fire, view.executor, view.token, ok, "exit 0").ok


def _config(tmp_path: Path, url: str) -> str:
    path = tmp_path / "c.toml"
    jobs = "".join(
        f'[[jobs]]\nname = "{j}"\nschedule = "@hourly"\ncommand = ["true"]\n\n' for j in ("j", "k")
    )
    path.write_text(f'[cluster]\nname = "{NS}"\nsize = 3\nredis_url = "{url}"\n\n{jobs}')
    return str(path)


def _history(cfg: str, *args: str) -> Any:
    return CliRunner().invoke(history, ["--config", cfg, *args], env={"COLUMNS": "250"})


def _slots(store: RedisStore, clock: Clock) -> dict[str, int]:
    """j: a scheduled slot, one triggered by alice, one after; k: one triggered by bob."""
    _run(store, clock, "j", T0)
    clock.now = T0 + 61_234
    manual = store.trigger("j", "alice")
    assert manual == T0 + 61_234
    _run(store, clock, "j", manual, ok=False)
    _run(store, clock, "j", T0 + 3_600_000)
    clock.now = T0 + 120_007
    other = store.trigger("k", "bob")
    _run(store, clock, "k", other)
    return {"scheduled": T0, "manual": manual, "next": T0 + 3_600_000, "k": other}


def test_history_marks_a_triggered_slot_and_by_whom_in_every_format(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_client, NS, clock=(clock := Clock(T0)))
    fires = _slots(store, clock)
    cfg = _config(tmp_path, redis_server.url)

    res = _history(cfg, "j", "--json")
    assert res.exit_code == 0, res.output
    docs = {d["slot_ms"]: d for d in map(json.loads, res.output.splitlines())}
    assert docs[fires["manual"]]["triggered"] is True
    assert docs[fires["manual"]]["triggered_by"] == ["alice"]
    for name in ("scheduled", "next"):
        assert docs[fires[name]]["triggered"] is False, name
        assert docs[fires[name]]["triggered_by"] == [], name

    res = _history(cfg, "j", "--format", "plain")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "triggered" in lines[1].split("  ")
    row = next(line for line in lines if "2027-01-15 08:01:01.234Z" in line)
    assert " by alice " in row and "failed" in row
    for label in ("2027-01-15 08:00:00Z", "2027-01-15 09:00:00Z"):
        other = next(line for line in lines if label in line)
        assert "by " not in other and "succeeded  -  " in other, other

    res = _history(cfg, "--format", "table")  # every job: each marked from its own audit
    assert res.exit_code == 0, res.output
    assert res.output.count("by alice") == 1 and res.output.count("by bob") == 1
    assert "triggered" in res.output


def test_hostile_audit_entries_harm_only_the_entry_they_name(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_client, NS, clock=(clock := Clock(T0)))
    fires = _slots(store, clock)
    audit = store_keys.job_prefix(NS, "j") + store_keys.AUDIT
    # A name with a terminal escape naming the scheduled slot; garbage the parser drops or that
    # names no slot; a detail that is the fire time with junk around it.
    redis_client.xadd(audit, {"action": "trigger", "at": str(T0), "by": "m\x1b[2Jx", "detail": str(T0)})
    redis_client.xadd(audit, {"action": "trigger", "at": "soon", "by": "eve", "detail": str(fires["next"])})
    redis_client.xadd(audit, {"action": "trigger", "at": "1", "by": "eve", "detail": "9" * 40})
    redis_client.xadd(audit, {"action": "trigger", "at": "1", "by": "eve", "detail": f" {fires['next']}"})
    redis_client.xadd(audit, {"action": "launch", "at": "1", "by": "eve", "detail": str(fires["next"])})
    cfg = _config(tmp_path, redis_server.url)

    res = _history(cfg, "j", "--json")
    assert res.exit_code == 0, res.output
    docs = {d["slot_ms"]: d for d in map(json.loads, res.output.splitlines())}
    assert docs[fires["manual"]]["triggered_by"] == ["alice"]
    assert docs[fires["scheduled"]]["triggered_by"] == ["m\x1b[2Jx"]  # (json.dumps escapes it)
    assert "\x1b" not in res.output
    assert docs[fires["next"]]["triggered"] is False

    res = _history(cfg, "j", "--format", "plain")
    assert "by m\\x1b[2Jx" in res.output and "\x1b" not in res.output
    res = _history(cfg, "j", "--format", "table")
    assert "\x1b[2J" not in res.output


def test_an_unreadable_audit_is_a_warning_and_only_its_jobs_entries_are_untold(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_client, NS, clock=(clock := Clock(T0)))
    fires = _slots(store, clock)
    audit = store_keys.job_prefix(NS, "k") + store_keys.AUDIT
    redis_client.delete(audit)
    redis_client.set(audit, "not a stream")
    cfg = _config(tmp_path, redis_server.url)

    res = CliRunner().invoke(history, ["--config", cfg, "--json"])
    assert res.exit_code == 0, res.output
    assert "cannot tell which slots of 'k' were triggered" in res.stderr
    docs = {(d["job"], d["slot_ms"]): d for d in map(json.loads, res.stdout.splitlines())}
    assert docs[("k", fires["k"])]["triggered"] is None
    assert docs[("k", fires["k"])]["triggered_by"] is None
    assert docs[("j", fires["manual"])]["triggered_by"] == ["alice"]

    res = CliRunner().invoke(history, ["--config", cfg, "--format", "plain"])
    row = next(line for line in res.stdout.splitlines() if line.split()[2] == "k")
    assert "  ?  " in row


def test_a_slot_older_than_the_audit_keeps_is_not_told(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    """The audit keeps the newest 1000 actions: a slot older than those may have lost its trigger's."""
    store = RedisStore(redis_client, NS, clock=(clock := Clock(T0)))
    fires = _slots(store, clock)
    audit = store_keys.job_prefix(NS, "j") + store_keys.AUDIT
    redis_client.delete(audit)  # (as if trimmed past alice's trigger by a thousand later actions)
    with redis_client.pipeline(transaction=False) as pipe:
        for i in range(AUDIT_READ):
            at = fires["next"] - 1000 + i
            pipe.xadd(audit, {"action": "pause", "at": str(at), "by": "ops", "detail": "x"})
        pipe.execute()
    cfg = _config(tmp_path, redis_server.url)
    res = _history(cfg, "j", "--json")
    assert res.exit_code == 0, res.output
    docs = {d["slot_ms"]: d for d in map(json.loads, res.output.splitlines())}
    assert docs[fires["next"]]["triggered"] is False
    assert docs[fires["manual"]]["triggered"] is None and docs[fires["scheduled"]]["triggered"] is None


def test_a_trigger_audited_with_no_name_is_still_marked(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_client, NS, clock=(clock := Clock(T0)))
    fires = _slots(store, clock)
    audit = store_keys.job_prefix(NS, "k") + store_keys.AUDIT
    redis_client.delete(audit)  # (the script leaves an empty ``by`` out of the entry)
    redis_client.xadd(audit, {"action": "trigger", "at": str(fires["k"]), "detail": str(fires["k"])})
    cfg = _config(tmp_path, redis_server.url)
    res = _history(cfg, "k", "--json")
    assert res.exit_code == 0, res.output
    (doc,) = map(json.loads, res.output.splitlines())
    assert doc["triggered"] is True and doc["triggered_by"] == []
    res = _history(cfg, "k", "--format", "plain")
    assert "succeeded  yes  " in res.output, res.output
