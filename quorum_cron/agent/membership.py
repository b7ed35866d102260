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
web Cluster page print.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any, Final

from quorum_cron.config.settings import ClusterConfig
from quorum_cron.core import model
from quorum_cron.core.model import Configuration, MembershipRecord
from quorum_cron.errors import QuorumCronError
from quorum_cron.store.base import HeartbeatResult, Member, Store

__all__ = [
    "MAX_NODE_ID",
    "Membership",
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


@dataclass(frozen=True, slots=True)
class QuorumHealth:
    """Live members against the configured cluster size."""

    alive: int
    size: int
    quorum: int

    @property
    def ok(self) -> bool:
        return self.alive >= self.quorum

    def __str__(self) -> str:
        return f"{self.alive} of {self.size} alive, need {self.quorum}"


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

    def leave(self) -> None:
        """Drop the membership if this process still holds it (clean shutdown)."""
        self.store.leave(self.node, self.incarnation)

    def members(self) -> list[Member]:
        return self.store.members()

    @staticmethod
    def health(members: list[Member], size: int, quorum: int) -> QuorumHealth:
        """Quorum health from a members list (expired members are not listed by the store)."""
        return QuorumHealth(alive=len(members), size=size, quorum=quorum)


# --------------------------------------------------------------------------- the membership record


def config_configuration(cluster: ClusterConfig) -> Configuration:
    """The configuration a node's config proposes: its members, or ``size`` open seats (size mode)."""
    return Configuration.of(cluster.members, size=cluster.size, quorum=cluster.quorum)


def _agrees(proposed: Configuration, conf: Configuration) -> bool:
    if proposed.members:
        return proposed == conf
    # Size mode: the seats fill with whichever ids register first, so only N and Q can be compared.
    return (conf.size, conf.quorum) == (proposed.size, proposed.quorum)


def _proposed(proposed: Configuration) -> str:
    if proposed.members:
        return proposed.describe()
    return f"size = {proposed.size} (quorum {proposed.quorum} of {proposed.size})"


def config_disagreement(
    proposed: Configuration, record: MembershipRecord, source: str = "the config"
) -> str | None:
    """One line when the config proposes another membership than the store's record, else None.

    The config agrees when it is the record's configuration, or — while a
    change is in progress (joint) — either of its two configurations: nodes
    are restarted with the new config one by one during a change. A config
    in size mode (no ``members``) agrees with any record of the same size
    and quorum.
    """
    confs = [record.current] + ([record.old] if record.old is not None else [])
    if any(_agrees(proposed, conf) for conf in confs):
        return None
    return (
        f"{source} proposes members {_proposed(proposed)} but the store enforces {record.describe()}; "
        f"expected the same (update the config to the store's members, or change them with "
        f"`quorum-cron members`)"
    )


def record_health(record: MembershipRecord, live: list[Member]) -> QuorumHealth:
    """Live members of the record's current configuration against the quorum the store enforces.

    While joint a slot also needs a quorum of the old configuration; the
    health shown is the tighter of the two (the fewer spare voters).
    """
    alive_nodes = {m.node for m in live}
    confs = [record.current] + ([record.old] if record.old is not None else [])
    worst: QuorumHealth | None = None
    for conf in confs:
        alive = sum(1 for node in conf.members if node in alive_nodes)
        health = QuorumHealth(alive=alive, size=conf.size, quorum=conf.quorum)
        if worst is None or health.alive - health.quorum < worst.alive - worst.quorum:
            worst = health
    assert worst is not None
    return worst


def _conf_doc(conf: Configuration | None) -> dict[str, Any] | None:
    if conf is None:
        return None
    return {
        "members": list(conf.members),
        "size": conf.size,
        "quorum": conf.quorum,
        "open_seats": conf.open_seats,
        "text": conf.describe(),
    }


def membership_doc(stored: model.Membership | None) -> dict[str, Any] | None:
    """The stored record as JSON-ready data (None: no record yet)."""
    if stored is None:
        return None
    record = stored.record
    return {
        "epoch": record.epoch,
        "current": _conf_doc(record.current),
        "old": _conf_doc(record.old),
        "joint": record.joint,
        "changed_ms": stored.changed_ms,
        "by": stored.by,
        "reason": stored.reason,
        "text": record.describe(),
    }


@dataclass(frozen=True, slots=True)
class MembershipFacts:
    """What ``status``, ``members show`` and the web Cluster page say about the membership."""

    stored: model.Membership | None
    health: QuorumHealth
    refused: tuple[Member, ...]
    """Live nodes outside the record (current and, while joint, old): the store refuses their votes."""
    behind: tuple[str, ...]
    """Live members heartbeating under an older epoch than the record (they learn it on their next beat)."""
    disagreement: str | None
    """This node's config against the record (None: it agrees, or there is no record yet)."""

    def doc(self) -> dict[str, Any]:
        return {
            "membership": membership_doc(self.stored),
            "alive": self.health.alive,
            "size": self.health.size,
            "quorum": self.health.quorum,
            "quorum_ok": self.health.ok,
            "refused": [{"node": m.node, "epoch": m.epoch, "seen_ms": m.seen_ms} for m in self.refused],
            "behind": list(self.behind),
            "config_agrees": self.disagreement is None,
            "config_problem": self.disagreement or "",
        }


def membership_facts(
    stored: model.Membership | None, live: list[Member], cluster: ClusterConfig, source: str = "the config"
) -> MembershipFacts:
    """The membership as the store enforces it, with who is refused and whether this config agrees.

    Without a record (no agent of this version has started yet) there is
    no enforced membership: the health is against this config's size and
    quorum, and every printer says that no record exists.
    """
    if stored is None:
        health = QuorumHealth(len(live), cluster.size, cluster.quorum)
        return MembershipFacts(None, health, (), (), None)
    record = stored.record
    refused = tuple(m for m in live if not record.is_member(m.node))
    behind = tuple(m.node for m in live if record.is_member(m.node) and m.epoch < record.epoch)
    return MembershipFacts(
        stored,
        record_health(record, live),
        refused,
        behind,
        config_disagreement(config_configuration(cluster), record, source),
    )
