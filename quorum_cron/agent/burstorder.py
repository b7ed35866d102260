"""The order in which a node sends a long vote's parts (:mod:`quorum_cron.agent.storeio`).

A minute boundary of many ``* * * * *`` jobs is one vote of every job, sent
in parts of :data:`~quorum_cron.agent.storeio.VOTE_PART` so that starts can
go between them. What the order of the slots over those parts must do:

* **Be the same on every node**, whatever order each declared its jobs in:
  a slot commits when a quorum's votes have landed, so all nodes should
  reach a slot at about the same point of their sends for commits to come
  part by part from the burst's first second. Hence a hash of the slot, not
  the job list's order (and below, every node's first slots are a uniform
  draw from that one order, so a slot sits at about the same point in each).
* **Change with the fire time**: a burst larger than the machine can start
  before the deadline misses its last slots; with the declaration order
  those were the same jobs every minute. A hash of (job, fire time) makes
  them a different draw each minute.
* **Keep each slot's executor among its first voters**: the store picks
  the executor by rendezvous among the voters that reached the quorum, so a
  node whose parts happened to land first would be in every quorum and run
  more than its share (docs/benchmarks.md, "Spreading the executors"). So
  each node sends first the slots for which it ranks among the top quorum
  of the members (:func:`~quorum_cron.store.rendezvous.rank`), then the
  others: the first quorum of votes of a slot then comes from its top-ranked
  members, and the rendezvous winner of all members is among them.
* **Let the executor's vote be the one that commits**: a commit that picks
  the voting node starts the slot in the same step (docs/protocol.md, "A
  start folded into the commit"), a call, a notice and a write fewer. So a
  node sends the slots it would win (rank 0) :data:`FOLD_SHIFT` later in
  that same order than its other top-quorum slots: the slot's other top
  voters, reaching it at its own place, have usually voted when the winner
  does. The price is the shift: the first commits of a burst come that much
  later (a quarter of the top-quorum votes' sending time).
"""

from __future__ import annotations

import zlib

from quorum_cron.core.model import VoteRequest
from quorum_cron.store.rendezvous import rank, ranking_seats

__all__ = ["FOLD_SHIFT", "burst_order"]

FOLD_SHIFT = 1 << 30
"""How much later, in the order's 32-bit hash space (a quarter of it), a node sends the slots it
would execute than its other top-quorum slots."""


def burst_order(requests: tuple[VoteRequest, ...]) -> tuple[VoteRequest, ...]:
    """``requests`` in the order a node sends them in parts (see the module's docstring)."""
    seats: dict[str, tuple[tuple[str, ...], int] | None] = {}

    def key(r: VoteRequest) -> tuple[bool, int]:
        text = r.membership
        if text not in seats:
            seats[text] = ranking_seats(text, r.node)
        top = seats[text]
        place = zlib.crc32(f"{r.job}\n{r.fire_ms}".encode())
        if top is None:
            return False, place
        ahead = rank(r.job, r.fire_ms, r.node, top[0])
        return ahead >= top[1], place + FOLD_SHIFT if ahead == 0 else place

    return tuple(sorted(requests, key=key))
