"""The parts of docs/architecture.md and the arrows between them, checked on the source: every import.

Each module of ``quorum_cron/``, ``sim/`` and ``chaos/`` belongs to one part (:data:`PARTS`, the most
specific entry wins), and a part imports only the parts and files its row of :data:`MAY_IMPORT` names.
Those two tables are the table of docs/architecture.md: a test reads the page, so the page and this file
cannot drift apart. The rules the page states in words are then checked on their own, where "reaches"
means the whole import closure (what importing the module loads): the core, the configuration and the
simulator reach no redis-py, no store implementation, no agent and no face; no module outside
``quorum_cron/store/`` imports redis-py; the web imports no agent and no command; no import cycles.

An import is every ``import`` statement, deferred ones inside functions too (a deferred import is how a
cycle or a wrong-way arrow hides). Imports under ``if TYPE_CHECKING:`` count as arrows (a type is a
dependency) but not for closures and cycles: they never run. A package ``__init__`` that a submodule's
import loads implicitly is not an arrow: only what a statement names is.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "quorum_cron"
TOP = ("quorum_cron", "sim", "chaos")
"""The import roots scanned; ``sim/`` and ``chaos/`` sit beside the package."""

PARTS: dict[str, tuple[str, ...]] = {
    "shared": ("errors.py", "redact.py", "printable.py"),
    "model": ("core/model.py", "core/membership.py", "core/fastinit.py"),
    "core": ("core/",),
    "clock": ("clock/",),
    "config": ("config/",),
    "store": ("store/",),
    "embedded": ("store/embedded/",),
    "agent": ("agent/",),
    "web": ("web/",),
    "crontab": ("crontab/",),
    "faces": (
        "__init__.py",
        "__main__.py",
        "cli.py",
        "app.py",
        "sim_cli.py",
        "commands/",
        "agent/__main__.py",
        "clock/check.py",
    ),
    "sim": ("sim/",),
    "chaos": ("chaos/",),
}
"""Part -> its folders and files (under ``quorum_cron/`` unless they start with ``sim/`` or ``chaos/``)."""

PURE_CONFIG = ("config/schedule.py", "config/cron.py", "config/durations.py", "config/bounds.py")
STORE_CONTRACT = ("store/base.py", "store/ports.py")
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "shared": (),
    "model": (),
    "core": ("model", "shared", *STORE_CONTRACT, *PURE_CONFIG),
    "clock": ("shared",),
    "config": ("model", "shared", "clock/policy.py", "clock/servers.py", "store/urls.py"),
    "store": ("model", "shared", "redis"),
    "embedded": ("store", "shared", "redis"),
    "agent": ("model", "core", "clock", "config", "store", "shared"),
    "web": ("model", "config", "store", "shared"),
    "crontab": ("config", "shared"),
    "faces": (
        "model",
        "core",
        "clock",
        "config",
        "store",
        "embedded",
        "agent",
        "web",
        "crontab",
        "sim",
        "shared",
    ),
    "sim": (
        "model",
        "core",
        "shared",
        *PURE_CONFIG,
        *STORE_CONTRACT,
        "store/keys.py",
        "store/memory*.py",
    ),
    "chaos": ("store", "embedded", "shared", "redis"),
}
"""Part -> what it may import besides itself: parts, files (globs allowed), or ``redis`` (redis-py).

Of the third-party packages only redis-py is an arrow here; the standard library and the others are free.
"""

FACES_AND_SIM = ("faces", "sim")
URL_PARSING = ("store/urls.py",)
"""What the configuration may load of the store: parsing a Redis URL, no client."""


# --------------------------------------------------------------------------- the scan


@dataclass(frozen=True)
class Import:
    """One name an import statement loads: a module of ours (``quorum_cron.x.y``) or a top-level package."""

    target: str
    line: int
    typing_only: bool


def _path_of(module: str) -> str:
    """The path (from the repository root) a module was read from."""
    return MODULES[module]


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, str]:
    found: dict[str, str] = {}
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            found[_module_of(path)] = str(path.relative_to(ROOT))
    return found


MODULES: dict[str, str] = _sources()
"""Every module scanned -> its path from the repository root."""


def _resolve(name: str) -> str:
    """``name`` as the module of ours it loads (the longest known prefix), or its top-level package."""
    if name.split(".")[0] not in TOP:
        return name.split(".")[0]
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def scan(source: str, module: str, *, is_package: bool = False) -> list[Import]:
    """Every import in ``source`` (of ``module``), nested ones too, marked if under TYPE_CHECKING."""
    found: list[Import] = []
    package = module if is_package else module.rpartition(".")[0]

    def add(name: str, line: int, typing_only: bool) -> None:
        found.append(Import(_resolve(name), line, typing_only))

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                visit(stmt, True)
            for stmt in node.orelse:
                visit(stmt, typing_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, typing_only)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                add(f"{base}.{alias.name}", node.lineno, typing_only)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(ast.parse(source), False)
    return found


@functools.cache
def imports_of(module: str) -> tuple[Import, ...]:
    path = ROOT / _path_of(module)
    return tuple(
        i for i in scan(path.read_text(), module, is_package=path.name == "__init__.py") if i.target != module
    )


def _pattern(spec: str) -> str:
    """A PARTS / MAY_IMPORT path as an fnmatch pattern over paths from the repository root."""
    full = spec if spec.split("/")[0] in ("sim", "chaos") else f"quorum_cron/{spec}"
    return full + "*" if full.endswith("/") else full


def part_of(module: str) -> str | None:
    """The part a module of ours belongs to: the most specific PARTS entry matching its path."""
    path = _path_of(module)
    matches = [
        (len(spec), part)
        for part, specs in PARTS.items()
        for spec in specs
        if fnmatch.fnmatch(path, _pattern(spec))
    ]
    return max(matches)[1] if matches else None


def _in(module: str, specs: Iterable[str]) -> bool:
    """Whether ``module`` (ours, or ``redis``) is one of ``specs``: part names, files or ``redis``."""
    if module not in MODULES:
        return module in specs
    part = part_of(module)
    return any(
        s == part or (("/" in s or s.endswith(".py")) and fnmatch.fnmatch(_path_of(module), _pattern(s)))
        for s in specs
    )


@functools.cache
def _graph() -> Mapping[str, frozenset[str]]:
    """Module -> the modules of ours (and ``redis``) its running imports load (TYPE_CHECKING excluded)."""
    return {
        m: frozenset(
            i.target
            for i in imports_of(m)
            if not i.typing_only and (i.target in MODULES or i.target == "redis")
        )
        for m in MODULES
    }


@functools.cache
def closure(module: str) -> frozenset[str]:
    """Every module importing ``module`` loads (statements that run), ``redis`` included if reached."""
    graph = _graph()
    seen: set[str] = set()
    todo = [module]
    while todo:
        for nxt in graph.get(todo.pop(), frozenset()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    seen.discard(module)
    return frozenset(seen)


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _where(module: str, targets: Iterable[str]) -> list[str]:
    """``path:line -> target`` for each import of ``module`` naming one of ``targets``."""
    wanted = set(targets)
    return [f"{_path_of(module)}:{i.line} -> {i.target}" for i in imports_of(module) if i.target in wanted]


def _modules(*parts: str) -> list[str]:
    return sorted(m for m in MODULES if part_of(m) in parts)


def _ids(modules: Iterable[str]) -> list[str]:
    return [_path_of(m) for m in modules]


# --------------------------------------------------------------------------- the table


def test_every_module_belongs_to_a_part() -> None:
    """A new folder or top-level module is given a part (here and in docs/architecture.md) when it lands."""
    assert [_path_of(m) for m in MODULES if part_of(m) is None] == []
    assert part_of("quorum_cron.core.node") == "core" and part_of("quorum_cron.core.model") == "model"
    assert (
        part_of("quorum_cron.clock.check") == "faces"
        and part_of("quorum_cron.store.embedded.single") == "embedded"
    )


@pytest.mark.parametrize("module", sorted(MODULES), ids=_ids(sorted(MODULES)))
def test_every_import_is_an_arrow_of_the_table(module: str) -> None:
    part = part_of(module)
    assert part is not None
    allowed = (part, *MAY_IMPORT[part])
    wrong = [
        f"{_path_of(module)}:{i.line} -> {i.target}"
        for i in imports_of(module)
        if (i.target in MODULES or i.target == "redis") and not _in(i.target, allowed)
    ]
    assert wrong == [], f"{part} may import only {', '.join(allowed)} (docs/architecture.md)"


def _part_of_spec(spec: str) -> str:
    """The part a MAY_IMPORT entry lies in (``store/base.py`` is the store's); a part name is itself."""
    if spec in PARTS or spec == "redis":
        return spec
    pattern = _pattern(spec)
    return max(
        (len(s), part)
        for part, specs in PARTS.items()
        for s in specs
        if pattern.startswith(_pattern(s).rstrip("*"))
    )[1]


def test_the_parts_form_no_cycle() -> None:
    """The table is layered: no part may import, through others, a part that may import it."""
    graph = {part: {_part_of_spec(s) for s in may} - {"redis", part} for part, may in MAY_IMPORT.items()}
    assert _part_of_spec("store/base.py") == "store" and _part_of_spec("core/model.py") == "model"
    assert cycles(graph) == []


def _page_table() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """The page's parts table: part -> (its folders and files, what it may import)."""
    rows: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        m = re.fullmatch(r"\|\s*\*\*(\w+)\*\*\s*\|(.*)\|(.*)\|(.*)\|\s*", line)
        if m:
            rows[m[1]] = (tuple(re.findall(r"`([^`]+)`", m[2])), tuple(re.findall(r"`([^`]+)`", m[4])))
    return rows


def test_the_page_shows_the_same_parts_and_arrows() -> None:
    """docs/architecture.md's table and PARTS / MAY_IMPORT say the same, row by row."""
    page = _page_table()
    assert sorted(page) == sorted(PARTS)
    for part, (where, may) in page.items():
        assert sorted(where) == sorted(PARTS[part]), part
        assert sorted(may) == sorted(MAY_IMPORT[part]), part


def test_every_path_the_page_names_exists() -> None:
    """The page names files (the table, the walk of one vote); a file moved or renamed is caught here."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = {t for t in re.findall(r"`([^`\s]+)`", text) if re.search(r"(\.py|\.lua|/)$", t)}
    assert len(named) > 40  # the page is read
    missing = [
        t
        for t in sorted(named)
        if not any(list((ROOT / r).glob(t.rstrip("/"))) for r in ("quorum_cron", "."))
    ]
    assert missing == []


# --------------------------------------------------------------------------- the rules in words


@pytest.mark.parametrize("module", _modules("core", "model"), ids=_ids(_modules("core", "model")))
def test_the_core_reaches_no_store_implementation_agent_face_or_simulator(module: str) -> None:
    """The simulator and the agent drive the same pure core: outside itself and the model it loads the
    store contract, the config's pure modules and ``shared``, nothing else."""
    allowed = ("core", "model", "shared", *STORE_CONTRACT, *PURE_CONFIG)
    assert sorted(m for m in closure(module) if not _in(m, allowed)) == []


@pytest.mark.parametrize("module", _modules("config"), ids=_ids(_modules("config")))
def test_the_config_reaches_no_agent_face_simulator_or_store_implementation(module: str) -> None:
    """What a node is told is read without a store client: of the store, only URL parsing."""
    bad = sorted(
        m
        for m in closure(module)
        if m == "redis"
        or part_of(m) in ("agent", "faces", "sim", "web", "embedded", "chaos")
        or (part_of(m) == "store" and not _in(m, URL_PARSING))
    )
    assert bad == []


@pytest.mark.parametrize("module", _modules("sim"), ids=_ids(_modules("sim")))
def test_the_simulator_reaches_no_agent_redis_or_face(module: str) -> None:
    """The simulator runs the core on the memory model in virtual time: no agent, no Redis, no face."""
    bad = sorted(
        m
        for m in closure(module)
        if m == "redis"
        or part_of(m) in ("agent", "faces", "web", "embedded", "chaos")
        or (part_of(m) == "store" and fnmatch.fnmatch(_path_of(m), "quorum_cron/store/redis*.py"))
    )
    assert bad == []


BELOW_FACES = sorted(m for m in MODULES if part_of(m) not in (*FACES_AND_SIM, "chaos"))


@pytest.mark.parametrize("module", BELOW_FACES, ids=_ids(BELOW_FACES))
def test_nothing_below_the_faces_imports_a_face_or_the_simulator(module: str) -> None:
    assert _where(module, (m for m in MODULES if part_of(m) in FACES_AND_SIM)) == []


OUTSIDE_STORE = sorted(m for m in MODULES if part_of(m) not in ("store", "embedded", "chaos"))
"""Every module of the package and the simulator outside ``quorum_cron/store/``. (``chaos/`` is a test
harness, like ``tests/``: it drives real servers and may speak to them with redis-py.)"""


@pytest.mark.parametrize("module", OUTSIDE_STORE, ids=_ids(OUTSIDE_STORE))
def test_no_module_outside_the_store_imports_redis(module: str) -> None:
    """Not even for an exception type or an annotation: the store raises and returns our own types."""
    assert _where(module, ("redis",)) == []


@pytest.mark.parametrize("module", _modules("web"), ids=_ids(_modules("web")))
def test_the_web_imports_no_agent_and_no_command(module: str) -> None:
    """The dashboard reads the store: what it shares with the agent or a command lives below both."""
    assert _where(module, (m for m in MODULES if part_of(m) in ("agent", "faces"))) == []


def test_no_import_cycles() -> None:
    """Between modules of quorum_cron/, sim/ and chaos/, through imports that run (deferred ones too)."""
    graph = {m: targets - {"redis"} for m, targets in _graph().items()}
    found = [
        " / ".join(f"{_path_of(a)} -> {b}" for a in component for b in sorted(graph[a] & set(component)))
        for component in cycles(graph)
    ]
    assert found == []


# --------------------------------------------------------------------------- the checker is not blind


def test_the_scan_sees_deferred_relative_and_typing_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import redis.cluster\n"
        "from . import model\n"
        "from .node import NodeCore\n"
        "if TYPE_CHECKING:\n"
        "    from quorum_cron.agent.runtime import Agent\n"
        "def f():\n"
        "    from sim.world import World\n"
    )
    found = {(i.target, i.typing_only) for i in scan(source, "quorum_cron.core.vote")}
    assert found == {
        ("typing", False),
        ("redis", False),
        ("quorum_cron.core.model", False),
        ("quorum_cron.core.node", False),
        ("quorum_cron.agent.runtime", True),
        ("sim.world", False),
    }


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_checker_sees_the_arrows_it_allows() -> None:
    """The scan reads the real tree: the runtime imports the core; the store contract is in its closure."""
    runtime = "quorum_cron.agent.runtime"
    assert "quorum_cron.core.node" in {i.target for i in imports_of(runtime)}
    assert "quorum_cron.store.base" in closure(runtime) and "quorum_cron.core.model" in closure(runtime)
    assert _in("quorum_cron.store.memory_records", MAY_IMPORT["sim"])
    assert not _in("quorum_cron.store.redis", MAY_IMPORT["sim"])


# --------------------------------------------------------------------------- size


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
