"""A bound on the log lines of one event between two ``summary`` lines.

The lines of what did not go as planned for one slot (a takeover, a refused
start, a failed run, an abstention...) are each worth reading, but not
100,000 of them in a minute: an agent on an overloaded machine with 100,000
jobs logged a ``start_refused`` and a ``takeover`` line for nearly every slot
(docs/benchmarks.md, "Scale"), writing lines nobody reads one by one with the
CPU it needed to catch up, and an agent whose clock is not trusted logs an
``abstain`` line for every due slot of every job. Each such event is logged
one by one up to :data:`MAX_LINES_PER_EVENT` times per summary interval; past
that, one ``lines_suppressed`` line says so, the rest are only counted, and
the node's next ``summary`` line (once a minute, and at shutdown) names how
many of each were not logged. Every slot is still counted in the metrics,
the summary and the ledger, which keeps each slot's own detail.

The summary is the window (no clock of its own): what was not logged is said
in the very line an operator reads for the minute's counts.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Final

from quorum_cron.agent.logs import event

__all__ = ["MAX_LINES_PER_EVENT", "LineBudget"]

MAX_LINES_PER_EVENT: Final = 50
"""Lines of one bounded event logged one by one between two ``summary`` lines at most."""


class LineBudget:
    """Counts a node's bounded lines per event since the last summary; logs the ones within bound."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def event(self, logger: logging.Logger, level: int, name: str, msg: str, **fields: object) -> None:
        """:func:`~quorum_cron.agent.logs.event`, within the bound of event ``name``."""
        if not logger.isEnabledFor(level):
            return
        self._seen[name] += 1
        seen = self._seen[name]
        if seen <= MAX_LINES_PER_EVENT:
            event(logger, level, name, msg, **fields)
        elif seen == MAX_LINES_PER_EVENT + 1:
            event(
                logger,
                logging.WARNING,
                "lines_suppressed",
                f"more than {MAX_LINES_PER_EVENT} {name} lines since the last summary: the rest are "
                "counted in the next summary line, not logged one by one",
                of_event=name,
                limit=MAX_LINES_PER_EVENT,
            )

    def take_suppressed(self) -> dict[str, int]:
        """Per event, the lines not logged since the last call (only events that lost some); starts over."""
        seen, self._seen = self._seen, Counter()
        return {name: n - MAX_LINES_PER_EVENT for name, n in sorted(seen.items()) if n > MAX_LINES_PER_EVENT}
