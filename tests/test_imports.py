"""The pure parts load without redis-py: core, model, schedule, config, memory model, simulator.

A package ``__init__`` that imports a network client eagerly makes every
module under it impure to its readers; this test blocks ``redis`` and
imports the pure parts in a fresh interpreter (the test process itself has
long since imported redis-py).
"""

from __future__ import annotations

import subprocess
import sys

PURE = (
    "quorum_cron.core.node",
    "quorum_cron.config.schedule",
    "quorum_cron.config.settings",
    "quorum_cron.core.model",
    "quorum_cron.store.memory",
    "sim",
)

PROBE = """
import importlib, sys
sys.modules['redis'] = None  # any 'import redis' now raises ImportError
for name in sys.argv[1:]:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.'))
assert loaded == ['redis'], loaded
print('ok')
"""


def test_pure_parts_import_without_redis() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *PURE], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_probe_sees_a_redis_import() -> None:
    """The probe itself is honest: importing the Redis store under it fails."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "quorum_cron.store.redis"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0 and "import of redis halted" in proc.stderr
