"""From a loaded configuration to a running agent's pieces: settings and jobs.

The configuration module validates; this module only translates its values
into what :class:`~quorum_cron.agent.runtime.Agent` takes, so the command
line and the demo build agents the same way. The store is opened by
:func:`quorum_cron.agent.startup.open_node_store` (the one place, issue 25).
"""

from __future__ import annotations

from collections.abc import Mapping

from quorum_cron.agent.jobprocess import CommandTarget, Target
from quorum_cron.agent.membership import config_configuration
from quorum_cron.agent.spec import AgentJob, AgentSettings
from quorum_cron.config.settings import ClusterConfig, JobSpec
from quorum_cron.core.node import CoreJob, NodeSettings
from quorum_cron.errors import QuorumCronError
from quorum_cron.store.redis import RedisStore

__all__ = ["agent_job", "agent_settings", "core_job", "replica_shortfall"]


def replica_shortfall(store: RedisStore, wait_replicas: int, shown_url: str) -> str | None:
    """A one-line warning when the store has fewer replicas than ``wait_replicas`` right now.

    Every acted-on write would then count as lost (WAIT never gets its
    acknowledgements): the node runs, but nothing commits until a replica
    is back — most likely ``wait_replicas`` set for a standalone Redis.
    None when enough replicas are connected, or when the store cannot be
    asked (the agent reports an unreachable store itself).
    """
    if wait_replicas <= 0:
        return None
    try:
        have = store.replicas_connected()  # on a cluster: the fewest of any master
    except QuorumCronError:
        return None
    if have >= wait_replicas:
        return None
    return (
        f"wait_replicas = {wait_replicas} but {shown_url} has {have} connected replica(s): "
        f"every vote and start counts as lost until {wait_replicas} are connected "
        f"(expected a replicated Redis; set wait_replicas = 0 for a standalone one)"
    )


def core_job(spec: JobSpec) -> CoreJob:
    return CoreJob(
        name=spec.name,
        schedule=spec.schedule,
        spec_hash=spec.spec_hash,
        deadline_ms=spec.starting_deadline_ms,
        timeout_ms=spec.timeout_ms,
        overlap=spec.overlap,
        delivery=spec.delivery,
        misfire=spec.misfire,
        retries=spec.retries,
        retry_backoff_ms=spec.retry_backoff_ms,
        retry_backoff_max_ms=spec.retry_backoff_max_ms,
        retry_jitter=spec.retry_jitter,
        run_local=spec.on_store_unavailable == "run-local",
    )


def agent_job(spec: JobSpec, target: Target | None = None) -> AgentJob:
    """The agent's view of a configured job (``target`` overrides the command: the Python API)."""
    if target is None:
        if spec.in_process:
            raise ValueError(f"job {spec.name!r} is in-process: expected its Python callable as target")
        env: Mapping[str, str] | None = dict(spec.env) if spec.env else None
        target = CommandTarget(
            argv=tuple(spec.command or ()),
            shell=spec.shell,
            env=env,
            cwd=spec.cwd,
            stdin=None if spec.stdin is None else spec.stdin.encode("utf-8"),
            inherit_env=spec.inherit_env,
            passthrough=spec.env_passthrough,
        )
    return AgentJob(
        core=core_job(spec),
        target=target,
        on_store_unavailable=spec.on_store_unavailable,
        alert_on=spec.alert_on,
    )


def agent_settings(
    cluster: ClusterConfig,
    node_id: str,
    *,
    grace_ms: int = 30_000,
    assign_poll_ms: int = 1_000,
    source: str = "the config",
) -> AgentSettings:
    """Protocol and runtime settings for ``node_id`` in ``cluster`` (``source``: the config's path)."""
    node = NodeSettings(
        node_id=node_id,
        quorum=cluster.quorum,
        max_skew_ms=cluster.max_skew_ms,
        lease_ms=cluster.lease_ms,
        start_timeout_ms=cluster.start_timeout_ms,
        assign_poll_ms=assign_poll_ms,
    )
    return AgentSettings(
        node=node,
        namespace=cluster.namespace,
        size=cluster.size,
        heartbeat_ms=cluster.heartbeat_ms,
        grace_ms=grace_ms,
        ntp_servers=tuple(cluster.ntp_servers),
        ntp_unreachable=cluster.ntp_unreachable,
        clock_check_interval_ms=cluster.clock_check_interval_ms,
        alert_command=cluster.alert_command,
        alert_url=cluster.alert_url,
        tail_bytes=cluster.output_tail,
        output_log_lines=cluster.output_log_lines,
        output_log_rate=cluster.output_log_rate,
        membership=config_configuration(cluster),
        config_source=source,
    )
