"""Operator commands against real agent processes: ``trigger``, ``pause``, ``resume``.

A trigger is a slot voted like any other: it runs exactly once with a
quorum (heard over pub/sub, or caught up from the store by nodes that
start later), and not at all when only a minority is alive. A pause makes
every due slot end ``skipped`` with its reason until ``resume``. Each test
waits on log events, ledger entries or ground-truth lines with bounded
deadlines.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from quorum_cron.commands.control import pause, resume, trigger
from quorum_cron.commands.history import history
from quorum_cron.commands.status import status
from quorum_cron.store.base import AuditAction, SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, job_toml, never_during_the_test

pytestmark = pytest.mark.slow

NEVER = never_during_the_test()
"""A schedule that does not fire during a test: only triggers run these jobs."""
MAX_SKEW_MS = 250


@pytest.fixture
def clusters(redis_server: EmbeddedRedis) -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for c in made:
        c.close()


def cli(command: click.Command, *args: str) -> Result:
    return CliRunner().invoke(command, list(args), env={"COLUMNS": "250"})


def triggered_slot(result: Result) -> int:
    assert result.exit_code == 0, result.output
    m = re.search(r"slot (\d+)", result.output)
    assert m, result.output
    return int(m.group(1))


def test_trigger_runs_once_with_a_quorum_and_never_without(
    tmp_path: Path, redis_server: EmbeddedRedis, clusters: list[Cluster]
) -> None:
    c = Cluster(tmp_path, redis_server.url, 3, namespace="trig")
    clusters.append(c)
    # The default start_timeout: n1 parks its vote for "late" 4 s, then forgets it. n2 and n3
    # join in about that time, so either n1 still awaits the slot when the records seating them
    # come, or it forgot it; either way it votes again under each, bringing the job the record
    # that lets their votes count (docs/protocol.md, "Membership and reconfiguration"; under load
    # they took over 4 s, and before the forgotten slot was voted again the slot was missed).
    cfg = c.config(
        job_toml("short", NEVER, c.out, starting_deadline='"1500ms"')
        + job_toml("late", NEVER, c.out, starting_deadline='"20s"')
    )
    c.start("n1", cfg)
    c.wait_joined(["n1"])

    # Unknown jobs are refused before the store is touched; the request carries only a name.
    res = cli(trigger, "nope", "--config", str(cfg))
    assert res.exit_code == 1
    assert res.output.strip() == "error: unknown job 'nope': expected one of short, late"

    # One node of three: the trigger is voted, reaches no quorum, and ends missed.
    res = cli(trigger, "short", "--config", str(cfg), "--by", "tester")
    short = triggered_slot(res)
    assert "only 1 of 3 nodes alive, need 2" in res.output
    late = triggered_slot(cli(trigger, "late", "--config", str(cfg), "--by", "tester"))
    c.wait("n1 to vote for the trigger", lambda: c.nodes["n1"].logged("trigger", job="short", slot=short), 10)
    entry = c.wait(
        "the minority trigger to be missed",
        lambda: (e := c.ledger("short").get(short)) is not None and e.state == SlotState.MISSED and e,
        15,
    )
    assert entry.voters == ("n1",), entry
    assert c.lines("start") == []

    # The other two start after the notice went out: they catch up from the store and form a quorum.
    c.start("n2", cfg)
    c.start("n3", cfg)
    c.wait_joined(["n2", "n3"])
    c.wait("the caught-up trigger to succeed", lambda: late in c.succeeded("late"), 20)
    assert any(
        str(e.get("how", "")).startswith("catch-up")
        for n in ("n2", "n3")
        for e in c.nodes[n].logged("trigger")
    ), c.describe()
    assert short not in c.ledger("short") or c.ledger("short")[short].state == SlotState.MISSED

    # All three up: heard over pub/sub, run once.
    again = triggered_slot(cli(trigger, "late", "--config", str(cfg), "--by", "tester"))
    c.wait("the second trigger to succeed", lambda: again in c.succeeded("late"), 15)
    c.stop()
    runs = Counter((x.job, x.slot) for x in c.lines("start"))
    assert runs == {("late", late): 1, ("late", again): 1}, runs
    ledger = c.ledger("late")
    for slot in (late, again):
        started = next(x for x in c.lines("start") if x.slot == slot)
        assert (ledger[slot].token, ledger[slot].executor) == (started.token, started.node)
    audit = c.store.audit("late", 10)
    assert [(a.action, a.by, a.detail) for a in audit] == [
        (AuditAction.TRIGGER, "tester", str(again)),
        (AuditAction.TRIGGER, "tester", str(late)),
    ]


def test_pause_skips_due_slots_with_the_reason_until_resume(
    tmp_path: Path, redis_server: EmbeddedRedis, clusters: list[Cluster]
) -> None:
    c = Cluster(tmp_path, redis_server.url, 3, namespace="pause")
    clusters.append(c)
    cfg = c.config(job_toml("tick", "@every 1s", c.out, starting_deadline='"1s"'))
    for n in ("n1", "n2", "n3"):
        c.start(n, cfg)
    c.wait_joined(["n1", "n2", "n3"])
    c.wait("a first run", lambda: c.succeeded("tick"), 15)

    res = cli(pause, "tick", "--config", str(cfg), "--reason", "disk swap", "--by", "ops")
    assert res.exit_code == 0 and "paused tick: paused by ops at" in res.output, res.output
    control = c.store.control("tick")
    assert control.paused and control.by == "ops" and control.reason == "disk swap"
    paused_at = control.at_ms

    def skipped() -> list[int]:
        return sorted(
            t
            for t, e in c.ledger("tick").items()
            if t > paused_at + MAX_SKEW_MS and e.state == SlotState.SKIPPED
        )

    c.wait("two slots skipped while paused", lambda: len(skipped()) >= 2 or None, 10)
    for t in skipped():
        assert c.ledger("tick")[t].reason == "paused by ops: disk swap", c.ledger("tick")[t]

    res = cli(status, "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert re.search(r"tick is PAUSED.*: paused by ops at \d{4}-\d\d-\d\d [\d:.]+Z: disk swap", res.output)
    [job] = json.loads(cli(status, "--config", str(cfg), "--json").output)["jobs"]
    assert (job["paused"], job["control_by"], job["control_at_ms"], job["pause_reason"]) == (
        True,
        "ops",
        paused_at,
        "disk swap",
    )
    res = cli(history, "tick", "--config", str(cfg), "--json", "--limit", "50")
    docs = [json.loads(line) for line in res.output.splitlines()]
    assert any(d["state"] == "skipped" and d["reason"] == "paused by ops: disk swap" for d in docs), docs

    # A second pause without a reason (a day-2 audit's: it replaced "disk swap" with nothing).
    res = cli(pause, "tick", "--config", str(cfg), "--by", "root@vm")
    assert res.exit_code == 0 and "tick is already paused: paused by ops at" in res.output, res.output
    again = c.store.control("tick")
    assert (again.by, again.reason, again.at_ms) == ("ops", "disk swap", paused_at)
    # The same pause again (a retried script): unchanged, and said so, not "paused".
    res = cli(pause, "tick", "--config", str(cfg), "--by", "ops", "--reason", "disk swap")
    assert res.exit_code == 0 and "tick is already paused: paused by ops at" in res.output, res.output
    assert res.output.rstrip().endswith("disk swap (unchanged)"), res.output
    assert c.store.control("tick").at_ms == paused_at

    res = cli(resume, "tick", "--config", str(cfg), "--by", "ops")
    assert res.exit_code == 0 and "resumed tick: active (resumed by ops at" in res.output, res.output
    resumed_at = c.store.control("tick").at_ms
    c.wait(
        "runs after resume",
        lambda: len([t for t in c.succeeded("tick") if t > resumed_at + MAX_SKEW_MS]) >= 2 or None,
        10,
    )
    c.stop()
    # Nothing that came due while paused ran; each slot ran at most once.
    runs = Counter(x.slot for x in c.lines("start", "tick"))
    assert max(runs.values()) == 1, runs
    # (A slot due in the last moment before the resume may have been voted after it, and run.)
    assert [t for t in runs if paused_at + MAX_SKEW_MS < t < resumed_at - 500] == []
    assert [(a.action, a.by) for a in c.store.audit("tick", 10)] == [
        (AuditAction.RESUME, "ops"),
        (AuditAction.PAUSE, "ops"),
    ]
