"""The demo's last word on a failed run: each slot not run exactly once, and what the ledger says of it.

Apart from :mod:`.demo` (at the modules' size cap) and pure: it reads
nothing, so a test feeds it ledger entries directly. The demo's store and
its temporary config are gone when it exits (the embedded server with it),
so ``quorum-cron history`` could not be run afterwards: every slot is said
here, the first few on the one verdict line and all of them (bounded) above
it.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape

from quorum_cron.core.model import LedgerEntry
from quorum_cron.printable import first_of, printable

__all__ = ["LISTED", "hms", "print_failure", "slot_lines", "verdict"]

LISTED = 50
"""Slot lines printed above the verdict; a run gone wholly wrong says how many more."""


def hms(ms: int) -> str:
    """``12:39:06.000`` (UTC): a slot's time as the demo's lines show it."""
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def slot_lines(
    wrong: list[tuple[str, int, int]],
    problems: list[str],
    entries: dict[tuple[str, int], LedgerEntry],
    killed: list[str],
) -> list[str]:
    """Per slot not run exactly once, ``tick@12:39:05.000 ran 2 times (ledger: lost; ...)``; then
    each place where the ledger disagrees with what the jobs wrote."""
    said = []
    for name, fire, times in wrong:
        e = entries.get((name, fire))
        ledger = (
            "no ledger entry"
            if e is None
            else f"ledger: {e.state.value}" + (f", {printable(e.reason)[:200]}" if e.reason else "")
        )
        if e is not None and e.executor in killed:
            ledger += f"; executor {e.executor} was killed"
        what = "missed" if times == 0 else f"ran {times} times"
        said.append(f"{name}@{hms(fire)} {what} ({ledger})")
    return said + [f"ledger disagrees: {p}" for p in problems]


def verdict(wrong: list[tuple[str, int, int]], said: list[str]) -> str:
    """One line: how many slots were not run exactly once, and the first three of :func:`slot_lines`
    (the rest are printed above it, the store being gone once the demo exits)."""
    slots = "1 slot" if len(wrong) == 1 else f"{len(wrong)} slots"
    count = f"{slots} not run exactly once" if wrong else "the ledger disagrees with the jobs"
    more = " (each listed above)" if len(said) > 3 else ""
    return f"FAILED: {count}: {first_of(said, 3, sep='; ')}{more}"


def print_failure(console: Console, wrong: list[tuple[str, int, int]], said: list[str]) -> None:
    """Every line of :func:`slot_lines` (bounded) when the verdict cannot name them all, then the
    verdict. Escaped for rich: a ledger reason comes from Redis and may hold ``[/]`` or ``[bold]``,
    which rich read as markup: eaten from the line, or (a closing tag with none open) a MarkupError
    that ended a failed demo in a traceback instead of its verdict."""
    if len(said) > 3:  # (the store goes with the demo: no `history` to look at afterwards)
        for line in said[:LISTED]:
            console.print(f"[red]  {escape(line)}[/]", soft_wrap=True)
        if len(said) > LISTED:
            console.print(f"[red]  and {len(said) - LISTED} more[/]")
    console.print(f"[bold red]{escape(verdict(wrong, said))}[/]", soft_wrap=True)
