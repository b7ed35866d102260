"""The membership as the store enforces it, described: quorum health, the config against the record.

Pure (model and config only): what ``status``, ``members show``, the web
Cluster page and the agent's health all print about the membership — the
configuration a node's config proposes (:func:`config_configuration`), one
line when it disagrees with the store's record (:func:`config_disagreement`),
quorum health of the live members of the record against the quorum the
store enforces (:func:`record_health`, :class:`QuorumHealth`), and
:func:`membership_facts`, the one description they share; the jobs too few
voters run to reach a quorum (:func:`short_jobs`). Here rather than
in the agent so the faces describe the membership without importing the
agent (docs/architecture.md); ``quorum_cron.agent.membership`` re-exports it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from quorum_cron.config.settings import ClusterConfig
from quorum_cron.core import model
from quorum_cron.core.model import Configuration, Member, MembershipRecord
from quorum_cron.printable import first_of, printable

__all__ = [
    "DOWN_SHOWN",
    "SHORT_SHOWN",
    "MembershipFacts",
    "QuorumHealth",
    "awaited_members",
    "config_configuration",
    "config_disagreement",
    "down_members",
    "judged_jobs",
    "members_hint",
    "membership_doc",
    "membership_facts",
    "not_in_config_text",
    "record_health",
    "short_jobs",
    "spec_hashes",
]


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


def down_members(record: MembershipRecord, live: Sequence[Member]) -> list[str]:
    """The members of the record (of both configurations, while joint) with no live heartbeat,
    in the record's order: the ones an operator must look at when fewer are alive than the size.
    A live node outside the record is refused, not down; an open seat (size mode) names no one."""
    alive_nodes = {m.node for m in live}
    confs = [record.current] + ([record.old] if record.old is not None else [])
    out: list[str] = []
    for conf in confs:
        out += [node for node in conf.members if node not in alive_nodes and node not in out]
    return out


def awaited_members(record: MembershipRecord, live: Sequence[Member]) -> list[str]:
    """While a change is in progress (joint), the new configuration's members with no live heartbeat,
    in the record's order: the change ends only when each heartbeats under the new epoch, so these
    are the ones it waits for, to start or (if one never will) to force past ([] when not joint)."""
    if record.old is None:
        return []
    alive_nodes = {m.node for m in live}
    return [node for node in record.current.members if node not in alive_nodes]


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


def members_hint(words: str, source: str | None, ids: Sequence[str] = ()) -> str:
    """```quorum-cron members WORDS IDS --reason "..." --config FILE``` as it runs when pasted: with the
    ``--reason`` a change requires and ``--config`` naming ``source`` (``FILE`` when that is no file,
    as for the Python API). Here, with the descriptions it completes, so the agent, the commands and
    the web Cluster page print one hint.

    The path is made absolute: an agent started by a supervisor from another directory logs the hint
    for an operator whose shell is elsewhere. A valid node id may start with ``-``, which the CLI would
    take for an option: then the ``ids`` go last, after ``--``."""
    config = shlex.quote(os.path.abspath(source)) if source is not None and os.path.isfile(source) else "FILE"
    named = "".join(f" {shlex.quote(i)}" for i in ids)
    if any(i.startswith("-") for i in ids):
        return f'`quorum-cron members {words} --reason "..." --config {config} --{named}`'
    return f'`quorum-cron members {words}{named} --reason "..." --config {config}`'


def spec_hashes(member: Member) -> dict[str, str]:
    """A node's job table as read with its heartbeat (``info["jobs"]``, filled in from the published
    table by :func:`~quorum_cron.store.ports.with_job_tables`): spec hash by job name."""
    out: dict[str, str] = {}
    for item in member.info.get("jobs", "").split(","):
        name, sep, digest = item.partition("=")
        if sep:
            out[name] = digest
    return out


def judged_jobs(voters: Sequence[Member], names: Iterable[str]) -> list[str]:
    """``names`` (this config's jobs), then the jobs some voter runs that they lack (sorted): a job
    one node alone was given must not look healthy from the other nodes' config (status, web)."""
    mine = list(names)
    return mine + sorted({name for m in voters for name in spec_hashes(m)} - set(mine))


DOWN_SHOWN = 10
"""Members named as down on one line (status's headline, the Cluster page, the quorum-lost line);
the JSON lists them all."""

SHORT_SHOWN = 10
"""Jobs named on one no-quorum line, and voters named for one such job (status, web): one line
at any count."""


def not_in_config_text(job: str, run_by: list[str]) -> str:
    """``newjob (not in this config; run by n3 only)``: a job only other nodes define, named as
    ``status`` and the dashboard name it; the name and node ids come from Redis, so bounded."""
    nodes = first_of([printable(n, 100) for n in run_by], SHORT_SHOWN)
    return f"{printable(job, 100)} (not in this config; run by {nodes}{' only' if len(run_by) == 1 else ''})"


def short_jobs(
    voters: Sequence[Member], names: Iterable[str], record: MembershipRecord | None, quorum: int
) -> dict[str, list[str]]:
    """Of the jobs ``names``, those no one definition of which enough ``voters`` run to commit,
    with the voters that run any: a commit counts only votes for one spec hash, from a quorum
    of the record's configuration (of each of the two, while joint); so no slot of theirs can be
    decided and each ends missed (a job added to one node's config only, a reload that reached
    too few nodes). A definition other than this config's that a quorum runs still commits
    (the drift lines say that), so such a job is not named. Without a record, ``quorum`` of
    all voters. Judged only when every voter's table was read: one not read (an older agent, a
    corrupt or stale table) tells nothing, so nothing is said."""
    if any("jobs" not in m.info for m in voters):
        return {}
    confs = (
        [(frozenset(c.members), c.quorum) for c in ([record.current] + ([record.old] if record.old else []))]
        if record
        else []
    )
    tables = [(m.node, spec_hashes(m)) for m in voters]
    out: dict[str, list[str]] = {}
    for name in names:
        by_hash: dict[str, set[str]] = {}
        for node, table in tables:
            if name in table:
                by_hash.setdefault(table[name], set()).add(node)
        if not any(_commits(nodes, confs, quorum) for nodes in by_hash.values()):
            out[name] = sorted(set().union(*by_hash.values()))
    return out


def _commits(nodes: set[str], confs: list[tuple[frozenset[str], int]], quorum: int) -> bool:
    """Whether votes of ``nodes`` make a quorum of every configuration (of ``quorum`` without a record)."""
    if not confs:
        return len(nodes) >= quorum
    return all(len(nodes & members) >= q for members, q in confs)
