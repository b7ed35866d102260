"""``history``: which of a slot's voters counted, after a membership change (a day-2 audit's finding).

The ledger lists every node whose vote a slot stored. After ``members remove
c``, a slot c voted for before the change and a and b decided after it
listed c among its voters, and an operator read that c's vote made the
quorum. Neither the ledger nor the slot record keeps the membership record
that decided a slot; ``history`` now tells apart what the store can tell:
a voter not a member of the cluster's records in force when the slot was
committed (the membership log), and a voter of another definition (the slot
record, while kept). The same slots are made on a real redis-server and on
the memory model, which must account for them alike.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis
from click.testing import CliRunner

from quorum_cron.commands.history import history
from quorum_cron.core.model import Configuration, MembershipRecord, VoteRequest, VoteStatus
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.voters import VoterAccount, account

NS = "voters"
SKEW = 250


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _vote(store: Any, clock: Clock, fire: int, node: str, rec: MembershipRecord, spec: str = "h") -> Any:
    clock.now = max(clock.now, fire)
    req = VoteRequest("j", fire, node, spec, 2, SKEW, 60_000, epoch=rec.epoch, membership=rec.encode())
    return store.vote([req])[0]


def _run(store: Any, res: Any) -> None:
    """Start and finish the slot a vote committed: its ledger entry."""
    assert res.status == VoteStatus.COMMITTED, res
    view = res.slot
    assert store.start("j", view.fire_ms, view.executor, view.token, 60_000).ok
    assert store.finish("j", view.fire_ms, view.executor, view.token, True, "exit 0").ok


def _slots(store: Any, clock: Clock) -> dict[str, int]:
    """Four slots around ``members remove c`` (epoch 1 a,b,c; 2 joint; 3 a,b); name -> fire time."""
    t = clock.now
    fires = {"other": t + 1_000, "before": t + 2_000, "joint": t + 3_200, "after": t + 3_000}
    one = store.init_membership(Configuration.of("abc"), "a").record
    _vote(store, clock, fires["other"], "c", one, spec="h-older")
    _vote(store, clock, fires["other"], "a", one)
    _run(store, _vote(store, clock, fires["other"], "b", one))
    _vote(store, clock, fires["before"], "a", one)
    _run(store, _vote(store, clock, fires["before"], "c", one))
    assert _vote(store, clock, fires["after"], "c", one).status == VoteStatus.RECORDED
    clock.now = t + 3_100
    joint = store.change_membership(1, Configuration.of("ab"), "op", "remove c").membership.record
    for node in ("c", "a"):
        _vote(store, clock, fires["joint"], node, joint)
    _run(store, _vote(store, clock, fires["joint"], "b", joint))
    clock.now = t + 3_300
    three = store.finish_membership(2, "op", "now", force=True).membership.record
    assert three.epoch == 3 and not three.is_member("c")
    clock.now = t + 3_400
    assert _vote(store, clock, fires["after"], "a", three).status == VoteStatus.RECORDED
    committed = _vote(store, clock, fires["after"], "b", three)
    assert committed.slot.voters == ("a", "b", "c")  # c's vote, stored under epoch 1, is still there
    _run(store, committed)
    return fires


def _config(tmp_path: Path, url: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nname = "{NS}"\nsize = 3\nredis_url = "{url}"\n\n'
        '[[jobs]]\nname = "j"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return str(path)


def _now_s() -> int:
    return time.time_ns() // 1_000_000 // 1000 * 1000 - 60_000  # (a minute ago: every slot is past)


def test_history_tells_apart_the_voters_that_did_not_count(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    clock = Clock(_now_s())
    store = RedisStore(redis_client, NS, clock=clock)
    fires = _slots(store, clock)
    cfg = _config(tmp_path, redis_server.url)

    res = CliRunner().invoke(history, ["j", "--config", cfg, "--json"])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    docs = {d["slot_ms"]: d for d in map(json.loads, res.stdout.splitlines())}
    got = {
        name: (
            docs[f]["voters"],
            docs[f]["epochs_at_commit"],
            docs[f]["not_members_at_commit"],
            docs[f]["other_definition"],
        )
        for name, f in fires.items()
    }
    assert got == {
        # Decided under epoch 3 (a, b): c's vote was stored under epoch 1, before the change.
        "after": (["a", "b", "c"], [3], ["c"], []),
        # Decided while joint: c is in the old configuration, whose quorum counts its vote.
        "joint": (["a", "b", "c"], [2], [], []),
        "before": (["a", "c"], [1], [], []),
        # c ran another definition of the job: its vote never counted, whatever the membership.
        "other": (["a", "b", "c"], [1], [], ["c"]),
    }

    res = CliRunner().invoke(history, ["j", "--config", cfg, "--format", "plain"])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    # Newest first: joint, after, before, other (under the title and the header). A row's words:
    # the slot (two), job, outcome, triggered, executor, token, the voters, delay, ran, the reason (two).
    cells = [" ".join(line.split()[7:-4]) for line in res.stdout.splitlines()[2:]]
    assert cells == [
        "a,b,c",
        "a,b [c: not a member of epoch 3, which decided it]",
        "a,c",
        "a,b [c: voted another definition]",
    ], cells


def test_the_memory_model_accounts_for_the_same_slots_alike(redis_client: redis.Redis) -> None:
    """What ``history`` computes from each store's reads (the ledger, the membership log, the
    slot records) is the same; with a slot record gone, only what the log tells is said."""
    start = _now_s()
    results = []
    for store, clock in (
        (RedisStore(redis_client, NS, clock=(c := Clock(start))), c),
        (MemoryStore(m := Clock(start)), m),
    ):
        fires = _slots(store, clock)
        entries = store.ledger("j", 10)
        log = store.membership_log(100)
        views = store.read_slots([(e.job, e.fire_ms) for e in entries])
        accounts = [account(e, log, v, SKEW) for e, v in zip(entries, views, strict=True)]
        by_fire = {e.fire_ms: a for e, a in zip(entries, accounts, strict=True)}
        # The entry names the record that decided it (epoch 3): exact, slot record or not.
        assert by_fire[fires["after"]] == VoterAccount((3,), ("c",), (), 3)
        after = next(e for e in entries if e.fire_ms == fires["after"])
        assert after.epoch == 3
        assert account(after, log, None, SKEW) == VoterAccount((3,), ("c",), None, 3)
        # A log that no longer holds that record tells nothing.
        assert account(after, [m for m in log if m.record.epoch != 3], None, SKEW) == VoterAccount()
        # An entry an older release wrote (no epoch) is inferred: without the slot record the
        # decision may have come at any time since the slot's first vote could come; epochs 1 to
        # 3 were in force then, and c was a member of two of them.
        legacy = replace(after, epoch=0)
        assert account(legacy, log, None, SKEW) == VoterAccount((1, 2, 3), (), None)
        assert account(legacy, log[:1], None, SKEW) == VoterAccount()
        results.append((entries, accounts))
    assert results[0] == results[1]


def test_a_slot_decided_under_an_older_record_after_a_change_names_that_record(
    redis_client: redis.Redis,
) -> None:
    """A job takes a new record only from a member's vote: here a job no member had voted for
    since ``members remove c`` is decided by a and c under epoch 1 after epoch 3 (a, b) is in
    force. Inferred from the log, no record in force at commit gives a and c a quorum and nothing
    can be told; the entry's epoch says epoch 1 decided it and both counted."""
    start = _now_s()
    for store, clock in (
        (RedisStore(redis_client, NS + "-late", clock=(c := Clock(start))), c),
        (MemoryStore(m := Clock(start)), m),
    ):
        one = store.init_membership(Configuration.of("abc"), "a").record
        clock.now += 100
        store.change_membership(1, Configuration.of("ab"), "op", "remove c")
        clock.now += 100
        assert store.finish_membership(2, "op", "now", force=True).membership.record.epoch == 3
        fire = clock.now + 1_000
        _vote(store, clock, fire, "c", one)
        _run(store, _vote(store, clock, fire, "a", one))
        (entry,) = store.ledger("j", 10)
        assert entry.epoch == 1 and entry.voters == ("a", "c")
        log = store.membership_log(100)
        assert account(entry, log, None, SKEW) == VoterAccount((1,), (), None, 1)
        assert account(replace(entry, epoch=0), log, None, SKEW) == VoterAccount()
