"""Stores: the contract (:mod:`.base`), the Redis scripts (:mod:`.redis`) and their model (:mod:`.memory`)."""

from quorum_cron.store.base import (
    DECIDED_STATES,
    TERMINAL_STATES,
    AuditAction,
    AuditEntry,
    Delivery,
    FinishResult,
    HeartbeatResult,
    JobControl,
    LedgerEntry,
    Member,
    Overlap,
    SlotState,
    SlotView,
    Store,
    SweepParams,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
)
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore

__all__ = [
    "DECIDED_STATES",
    "TERMINAL_STATES",
    "AuditAction",
    "AuditEntry",
    "Delivery",
    "FinishResult",
    "HeartbeatResult",
    "JobControl",
    "LedgerEntry",
    "Member",
    "MemoryStore",
    "Overlap",
    "RedisStore",
    "SlotState",
    "SlotView",
    "Store",
    "SweepParams",
    "TransitionResult",
    "VoteRequest",
    "VoteResult",
    "VoteStatus",
]
