"""The library's error family.

Every error quorum-cron raises on purpose derives from :class:`QuorumCronError`
so callers can catch one base class. Messages name the offending value and
what was expected, on one line, because operators read them in logs and in a
terminal after a failed ``quorum-cron validate``.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "QuorumCronError",
    "ScheduleError",
    "StoreError",
    "StoreOutOfMemory",
    "StoreRefusing",
    "StoreUnavailable",
    "StoreUnreplicated",
]


class QuorumCronError(Exception):
    """Base class of every error quorum-cron raises deliberately."""


class ConfigError(QuorumCronError):
    """A configuration value was refused where it entered the system."""


class ScheduleError(ConfigError):
    """A schedule (cron expression, alias, ``@every``, timezone) is invalid."""


class StoreError(QuorumCronError):
    """The store answered, but not with something the protocol allows.

    Examples: a script missing from the server after a reload that failed,
    a reply of the wrong shape, a key holding the wrong type.
    """

    def __init__(self, message: str, failure: str = "") -> None:
        super().__init__(message)
        self.failure = failure
        """What failed, worded for a line that names the store already ("unavailable: Connection
        refused"): the message names the address and the store's own operation, right in the
        agent's log but twice told on a command's line that shows the URL. Empty: the message
        is all there is (:func:`quorum_cron.store.connect.store_failure`)."""


class StoreUnavailable(StoreError):
    """The store could not be reached (connection refused, reset, timeout).

    The caller may retry later; nothing is known about whether the last
    write landed, which is why every store operation is idempotent.
    """


class StoreOutOfMemory(StoreUnavailable):
    """Redis refused a write: used memory is above ``maxmemory`` (policy ``noeviction``).

    Nothing was written (Redis refuses the whole command or script before it
    runs), so the caller retries like any outage; reported as its own state
    (``quorum_cron_store_oom``, a ``store_oom`` alert) because the fix is not
    the network but memory.
    """

    PREFIX = "out of memory: "
    """Every message starts with this (the agent's health tells OOM from other outages by it)."""


class StoreRefusing(StoreUnavailable):
    """Redis answers, but refuses this client's calls until the server changes.

    ``MISCONF`` (its last RDB save failed and ``stop-writes-on-bgsave-error``
    holds every write back), ``READONLY`` (the node became a replica),
    ``NOPERM`` (the ACL user lost a command or key quorum-cron needs),
    ``NOAUTH``/``WRONGPASS`` (the password or user changed under a running
    agent). The caller retries with backoff, as for any outage, and the agent
    says it once: as a plain ``StoreError`` (an error reply per call) it
    logged one ERROR line per vote, sweep and heartbeat, raised no alert,
    kept ``quorum_cron_store_up`` at 1, and took a write refused inside a
    script for a corrupt value of one slot. Its outcome is unknown to the
    caller, as a lost reply's is (a script stopped by a refusal keeps the
    writes it made before it), and every store operation is idempotent.
    """

    WRITES = "refuses writes during "
    """In the message of a refusal of writes only (``MISCONF``, ``READONLY``), where reads still
    succeed meanwhile: what tells it from a refusal of every call (the agent's health may hold
    such a state until a write succeeds, as it holds out of memory)."""


class StoreUnreplicated(StoreUnavailable):
    """A write fewer replicas than ``wait_replicas`` acknowledged (a ``WAIT`` shortfall).

    Its outcome is unknown to the caller, as a lost reply's is, so it is an
    outage to retry; reported as its own state (the agent's
    :mod:`~quorum_cron.agent.replication`) because reads, which need no
    replica, keep succeeding meanwhile.
    """

    MARKER = "not replicated as required: "
    """Every message holds this before the shortfall (the agent tells the state by it: the reason
    travels as text, like :attr:`StoreOutOfMemory.PREFIX`)."""
