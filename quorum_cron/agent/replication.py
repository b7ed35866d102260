"""Whether a node's writes reach ``wait_replicas``: a state of its own, apart from an outage.

A write fewer replicas than ``wait_replicas`` acknowledged (the store's
``WAIT`` shortfall, a ``StoreUnavailable`` saying "not replicated as
required") stops the node voting like an outage, but reads and heartbeats,
which need no replica, succeed all along. Taken for an outage, every read
declared the store back and every write down again: the node flapped
between "not voting" and "store reachable again" several times a second,
with an alert each time. So it is said once, when it begins, and ends only
when a write is acknowledged by enough replicas at least
:attr:`Replication.hold_ms` after the last shortfall (on a Redis Cluster a
write to another master is replicated while the one without a replica
still falls short; there a shortfall names its master and is that master's
state: :mod:`.shortmasters`). :mod:`.health` holds one and probes it with a
replicated write while it lasts (:func:`probe_write`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from quorum_cron.core import model
from quorum_cron.errors import StoreUnreplicated
from quorum_cron.store.base import Store

__all__ = ["Replication", "probe_write", "shortfall"]


def shortfall(reason: str) -> str | None:
    """The ``WAIT`` shortfall of a store error's message ("WAIT: 0 of 1 replicas acknowledged
    within 100 ms"), or None when the error is another outage (the reason travels as text: the
    store's :class:`~quorum_cron.errors.StoreUnreplicated` marks it)."""
    marker = StoreUnreplicated.MARKER
    at = reason.find(marker)
    return None if at < 0 else reason[at + len(marker) :]


class Replication:
    """The node's replication shortfall, if any (see the module docstring)."""

    def __init__(self, monotonic_ms: Callable[[], int], hold_ms: int) -> None:
        self._monotonic_ms = monotonic_ms
        self.hold_ms = hold_ms
        """How long after the last shortfall a replicated write ends the state (two heartbeats)."""
        self.short = ""
        """The ``WAIT`` shortfall while writes are not replicated as required ("": they are)."""
        self._last_mono = 0

    def began(self, short: str) -> bool:
        """A write fell short by ``short``: True if that begins the state (to be said), False if
        it was already on."""
        self._last_mono = self._monotonic_ms()
        if self.short:
            return False
        self.short = short
        return True

    def ends(self, replicated: bool) -> bool:
        """A store call succeeded (``replicated``: a write ``WAIT`` covered): True if that ends the
        state now; False if it stays on (or was off)."""
        if not self.short or not replicated or self._monotonic_ms() - self._last_mono < self.hold_ms:
            return False
        self.short = ""
        return True


async def probe_write(
    proposed: model.Configuration | None,
    node: str,
    store: Store,
    background: Callable[[Callable[[], model.Membership]], Awaitable[model.Membership]],
) -> model.Membership | None:
    """While writes fall short of ``wait_replicas``: one write ``WAIT`` covers, which ends the
    state once it is replicated (the caller's ``store_ok(replicated=True)``). ``init_membership``
    creates the record only where there is none (as a node starting does) and returns it: nothing
    else changes. A shortfall raises ``StoreUnavailable`` (the loop backs off). Without a proposed
    membership (settings made by hand) there is nothing to write (None): reads end it then,
    after :attr:`Replication.hold_ms`."""
    if proposed is None:
        return None
    return await background(partial(store.init_membership, proposed, node))
