"""How long a failed run waits before its retry: the job's backoff, doubled per attempt, capped, jittered.

The store schedules a retry "not before" ``now + retry_backoff_ms`` of the
failing ``finish`` (docs/protocol.md, "Retries") and knows nothing about
policies; the core computes that delay here from the job's settings and the
slot's attempt number (``SlotView.runs`` of the run's start reply).

The jitter spreads retries of many slots failing at once (a database down
for every job) without making the delay depend on *which* node finished:
it is derived from a hash of ``(job, fire_ms, attempt)``, so every node (and
every replay of the simulator) computes the same delay for the same
attempt, and the core still reads no randomness.
"""

from __future__ import annotations

import hashlib

__all__ = ["MAX_JITTER", "jitter_fraction", "retry_delay_ms"]

MAX_JITTER = 1.0
"""A jitter of 1 lets the delay fall anywhere between 0 and its un-jittered value ("full jitter")."""

_JITTER_STEPS = 1_000_000
"""The jitter is applied in millionths, in integers: no float rounding differs between nodes."""


def jitter_fraction(job: str, fire_ms: int, attempt: int) -> int:
    """A number in ``[0, 2**64)`` fixed by ``(job, fire_ms, attempt)``: the same on every node.

    SHA-256, not ``hash()``: Python salts ``hash`` of strings per process.
    """
    digest = hashlib.sha256(f"{job}\n{fire_ms}\n{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def retry_delay_ms(job: str, fire_ms: int, attempt: int, backoff_ms: int, max_ms: int, jitter: float) -> int:
    """The wait before the retry that follows failed attempt ``attempt`` (1 = the first run).

    ``min(backoff_ms * 2**(attempt - 1), max(backoff_ms, max_ms))``, then, with
    ``jitter`` (0-1), shortened by up to that fraction of itself: the cap is a
    true upper bound, and ``max_ms`` at or below ``backoff_ms`` (the default)
    keeps the fixed backoff. An unknown attempt (0) counts as the first.
    """
    cap = max(backoff_ms, max_ms, 0)
    n = max(attempt, 1)
    # Doubling stops at the cap (a bounded shift: retries are at most 100).
    delay = cap if backoff_ms > 0 and n - 1 >= cap.bit_length() else min(max(backoff_ms, 0) << (n - 1), cap)
    steps = round(min(max(jitter, 0.0), MAX_JITTER) * _JITTER_STEPS)
    if not steps or not delay:
        return delay
    cut = delay * steps * jitter_fraction(job, fire_ms, n) // (_JITTER_STEPS << 64)
    return delay - cut
