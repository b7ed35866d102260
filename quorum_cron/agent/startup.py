"""Starting a node: the one path of ``quorum-cron agent`` and the Python API (``App``).

Both faces go through the same steps, so a check added here holds for both:

0. :func:`tune_allocator_for` — from 1,000 jobs, the C allocator's settings
   (:mod:`.allocator`), before any thread of the node starts;
1. :func:`open_node_store` — the cluster's store on a fail-fast client
   (:func:`quorum_cron.store.options.open_store` with :func:`store_options`);
2. :func:`preflight` — the server checks of :mod:`.preflight` (credentials,
   a Redis at all, the support matrix, the members key, an ACL that refuses
   the scripts, the eviction policy), each refusal one line (:class:`~.preflight.PreflightError`);
   an evicting server is refused unless the caller allows it, and then said
   loudly; a replica shortfall is a warning, and so is a server that lets
   clients in without the password the URL gives (:func:`report_preflight`);
3. :func:`new_agent` — the :class:`~.runtime.Agent` on that store;
4. :func:`run_node` — the bad-value reporter attached, and, when the caller
   owns the process (the CLI, ``App.run()``), the signals: SIGTERM or SIGINT
   starts a graceful stop and a second one ends the grace period; SIGHUP
   reloads the config file where there is one (the CLI's
   :class:`~.reload.ConfigReload`) and otherwise stops gracefully like
   SIGTERM (the Python API: its jobs come from code, a restart applies a change).

What differs stays in the faces: the CLI's options, metrics and web server,
exit codes and banner; the API's injected store (a ``MemoryStore`` has no
server to check) and its cancellation.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from quorum_cron.agent.allocator import tune_allocator
from quorum_cron.agent.badvalues import BadValueReporter
from quorum_cron.agent.build import agent_settings, replica_shortfall
from quorum_cron.agent.heap import SETTLE_MIN_JOBS
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.preflight import PreflightError, check_scripts, check_server, eviction_problem
from quorum_cron.agent.reload import ConfigReload
from quorum_cron.agent.runtime import Agent
from quorum_cron.agent.spec import AgentJob
from quorum_cron.config.settings import ClusterConfig
from quorum_cron.redact import redact_url
from quorum_cron.store.base import Store
from quorum_cron.store.options import StoreOptions, open_store
from quorum_cron.store.passwords import password_not_required
from quorum_cron.store.redis import RedisStore

__all__ = [
    "STOP_SIGNALS",
    "Preflight",
    "new_agent",
    "open_node_store",
    "preflight",
    "report_preflight",
    "run_node",
    "store_options",
    "tune_allocator_for",
]

log = logging.getLogger(EVENT_LOGGER)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Each starts a graceful stop (SIGHUP: unless a config reload takes it); a second one ends the grace."""


def store_options(cluster: ClusterConfig) -> StoreOptions:
    """The store settings of ``cluster`` (the config's names, the store's keywords)."""
    return StoreOptions(
        namespace=cluster.namespace,
        retention_ms=cluster.retention_ms,
        ledger_maxlen=cluster.ledger_maxlen,
        wait_replicas=cluster.wait_replicas,
        wait_timeout_ms=cluster.wait_timeout_ms,
    )


def open_node_store(url: str, cluster: ClusterConfig) -> tuple[RedisStore, str]:
    """The cluster's store on a fail-fast client, and its printable (password-free) URL.

    A bad URL raises :class:`~quorum_cron.errors.ConfigError`; nothing is
    sent to the server yet (except a cluster's slot-map read).
    """
    return open_store(url, store_options(cluster)), redact_url(url)


@dataclass(frozen=True)
class Preflight:
    """What the server checks found that lets the node start, but must be said."""

    policy: str | None
    """The server's ``maxmemory-policy`` (None: not readable)."""
    eviction: str | None
    """The eviction problem the caller chose to run with (``allow_evicting``), else None."""
    shortfall: str | None
    """Fewer connected replicas than ``wait_replicas`` (see :func:`~.build.replica_shortfall`)."""
    override: str = ""
    """How the caller allowed an evicting server (named in the log line)."""
    no_password: str | None = None
    """The URL gives a password, but the server lets clients in without one
    (:func:`~quorum_cron.store.passwords.password_not_required`), else None."""


def preflight(
    store: RedisStore, shown_url: str, wait_replicas: int, *, allow_evicting: bool, override: str
) -> Preflight:
    """Check the server before the node votes; raises :class:`PreflightError` with one line.

    ``override`` names how the caller allows an evicting server (the CLI's
    ``--allow-evicting-redis``, the API's ``allow_evicting_redis=True``):
    the refusal says it. A server that cannot be reached passes (the node
    waits for it).
    """
    policy = check_server(store, shown_url)  # the store itself: its members key, no raw client
    check_scripts(store)
    eviction = eviction_problem(policy or "", shown_url)
    if eviction is not None and not allow_evicting:
        raise PreflightError(f"{eviction}, or pass {override} to run anyway")
    shortfall = replica_shortfall(store, wait_replicas, shown_url)
    return Preflight(policy, eviction, shortfall, override, password_not_required(store, shown_url))


def report_preflight(found: Preflight, *, warn: Callable[[str], None] | None = None) -> None:
    """Log what :func:`preflight` let pass; ``warn`` takes the replica warning instead (plain stderr).

    A server that does not check the URL's password is always an event (``store_password``,
    level warning): a node's log is where the operator looks for what the node runs on."""
    if found.no_password is not None:
        event(log, logging.WARNING, "store_password", found.no_password)
    if found.eviction is not None:
        event(
            log,
            logging.ERROR,
            "eviction",
            f"UNSAFE ({found.override}): {found.eviction}",
            policy=found.policy,
        )
    if found.shortfall is not None:
        if warn is not None:
            warn(found.shortfall)
        else:
            event(log, logging.WARNING, "replicas", found.shortfall)


def tune_allocator_for(jobs: int) -> tuple[str, ...]:
    """For a node of ``jobs`` >= :data:`~.heap.SETTLE_MIN_JOBS` jobs: the C allocator's settings
    (:mod:`.allocator`); returns those applied. A face calls it first, before any thread of the
    node starts (metrics, dashboard, the server checks' worker thread): the arena setting holds
    only for threads that allocate for the first time afterwards."""
    if jobs < SETTLE_MIN_JOBS:
        return ()
    tuned = tune_allocator()
    log.debug("allocator: %s", ", ".join(tuned) or "left as it is")
    return tuned


def new_agent(
    cluster: ClusterConfig,
    node_id: str,
    jobs: Sequence[AgentJob],
    store: Store,
    *,
    grace_ms: int,
    metrics: Metrics,
    source: str = "the config",
) -> Agent:
    """The node's :class:`Agent`; on a Redis store it also listens to the store's notices (pub/sub)."""
    settings = agent_settings(cluster, node_id, grace_ms=grace_ms, source=source)
    return Agent(settings, jobs, store, notices=isinstance(store, RedisStore), metrics=metrics)


async def run_node(agent: Agent, *, signals: bool, reloader: ConfigReload | None = None) -> int:
    """Run ``agent`` until it stops; returns its exit code.

    Bad values the store reads are reported (log, metric, alert) through a
    :class:`BadValueReporter`. ``signals``: install the stop signals
    (:data:`STOP_SIGNALS`) for the time of the run — only for a caller that
    owns the process; ``reloader`` takes SIGHUP first. Cancelling the
    caller stops the node gracefully before the cancellation goes on.
    """
    loop = asyncio.get_running_loop()
    if isinstance(agent.store, RedisStore):
        BadValueReporter(agent.metrics, agent.alerts).attach(agent.store, loop)
    installed: tuple[signal.Signals, ...] = STOP_SIGNALS if signals else ()
    received = 0

    def on_signal(signum: signal.Signals) -> None:
        nonlocal received
        reloading = signum == signal.SIGHUP and received == 0 and reloader is not None
        if reloading and reloader is not None and reloader.reload() != "restart":
            return  # refused (the old config runs on) or taken live
        received += 1
        if received == 1:
            agent.request_stop(f"{signum.name} received (a second signal stops running jobs at once)")
        else:
            agent.end_grace(f"second {signum.name}")

    for sig in installed:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        task = asyncio.ensure_future(agent.run())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            agent.request_stop("cancelled")
            await task
            raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
