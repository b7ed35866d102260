"""One root seed, one independent ``random.Random`` per subsystem.

Forking by name (SHA-256 of ``"<seed>/<name>"``) keeps the streams apart: a
change in how often the network draws numbers does not shift the faults or
the clocks of the same seed, which keeps shrunk scenarios replaying.
"""

from __future__ import annotations

import hashlib
import random

__all__ = ["Streams", "derive_seed"]


def derive_seed(root: int, name: str) -> int:
    """A 64-bit seed for the stream ``name`` of root seed ``root``."""
    digest = hashlib.sha256(f"{root}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Streams:
    """Named random streams derived from one root seed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def fork(self, name: str) -> random.Random:
        """A fresh generator for subsystem ``name`` (same seed + name → same numbers)."""
        return random.Random(derive_seed(self.seed, name))
