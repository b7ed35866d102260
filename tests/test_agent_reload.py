"""SIGHUP reloads the config (issue 26 item 7), on a real agent process and a real Redis.

* a file that does not validate is refused with one line (a ``reload``
  error event and a ``config_refused`` alert) and the node runs on with the
  config it had;
* a change the protocol does not see (``alert_on``) is taken live: the next
  failed slot alerts;
* a changed definition (another schedule) is swapped live: the slots after
  the reload's boundary follow the new schedule, the node runs on;
* a ``[cluster]`` setting a running node cannot take (the lease) is applied
  by a graceful stop (exit 0) for the service manager to restart the agent
  with the new file.

And :func:`plan_reload`'s reading of what changed, as a pure function.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from quorum_cron.agent.reload import plan_reload
from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster
from tests.test_agent_observability import AlertSink

JOB = (
    '[[jobs]]\nname = "tick"\nschedule = "{schedule}"\nstarting_deadline = "1s"\n'
    'command = ["/bin/false"]\nalert_on = {alert_on}\n'
)


def _fields(doc: dict[str, object]) -> dict[str, object]:
    fields = doc["fields"]
    assert isinstance(fields, dict)
    return fields


@pytest.mark.slow
def test_sighup_refuses_a_bad_file_takes_jobs_live_and_restarts_for_a_cluster_setting(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    sink = AlertSink()
    c = Cluster(tmp_path, redis_server.url, 1, namespace="reload")
    extra = f'alert_url = "{sink.url}"\n'
    try:
        cfg = c.config(JOB.format(schedule="@every 1s", alert_on='["missed"]'), extra=extra)
        c.start("n1", cfg)
        c.wait_joined(["n1"])
        c.wait(
            "a failed tick", lambda: c.nodes["n1"].logged("finish", job="tick", state="failed") or None, 20
        )
        assert not [d for d in list(sink.docs) if d["kind"] == "job_failed"]  # alert_on = ["missed"]

        # alert_on only: taken live, the next failed slot alerts.
        c.config(JOB.format(schedule="@every 1s", alert_on='["failed"]'), extra=extra)
        c.signal("n1", signal.SIGHUP)
        (applied,) = c.wait("the reload event", lambda: c.nodes["n1"].logged("config_reloaded") or None, 10)
        assert "alert_on changed: tick" in str(applied["msg"]), applied
        c.wait(
            "a job_failed alert",
            lambda: [d for d in list(sink.docs) if d["kind"] == "job_failed"] or None,
            20,
        )

        # A file that does not validate: one line, and the node runs on.
        cfg.write_text(cfg.read_text().replace('schedule = "@every 1s"', 'schedule = "@every 1 fortnight"'))
        c.signal("n1", signal.SIGHUP)
        (refused,) = c.wait("the refusal", lambda: c.nodes["n1"].logged("reload") or None, 10)
        assert refused["level"] == "error" and "\n" not in str(refused["msg"]), refused
        assert str(refused["msg"]).startswith("reload refused, keeping the running config: "), refused
        assert "fortnight" in str(refused["msg"])
        c.wait(
            "config_refused at the URL",
            lambda: [d for d in list(sink.docs) if d["kind"] == "config_refused"] or None,
            10,
        )
        before = len(c.nodes["n1"].logged("finish", job="tick"))
        c.wait(
            "the old config still running",
            lambda: len(c.nodes["n1"].logged("finish", job="tick")) >= before + 2 or None,
            20,
        )
        assert c.nodes["n1"].proc.poll() is None

        # A new definition (every 2 s, not 1 s): swapped live from the next slot, no restart.
        c.config(JOB.format(schedule="@every 2s", alert_on='["failed"]'), extra=extra)
        c.signal("n1", signal.SIGHUP)
        (swapped,) = c.wait("the swap", lambda: c.nodes["n1"].logged("reload", job="tick") or None, 10)
        boundary = swapped["boundary"]
        assert isinstance(boundary, int), swapped
        reloads = c.wait(
            "the reload event",
            lambda: c.nodes["n1"].logged("config_reloaded")[1:] or None,
            10,
        )
        redefined = reloads[-1]
        assert "redefined: tick" in str(redefined["msg"]) and redefined["restart"] is False, redefined

        def after() -> list[int]:
            slots = [e["slot"] for e in c.nodes["n1"].logged("finish", job="tick")]
            return [s for s in slots if isinstance(s, int) and s > boundary]

        later = c.wait("three slots of the new schedule", lambda: after() if len(after()) >= 3 else None, 20)
        assert all(s % 2_000 == 0 for s in later) and len(set(later)) == len(later), later
        assert c.nodes["n1"].proc.poll() is None and not c.nodes["n1"].logged("stopping")

        # A cluster setting the running node cannot take: a graceful stop, exit 0, for the
        # supervisor to start it again with the new file (if it restarts on exit 0).
        c.config(JOB.format(schedule="@every 2s", alert_on='["failed"]'), extra=extra + 'lease = "20s"\n')
        c.signal("n1", signal.SIGHUP)
        assert c.nodes["n1"].proc.wait(20) == 0, c.describe()
        restart = c.nodes["n1"].logged("config_reloaded")[-1]
        assert "cluster settings needing a restart: lease;" in str(restart["msg"]), restart
        # The line says what happens: the node stops, and comes back only under a supervisor
        # that restarts on exit 0 (not one that restarts on failure alone).
        assert "restarting" not in str(restart["msg"]), restart
        assert str(restart["msg"]).endswith(
            "stopping gracefully: start it again to apply them (its supervisor does so only if it "
            "restarts on exit 0, as the shipped unit's Restart=always does)"
        ), restart
        assert restart["restart"] is True, restart
        assert c.nodes["n1"].logged("left")
    finally:
        c.close()
        sink.close()


@pytest.mark.slow
def test_sighup_refuses_a_redis_url_the_restart_would_refuse(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    """A URL option redis-py has not got passes load_config but not ``validate`` nor the agent's start.

    Such a reload was taken as a cluster change: the node stopped to restart, and the restart
    refused the file, leaving the node down. It is refused like any file that does not
    validate, and the node runs on.
    """
    c = Cluster(tmp_path, redis_server.url, 1, namespace="reload-url")
    try:
        cfg = c.config(JOB.format(schedule="@every 1s", alert_on="[]"))
        c.start("n1", cfg)
        c.wait_joined(["n1"])
        cfg.write_text(
            cfg.read_text().replace(
                f'redis_url = "{redis_server.url}"', f'redis_url = "{redis_server.url}?foo=1"'
            )
        )
        c.signal("n1", signal.SIGHUP)
        (refused,) = c.wait("the refusal", lambda: c.nodes["n1"].logged("reload") or None, 10)
        assert refused["level"] == "error" and "\n" not in str(refused["msg"]), refused
        assert str(refused["msg"]).startswith("reload refused, keeping the running config: "), refused
        assert "field 'redis_url'" in str(refused["msg"]) and "'foo'" in str(refused["msg"]), refused
        before = len(c.nodes["n1"].logged("finish", job="tick"))
        c.wait(
            "the old config still running",
            lambda: len(c.nodes["n1"].logged("finish", job="tick")) >= before + 2 or None,
            20,
        )
        assert c.nodes["n1"].proc.poll() is None and not c.nodes["n1"].logged("stopping")
    finally:
        c.close()


def _config(*jobs: JobSpec, **cluster: object) -> Config:
    return Config(ClusterConfig(namespace="r", size=3, **cluster), jobs)  # type: ignore[arg-type]


def test_plan_reload_tells_live_changes_from_those_that_need_a_restart() -> None:
    a = JobSpec.create("a", "@every 10s", command=("true",))
    b = JobSpec.create("b", "@every 10s", command=("true",))
    quiet_a = JobSpec.create("a", "@every 10s", command=("true",), alert_on=("missed",))
    slow_b = JobSpec.create("b", "@every 20s", command=("true",))
    c = JobSpec.create("c", "@every 10s", command=("true",))
    assert plan_reload(_config(a, b), _config(a, b)).empty
    live = plan_reload(_config(a, b), _config(quiet_a, b, alert_url="http://127.0.0.1:9/x"))
    assert (live.alerting, live.cluster_live, live.needs_restart) == (("a",), ("alert_url",), False)
    jobs = plan_reload(_config(a, b), _config(quiet_a, slow_b, c))
    assert (jobs.added, jobs.redefined, jobs.jobs_changed, jobs.needs_restart) == (
        ("c",),
        ("b",),
        True,
        False,
    )
    plan = plan_reload(_config(a, b), _config(quiet_a, slow_b, c, lease_ms=20_000))
    assert (plan.added, plan.removed, plan.redefined, plan.alerting) == (("c",), (), ("b",), ("a",))
    # Named as the file spells it: the log line said "lease_ms", a key no config file has.
    assert plan.cluster_restart == ("lease",) and plan.needs_restart
    assert "cluster settings needing a restart: lease" in plan.describe()
    assert plan_reload(_config(a, b), _config(a)).removed == ("b",)
    assert "redefined: b" in plan.describe() and "added: c" in plan.describe()
