"""The deterministic simulator: the real node core, a simulated network, virtual time.

``sim.run(scenario, seed, strategy)`` runs one seeded scenario and returns
its trace and the checker's verdict; see ``docs/simulator.md``.
"""

from sim.checker import Report, Violation, check
from sim.runner import RunResult, run
from sim.scenario import FAULT_KINDS, Fault, JobDef, Scenario, dumps, load, loads
from sim.trace import Trace, read_trace

__all__ = [
    "FAULT_KINDS",
    "Fault",
    "JobDef",
    "Report",
    "RunResult",
    "Scenario",
    "Trace",
    "Violation",
    "check",
    "dumps",
    "load",
    "loads",
    "read_trace",
    "run",
]
