"""A timeline of one run: nodes as rows, faults shaded, votes and executions marked.

Needs matplotlib (``pip install matplotlib``); nothing else in ``sim``
does. Reads only the trace, so a saved trace can be plotted later.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sim.trace import Record

__all__ = ["plot_timeline"]

_SHADE = {
    "partitioned": "#f4a582",
    "paused": "#92c5de",
    "down": "#bababa",
    "untrusted": "#fddbc7",
    "store down": "#b2abd2",
    "degraded link": "#fee0b6",
}


def plot_timeline(records: Sequence[Record], path: str | Path) -> None:
    """Write a PNG timeline of the trace ``records`` to ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise SystemExit("the timeline plot needs matplotlib: pip install matplotlib") from None
    header = records[0]
    end = records[-1]["t"]
    start = header["t"]
    nodes = sorted({r["node"] for r in records if r["ev"] == "health"})
    row = {n: i for i, n in enumerate(nodes)}
    fig, ax = plt.subplots(figsize=(14, 1.0 + 0.6 * len(nodes)))

    def x(t: int) -> float:
        return float(t - start) / 1000

    open_since: dict[str, tuple[int, str]] = {}
    for r in records:
        if r["ev"] != "health":
            continue
        node = r["node"]
        if node in open_since:
            t0, why = open_since.pop(node)
            key = next((k for k in _SHADE if why.startswith(k)), "")
            ax.barh(row[node], x(r["t"]) - x(t0), left=x(t0), height=0.8, color=_SHADE.get(key, "#f7f7f7"))
        if not r["ok"]:
            open_since[node] = (r["t"], r["why"])
    for node, (t0, why) in open_since.items():
        key = next((k for k in _SHADE if why.startswith(k)), "")
        ax.barh(row[node], x(end) - x(t0), left=x(t0), height=0.8, color=_SHADE.get(key, "#f7f7f7"))
    points: dict[str, tuple[list[float], list[int]]] = {"vote": ([], []), "run": ([], []), "again": ([], [])}
    seen: set[tuple[str, int]] = set()
    for r in records:
        if r.get("node") not in row:
            continue
        kind = "vote" if r["ev"] in ("vote", "kv") else "run" if r["ev"] == "run" else ""
        if kind == "run":
            slot = (r["job"], r["fire"])
            kind = "again" if slot in seen else "run"
            seen.add(slot)
        if kind:
            points[kind][0].append(x(r["t"]))
            points[kind][1].append(row[r["node"]])
    styles = {
        "vote": ("|", 30, "#777777", "vote / lock call"),
        "run": ("o", 18, "#1a9850", "run (side effect)"),
        "again": ("x", 60, "#d73027", "slot run again"),
    }
    for kind, (marker, size, color, label) in styles.items():
        xs, ys = points[kind]
        if xs:
            ax.scatter(xs, ys, marker=marker, s=size, color=color, label=label)
    for label, color in _SHADE.items():
        ax.barh(-10, 0, color=color, label=label)
    ax.set_yticks(range(len(nodes)), nodes)
    ax.set_ylim(-0.6, len(nodes) - 0.4)
    ax.set_xlim(0, x(end))
    ax.set_xlabel("simulated seconds")
    ax.set_title(f"seed {header['seed']} · {header['strategy']}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
