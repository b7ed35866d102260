"""Servers for the tests of what a failing store's line says (commands, check-clock, the web).

A port where nothing listens: a bound socket that never listens, so a connect is refused and no
one else can take the port. A redis-server with a password: set once it answers (the start
waits for a PING), cleared before it stops.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from quorum_cron.store.embedded.single import EmbeddedRedis

__all__ = ["PASSWORD", "locked_server", "unlistened_port"]

PASSWORD = "s3cret-pw"


@contextmanager
def unlistened_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@contextmanager
def locked_server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        admin = server.client()
        admin.config_set("requirepass", PASSWORD)
        try:
            yield server
        finally:
            admin.config_set("requirepass", "")
            admin.close()
