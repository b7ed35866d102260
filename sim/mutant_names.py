"""The planted protocol bugs by name, and what each breaks (the mutants themselves: sim/mutants.py).

Why apart from them: a scenario file may name a mutant, and its loader checks the name; the
mutants import the strategies, which import the loader, so the names live where both can read
them without a cycle.
"""

from __future__ import annotations

__all__ = ["MUTANTS"]

MUTANTS: dict[str, str] = {
    "quorum-n-over-2": "every node configured with quorum N // 2",
    "no-spec-hash": "the store counts votes whatever their spec hash",
    "node-clock-window": "the store judges the vote window by the voter's clock",
    "unfenced-start": "the store starts a committed slot for any node and token",
    "non-atomic-commit": "quorum checked in one step, commit made unconditionally in a later one",
    "untrusted-votes": "the core votes although its clock is not trusted",
    "retry-no-backoff": "the store lets a retry start at once, ignoring its backoff",
    "same-executor": "a retry or takeover goes back to the executor the slot had",
    "lease-from-reply": "the core counts a renewed lease from the reply, and kills no run at its lease end",
    "never-record-missed": "the core never sends a missed record",
    "no-catch-up": "a booting core does not account for the slots due since the job's high-water mark",
    "skip-wrongly": "the store skips every third slot it should commit",
    "succeeded-early": "the node reports a run succeeded as it starts it",
    "forget-retry": "the store logs a retry, then forgets the slot",
    "joint-new-only": "while a job's record is joint, the store commits with the new set's majority alone",
    "reload-unswept": "a reload that removes a job stops the node's sweep from ending its open slots",
    "overlap-ignored": "the store commits a slot of an overlap-forbid job while another of its slots runs",
    "unkilled-at-lease": "the core lets an at-most-once run go on past its lease whatever the overlap policy",
}
