"""The default node id, the host name (connecting to Redis is :mod:`quorum_cron.store.connect`'s)."""

from __future__ import annotations

import socket

__all__ = ["default_node_id"]


def default_node_id() -> str:
    """The node id when none is given: the host name (unique per server in a typical deployment)."""
    return socket.gethostname()
