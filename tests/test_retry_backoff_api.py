"""The Python API and the agent's build carry a job's retry backoff policy to the core (issue 26 item 8)."""

from __future__ import annotations

import pytest

from quorum_cron.agent.build import core_job
from quorum_cron.app import App, JobContext
from quorum_cron.config.settings import JobSpec
from quorum_cron.errors import ConfigError


def test_the_python_api_takes_the_retry_policy_and_the_core_gets_it() -> None:
    app = App(namespace="x", size=3, redis_url="redis://localhost:1/0", node_id="n")

    @app.cron("@hourly", retries=3, retry_backoff="10s", retry_backoff_max="1m", retry_jitter=0.2)
    def grows(ctx: JobContext) -> None: ...

    @app.cron("@hourly", retries=3)
    def fixed(ctx: JobContext) -> None: ...

    spec = app.jobs["grows"]
    assert (spec.retry_backoff_ms, spec.retry_backoff_max_ms, spec.retry_jitter) == (10_000, 60_000, 0.2)
    core = core_job(spec)
    assert (core.retry_backoff_ms, core.retry_backoff_max_ms, core.retry_jitter) == (10_000, 60_000, 0.2)
    plain = app.jobs["fixed"]
    assert (plain.retry_backoff_max_ms, plain.retry_jitter) == (10_000, 0.0)
    assert "retry_backoff_max_ms" not in plain.canonical()
    shorter = r"field 'retry_backoff_max': '5s' is shorter than retry_backoff '10s'"
    with pytest.raises(ConfigError, match=shorter):
        app.cron("@hourly", name="bad", retry_backoff_max="5s")(grows)
    with pytest.raises(ConfigError, match=r"field 'retry_jitter': 2 is outside 0-1"):
        app.cron("@hourly", name="bad", retry_jitter=2)(grows)


def test_the_agent_build_gives_the_core_the_configured_policy() -> None:
    spec = JobSpec.create("j", "@hourly", command=("true",), retry_backoff_max_ms=120_000, retry_jitter=0.5)
    core = core_job(spec)
    assert (core.retry_backoff_max_ms, core.retry_jitter) == (120_000, 0.5)
