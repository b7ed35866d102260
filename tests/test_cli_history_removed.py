"""``history JOB`` of a job the config no longer defines (a day-2 audit's finding).

Removing a job from the config deletes none of its keys: its ledger is still
the record of what its slots did, and the operator who removed it is the one
who asks. A typo is still refused as an unknown job.
"""

from __future__ import annotations

import json
from pathlib import Path

import redis
from click.testing import CliRunner

from quorum_cron.commands.history import history
from quorum_cron.store.embedded.single import EmbeddedRedis

NS = "removed"


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nname = "{NS}"\nsize = 1\nredis_url = "{url}"\n\n'
        '[[jobs]]\nname = "kept"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


def test_history_of_a_removed_job_shows_its_ledger_and_says_where_from(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    cfg = str(_config(tmp_path, redis_server.url))
    ledger = f"qc:{{{NS}:gone}}:ledger"
    for fire in (1_800_000_000_000, 1_800_000_060_000):
        fields = {"fire": str(fire), "state": "succeeded", "finished": str(fire + 900), "reason": "exit 0"}
        redis_client.xadd(ledger, {**fields, "executor": "n1", "token": "7"})

    res = CliRunner().invoke(history, ["gone", "--config", cfg, "--json"])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    docs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(d["job"], d["slot_ms"], d["state"]) for d in docs] == [
        ("gone", 1_800_000_060_000, "succeeded"),
        ("gone", 1_800_000_000_000, "succeeded"),
    ]
    assert (
        res.stderr.strip()
        == "note: 'gone' is not in this config (removed, or defined in other nodes' configs only?); "
        "its ledger as the store keeps it"
    )

    # A name the store has no ledger of is a typo: refused, and the line says the store was asked.
    res = CliRunner().invoke(history, ["gnoe", "--config", cfg])
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.strip() == (
        "error: unknown job 'gnoe': expected one of kept (the store holds no ledger of 'gnoe' either)"
    )
    # A name no job can have is refused without asking the store.
    res = CliRunner().invoke(history, ["a b", "--config", cfg])
    assert res.exit_code == 1 and res.stderr.strip() == "error: unknown job 'a b': expected one of kept"


def test_history_of_an_unknown_job_with_the_store_away_says_both(tmp_path: Path) -> None:
    """Unreachable store: the name is refused, and the line does not pretend the ledger was looked for."""
    cfg = str(_config(tmp_path, "redis://127.0.0.1:1/0"))
    res = CliRunner().invoke(history, ["gone", "--config", cfg])
    lines = res.stderr.splitlines()
    assert res.exit_code == 1 and len(lines) == 1, lines
    assert lines[0].startswith(
        "error: unknown job 'gone': expected one of kept (nor could its ledger be looked for in the store at "
        "redis://127.0.0.1:1/0: "
    ), lines


def test_the_history_header_counts_in_the_singular_and_the_plural(
    tmp_path: Path, redis_server: EmbeddedRedis, redis_client: redis.Redis
) -> None:
    # "history (1 entries, newest first)" read wrong; both the plain and the table header.
    cfg = str(_config(tmp_path, redis_server.url))
    ledger = f"qc:{{{NS}:kept}}:ledger"
    for fire, want in ((1_800_000_000_000, "1 entry"), (1_800_000_060_000, "2 entries")):
        fields = {"fire": str(fire), "state": "succeeded", "finished": str(fire + 900), "reason": "exit 0"}
        redis_client.xadd(ledger, {**fields, "executor": "n1", "token": "7"})
        for fmt in ("plain", "table"):
            res = CliRunner().invoke(
                history, ["kept", "--config", cfg, "--format", fmt], env={"COLUMNS": "200"}
            )
            assert res.exit_code == 0, (res.stdout, res.stderr)
            assert res.stdout.splitlines()[0].strip() == f"history ({want}, newest first)", res.stdout
