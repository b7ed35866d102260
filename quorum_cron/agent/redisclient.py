"""The default node id; the fail-fast store client now lives in :mod:`quorum_cron.store.client`.

``connect_store`` and the socket timeouts are re-exported from there for
the callers that still import them from here (the agent imports no redis-py:
issue 25).
"""

from __future__ import annotations

import socket

from quorum_cron.store.client import SOCKET_CONNECT_TIMEOUT_S, SOCKET_TIMEOUT_S, connect_store

__all__ = ["SOCKET_CONNECT_TIMEOUT_S", "SOCKET_TIMEOUT_S", "connect_store", "default_node_id"]


def default_node_id() -> str:
    """The node id when none is given: the host name (unique per server in a typical deployment)."""
    return socket.gethostname()
