"""SIGHUP: read the config file again, refuse a bad one, take what can be taken while running.

What a reload changes while the node runs:

* **Jobs** — added, removed, or defined differently (another spec hash):
  swapped live through :meth:`~quorum_cron.agent.runtime.Agent.replace_jobs`
  (:mod:`quorum_cron.core.jobswap`). A changed job applies from its next
  slot: a slot this node already took in (voted, committed, running, a
  retry of one) keeps the definition it was voted under — its hash, its
  command, environment and timeout — and a run already going is left
  alone. The spec-hash rule holds throughout: a slot commits only on a
  quorum of ONE hash, so nodes that disagree while they are reloaded one by
  one never fire a slot together. An added job is scheduled like at a
  node's start; a removed one takes in no new slot and lets its voted or
  running ones finish.
* **What the protocol does not see** — each job's ``alert_on`` (not part of
  its spec hash), the alert hook (``alert_command``, ``alert_url``) and how
  job output is logged: at once, to the next alert and the next run.
* **Any other ``[cluster]`` setting** (size, quorum, members, lease, Redis
  URL, namespace, clock settings...) is what the store, the membership and
  every slot's votes are built on: it is not swapped under a running node.
  Such a reload stops the node gracefully: :meth:`ConfigReload.reload`
  answers ``restart``, the agent stops like on SIGTERM (running jobs finish
  and are recorded, the membership is left, exit 0) and relies on its
  supervisor to start it again with the new file: the shipped systemd unit
  (``Restart=always``) does; one that restarts only on failure
  (``Restart=on-failure``), nohup or a container without a restart policy
  leaves it stopped. Nothing of the new file is taken then, jobs included:
  the next start takes it whole.

A file that does not load or validate is refused with one line (log and
the ``config_refused`` alert); the node keeps running the config it has.
Every outcome is logged, and kept in the store's alert stream (the Cluster
page) as the cluster's record of who reloaded what.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, replace
from typing import Literal

from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.build import agent_job
from quorum_cron.agent.executions import Runs
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.runtime import Agent
from quorum_cron.agent.spec import AgentJob
from quorum_cron.config.settings import ClusterConfig, Config
from quorum_cron.errors import ConfigError

__all__ = ["LIVE_CLUSTER_KEYS", "ConfigReload", "ReloadPlan", "plan_reload"]

log = logging.getLogger(EVENT_LOGGER)

LIVE_CLUSTER_KEYS = ("alert_command", "alert_url", "output_log_lines", "output_log_rate")
"""``[cluster]`` settings a running node takes on a reload; any other change needs a restart."""

RESTART_NOTE = (
    "start it again to apply them (its supervisor does so only if it restarts on exit 0, "
    "as the shipped unit's Restart=always does)"
)
"""What a reload needing a restart leaves to the operator: the agent stops (exit 0), not restarts."""

Verdict = Literal["refused", "unchanged", "applied", "restart"]


@dataclass(frozen=True, slots=True)
class ReloadPlan:
    """What differs between the running config and the new one."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    redefined: tuple[str, ...] = ()
    """Jobs whose spec hash changed."""
    alerting: tuple[str, ...] = ()
    """Jobs whose ``alert_on`` alone changed (applied live)."""
    cluster_live: tuple[str, ...] = ()
    cluster_restart: tuple[str, ...] = ()

    @property
    def jobs_changed(self) -> bool:
        """Jobs added, removed or redefined: swapped live by a node that can (``Agent.replace_jobs``)."""
        return bool(self.added or self.removed or self.redefined)

    @property
    def needs_restart(self) -> bool:
        """A ``[cluster]`` setting a running node cannot take (see the module docstring)."""
        return bool(self.cluster_restart)

    @property
    def empty(self) -> bool:
        return not (self.jobs_changed or self.needs_restart or self.alerting or self.cluster_live)

    def describe(self) -> str:
        parts = []
        for label, names in (
            ("added", self.added),
            ("removed", self.removed),
            ("redefined", self.redefined),
            ("alert_on changed", self.alerting),
            ("cluster settings taken live", self.cluster_live),
            ("cluster settings needing a restart", self.cluster_restart),
        ):
            if names:
                parts.append(f"{label}: {', '.join(names)}")
        return "; ".join(parts) or "no change"


def _cluster_diff(old: ClusterConfig, new: ClusterConfig) -> list[str]:
    """The ``[cluster]`` keys whose values differ, as the file spells them (``lease``, not ``lease_ms``)."""
    return [
        name.removesuffix("_ms")
        for name in old.__dataclass_fields__
        if getattr(old, name) != getattr(new, name)
    ]


def plan_reload(old: Config, new: Config) -> ReloadPlan:
    """Compare the job definitions (by spec hash) and the cluster settings of two configs.

    In-process jobs (an :class:`~quorum_cron.app.App`'s Python functions) are
    not the agent command's to run, so they are left out on both sides.
    """
    before = {j.name: j for j in old.jobs if not j.in_process}
    after = {j.name: j for j in new.jobs if not j.in_process}
    changed_cluster = _cluster_diff(old.cluster, new.cluster)
    return ReloadPlan(
        added=tuple(sorted(set(after) - set(before))),
        removed=tuple(sorted(set(before) - set(after))),
        redefined=tuple(
            sorted(n for n in set(before) & set(after) if before[n].spec_hash != after[n].spec_hash)
        ),
        alerting=tuple(
            sorted(
                n
                for n in set(before) & set(after)
                if before[n].spec_hash == after[n].spec_hash and before[n].alert_on != after[n].alert_on
            )
        ),
        cluster_live=tuple(k for k in changed_cluster if k in LIVE_CLUSTER_KEYS),
        cluster_restart=tuple(k for k in changed_cluster if k not in LIVE_CLUSTER_KEYS),
    )


class ConfigReload:
    """The running config of one agent and what SIGHUP does with a new one."""

    def __init__(
        self,
        config: Config,
        load: Callable[[], Config],
        *,
        jobs: MutableMapping[str, AgentJob],
        alerts: AlertHook,
        runs: Runs,
        agent: Agent | None = None,
    ) -> None:
        """``load``: reads and validates the file (raises :class:`ConfigError`); ``jobs``: the agent's own
        job table, shared with its parts (an entry replaced here is what they read next); ``agent``:
        the node whose jobs a changed job set is swapped into (None: such a reload restarts it)."""
        self.config = config
        self._load = load
        self._jobs = jobs
        self._alerts = alerts
        self._runs = runs
        self._agent = agent

    def reload(self) -> Verdict:
        """Read the file again: refuse it, take it live, or ask for a graceful stop (to be started again)."""
        source = self.config.source
        try:
            new = self._load()
        except ConfigError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            more = len(str(exc).splitlines()) - 1
            validate = f"quorum-cron validate {shlex.quote(source)}"
            line = f"reload refused, keeping the running config: {first}" + (
                f" (and {more} more problem(s): `{validate}`)" if more > 0 else ""
            )
            event(log, logging.ERROR, "reload", line, source=source)
            self._alerts.raise_(AlertKind.CONFIG_REFUSED, line, source=source)
            return "refused"
        plan = plan_reload(self.config, new)
        if plan.empty:
            event(log, logging.INFO, "reload", f"{source} reloaded: no change", source=source)
            return "unchanged"
        if plan.needs_restart or (plan.jobs_changed and self._agent is None):
            what = "these cluster settings" if plan.needs_restart else "its jobs"
            message = (
                f"{source} reloaded: {plan.describe()}; the running node cannot change {what} under "
                f"its slots: stopping gracefully: {RESTART_NOTE}"
            )
            self._alerts.note(AlertKind.CONFIG_RELOADED, message, source=source, restart=True)
            return "restart"
        specs = {j.name: j for j in new.jobs}
        if plan.jobs_changed and self._agent is not None:
            changes = self._agent.replace_jobs([agent_job(j) for j in new.jobs if not j.in_process])
            boundaries = dict(changes.boundaries)
            for name in changes.changed:
                if name in boundaries:
                    event(
                        log,
                        logging.INFO,
                        "reload",
                        f"{name}: the new definition {specs[name].spec_hash[:12]} applies to slots after "
                        f"{boundaries[name]}; slots up to it keep the old one",
                        job=name,
                        boundary=boundaries[name],
                    )
        for name in plan.alerting:
            self._jobs[name] = replace(self._jobs[name], alert_on=specs[name].alert_on)
        cluster = new.cluster
        if "alert_command" in plan.cluster_live or "alert_url" in plan.cluster_live:
            self._alerts.reconfigure(command=cluster.alert_command, url=cluster.alert_url)
        self._runs.output_log_lines = cluster.output_log_lines
        self._runs.set_output_rate(cluster.output_log_rate)
        self.config = new
        self._alerts.note(
            AlertKind.CONFIG_RELOADED, f"{source} reloaded: {plan.describe()}", source=source, restart=False
        )
        return "applied"
