"""``status`` and ``history`` against a live cluster of agent processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.commands.history import history
from quorum_cron.commands.status import status
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, job_toml

pytestmark = pytest.mark.slow


def test_status_and_history_show_the_cluster(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    c = Cluster(tmp_path, redis_server.url, 3, namespace="cmds")
    try:
        # overlap = "allow": with the default "forbid", a slot is rightly
        # skipped when the previous second's finish reaches the store after
        # the next slot commits (votes lead the fire time); this test is about
        # what status and history show, not about that race.
        cfg = c.config(job_toml("tick", "@every 1s", c.out, starting_deadline='"1s"', overlap='"allow"'))
        for n in ("n1", "n2", "n3"):
            c.start(n, cfg)
        c.wait_joined(["n1", "n2", "n3"])
        c.wait("three finished runs", lambda: len(c.succeeded("tick")) >= 3 or None, 20)
        runner = CliRunner()
        res = runner.invoke(status, ["--config", str(cfg)], env={"COLUMNS": "220"})
        assert res.exit_code == 0, res.output
        assert "3 of 3 alive, need 2" in res.output
        for node in ("n1", "n2", "n3"):
            assert node in res.output
        assert "trusted" in res.output and "succeeded" in res.output and "@every 1s" in res.output

        res = runner.invoke(history, ["tick", "--config", str(cfg), "--json", "--limit", "5"])
        assert res.exit_code == 0, res.output
        docs = [json.loads(line) for line in res.output.splitlines()]
        assert 3 <= len(docs) <= 5
        assert [d["slot_ms"] for d in docs] == sorted((d["slot_ms"] for d in docs), reverse=True)
        # history shows the ledger as it is: each entry is the store's own (entries never change;
        # read after history, so newer ones may come before them). The first slot may rightly end
        # missed while the nodes are still starting (deadline 1 s), so outcomes are not assumed.
        ledger = {e.fire_ms: e for e in c.store.ledger("tick", 50)}
        shown = [(d["slot_ms"], d["state"], d["executor"], d["reason"]) for d in docs]
        stored = [
            (f, str(ledger[f].state), ledger[f].executor, ledger[f].reason) if f in ledger else None
            for f, *_ in shown
        ]
        assert shown == stored
        assert any(d["state"] == "succeeded" and d["executor"] in ("n1", "n2", "n3") for d in docs), shown

        res = runner.invoke(history, ["--config", str(cfg)], env={"COLUMNS": "220"})
        assert res.exit_code == 0 and "succeeded" in res.output and "exit 0" in res.output, res.output
        res = runner.invoke(history, ["nope", "--config", str(cfg)])
        assert res.exit_code == 1 and "unknown job 'nope'" in res.output

        c.stop()
        res = runner.invoke(status, ["--config", str(cfg)], env={"COLUMNS": "220"})
        assert res.exit_code == 1 and "0 of 3 alive, need 3" not in res.output
        assert "0 of 3 alive, need 2" in res.output and "QUORUM LOST" in res.output
    finally:
        c.close()


def test_commands_report_an_unreachable_store(tmp_path: Path) -> None:
    c = Cluster(tmp_path, "redis://127.0.0.1:1/0", 3, namespace="down")
    cfg = c.config(job_toml("tick", "@every 1s", c.out))
    res = CliRunner().invoke(status, ["--config", str(cfg)])
    assert res.exit_code == 1 and "error: cannot read the store at redis://127.0.0.1:1/0" in res.output
