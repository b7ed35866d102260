"""What an agent is built from: its jobs (:class:`AgentJob`) and its settings (:class:`AgentSettings`).

Plain frozen values with no behaviour, so that every part of the agent (and
:mod:`.build`, which builds them from a config) can import them without
importing the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quorum_cron.agent.clocktrust import DEFAULT_CHECK_INTERVAL_MS
from quorum_cron.agent.jobprocess import DEFAULT_TAIL_BYTES, Target
from quorum_cron.config.values import DEFAULT_ALERT_ON, DEFAULT_OUTPUT_LOG_LINES, DEFAULT_OUTPUT_LOG_RATE
from quorum_cron.core.model import Configuration
from quorum_cron.core.node import CoreJob, NodeSettings

__all__ = ["AgentJob", "AgentSettings"]


@dataclass(frozen=True, slots=True)
class AgentJob:
    """A job as the agent runs it: the protocol part (retries included), what to run, the outage policy."""

    core: CoreJob
    target: Target
    on_store_unavailable: str = "skip"
    """``skip`` (default) or ``run-local``: run on this node alone while the store is unreachable."""
    alert_on: tuple[str, ...] = DEFAULT_ALERT_ON
    """Which of the job's outcomes raise an alert (``failed``, ``recovered``, ``missed``, ``lost``)."""

    @property
    def name(self) -> str:
        return self.core.name


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Everything the agent needs besides its jobs and store (the one secret, a webhook URL, kept
    out of its repr)."""

    node: NodeSettings
    namespace: str
    size: int
    heartbeat_ms: int = 2_000
    grace_ms: int = 30_000
    ntp_servers: tuple[str, ...] = ()
    ntp_unreachable: str = ""
    """Empty: :func:`~quorum_cron.clock.skew.default_unreachable_policy` of ``ntp_servers``."""
    clock_check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS
    tail_bytes: int = DEFAULT_TAIL_BYTES
    """Bytes of each output stream of a run kept in the ledger (``cluster.output_tail``)."""
    output_log_lines: int = DEFAULT_OUTPUT_LOG_LINES
    """Output lines of one run logged as ``output`` events (0: none)."""
    output_log_rate: int = DEFAULT_OUTPUT_LOG_RATE
    """Output lines per second logged over all runs of this node."""
    alert_command: tuple[str, ...] | str | None = None
    alert_url: str | None = field(default=None, repr=False)
    """A webhook's URL carries its secret in the path (Slack's, say): never in a repr."""
    info: dict[str, str] = field(default_factory=dict)
    """Extra membership info (shown by ``status``)."""
    membership: Configuration | None = None
    """The membership this node's config proposes: the store's record is created from it if absent,
    and a node whose config disagrees with the record does not vote. None: no record is created or
    checked here (the node still follows whatever record the store holds)."""
    config_source: str = "the config"
    """Where ``membership`` came from, for the one-line disagreement (the config file's path)."""

    @property
    def node_id(self) -> str:
        return self.node.node_id

    @property
    def heartbeat_ttl_ms(self) -> int:
        return 3 * self.heartbeat_ms
