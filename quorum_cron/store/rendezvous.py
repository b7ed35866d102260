"""Executor choice by rendezvous (highest-random-weight) hashing.

Both stores must pick the same executor for the same slot and voters, so the
weight is SHA-1 over a fixed text — something Redis Lua can compute too
(``redis.sha1hex``) — and ties, which SHA-1 makes vanishingly rare, fall to
the smaller node id. Hashing the slot with each node spreads executions evenly
over the voters without any shared counter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from quorum_cron.core.membership import MembershipRecord

__all__ = ["pick_executor", "rank", "ranking_seats", "weight"]


def _stem(job: str, fire_ms: int) -> str:
    """What every node's weight for the slot hashes before the node id (``pick`` in _job.lua)."""
    return f"{job}\n{fire_ms}\n"


def _digest(stem: str, node: str) -> bytes:
    """The raw SHA-1 of the weight's text: ordered as bytes as its hex text is as text."""
    return hashlib.sha1((stem + node).encode(), usedforsecurity=False).digest()


def weight(job: str, fire_ms: int, node: str) -> str:
    """The node's weight for the slot: hex SHA-1, compared as text."""
    return _digest(_stem(job, fire_ms), node).hex()


def pick_executor(job: str, fire_ms: int, candidates: Iterable[str]) -> str:
    """The candidate with the highest weight (smallest id on a tie); ``""`` if none."""
    best, best_w = "", ""
    for node in sorted(candidates):
        w = weight(job, fire_ms, node)
        if w > best_w:
            best, best_w = node, w
    return best


def rank(job: str, fire_ms: int, node: str, members: Iterable[str]) -> int:
    """Where ``node`` stands in the slot's rendezvous order of ``members``: 0 when it is the node
    :func:`pick_executor` would pick among all of them, 1 when one member outranks it, and so on.

    Why: the executor is picked among the voters that reached the quorum, so a
    node that is always among the first voters of a burst would run most of it.
    A node that sends its votes in the order of this rank (its rank-0 slots
    first) is among the first voters of the slots it would win, and the work
    spreads over the members (docs/protocol.md, "Executor choice").
    """
    # (Raw digests, :func:`weight`'s order without its hex text: a node ranks each vote of a
    # burst twice, for the burst's order and in the store's call; 2.4 -> 1.7 µs a rank among
    # three members. The order is held by tests/test_store_vote_order.py.)
    stem = _stem(job, fire_ms)
    mine = _digest(stem, node)
    ahead = 0
    for other in members:
        if other != node:
            w = _digest(stem, other)
            if w > mine or (w == mine and other < node):
                ahead += 1
    return ahead


def ranking_seats(record_text: str, node: str) -> tuple[tuple[str, ...], int] | None:
    """The members a vote of ``node`` under ``record_text`` ranks against (for :func:`rank`), and
    how many of them make the current configuration's quorum.

    None without a record (legacy epoch-0 votes), for a record that does not
    parse (the store refuses that vote: where it goes does not matter) or
    that ``node`` is not a member of. What both orders of a node's votes read:
    the store's within a call (``redis_batch``) and the agent's over a long
    vote's parts (``agent.burstorder``).
    """
    if not record_text:
        return None
    try:
        record = MembershipRecord.decode(record_text)
    except ValueError:
        return None
    if node not in record.members:
        return None
    return record.members, record.current.quorum
