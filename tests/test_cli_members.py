"""``quorum-cron members`` and the membership part of ``status`` against a real redis-server.

No agents here: heartbeats are sent with the store's own call (as an agent
does), so each test sets exactly the facts it checks. Every change is read
back from the store (the record and its audit), never only from the
command's output.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import redis
from click.testing import CliRunner, Result

from quorum_cron.commands.members import members
from quorum_cron.commands.status import status
from quorum_cron.core.model import Configuration
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore

NS = "mem"


@pytest.fixture
def store(redis_client: redis.Redis, redis_server: EmbeddedRedis) -> Iterator[RedisStore]:
    s = RedisStore.from_url(redis_server.url, NS, socket_timeout=5.0)
    try:
        yield s
    finally:
        s.close()


def config(tmp_path: Path, url: str, cluster: str = 'members = ["a", "b", "c"]') -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(f'[cluster]\nname = "{NS}"\n{cluster}\nredis_url = "{url}"\n')
    return path


def run(command: click.Command, *args: str) -> Result:
    return CliRunner().invoke(command, list(args), env={"COLUMNS": "250"})


def beat(store: RedisStore, node: str, epoch: int) -> None:
    assert store.heartbeat(node, f"inc-{node}", 30_000, {"voting": "yes"}, epoch=epoch).ok


def test_show_without_a_record_says_who_creates_it(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    cfg = config(tmp_path, redis_server.url)
    res = run(members, "show", "--config", str(cfg))
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"error: the store at {redis_server.url} has no membership record for 'mem' yet: "
        "the first agent to start creates it from its config"
    ]
    res = run(members, "add", "d", "--reason", "grow", "--config", str(cfg))
    assert res.exit_code == 1 and "has no membership record yet" in res.output


def test_grow_through_a_joint_configuration_audited_and_ended_by_the_heartbeats(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    cfg = config(tmp_path, redis_server.url)
    store.init_membership(Configuration.of(["a", "b", "c"]), "a")
    for node in "abc":
        beat(store, node, 1)

    res = run(members, "show", "--config", str(cfg), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["membership"]["epoch"] == 1 and doc["membership"]["current"]["members"] == ["a", "b", "c"]
    assert (doc["quorum"], doc["size"], doc["alive"], doc["config_agrees"]) == (2, 3, 3, True)

    # A change needs a reason: click refuses a missing one, the command a bad one (one line each).
    assert run(members, "add", "d", "e", "--config", str(cfg)).exit_code == 2
    res = run(members, "add", "d", "--reason", "x" * 501, "--config", str(cfg))
    assert res.exit_code == 1
    assert res.output.strip() == (
        "error: --reason is 501 characters: expected one line of 1-500 printable characters "
        "saying why the membership changes"
    )
    res = run(members, "add", "b", "--reason", "grow", "--config", str(cfg))
    assert (res.exit_code, res.output.strip()) == (
        1,
        "error: node 'b' is already a member (members: a, b, c)",
    )
    assert store.membership() is not None and store.membership().record.epoch == 1  # type: ignore[union-attr]

    res = run(members, "add", "d", "e", "--reason", "more capacity", "--by", "alice", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "membership epoch 2: joint, old a, b, c (quorum 2 of 3) -> new a, b, c, d, e (quorum 3 of 5)" in (
        res.output
    )
    assert "next: start d, e" in res.output
    stored = store.membership()
    assert stored is not None and stored.record.joint and stored.record.epoch == 2
    assert (stored.by, stored.reason) == ("alice", "more capacity")
    assert store.membership_log(5)[0] == stored

    # One change at a time; finishing early is refused, naming who has not heartbeated yet.
    res = run(members, "remove", "a", "--reason", "x", "--config", str(cfg))
    assert res.exit_code == 1 and res.output.startswith("error: a change is in progress (epoch 2: joint")
    res = run(members, "finish", "--reason", "done", "--config", str(cfg))
    assert res.exit_code == 1 and res.output.startswith("error: cannot finish the change: ")
    assert "d" in res.output and "e" in res.output and len(res.output.strip().splitlines()) == 1
    hint = f'`quorum-cron members finish --force --reason "..." --config {cfg}`'
    assert res.output.rstrip().endswith(f"; {hint} ends it anyway"), res.output

    # status: the store's quorum (the tighter of the two while joint), the change in progress.
    res = run(status, "--config", str(cfg))
    assert "CHANGE IN PROGRESS (joint)" in res.output, res.output
    assert "membership epoch 2:" in res.output

    for node in "abcde":
        beat(store, node, 2)
    stored = store.membership()
    assert stored is not None and not stored.record.joint and stored.record.epoch == 3
    assert stored.record.current == Configuration.of("abcde")

    # The old config now disagrees: status says so, and exits 1 although the quorum is alive.
    res = run(status, "--config", str(cfg))
    assert res.exit_code == 1, res.output
    assert "CONFIG DISAGREES" in res.output and "5 of 5 alive, need 3" in res.output
    new_cfg = config(tmp_path, redis_server.url, 'members = ["a", "b", "c", "d", "e"]')
    res = run(status, "--config", str(new_cfg), "--json")
    doc = json.loads(res.output)
    assert res.exit_code == 0 and doc["config_agrees"] and (doc["quorum"], doc["size"]) == (3, 5)


def test_shrink_replace_and_forced_finish(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    cfg = config(tmp_path, redis_server.url)
    store.init_membership(Configuration.of("abcde"), "a")
    res = run(members, "remove", "x", "--reason", "shrink", "--config", str(cfg))
    assert (res.exit_code, res.output.strip()) == (
        1,
        "error: node 'x' is not a member (members: a, b, c, d, e)",
    )
    res = run(members, "remove", "d", "e", "--reason", "shrink", "--config", str(cfg), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output.split("\nwarning")[0])
    assert doc["joint"] and doc["current"]["members"] == ["a", "b", "c"] and doc["old"]["size"] == 5

    res = run(members, "finish", "--force", "--reason", "d and e are gone", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    stored = store.membership()
    assert stored is not None and stored.record.epoch == 3 and not stored.record.joint
    assert stored.reason == "d and e are gone"
    res = run(members, "finish", "--reason", "again", "--config", str(cfg))
    assert res.exit_code == 1 and "no change is in progress (epoch 3: a, b, c (quorum 2 of 3))" in res.output

    res = run(members, "replace", "c", "c2", "--reason", "c's disk died", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    stored = store.membership()
    assert stored is not None and stored.record.old == Configuration.of("abc")
    assert stored.record.current == Configuration.of(["a", "b", "c2"])
    res = run(members, "set", "a,,b", "--reason", "x", "--config", str(cfg))
    assert res.exit_code == 1 and "is not a list of node ids" in res.output


def test_a_change_in_size_mode_closes_the_open_seats_and_says_so(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    cfg = config(tmp_path, redis_server.url, "size = 3")
    store.init_membership(Configuration.of([], size=3), "a")
    beat(store, "a", 1)  # fills a seat: epoch 2, a + 2 open seats
    stored = store.membership()
    assert stored is not None and stored.record.current.describe() == "a + 2 open seats (quorum 2 of 3)"
    res = run(members, "add", "b", "--reason", "name them", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "note: the 2 open seat(s) of size mode are closed: the new members are exactly a, b" in res.output
    stored = store.membership()
    assert stored is not None and stored.record.current == Configuration.of("ab")
    assert stored.record.old == Configuration.of(["a"], size=3)


def test_status_lists_a_refused_non_member_and_never_the_configs_quorum(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    # The config says 1 node; the store enforces three: status prints the store's.
    cfg = config(tmp_path, redis_server.url, "size = 1")
    store.init_membership(Configuration.of("abc"), "a")
    for node in "abc":
        beat(store, node, 1)
    beat(store, "intruder", 1)
    res = run(status, "--config", str(cfg), "--json")
    doc = json.loads(res.output)
    assert (doc["alive"], doc["size"], doc["quorum"]) == (3, 3, 2)
    assert doc["refused"] == [{"node": "intruder", "epoch": 1, "seen_ms": doc["refused"][0]["seen_ms"]}]
    assert not doc["config_agrees"] and res.exit_code == 1
    assert (
        "size = 1 (quorum 1 of 1) but the store enforces epoch 1: a, b, c (quorum 2 of 3)"
        in (doc["config_problem"])
    )
    roles = {m["node"]: m["role"] for m in doc["members"]}
    assert roles == {"a": "member", "b": "member", "c": "member", "intruder": "refused"}
    res = run(status, "--config", str(cfg))
    assert (
        "3 of 3 alive, need 2" in res.output
        and "REFUSED" in res.output
        and "intruder (epoch 1)" in res.output
    )
    res = run(members, "show", "--config", str(cfg))
    assert res.exit_code == 0 and "intruder  REFUSED  epoch 1" in res.output, res.output


def test_set_with_the_seated_members_closes_the_open_seats(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    # size = 3, only a and b ever started: `members set a,b` makes it a 2-node cluster (it was refused as
    # "the members are already a, b: nothing to change", leaving no way to close the seat).
    cfg = config(tmp_path, redis_server.url, "size = 3")
    store.init_membership(Configuration.of([], size=3), "a")
    beat(store, "a", 1)
    beat(store, "b", 2)
    stored = store.membership()
    assert stored is not None and stored.record.current == Configuration.of("ab", size=3)
    res = run(members, "set", "a,b", "--reason", "the third host never came", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "note: the 1 open seat(s) of size mode are closed: the new members are exactly a, b" in res.output
    stored = store.membership()
    assert stored is not None and stored.record.current == Configuration.of("ab")
    assert stored.record.old == Configuration.of("ab", size=3)


def test_a_quorum_above_a_majority_is_not_lowered_by_a_change(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    # quorum = 3 of 3 in the config and the store: a replace used to make it 2 of 3 silently, and the
    # hosts' files (quorum = 3, the new members) then disagreed with the store: their nodes did not vote.
    cfg = config(tmp_path, redis_server.url, 'members = ["a", "b", "c"]\nquorum = 3')
    store.init_membership(Configuration.of("abc", quorum=3), "a")
    res = run(members, "replace", "c", "d", "--reason", "c died", "--config", str(cfg))
    assert (res.exit_code, res.output.strip()) == (
        1,
        "error: the store enforces a quorum of 3 of 3, above a majority: expected --quorum Q "
        "(2-3 for a, b, d), so that the change does not lower it unasked",
    )
    stored = store.membership()
    assert stored is not None and stored.record.epoch == 1
    res = run(members, "replace", "c", "d", "--reason", "c died", "--quorum", "3", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "-> new a, b, d (quorum 3 of 3)" in res.output
    stored = store.membership()
    assert stored is not None and stored.record.current == Configuration.of("abd", quorum=3)
    for node in "abd":
        beat(store, node, 2)
    new_cfg = config(tmp_path, redis_server.url, 'members = ["a", "b", "d"]\nquorum = 3')
    res = run(status, "--config", str(new_cfg), "--json")
    assert json.loads(res.output)["config_agrees"], res.output
    res = run(members, "set", "a,b,d", "--quorum", "2", "--reason", "a majority", "--config", str(cfg))
    assert res.exit_code == 0 and "-> new a, b, d (quorum 2 of 3)" in res.output, res.output


def test_adding_a_node_that_runs_already_does_not_ask_to_start_it(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    # A removed node still running (REFUSED), added back: it needs no start, only its next heartbeat.
    cfg = config(tmp_path, redis_server.url)
    store.init_membership(Configuration.of("abc"), "a")
    for node in "abcd":
        beat(store, node, 1)
    res = run(members, "add", "d", "e", "--reason", "d is back, e is new", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "next: start e (their config lists the new members)" in res.output
    res = run(members, "finish", "--force", "--reason", "e never comes", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "warning: 4 of the members are alive" not in res.output  # 4 of 5 alive, quorum 3: no warning
    res = run(members, "remove", "e", "--reason", "typo", "--config", str(cfg))
    assert res.exit_code == 0 and "next:" not in res.output, res.output
    for node in "abcd":
        beat(store, node, 4)
    assert not store.membership().record.joint  # type: ignore[union-attr]
    res = run(members, "set", "a,b,c", "--reason", "d goes", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert (
        "next: stop d (SIGTERM) once `members show` shows no change in progress: it runs, and until it "
        'stops it heartbeats as REFUSED (docs/operations.md, "Scale down")'
    ) in res.output
    for node in "abc":
        beat(store, node, 6)
    res = run(members, "add", "d", "--reason", "d is back", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "next: start" not in res.output
    assert "next: d is already running (refused until now); the change ends when every" in res.output
    store.leave("a", "inc-a")
    store.leave("b", "inc-b")
    store.leave("c", "inc-c")
    res = run(members, "finish", "--force", "--reason", "x", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "warning: 1 of the members are alive, need 3: no slot commits until enough of a, b, c, d run" in (
        res.output
    )


def test_a_change_that_keeps_no_member_is_refused_unless_forced(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore, redis_client: redis.Redis
) -> None:
    # A one-node cluster whose host died, replaced as docs/operations.md said: every job had s1's
    # record and refused s2 for good (each slot "missed ... s2 is not a member of epoch 1"), as a
    # job takes a newer record only from a member of its own. Now refused, naming the way out.
    cfg = tmp_path / "one.toml"
    cfg.write_text(
        f'[cluster]\nname = "{NS}"\nmembers = ["s1"]\nredis_url = "{redis_server.url}"\n'
        '[[jobs]]\nname = "often"\nschedule = "@every 2s"\ncommand = ["true"]\n'
    )
    store.init_membership(Configuration.of(["s1"]), "s1")
    res = run(members, "replace", "s1", "s2", "--reason", "s1 died", "--config", str(cfg))
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        "error: no member of epoch 1 (s1) stays in the new members (s2): a job that no vote of s1 reaches "
        "before the change ends (every job, if they are down) would refuse s2 for good; expected a change "
        "that keeps a member (replace a majority in steps), or the new host started under the old id "
        "(--node-id s1) with no change — or --force, then clear each such job's record (docs/operations.md, "
        '"Replace a host")'
    ]
    stored = store.membership()
    assert stored is not None and stored.record.epoch == 1
    res = run(members, "replace", "s1", "s2", "--reason", "s1 died", "--force", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert f"redis-cli HDEL KEY mr — 'qc:{{{NS}:often}}:meta'" in res.output
    stored = store.membership()
    assert stored is not None and stored.record.current == Configuration.of(["s2"])
    # Keeping one member is a change like any other (a majority replaced in steps).
    store.heartbeat("s2", "inc-s2", 30_000, {}, epoch=2)
    res = run(members, "set", "s2,s3,s4", "--reason", "grow", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    for node in ("s2", "s3", "s4"):
        beat(store, node, 4)
    res = run(members, "set", "s5,s6,s7", "--reason", "new hosts", "--config", str(cfg))
    assert res.exit_code == 1 and res.output.startswith(
        "error: no member of epoch 5 (s2, s3, s4) stays in the new members (s5, s6, s7)"
    ), res.output
    assert redis_client.hget(f"qc:{{{NS}:often}}:meta", "mr") is None  # (the command writes no job key)


def test_show_and_status_name_the_new_members_a_change_still_waits_for(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    # The procedures say to wait until `members show` shows no change in progress: it now says
    # which new member it waits for (only `members finish` named it, by being refused).
    cfg = config(tmp_path, redis_server.url)
    store.init_membership(Configuration.of("abc"), "a")
    for node in "abc":
        beat(store, node, 1)
    assert run(members, "add", "d", "--reason", "grow", "--config", str(cfg)).exit_code == 0
    for node in "abc":
        beat(store, node, 2)
    line = (
        "  waiting for d: not running (start them; if one never will, "
        '`quorum-cron members finish --force --reason "..." --config {}`, then remove it)'
    )
    res = run(members, "show", "--config", str(cfg))
    assert res.exit_code == 0 and line.format(cfg) in res.output.splitlines(), res.output
    res = run(status, "--config", str(cfg), "--format", "plain")  # (status names its file too)
    assert line.format(cfg) in res.output.splitlines(), res.output
    beat(store, "d", 2)
    res = run(members, "show", "--config", str(cfg))
    assert "waiting for" not in res.output and "CHANGE IN PROGRESS" not in res.output, res.output


def test_set_takes_the_members_comma_or_space_separated(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    # `members set a b d` (as `add` takes them) was "Got unexpected extra arguments (b d)".
    cfg = config(tmp_path, redis_server.url)
    store.init_membership(Configuration.of("abc"), "a")
    res = run(members, "set", "a,", "b", "--reason", "x", "--config", str(cfg))
    assert (res.exit_code, res.output.strip()) == (
        1,
        "error: 'a, b' mixes commas and spaces: expected the members as one list, 'a,b,c' or a b c",
    )
    res = run(members, "set", "a", "b", "d", "--reason", "c goes, d comes", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    stored = store.membership()
    assert stored is not None and stored.record.current == Configuration.of("abd")


def test_a_forced_change_without_jobs_in_the_file_names_the_key_pattern(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    # A cluster of Python nodes (jobs in code): the operator's file has no [[jobs]] to name.
    cfg = config(tmp_path, redis_server.url, 'members = ["s1"]')
    store.init_membership(Configuration.of(["s1"]), "s1")
    res = run(members, "replace", "s1", "s2", "--reason", "s1 died", "--force", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert f"redis-cli HDEL KEY mr — 'qc:{{{NS}:JOB}}:meta' for each job" in res.output, res.output


def test_the_next_steps_read_right_for_several_running_nodes(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    """'d, e are already running' / 'they run': the hints said 'd already run(s)' for one and many."""
    cfg = config(tmp_path, redis_server.url)
    store.init_membership(Configuration.of("abc"), "a")
    for node in "abcde":
        beat(store, node, 1)
    res = run(members, "add", "d", "e", "--reason", "both run", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "next: d, e are already running (refused until now); the change ends when every" in res.output
    for node in "abcde":
        beat(store, node, 2)
    assert not store.membership().record.joint  # type: ignore[union-attr]
    res = run(members, "remove", "d", "e", "--reason", "both go", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "no change in progress: they run, and until they stop they heartbeat as REFUSED" in res.output


def test_a_change_to_members_that_tolerate_no_failure_warns_and_still_succeeds(
    tmp_path: Path, redis_server: EmbeddedRedis, store: RedisStore
) -> None:
    # A newcomer's `members remove n1 n2` on 3 nodes went to one node (quorum 1 of 1) silently.
    cfg = config(tmp_path, redis_server.url)
    store.init_membership(Configuration.of("abc"), "a")
    for node in "abc":
        beat(store, node, 1)
    warning = (
        "warning: the new configuration c (quorum 1 of 1) tolerates no node failure: with any member down, "
    )
    res = run(members, "remove", "a", "b", "--reason", "shrink", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert warning + "no slot commits" in res.output.splitlines(), res.output
    stored = store.membership()
    assert stored is not None and stored.record.current == Configuration.of("c")  # (the change is made)
    assert run(members, "finish", "--force", "--reason", "x", "--config", str(cfg)).exit_code == 0
    # Back to three, then a change that keeps a majority quorum: no warning.
    res = run(members, "add", "d", "e", "--reason", "grow", "--config", str(cfg))
    assert res.exit_code == 0 and "tolerates no node failure" not in res.output, res.output
