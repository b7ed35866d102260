"""Core bugs the simulator found, as minimal scenarios: regression tests once fixed.

``untrusted-busy-loop`` and ``paused-between-start-and-run`` were fixed in
20af25a; ``store-outage-unaccounted`` in 366e5b3 (the explorer still finds
the kind when every link is cut or every clock untrusted, so it stays in
``sim.checker.KNOWN_CORE_BUGS``). A bug still open gets a strict xfail
here, which fails the suite as soon as the fix lands.
"""

from __future__ import annotations

from pathlib import Path

import sim
from sim.checker import BUSY_LOOP, LATE_RUN, UNVOTED

BUGS = Path(sim.__file__).parent / "scenarios" / "bugs"


def test_an_untrusted_node_does_not_spin() -> None:
    rep = sim.run(sim.load(BUGS / "untrusted-busy-loop.toml"), 0).report
    assert BUSY_LOOP not in rep.by_kind() and rep.ok


def test_slots_due_during_a_store_outage_are_accounted_for() -> None:
    rep = sim.run(sim.load(BUGS / "store-outage-unaccounted.toml"), 0).report
    assert UNVOTED not in rep.by_kind() and rep.ok


def test_a_start_reply_handled_after_the_lease_does_not_run_the_job() -> None:
    for seed in range(5):
        rep = sim.run(sim.load(BUGS / "paused-between-start-and-run.toml"), seed).report
        assert LATE_RUN not in rep.by_kind() and rep.duplicates == 0 and rep.ok
