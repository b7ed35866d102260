"""``quorum-cron agent``: run one node until SIGTERM.

Start-up (store, server checks, signals, the bad-value reporter) is the
Python API's too (:mod:`quorum_cron.agent.startup`). Signals: SIGTERM or
SIGINT starts a graceful stop (no more votes, running jobs get the grace
period, results are recorded, membership is left, exit 0); a second one
ends the grace period at once (running jobs are stopped and recorded as
failed). SIGHUP reloads the config file
(``agent/reload.py``): a bad file is refused with one line and the node
runs on; jobs added, removed or redefined are swapped live (a changed job
from its next slot), as are ``alert_on``, the alert hook and output
logging; another ``[cluster]`` setting is applied by a graceful stop (as
SIGTERM) for the service manager to restart the agent with the new file.

Exit status: 0 after a graceful stop; 1 for bad input — a bad config, a
bad option (node id, ``--grace``, metrics address), or a Redis server that
refuses the credentials, is not Redis, holds corrupt membership or has a
``maxmemory-policy`` that can evict keys (unless ``--allow-evicting-redis``;
see ``agent/preflight.py``); 3 when another live process holds the node id.
Every error is one line on stderr. With ``--log-json`` everything the agent
writes after its options are checked is a JSON line (the start banner and
the replica warning included), so a log shipper never sees plain text.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from quorum_cron.agent.build import agent_job
from quorum_cron.agent.logs import EVENT_LOGGER, configure_logging, event, scrub
from quorum_cron.agent.membership import NodeIdTaken, node_id_problem
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.preflight import PreflightError
from quorum_cron.agent.redisclient import default_node_id
from quorum_cron.agent.reload import ConfigReload
from quorum_cron.agent.runtime import EXIT_ID_TAKEN
from quorum_cron.agent.startup import (
    new_agent,
    open_node_store,
    preflight,
    report_preflight,
    run_node,
    tune_allocator_for,
)
from quorum_cron.commands.common import config_option, load, redis_option, redis_url_problem, store_url
from quorum_cron.config.durations import parse_duration
from quorum_cron.config.file import load_config
from quorum_cron.config.settings import Config
from quorum_cron.errors import ConfigError, QuorumCronError
from quorum_cron.printable import printable

__all__ = ["agent"]

log = logging.getLogger(EVENT_LOGGER)

NODE_ID_ENV = "QUORUM_CRON_NODE_ID"

EXIT_USAGE = 1
"""A bad option (node id, duration, metrics address): bad input, like every other command's."""


@click.command("agent")
@config_option
@click.option(
    "--node-id",
    metavar="ID",
    envvar=NODE_ID_ENV,
    help="This node's id (default: the host name; a StatefulSet pod's name). Unique per process. "
    "Env: QUORUM_CRON_NODE_ID.",
)
@redis_option
@click.option("--metrics-port", type=click.IntRange(0, 65535), help="Serve Prometheus metrics on this port.")
@click.option("--metrics-addr", default="127.0.0.1", show_default=True, help="Address for --metrics-port.")
@click.option(
    "--web-port",
    type=click.IntRange(0, 65535),
    help="Also serve the web dashboard on this port (docs/web.md; tokens only from the environment).",
)
@click.option("--web-addr", default="127.0.0.1", show_default=True, help="Address for --web-port.")
@click.option(
    "--grace", default="30s", show_default=True, metavar="DURATION", help="How long running jobs get at stop."
)
@click.option("--log-json", is_flag=True, help="Log one JSON object per line (stderr).")
@click.option(
    "--allow-evicting-redis",
    is_flag=True,
    help="Run even if Redis's maxmemory-policy can evict keys (unsafe: see docs/operations.md).",
)
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
    web_port: int | None,
    web_addr: str,
    grace: str,
    log_json: bool,
    log_level: str,
    allow_evicting_redis: bool,
) -> None:
    """Run this server's node of the cluster: vote on due slots, run the ones assigned here."""
    config = load(config_path)
    if node_id is None and os.environ.get(NODE_ID_ENV) == "":
        # click reads an empty variable as unset: the host name would stand in for a
        # QUORUM_CRON_NODE_ID=$UNDEFINED_VAR, a node id the operator never chose.
        _exit(
            EXIT_USAGE, f"{NODE_ID_ENV} is set but empty (expected a node id, or unset it for the host name)"
        )
    node = node_id if node_id is not None else default_node_id()
    problem = node_id_problem(node)
    if problem is not None:
        _exit(EXIT_USAGE, problem + ("" if node_id is not None else " (the host name; pass --node-id ID)"))
    try:
        grace_ms = parse_duration(grace, what="--grace")
    except ConfigError as exc:
        _exit(EXIT_USAGE, str(exc))
    tune_allocator_for(sum(not spec.in_process for spec in config.jobs))  # before any thread starts
    try:
        store, shown_url = open_node_store(store_url(config, redis_url), config.cluster)
    except QuorumCronError as exc:
        _exit(1, str(exc))
    try:
        found = preflight(
            store,
            shown_url,
            config.cluster.wait_replicas,
            allow_evicting=allow_evicting_redis,
            override="--allow-evicting-redis",
        )
    except PreflightError as exc:
        store.close()
        _exit(1, str(exc))
    configure_logging(node, json_lines=log_json, level=log_level)
    report_preflight(found, warn=None if log_json else lambda line: click.echo(f"warning: {line}", err=True))
    jobs = [agent_job(spec) for spec in config.jobs if not spec.in_process]
    metrics = Metrics()
    if metrics_port is not None:
        try:
            metrics.serve(metrics_port, metrics_addr)
        except (OSError, ValueError) as exc:
            store.close()
            _exit(EXIT_USAGE, f"cannot serve metrics on {metrics_addr!r} port {metrics_port}: {exc}")
    runtime = new_agent(
        config.cluster, node, jobs, store, grace_ms=grace_ms, metrics=metrics, source=config.source
    )
    reloader = ConfigReload(
        config,
        lambda: _load_for_reload(config.source, redis_url),
        jobs=runtime.jobs,
        alerts=runtime.alerts,
        runs=runtime.runs,
        agent=runtime,
    )
    web_server = None
    if web_port is not None:
        from quorum_cron.commands.web import start_web_thread

        web_server = start_web_thread(config, redis_url, web_addr, web_port)
    banner = f"quorum-cron agent {node}: {len(jobs)} job(s), store {shown_url}"
    if log_json:
        event(log, logging.INFO, "starting", banner, jobs=len(jobs), store=shown_url)
    else:
        click.echo(banner, err=True)
    try:
        code = asyncio.run(run_node(runtime, signals=True, reloader=reloader))
    except NodeIdTaken as exc:
        _exit(EXIT_ID_TAKEN, str(exc))
    except QuorumCronError as exc:
        # The store refused us for good (not an outage, which the agent waits out).
        _exit(1, str(exc))
    finally:
        store.close()
        if web_server is not None:
            web_server.stop()
    sys.exit(code)


def _load_for_reload(source: str, override: str | None) -> Config:
    """The file again, refused (ConfigError) where the agent would refuse to start on it.

    A reload that changes the Redis URL restarts the agent; load_config checks the URL's form
    but not its connection options (the config reaches no store implementation), which
    ``validate`` and the agent's start check. A SIGHUP with ``?foo=1`` added was taken, the
    agent stopped "to restart", and the restart refused the file: the node was down. The URL
    checked is the one the restart would use (``--redis`` / QUORUM_CRON_REDIS_URL first).
    """
    new = load_config(source)
    url = override or new.cluster.redis_url
    if not url:
        raise ConfigError(
            f"{source}: no Redis URL: set cluster.redis_url, pass --redis URL or set QUORUM_CRON_REDIS_URL"
        )
    if (problem := redis_url_problem(url)) is not None:
        where = "--redis / QUORUM_CRON_REDIS_URL" if override else "cluster: field 'redis_url'"
        raise ConfigError(f"{source}: {where}: {problem}")
    return new


def _exit(code: int, message: str) -> NoReturn:
    """One line on stderr, password-free and without control characters, then exit."""
    click.echo(f"error: {printable(scrub(message), 2000)}", err=True)
    sys.exit(code)
