"""What the Cluster view says of quorum, worded as ``status`` words it.

The facts are :mod:`quorum_cron.config.membership`'s, the functions
``status`` calls too (:func:`down_members`, :func:`judged_jobs`,
:func:`short_jobs`, :func:`not_in_config_text`): one fact, two faces.
The web may not import the commands (docs/architecture.md), so the rest of
the lines' wording is written here; apart from :mod:`.views`, which is at
the modules' size cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from quorum_cron.config.membership import (
    DOWN_SHOWN,
    SHORT_SHOWN,
    QuorumHealth,
    down_members,
    judged_jobs,
    not_in_config_text,
    short_jobs,
)
from quorum_cron.config.settings import Config
from quorum_cron.core import model
from quorum_cron.printable import first_of, printable
from quorum_cron.store.base import Member

__all__ = ["down_of", "down_text", "health_text", "no_quorum"]


def down_of(stored: model.Membership | None, live: Sequence[Member]) -> list[str]:
    """:func:`down_members` of the store's record: the members with no live heartbeat, the ones to
    look at when fewer are alive than the size ([] without a record: it names no one yet)."""
    return down_members(stored.record, live) if stored is not None else []


def down_text(down: list[str]) -> str:
    """``n2`` or ``n1, ..., n10 and 3 more``: one line at any count."""
    return first_of(down, DOWN_SHOWN)


def health_text(health: QuorumHealth, down: list[str]) -> str:
    """``2 of 3 alive, need 2 (down: n2)``: who is missing, not only how many (status's headline)."""
    return f"{health} (down: {down_text(down)})" if down else str(health)


def no_quorum(
    voters: Sequence[Member], config: Config, stored: model.Membership | None, quorum: int, now: int
) -> list[dict[str, Any]]:
    """The ``no_quorum`` problem ([] or one): the jobs no one definition of which a quorum of the
    ``voters`` runs, this config's and those only a voter's published table names (a job one node
    alone was given must not look healthy from the other nodes' config). Those are marked on the line
    as status marks them, ``newjob (not in this config; run by n3 only)``, and listed in
    ``not_in_config``: the tail :func:`judged_jobs` appends to this config's names.

    One problem for all: a config change can make many, which must not push the others out of the
    page's 50. Fewer voters than ``quorum``: every job is short, and the quorum's problem says it.
    """
    if len(voters) < quorum:
        return []
    record = stored.record if stored is not None else None
    judged = judged_jobs(voters, [s.name for s in config.jobs])
    elsewhere = set(judged[len(config.jobs) :])
    short = short_jobs(voters, judged, record, quorum)
    if not short:
        return []
    said = [not_in_config_text(n, short[n]) if n in elsewhere else printable(n, 100) for n in short]
    shown = first_of(said, SHORT_SHOWN)  # (names from Redis: escaped and cut, as status)
    return [
        {
            "kind": "no_quorum",
            "at_ms": now,
            "jobs": list(short),
            "not_in_config": [n for n in short if n in elsewhere],
            "message": f"no quorum for {shown}: no one definition is run by a quorum of the "
            f"{len(voters)} voting members: each slot ends missed",
        }
    ]
