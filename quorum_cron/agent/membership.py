"""Membership: heartbeats with an incarnation id, and what they say about the quorum.

Each agent process draws a random incarnation id when it starts and
heartbeats ``(node id, incarnation)`` with a TTL. The store refuses a
heartbeat for a node id that a *different* incarnation holds unexpired, so a
second process started with the same id (a copy-pasted config, a restart
while the old process is only paused) is refused at start with a clear
error instead of voting twice under one name. A refusal later on means the
id was taken over while this process was paused: it must stop voting.

Who may vote is the store's **membership record** (an epoch, the member
ids, the quorum; a joint configuration while a change is in progress:
``docs/protocol.md``, "Membership and reconfiguration"). The config only
proposes the first record (:func:`config_configuration`); at start a node
whose config disagrees with the stored record says so in one line
(:func:`config_disagreement`) and does not vote. Quorum health compares the
live *members of the record* with the quorum *the store enforces*
(:func:`record_health`), never the config's: that is what an operator
wants to read ("2 of 5 alive, need 3"). :func:`membership_facts` is the one
description of the membership that ``status``, ``members show`` and the
web Cluster page print. Those descriptions are pure and live in
:mod:`quorum_cron.config.membership` (the faces import them from there);
they are re-exported here for the agent's modules.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import Final

from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.config.membership import (
    MembershipFacts,
    QuorumHealth,
    config_configuration,
    config_disagreement,
    membership_doc,
    membership_facts,
    record_health,
)
from quorum_cron.errors import QuorumCronError
from quorum_cron.store.base import HeartbeatResult, Member, Store

log = logging.getLogger(EVENT_LOGGER)

__all__ = [
    "MAX_NODE_ID",
    "Membership",
    "MembershipFacts",
    "NodeIdTaken",
    "QuorumHealth",
    "config_configuration",
    "config_disagreement",
    "membership_doc",
    "membership_facts",
    "new_incarnation",
    "node_id_problem",
    "record_health",
]

MAX_NODE_ID: Final = 100
_NODE_ID_RE: Final = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)


def node_id_problem(node: str) -> str | None:
    """Why ``node`` cannot be a node id, or None.

    A node id names a Redis hash field, an assignment channel and every
    vote; it is printed by ``status`` and written in the ledger. Host-name
    characters only (``A-Z a-z 0-9 _ . -``), 1-100 of them: no braces or
    colons (key syntax), no whitespace or control characters, nothing that
    makes every vote carry kilobytes.
    """
    if not node or len(node) > MAX_NODE_ID or not _NODE_ID_RE.fullmatch(node):
        shown = repr(node) if len(node) <= 60 else f"{node[:60]!r}... ({len(node)} characters)"
        return f"node id {shown} is not valid: expected 1-{MAX_NODE_ID} characters from A-Z a-z 0-9 _ . -"
    return None


class NodeIdTaken(QuorumCronError):
    """Another live process holds this node id."""


def new_incarnation() -> str:
    """A random id for this process (not derived from time: two restarts never collide)."""
    return secrets.token_hex(8)


class Membership:
    """One process's membership: blocking calls, run on the store worker's background thread."""

    def __init__(self, store: Store, node: str, ttl_ms: int, incarnation: str | None = None) -> None:
        if ttl_ms <= 0:
            raise ValueError(f"invalid heartbeat TTL {ttl_ms} ms: expected > 0")
        self.store = store
        self.node = node
        self.ttl_ms = ttl_ms
        self.incarnation = incarnation or new_incarnation()

    def beat(self, info: dict[str, str], epoch: int = 0) -> HeartbeatResult:
        """Heartbeat once under ``epoch`` (the record this node holds; 0: none yet).

        Returns the reply, which carries the namespace's membership record.
        Raises :class:`NodeIdTaken` when another live process holds the id.
        """
        result = self.store.heartbeat(self.node, self.incarnation, self.ttl_ms, info, epoch=epoch)
        if not result.ok:
            raise NodeIdTaken(
                f"node id {self.node!r} is held by another live process (incarnation {result.holder}); "
                f"expected one process per node id — stop it, or give this one a different --node-id"
            )
        return result

    def wait_out(self, exc: NodeIdTaken) -> int | None:
        """How long to wait before asking once more for the id another process holds (ms), or
        None to refuse now.

        A process killed without leaving (SIGKILL, the OOM killer, a crash) holds its id until its
        heartbeat entry expires, and a supervisor restarts the node sooner (systemd's
        ``RestartSec``): exiting 3 at once left such a node down for good. So when the holder's
        entry ends within this node's own entry lifetime, the id is asked for once more just
        after it ends (by the store's clock): a killed holder's entry is gone then, a live one
        has renewed it and the second refusal stands.
        """
        now = self.store.time_ms()
        entry = next((m for m in self.store.members() if m.node == self.node), None)
        if entry is None or not now < entry.expires_ms <= now + self.ttl_ms:
            return None
        wait = entry.expires_ms - now + 50
        event(
            log,
            logging.WARNING,
            "membership",
            f"{str(exc).split(';', 1)[0]}: asking again in {wait / 1000:g} s, when its entry "
            "expires (this node restarted after it was killed?)",
        )
        return wait

    def leave(self) -> None:
        """Drop the membership if this process still holds it (clean shutdown)."""
        self.store.leave(self.node, self.incarnation)

    def members(self) -> list[Member]:
        return self.store.members()

    @staticmethod
    def health(members: list[Member], size: int, quorum: int) -> QuorumHealth:
        """Quorum health from a members list (expired members are not listed by the store)."""
        return QuorumHealth(alive=len(members), size=size, quorum=quorum)
