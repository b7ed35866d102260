"""Loading a script of benchmarks/ in a test, from its file.

benchmarks/ is not a package, and putting it on ``sys.path`` for the session
would let its modules (memory.py, ...) shadow others. So the directory is on
``sys.path`` only while the script loads (its own imports of ``_common``,
``peers_analysis``, ... need it), and the path is restored afterwards.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_benchmark(filename: str, name: str) -> ModuleType:
    """``benchmarks/<filename>`` loaded as module ``name`` (registered in ``sys.modules``:
    dataclasses look their module up by name)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module
