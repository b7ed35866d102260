"""Every ``quorum-cron members ...`` hint a node or a command prints runs as printed, on a real redis-server.

A newcomer pasted the ``not_a_member`` line's `quorum-cron members add n4` and got
``error: Missing option '--reason'``; the ``members finish`` hints had the same hole. Each hint
here is taken from the line the code prints, split as a shell would and handed to the CLI's
own entry point (``quorum_cron.cli.main``): it must parse (no usage error, exit 2) and do
what it says, read back from the store.
"""

from __future__ import annotations

import logging
import re
import shlex
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result

from quorum_cron.agent.alerts import AlertKind
from quorum_cron.agent.build import agent_job, agent_settings
from quorum_cron.agent.member_reports import members_hint
from quorum_cron.agent.runtime import Agent
from quorum_cron.cli import main
from quorum_cron.config.settings import AUTO, ClusterConfig, JobSpec
from quorum_cron.core.model import Configuration
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from tests.agent_inproc import run_agent
from tests.polling import until

NS = "hints"


def hints(text: str) -> list[list[str]]:
    """The arguments of each backquoted `quorum-cron ...` in ``text``, split as a shell splits them."""
    found = [shlex.split(h) for h in re.findall(r"`(quorum-cron [^`]*)`", text)]
    assert found and all(h[0] == "quorum-cron" for h in found), text
    return [h[1:] for h in found]


def paste(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, env={"COLUMNS": "250"})


def config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(f'[cluster]\nname = "{NS}"\nmembers = ["a", "b", "c"]\nredis_url = "{url}"\n')
    return path


def test_a_hint_names_the_reason_and_the_config_file(tmp_path: Path) -> None:
    cfg = config(tmp_path, "redis://localhost:1")
    assert (
        members_hint("add", str(cfg), ["n4"]) == f'`quorum-cron members add n4 --reason "..." --config {cfg}`'
    )
    assert members_hint("add", "App", ["n4"]) == '`quorum-cron members add n4 --reason "..." --config FILE`'
    spaced = tmp_path / "my cluster.toml"
    spaced.write_text("")
    assert hints(members_hint("finish", str(spaced))) == [
        ["members", "finish", "--reason", "...", "--config", str(spaced)]
    ]


def test_a_hint_names_the_config_file_from_anywhere_and_an_id_like_an_option_after_dashes(
    redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent started from another directory (a supervisor's) logs the hint for an operator whose
    shell is elsewhere: the path is absolute. A valid node id may start with ``-``: it goes after
    ``--``, or the CLI takes it for an option ("No such option: -n")."""
    cfg = config(tmp_path, redis_server.url)
    monkeypatch.chdir(tmp_path)
    (relative,) = hints(members_hint("finish", "cluster.toml"))
    assert relative[-2:] == ["--config", str(cfg)]
    store = RedisStore(redis_client, NS)
    store.init_membership(Configuration.of("abc"), "a")
    (args,) = hints(members_hint("add", str(cfg), ["-n5"]))
    assert args[-2:] == ["--", "-n5"], args
    res = paste(args)
    assert res.exit_code == 0, res.output
    stored = store.membership()
    assert stored is not None and "-n5" in stored.record.current.members


def test_the_not_a_member_hint_adds_the_node_as_printed(
    redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config(tmp_path, redis_server.url)
    store = RedisStore(redis_client, NS)
    store.init_membership(Configuration.of("abc"), "a")
    cluster = ClusterConfig(
        namespace=NS,
        size=AUTO,
        members=("a", "b", "c"),
        heartbeat_ms=100,
        lease_ms=1_000,
        start_timeout_ms=500,
    )
    job = JobSpec.create("tick", "@every 1s", command=("true",), starting_deadline_ms=900)
    agent = Agent(agent_settings(cluster, "n4", source=str(cfg)), [agent_job(job)], store)

    async def scenario() -> None:
        await until(
            "the not_a_member alert", lambda: any(a.kind == AlertKind.NOT_A_MEMBER for a in agent.alerts.sent)
        )

    with caplog.at_level(logging.INFO, logger="quorum_cron.agent"):
        run_agent(agent, scenario)
    (line,) = [r.getMessage() for r in caplog.records if getattr(r, "qc_event", "") == "not_a_member"]
    (args,) = hints(line)
    assert args == ["members", "add", "n4", "--reason", "...", "--config", str(cfg)], line
    res = paste(args)
    assert res.exit_code == 0, res.output
    stored = store.membership()
    assert stored is not None and stored.record.joint and "n4" in stored.record.current.members
    assert stored.reason == "..."


def test_the_members_finish_hints_run_as_printed(
    redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    cfg = config(tmp_path, redis_server.url)
    store = RedisStore(redis_client, NS)
    store.init_membership(Configuration.of("abc"), "a")
    assert paste(["members", "add", "d", "--reason", "grow", "--config", str(cfg)]).exit_code == 0

    # `members show` (the change in progress, and the member it waits for), a second change
    # refused while one is in progress, and `members finish` refused: each names a finish.
    shown = paste(["members", "show", "--config", str(cfg)])
    assert shown.exit_code == 0, shown.output
    second = paste(["members", "remove", "a", "--reason", "shrink", "--config", str(cfg)])
    assert second.exit_code == 1, second.output
    early = paste(["members", "finish", "--reason", "done", "--config", str(cfg)])
    assert early.exit_code == 1, early.output
    printed = hints(shown.output) + hints(second.output) + hints(early.output)
    assert len(printed) == 4, printed
    for args in printed:
        assert args[:2] == ["members", "finish"] and "--reason" in args
        assert args[-2:] == ["--config", str(cfg)]
        if "--force" not in args:  # (refused: d has not heartbeated; refused by the command, not its parser)
            res = paste(args)
            assert res.exit_code == 1 and "cannot finish the change" in res.output, res.output
    forced = next(a for a in printed if "--force" in a)
    res = paste(forced)
    assert res.exit_code == 0, res.output
    stored = store.membership()
    assert stored is not None and not stored.record.joint and stored.reason == "..."


def test_status_and_trigger_hints_run_as_printed(
    redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """status's members lines name this config file (they named ``FILE``), and trigger's warning
    on a paused job names a `quorum-cron resume` that resumes it as pasted (it had no --config)."""
    cfg = config(tmp_path, redis_server.url)
    with cfg.open("a") as f:
        f.write('\n[[jobs]]\nname = "tick"\nschedule = "@every 1h"\ncommand = ["true"]\n')
        f.write('\n[[jobs]]\nname = "-x"\nschedule = "@every 1h"\ncommand = ["true"]\n')
    store = RedisStore(redis_client, NS)
    store.init_membership(Configuration.of("abc"), "a")
    assert paste(["members", "add", "d", "--reason", "grow", "--config", str(cfg)]).exit_code == 0
    status = paste(["status", "--config", str(cfg), "--format", "plain"])
    finish = [h for h in hints(status.output) if h[:2] == ["members", "finish"]]
    assert finish and all(h[-2:] == ["--config", str(cfg)] for h in finish), status.output

    assert paste(["pause", "tick", "--reason", "maint", "--config", str(cfg)]).exit_code == 0
    triggered = paste(["trigger", "tick", "--config", str(cfg)])
    assert triggered.exit_code == 0, triggered.output
    (resume,) = [h for h in hints(triggered.output) if h[0] == "resume"]
    assert resume == ["resume", "--config", str(cfg), "tick"], triggered.output
    assert paste(resume).exit_code == 0
    assert not store.control("tick").paused
    # A job named like an option: the hint puts `--` before it, and runs as pasted.
    assert paste(["pause", "--reason", "maint", "--config", str(cfg), "--", "-x"]).exit_code == 0
    triggered = paste(["trigger", "--config", str(cfg), "--", "-x"])
    assert triggered.exit_code == 0, triggered.output
    (resume,) = [h for h in hints(triggered.output) if h[0] == "resume"]
    assert paste(resume).exit_code == 0, resume
    assert not store.control("-x").paused
