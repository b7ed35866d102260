"""How long a node holds a lease it was granted: measured from the call's send, less a margin.

Two pure functions of a lease and a send time, with no state of the core: the running side
(:mod:`quorum_cron.core.run`) starts, renews and kills runs by them, and docs/protocol.md
("Leases") says why the margin is what it is.
"""

from __future__ import annotations

__all__ = ["lease_end", "lease_margin"]


def lease_margin(lease_ms: int) -> int:
    """How long before its lease ends in the store (by the node's clock) a run is killed.

    The node measures the lease on its monotonic clock from when it *sent*
    the start or renew, so the store's lease (set when the call arrived)
    ends later by the network delay; what is left to cover is the two
    clocks running at different rates. 1% (10,000 ppm) is twice the
    simulator's largest drift and a hundred times a typical crystal's
    (docs/protocol.md, "Leases").
    """
    return max(1, lease_ms // 100)


def lease_end(sent_mono: int, lease_ms: int) -> int:
    """The node's monotonic time at which a lease granted to a call sent at ``sent_mono`` is over."""
    return sent_mono + lease_ms - lease_margin(lease_ms)
