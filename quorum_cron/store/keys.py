"""Names and defaults of the store's data: one place for both.

Every key of a job shares the prefix ``qc:{<ns>:<job>}:`` (its hash tag is
the Redis Cluster slot the job lives in) plus a suffix; the cluster-wide
keys and channels share ``qc:{<ns>}:``. The Lua scripts receive these names
as KEYS and ARGV and build the per-slot key themselves from :data:`SLOT`;
``tests/test_store_keys.py`` checks that the scripts and this module agree.

The retention and ledger bounds here are the defaults of both stores (the
Redis scripts and their memory model) and of the agent's connection. This
module is pure: the memory model and the simulator import it without
redis-py.
"""

from __future__ import annotations

__all__ = [
    "ASSIGN",
    "AUDIT",
    "DEFAULT_AUDIT_MAXLEN",
    "DEFAULT_LEDGER_MAXLEN",
    "DEFAULT_RETENTION_MS",
    "DEFAULT_TRIGGER_MAXLEN",
    "FORBIDDEN_NAMESPACE_CHARS",
    "JOB_CHANNEL_SUFFIXES",
    "JOB_SUFFIXES",
    "LEDGER",
    "META",
    "OPEN",
    "SLOT",
    "SLOTS",
    "TRIGGER",
    "TRIGGERS",
    "alerts_key",
    "assign_channel",
    "assign_prefix",
    "job_assign_channel",
    "job_name_offset",
    "job_prefix",
    "job_trigger_channel",
    "members_key",
    "membership_key",
    "membership_log_key",
    "trigger_channel",
]

DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
"""How long a slot is kept after its last write (a week)."""
DEFAULT_LEDGER_MAXLEN = 10_000
"""Ledger entries kept per job (newest)."""
DEFAULT_AUDIT_MAXLEN = 1_000
"""Operator actions kept per job (newest)."""
DEFAULT_TRIGGER_MAXLEN = 100
"""Pending manual triggers kept per job (newest)."""

FORBIDDEN_NAMESPACE_CHARS = "{}:"
"""A namespace with these would break the hash tags and the prefix parsing."""

# Suffixes of a job's keys (after job_prefix).
META = "meta"
"""HASH: token counter, membership record (legacy: quorum floor), high-water mark, pause state."""
OPEN = "open"
"""ZSET: slots proposed, committed or running (what sweep scans)."""
SLOTS = "slots"
"""ZSET: slots that reached a terminal state."""
LEDGER = "ledger"
"""STREAM: one entry per slot that became terminal (and per retried failure)."""
TRIGGERS = "triggers"
"""ZSET: manual trigger fire times."""
AUDIT = "audit"
"""STREAM: operator actions."""
SLOT = "slot:"
"""STRING per slot: ``slot:<fire_ms>``."""
JOB_SUFFIXES = (META, OPEN, SLOTS, LEDGER, TRIGGERS, AUDIT, SLOT)

# Suffixes of a job's sharded pub/sub channels (after job_prefix): on a Redis
# Cluster the notices are per job, in the job's hash slot (SPUBLISH/SSUBSCRIBE).
ASSIGN = "assign:"
"""Plus the executor's id: that node's assignment notices for the job."""
TRIGGER = "trigger"
"""The job's manual triggers."""
JOB_CHANNEL_SUFFIXES = (ASSIGN, TRIGGER)


def job_assign_channel(namespace: str, job: str, node: str) -> str:
    """``qc:{<ns>:<job>}:assign:<node>``: the sharded channel of ``node``'s notices for ``job`` (cluster)."""
    return job_prefix(namespace, job) + ASSIGN + node


def job_trigger_channel(namespace: str, job: str) -> str:
    """``qc:{<ns>:<job>}:trigger``: the sharded channel of ``job``'s manual triggers (cluster)."""
    return job_prefix(namespace, job) + TRIGGER


def job_prefix(namespace: str, job: str) -> str:
    """``qc:{<ns>:<job>}:``: every key of the job is this plus a suffix."""
    return f"qc:{{{namespace}:{job}}}:"


def job_name_offset(namespace: str) -> int:
    """Where the job name starts in :func:`job_prefix` (1-based, as Lua's ``string.sub`` counts)."""
    return len(f"qc:{{{namespace}:") + 1


def members_key(namespace: str) -> str:
    """``qc:{<ns>}:members``: HASH node → its last heartbeat."""
    return f"qc:{{{namespace}}}:members"


def membership_key(namespace: str) -> str:
    """``qc:{<ns>}:membership``: HASH, the namespace's membership record: ``r`` its text
    (``MembershipRecord.encode``), ``at`` store ms of the change that made it, ``by``, ``why``.
    Same hash tag as the members hash, so one heartbeat script reads both."""
    return f"qc:{{{namespace}}}:membership"


def membership_log_key(namespace: str) -> str:
    """``qc:{<ns>}:membership:log``: STREAM, every record the namespace held (fields as the
    hash's), capped at the audit length."""
    return f"qc:{{{namespace}}}:membership:log"


def job_tables_key(namespace: str) -> str:
    """``qc:{<ns>}:jobs``: HASH node → its job table (``Store.publish_jobs``; heartbeats carry its
    digest). Same hash tag as the members hash."""
    return f"qc:{{{namespace}}}:jobs"


def alerts_key(namespace: str) -> str:
    """``qc:{<ns>}:alerts``: STREAM of the agents' recent alerts (capped, best-effort; no node reads it)."""
    return f"qc:{{{namespace}}}:alerts"


def assign_prefix(namespace: str) -> str:
    """``qc:{<ns>}:assign:``: the scripts publish an assignment on this plus the executor's id."""
    return f"qc:{{{namespace}}}:assign:"


def assign_channel(namespace: str, node: str) -> str:
    """The pub/sub channel of ``node``'s assignment notices (payload ``job\\nfire_ms\\ntoken``)."""
    return assign_prefix(namespace) + node


def trigger_channel(namespace: str) -> str:
    """The pub/sub channel of manual triggers (payload ``job\\nfire_ms``)."""
    return f"qc:{{{namespace}}}:trigger"
