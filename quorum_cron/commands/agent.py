"""``quorum-cron agent``: run one node until SIGTERM.

Signals: SIGTERM, SIGINT or SIGHUP starts a graceful stop (no more votes,
running jobs get the grace period, results are recorded, membership is
left, exit 0); a second one ends the grace period at once (running jobs are
stopped and recorded as failed). SIGHUP does not reload the config: a
reload would change the job set and spec hashes under slots already voted
on, so it stops like SIGTERM and the service manager restarts the agent
with the new config (its default action, killing the agent on the spot,
orphaned the running job and left its slot ``running``). Exit status: 0 after a graceful stop, 2 for a bad
config or option, 3 when another live process holds the node id.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import click

from quorum_cron.agent.badvalues import BadValueReporter
from quorum_cron.agent.connect import default_node_id
from quorum_cron.agent.logs import configure_logging
from quorum_cron.agent.membership import NodeIdTaken
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.runtime import EXIT_ID_TAKEN, Agent
from quorum_cron.agent.setup import agent_job, agent_settings, replica_shortfall
from quorum_cron.commands.common import config_option, load, redis_option, store_for
from quorum_cron.durations import parse_duration
from quorum_cron.errors import ConfigError
from quorum_cron.store.redis import RedisStore

__all__ = ["STOP_SIGNALS", "agent"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Each starts a graceful stop; a second one ends the grace period."""


@click.command("agent")
@config_option
@click.option("--node-id", metavar="ID", help="This node's id (default: the host name). Unique per process.")
@redis_option
@click.option("--metrics-port", type=click.IntRange(0, 65535), help="Serve Prometheus metrics on this port.")
@click.option("--metrics-addr", default="0.0.0.0", show_default=True, help="Address for --metrics-port.")
@click.option(
    "--grace", default="30s", show_default=True, metavar="DURATION", help="How long running jobs get at stop."
)
@click.option("--log-json", is_flag=True, help="Log one JSON object per line (stderr).")
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
)
def agent(
    config_path: Path,
    node_id: str | None,
    redis_url: str | None,
    metrics_port: int | None,
    metrics_addr: str,
    grace: str,
    log_json: bool,
    log_level: str,
) -> None:
    """Run this server's node of the cluster: vote on due slots, run the ones assigned here."""
    config = load(config_path)
    node = node_id or default_node_id()
    try:
        grace_ms = parse_duration(grace, what="--grace")
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--grace") from None
    store, shown_url = store_for(config, redis_url)
    configure_logging(node, json_lines=log_json, level=log_level)
    shortfall = replica_shortfall(store, config.cluster.wait_replicas, shown_url)
    if shortfall is not None:
        click.echo(f"warning: {shortfall}", err=True)
    settings = agent_settings(config.cluster, node, grace_ms=grace_ms)
    jobs = [agent_job(spec) for spec in config.jobs if not spec.in_process]
    metrics = Metrics()
    if metrics_port is not None:
        metrics.serve(metrics_port, metrics_addr)
    runtime = Agent(settings, jobs, store, notices=store.client, metrics=metrics)
    bad_values = BadValueReporter(metrics, runtime.alerts)
    click.echo(f"quorum-cron agent {node}: {len(jobs)} job(s), store {shown_url}", err=True)
    try:
        code = asyncio.run(_serve(runtime, store, bad_values))
    except NodeIdTaken as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_ID_TAKEN)
    finally:
        store.close()
    sys.exit(code)


async def _serve(runtime: Agent, store: RedisStore, bad_values: BadValueReporter) -> int:
    loop = asyncio.get_running_loop()
    bad_values.attach(store, loop)
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        name = signal.Signals(signum).name
        if signals == 1:
            runtime.request_stop(f"{name} received")
        else:
            runtime.end_grace(f"second {name}")

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await runtime.run()
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
