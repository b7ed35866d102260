"""The forbidden arrows of docs/architecture.md, checked on the source (every import, nested ones too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "quorum_cron"

PURE = sorted(
    str(p.relative_to(PKG).with_suffix(""))
    for p in [
        *(PKG / "core").glob("*.py"),
        *(PKG / "config" / n for n in ("schedule.py", "cron.py", "durations.py")),
    ]
)
FACES = ("quorum_cron.cli", "quorum_cron.commands", "quorum_cron.app", "quorum_cron.sim_cli")
REDIS_STORE = tuple(f"quorum_cron.store.{p.stem}" for p in sorted((PKG / "store").glob("redis*.py")))
"""``RedisStore`` and the modules it is assembled from (``store/redis.py``, ``store/redis_*.py``)."""
MEMORY_STORE = tuple(f"quorum_cron.store.{p.stem}" for p in sorted((PKG / "store").glob("memory*.py")))
"""The memory model and its parts (``store/memory.py``, ``store/memory_*.py``)."""
IMPLEMENTATIONS = (*REDIS_STORE, *MEMORY_STORE, "redis")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _hits(imports: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(i for i in imports if any(i == p or i.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("name", PURE)
def test_the_core_imports_no_store_implementation_agent_face_or_simulator(name: str) -> None:
    forbidden = (*IMPLEMENTATIONS, "quorum_cron.agent", *FACES, "sim")
    assert _hits(_imports(PKG / f"{name}.py"), forbidden) == []


BELOW_FACES = sorted(
    p
    for p in [*(PKG / "store").glob("*.py"), *(PKG / "agent").glob("*.py"), *(PKG / "config").glob("*.py")]
    if p.name != "__main__.py"  # (``python -m quorum_cron.agent`` is an entry point: a face)
)


@pytest.mark.parametrize("path", BELOW_FACES, ids=lambda p: str(p.relative_to(PKG)))
def test_nothing_below_the_faces_imports_a_face_or_the_simulator(path: Path) -> None:
    assert _hits(_imports(path), (*FACES, "sim")) == []


@pytest.mark.parametrize("path", sorted((ROOT / "sim").glob("*.py")), ids=lambda p: p.name)
def test_the_simulator_imports_no_agent_and_no_redis(path: Path) -> None:
    assert _hits(_imports(path), ("quorum_cron.agent", *REDIS_STORE, "redis", *FACES)) == []


def test_the_checker_sees_an_arrow() -> None:
    """The scan is not blind: the agent's runtime does import the core and a store contract."""
    found = _imports(PKG / "agent" / "runtime.py")
    assert "quorum_cron.core.node" in found and _hits(found, ("quorum_cron.store",))


def test_the_redis_store_list_names_its_parts() -> None:
    """The arrows above cover every part of ``RedisStore``, not only ``store/redis.py``."""
    assert "quorum_cron.store.redis" in REDIS_STORE and "quorum_cron.store.redis_writes" in REDIS_STORE


MAX_LINES = 500
"""No god modules (issue 10 item 4): a file does one thing, and about 500 lines is the bound."""


def _module_lines() -> dict[str, int]:
    return {str(p.relative_to(PKG)): len(p.read_text().splitlines()) for p in sorted(PKG.rglob("*.py"))}


def test_no_module_is_over_500_lines() -> None:
    """Every module under quorum_cron/ (subpackages too) is at most MAX_LINES lines; offenders are named."""
    sizes = _module_lines()
    assert "core/model.py" in sizes and "store/redis.py" in sizes  # the scan sees the package
    over = [f"{name} ({n} lines)" for name, n in sizes.items() if n > MAX_LINES]
    assert over == [], f"modules over {MAX_LINES} lines (split them by what they own): {', '.join(over)}"
