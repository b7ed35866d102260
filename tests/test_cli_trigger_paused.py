"""``trigger`` of a paused job says the slot will be skipped (an operator audit's finding).

The store takes the trigger (its audit and ledger say what became of it),
but a paused job's slots end ``skipped``: the command said "triggered" and
nothing else, and the operator waited for a run that could not come.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from quorum_cron.commands.control import pause, resume, trigger
from quorum_cron.store.embedded.single import EmbeddedRedis


def _config(tmp_path: Path, url: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nname = "trigpause"\nsize = 1\nredis_url = "{url}"\n\n'
        '[[jobs]]\nname = "tick"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return str(path)


def test_triggering_a_paused_job_warns_that_its_slot_will_be_skipped(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    cfg = _config(tmp_path, redis_server.url)
    res = CliRunner().invoke(pause, ["tick", "--config", cfg, "--by", "alice", "--reason", "migration"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(trigger, ["tick", "--config", cfg, "--by", "bob"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("triggered tick: slot ")
    warning = [line for line in res.stderr.splitlines() if "paused" in line]
    assert len(warning) == 1 and "alice" in warning[0] and "migration" in warning[0], res.stderr
    assert "recorded skipped" in warning[0] and f"quorum-cron resume --config {cfg} tick" in warning[0]

    assert CliRunner().invoke(resume, ["tick", "--config", cfg, "--by", "alice"]).exit_code == 0
    res = CliRunner().invoke(trigger, ["tick", "--config", cfg, "--by", "bob"])
    assert res.exit_code == 0 and "paused" not in res.stderr, res.stderr
