"""Overlapping faults of one kind nest, as overlapping partitions do (docs/simulator.md,
"Overlapping faults nest"): each fault's end undoes only its own effect.

Before, a short crash inside a long one booted the node at the short one's end, the first of two
overlapping drifts to end left its drift for good, a strobe's end stopped a longer strobe, and a
pause of a paused node was ignored (a user audit; trace ``/tmp/sc/co.jsonl``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sim
from sim.faults import install_faults
from sim.runner import make_strategy
from sim.scenario import Fault, loads
from sim.world import World

BASE = """
name = "nesting"
nodes = 3
duration = "2m"
[[jobs]]
name = "c"
every = "10s"
"""


def _world(*faults: Fault) -> World:
    sc = loads(BASE, "<test>").with_faults(faults)
    return World(sc, 1, make_strategy("quorum"))


def _probe(world: World, at_s: float, fn: Callable[[], Any], out: dict[float, Any]) -> None:
    world.loop.at(world.start_ms + int(at_s * 1000), lambda: out.__setitem__(at_s, fn()))


def _run_probing(world: World, times: list[float], fn: Callable[[], Any]) -> dict[float, Any]:
    out: dict[float, Any] = {}

    def install(w: World) -> None:
        install_faults(w)
        for t in times:
            _probe(w, t, fn, out)

    world.run(install)
    return out


def _node_fault(kind: str, at: int, for_: int, **kw: Any) -> Fault:
    return Fault(kind=kind, at_ms=at * 1000, for_ms=for_ * 1000, nodes=("n1",), **kw)


def test_a_node_is_down_while_any_crash_fault_covers_it() -> None:
    sc = loads(BASE, "<test>").with_faults((_node_fault("crash", 10, 30), _node_fault("crash", 20, 5)))
    records = sim.run(sc, 1).trace.records
    n1 = [
        (r["ev"], r["t"] - sc.start_ms)
        for r in records
        if r.get("node") == "n1" and r["ev"] in ("crash", "boot")
    ]
    assert n1 == [("boot", 0), ("crash", 10_000), ("boot", 40_000)]


def test_a_crash_for_ever_inside_a_timed_one_keeps_the_node_down() -> None:
    sc = loads(BASE, "<test>").with_faults((_node_fault("crash", 10, 30), _node_fault("crash", 20, 0)))
    records = sim.run(sc, 1).trace.records
    boots = [r["t"] - sc.start_ms for r in records if r.get("node") == "n1" and r["ev"] == "boot"]
    assert boots == [0]


def test_a_deploy_inside_a_crash_boots_with_its_spec_when_the_crash_ends() -> None:
    sc = loads(BASE, "<test>").with_faults(
        (_node_fault("crash", 10, 40), _node_fault("deploy", 20, 5, job="c", spec="v2"))
    )
    records = sim.run(sc, 1).trace.records
    boots = [
        (r["t"] - sc.start_ms, r["specs"]) for r in records if r.get("node") == "n1" and r["ev"] == "boot"
    ]
    assert boots == [(0, {}), (50_000, {"c": "v2"})]


def test_overlapping_drifts_end_on_the_nodes_own_drift() -> None:
    world = _world(_node_fault("clock_drift", 10, 30, ppm=100), _node_fault("clock_drift", 20, 40, ppm=300))
    own = world.nodes["n1"].clock.ppm
    seen = _run_probing(world, [15, 30, 50, 70], lambda: world.nodes["n1"].clock.ppm)
    # The latest-started active drift wins; when the last ends, the node's own drift is back.
    assert seen == {15: 100, 30: 300, 50: 300, 70: own}


def test_a_drift_inside_a_longer_one_gives_it_back_when_it_ends() -> None:
    world = _world(_node_fault("clock_drift", 10, 50, ppm=100), _node_fault("clock_drift", 20, 10, ppm=300))
    own = world.nodes["n1"].clock.ppm
    seen = _run_probing(world, [25, 40, 70], lambda: world.nodes["n1"].clock.ppm)
    assert seen == {25: 300, 40: 100, 70: own}


def test_a_strobe_ending_inside_a_longer_one_does_not_stop_it() -> None:
    world = _world(
        _node_fault("clock_strobe", 5, 5, by_ms=200, period_ms=1000),
        _node_fault("clock_strobe", 6, 60, by_ms=50, period_ms=2000),
    )
    clock = world.nodes["n1"].clock
    seen = _run_probing(world, [7, 20, 65, 67], lambda: (clock.strobe_ms, clock.strobe_period_ms))
    assert seen == {7: (50, 2000), 20: (50, 2000), 65: (50, 2000), 67: (0, 1)}


def test_a_strobe_inside_a_longer_one_gives_it_back_when_it_ends() -> None:
    world = _world(
        _node_fault("clock_strobe", 5, 60, by_ms=200, period_ms=1000),
        _node_fault("clock_strobe", 10, 5, by_ms=50, period_ms=2000),
    )
    clock = world.nodes["n1"].clock
    seen = _run_probing(world, [12, 20, 70], lambda: clock.strobe_ms)
    assert seen == {12: 50, 20: 200, 70: 0}


def test_a_node_stays_paused_until_the_latest_overlapping_pause_ends() -> None:
    world = _world(_node_fault("pause", 10, 5), _node_fault("pause", 12, 30))
    seen = _run_probing(world, [14, 20, 41, 43], lambda: world.nodes["n1"].paused)
    assert seen == {14: True, 20: True, 41: True, 43: False}
    resumes = [r["t"] - world.start_ms for r in world.trace.records if r["ev"] == "resume"]
    assert resumes == [42_000]


def test_the_store_is_down_while_any_store_fault_holds_it_and_refuses_while_any_refusal_lasts() -> None:
    store_faults = (
        Fault(kind="store_restart", at_ms=10_000, for_ms=30_000),
        Fault(kind="store_restart", at_ms=20_000, for_ms=5_000),
        Fault(kind="store_refuse", at_ms=50_000, for_ms=30_000),
        Fault(kind="store_refuse", at_ms=60_000, for_ms=5_000),
    )
    world = _world(*store_faults)
    seen = _run_probing(world, [30, 45, 70, 85], lambda: (world.store.up, bool(world.store.refusing)))
    assert seen == {30: (False, False), 45: (True, False), 70: (True, True), 85: (True, False)}


def test_a_node_learns_no_record_while_any_stale_config_covers_it() -> None:
    world = _world(_node_fault("stale_config", 10, 30), _node_fault("stale_config", 20, 5))
    seen = _run_probing(world, [30, 45], lambda: "n1" in world.stale_config)
    assert seen == {30: True, 45: False}


def test_overlapping_partitions_still_nest() -> None:
    world = _world(_node_fault("partition", 10, 30), _node_fault("partition", 20, 5))
    seen = _run_probing(world, [30, 45], lambda: world.nodes["n1"].link.cuts)
    assert seen == {30: 1, 45: 0}


def test_a_lone_fault_still_ends_as_before() -> None:
    """No overlap, no change: a drift gives the node's own drift back, a strobe stops."""
    world = _world(
        _node_fault("clock_drift", 10, 10, ppm=100),
        _node_fault("clock_strobe", 30, 10, by_ms=20, period_ms=500),
    )
    own = world.nodes["n1"].clock.ppm
    clock = world.nodes["n1"].clock
    seen = _run_probing(world, [15, 25, 35, 45], lambda: (clock.ppm, clock.strobe_ms))
    assert seen == {15: (100, 0), 25: (own, 0), 35: (own, 20), 45: (own, 0)}
