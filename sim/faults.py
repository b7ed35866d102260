"""Faults: turn a scenario's timed fault list into events on a world.

Each fault of :data:`sim.scenario.FAULT_KINDS` begins at ``at`` and, where
it has a length, ends ``for`` later; both ends are traced (``fault`` records
with ``phase`` begin/end) so the checker and the plot can see them. Random
choices (which nodes ``pick`` selects, flapping intervals, swizzle order)
come from the world's ``faults`` stream, drawn when the fault is installed,
so they do not depend on anything that happens during the run.

Membership (issue 22): a scenario with ``members`` or a membership fault
(:data:`sim.scenario.MEMBERSHIP_KINDS`) also simulates heartbeats, the way
the agent learns the record: every node up, unpaused and linked to a
running store heartbeats every :data:`HEARTBEAT_MS` with the epoch it
holds (``store.heartbeat``, which also leaves a joint state once every new
member holds it) and adopts the record in the reply. Every change of the
namespace record is traced (``membership`` records: epoch, text, by whom)
so the checker can hold each job's record to the records the cluster had.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from quorum_cron.core.model import Configuration, MembershipRecord
from sim.scenario import MEMBERSHIP_KINDS, Fault
from sim.world import PauseTrigger, SimNode, World

__all__ = ["install_faults"]


HEARTBEAT_MS = 1_000
"""How often a simulated node heartbeats in a membership scenario. Not the agent's default
(``heartbeat``, 2 s): a simulated node beats twice as often, so joint changes finish and stale
nodes learn records sooner than on a default agent. The rules the checker judges do not depend
on the pace; it stays because every shipped and shrunk scenario replays the same only with it
(``sim scenario --config`` carries a config's own heartbeat into the clock check, not here)."""


@dataclass
class _Holds:
    """What the active faults of the kinds that do not simply add up hold, per world.

    Overlapping faults of one kind nest, as partitions do (``Link.cuts``): a node is down while
    any crash, outage or deploy holds it down, and boots when the last of them ends; the store is
    down while any ``store_restart`` or ``store_failover`` holds it down and refuses writes while
    any ``store_refuse`` is active; a node learns no membership record while any ``stale_config``
    covers it; a node's drift (strobe) is the one of the latest-started ``clock_drift``
    (``clock_strobe``) still active on it, and its own drift (no strobe) once none is.
    """

    down: dict[str, int] = field(default_factory=dict)
    """Node → the crash-like faults holding it down."""
    store_down: int = 0
    refusing: int = 0
    stale: dict[str, int] = field(default_factory=dict)
    drifts: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Node → (fault id, ppm) of the active drift faults, in the order they began."""
    own_ppm: dict[str, int] = field(default_factory=dict)
    """Node → its drift before the first drift fault (the one ``clocks.drift`` drew)."""
    strobes: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    """Node → (fault id, amplitude, period) of the active strobe faults, in the order they began."""


_HOLDS: weakref.WeakKeyDictionary[World, _Holds] = weakref.WeakKeyDictionary()


def _holds(world: World) -> _Holds:
    holds = _HOLDS.get(world)
    if holds is None:
        holds = _HOLDS[world] = _Holds()
    return holds


def _hold_down(world: World, node: SimNode, why: str) -> None:
    """One more fault holds the node down: crash it (if it is up)."""
    down = _holds(world).down
    down[node.id] = down.get(node.id, 0) + 1
    world.crash(node, why)


def _release(world: World, node: SimNode) -> None:
    """One fault holding the node down ended: boot it if no other one still holds it."""
    down = _holds(world).down
    down[node.id] = max(0, down.get(node.id, 0) - 1)
    if not down[node.id]:
        world.boot(node)


def install_faults(world: World) -> None:
    """Schedule every fault of the world's scenario (and heartbeats, if it simulates membership).

    Membership faults act on the quorum strategy's store only: the baselines have no membership.
    """
    quorum = world.strategy.name == "quorum"
    for fid, fault in enumerate(world.scenario.faults):
        if (fault.kind in MEMBERSHIP_KINDS or fault.kind == "reload") and not quorum:
            continue  # (the baselines have no membership, and no live reload)
        _INSTALL[fault.kind](world, fid, fault, _targets(world, fault))
    if world.scenario.uses_membership and quorum:
        world.loop.at(world.start_ms, _trace_membership, world, "start")
        # (A stream of their own: drawn from the faults' one after every fault's install, the
        # phases changed with a fault removed past the run's end, and a shrunk run with them.)
        phases = world.streams.fork("heartbeats")
        for node_id in sorted(world.nodes):
            node = world.nodes[node_id]
            world.loop.at(world.start_ms + phases.randint(1, HEARTBEAT_MS), _heartbeat, world, node)


# -- membership ----------------------------------------------------------------


def _trace_membership(world: World, by: str) -> None:
    """Trace the namespace record if it changed since the last one traced."""
    ms = world.store.state.membership()
    if ms is None:
        return
    text = ms.record.encode()
    if world.membership_traced == text:
        return
    world.membership_traced = text
    st = world.store.clock.wall(world.loop.now)
    world.trace.emit(
        world.loop.now, "membership", epoch=ms.record.epoch, record=text, by=by, why=ms.reason, st=st
    )
    if ms.record.joint:
        world.reached("membership change (joint)")
    elif ms.record.epoch > 1:
        world.reached("membership change finished")


def _reachable(world: World, node: SimNode) -> bool:
    """Whether the node's heartbeat (a write) gets through: up, unpaused, linked, store taking writes."""
    return node.up and not node.paused and not node.link.cuts and _writable(world)


def _writable(world: World) -> bool:
    return world.store.up and not world.store.refusing


def _heartbeat(world: World, node: SimNode) -> None:
    """One heartbeat: the store records the epoch the node holds, the node learns the record."""
    world.loop.at(world.loop.now + HEARTBEAT_MS, _heartbeat, world, node)
    process = node.process
    if process is None or not _reachable(world, node):
        return
    core = process.core  # type: ignore[attr-defined]
    held = core.membership
    before = world.store.state.membership()
    epoch = held.epoch if held is not None else 0
    hb = world.store.state.heartbeat(node.id, str(node.incarnation), 3 * HEARTBEAT_MS, {}, epoch)
    if hb.ok and before is not None and before.record.joint:
        # (While a change is joint only: what a finish must wait for, the checker's evidence.)
        st = world.store.clock.wall(world.loop.now)
        world.trace.emit(world.loop.now, "hb", node=node.id, epoch=epoch, st=st, ttl=3 * HEARTBEAT_MS)
    _trace_membership(world, f"heartbeat of {node.id}")
    if hb.membership is not None and node.id not in world.stale_config:
        process.set_membership(hb.membership.record)  # type: ignore[attr-defined]


def _reconfigure(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    def change() -> None:
        if not _writable(world):
            _mark(world, f, "refused", nodes, why="store down or refusing writes")
            return
        store = world.store.state
        ms = store.membership()
        epoch = ms.record.epoch if ms is not None else 0
        res = store.change_membership(epoch, Configuration.of(n.id for n in nodes), "operator", "sim")
        _mark(world, f, "begin" if res.ok else "refused", nodes, why=res.reason)
        _trace_membership(world, "operator")
        if not res.ok:
            world.reached("membership change refused")

    _at(world, f, 0, change)


def _finish(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    def finish() -> None:
        if not _writable(world):
            _mark(world, f, "refused", [], why="store down or refusing writes")
            return
        store = world.store.state
        ms = store.membership()
        epoch = ms.record.epoch if ms is not None else 0
        res = store.finish_membership(epoch, "operator", "sim")
        _mark(world, f, "begin" if res.ok else "refused", [], why=res.reason)
        _trace_membership(world, "operator")
        if not res.ok:
            world.reached("membership finish refused")

    _at(world, f, 0, finish)


def _stale_config(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    stale = _holds(world).stale

    def begin() -> None:
        for n in nodes:
            stale[n.id] = stale.get(n.id, 0) + 1
            world.stale_config.add(n.id)

    def end() -> None:
        for n in nodes:
            stale[n.id] = max(0, stale.get(n.id, 0) - 1)
            if not stale[n.id]:
                world.stale_config.discard(n.id)

    _span(world, f, nodes, begin, end)


def _rogue(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    """Each node holds a copy of the config that lists it, under the store's epoch: it votes.

    A record of its own making is something no agent sends (an agent holds only records read
    from the store): this is a stranger the store must keep out. Only a node that was never a
    member of any record the namespace held forges: a job takes a newer record from its own
    members, whom the protocol trusts to relay the namespace's (docs/protocol.md, "Membership
    and reconfiguration"); a removed node forging one would be a lying member, outside the
    fault model, like a member voting under another node's id.
    """

    def begin() -> None:
        store = world.store.state
        ms = store.membership()
        if ms is None:
            return
        rec = ms.record
        held = store.membership_log(1 << 30)
        for n in nodes:
            if n.process is None or any(m.record.is_member(n.id) for m in held):
                continue
            forged = MembershipRecord(rec.epoch, Configuration.of((*rec.current.members, n.id)))
            core = n.process.core  # type: ignore[attr-defined]
            core._record = None  # (the core adopts only newer records: this one is forged)
            n.process.set_membership(forged)  # type: ignore[attr-defined]
        _mark(world, f, "begin", nodes)

    _at(world, f, 0, begin)


def _targets(world: World, f: Fault) -> list[SimNode]:
    if f.nodes:
        return [world.nodes[n] for n in f.nodes]
    ids = sorted(world.nodes)
    if f.pick:
        return [world.nodes[n] for n in sorted(world.fault_rng.sample(ids, f.pick))]
    return [world.nodes[n] for n in ids]


def _at(world: World, f: Fault, offset: int, fn: Callable[..., None], *args: Any) -> None:
    world.loop.at(world.start_ms + f.at_ms + offset, fn, *args)


def _mark(world: World, f: Fault, phase: str, nodes: list[SimNode], **details: Any) -> None:
    world.trace.emit(
        world.loop.now, "fault", kind=f.kind, phase=phase, nodes=[n.id for n in nodes], **details
    )


def _span(
    world: World, f: Fault, nodes: list[SimNode], begin: Callable[[], None], end: Callable[[], None]
) -> None:
    """A fault active from ``at`` for ``for``: traced, health re-evaluated at both ends."""

    def on_begin() -> None:
        begin()
        _mark(world, f, "begin", nodes)
        world.update_all_health()

    def on_end() -> None:
        end()
        _mark(world, f, "end", nodes)
        world.update_all_health()

    _at(world, f, 0, on_begin)
    if f.for_ms:
        _at(world, f, f.for_ms, on_end)


def _cut(nodes: list[SimNode], by: int) -> None:
    for n in nodes:
        n.link.cuts += by


def _partition(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    _span(world, f, nodes, lambda: _cut(nodes, 1), lambda: _cut(nodes, -1))


def _flap(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    rng = world.fault_rng
    for node in nodes:
        t, down = 0, True
        while t < f.for_ms:
            length = min(rng.randint(f.period_ms // 2, f.period_ms * 3 // 2) + 1, f.for_ms - t)
            if down:
                piece = Fault(kind="flap", at_ms=f.at_ms + t, for_ms=length)
                _span(world, piece, [node], partial(_cut, [node], 1), partial(_cut, [node], -1))
            t, down = t + length, not down


def _swizzle(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    rng = world.fault_rng
    cut_order = list(nodes)
    rng.shuffle(cut_order)
    heal_order = list(nodes)
    rng.shuffle(heal_order)
    for i, node in enumerate(cut_order):
        _at(world, f, i * f.period_ms, _swizzle_step, world, f, node, 1)
    for i, node in enumerate(heal_order):
        _at(world, f, f.for_ms + i * f.period_ms, _swizzle_step, world, f, node, -1)


def _swizzle_step(world: World, f: Fault, node: SimNode, by: int) -> None:
    _cut([node], by)
    _mark(world, f, "begin" if by > 0 else "end", [node])
    world.update_all_health()


def _link_mod(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    mod = (f.loss, f.reply_loss, f.delay_ms)

    def apply(m: tuple[float, float, tuple[int, int]] | None) -> None:
        for n in nodes:
            n.link.modify(fid, m)

    _span(world, f, nodes, lambda: apply(mod), lambda: apply(None))


def _pause(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    if f.when:

        def arm() -> None:
            world.pause_trigger = PauseTrigger(when=f.when, from_ms=world.loop.now, for_ms=f.for_ms)
            _mark(world, f, "armed", [], when=f.when)

        _at(world, f, 0, arm)
        return
    for node in nodes:
        _at(world, f, 0, world.pause, node, f.for_ms, "pause fault")


def _crash(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    """Down from ``at`` while this or any other crash-like fault holds the node (0: for ever)."""
    for node in nodes:
        _at(world, f, 0, _hold_down, world, node, "crash fault")
        if f.for_ms:
            _at(world, f, f.for_ms, _release, world, node)


def _outage(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    rng = world.fault_rng
    _at(world, f, 0, _mark, world, f, "begin", nodes)
    for node in nodes:
        _at(world, f, rng.randint(0, 500), _hold_down, world, node, "whole-cluster outage")
        if f.for_ms:
            _at(world, f, f.for_ms + rng.randint(0, 2_000), _release, world, node)
    if f.for_ms:
        _at(world, f, f.for_ms, _mark, world, f, "end", nodes)


def _stepped(world: World, nodes: list[SimNode]) -> None:
    for n in nodes:
        world.clock_stepped(n)


def _clock_jump(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    def jump(by: int) -> None:
        for n in nodes:
            n.clock.jump(by)
        _stepped(world, nodes)

    _span(world, f, nodes, lambda: jump(f.by_ms), lambda: jump(-f.by_ms))


def _clock_drift(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    """The node drifts by ``ppm`` while this is the latest-started drift fault active on it; once
    none is, it drifts as it did before the first (its own drift, drawn within ``clocks.drift``)."""
    holds = _holds(world)

    def begin() -> None:
        for n in nodes:
            active = holds.drifts.setdefault(n.id, [])
            if not active:
                holds.own_ppm[n.id] = n.clock.ppm
            active.append((fid, f.ppm))
            n.clock.set_drift(world.loop.now, f.ppm)
        _stepped(world, nodes)

    def end() -> None:
        for n in nodes:
            active = holds.drifts.setdefault(n.id, [])
            active[:] = [a for a in active if a[0] != fid]
            ppm = active[-1][1] if active else holds.own_ppm.get(n.id, 0)
            n.clock.set_drift(world.loop.now, ppm)
        _stepped(world, nodes)

    _span(world, f, nodes, begin, end)


def _clock_strobe(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    """The node's wall clock swings by this fault's ``by`` and ``period`` while it is the
    latest-started strobe active on it; once none is, it stops swinging."""
    strobes = _holds(world).strobes

    def begin() -> None:
        for n in nodes:
            strobes.setdefault(n.id, []).append((fid, abs(f.by_ms), f.period_ms))
            n.clock.set_strobe(world.loop.now, abs(f.by_ms), f.period_ms)
        _stepped(world, nodes)

    def end() -> None:
        for n in nodes:
            active = strobes.setdefault(n.id, [])
            was = active[-1] if active else None
            active[:] = [a for a in active if a[0] != fid]
            now = active[-1] if active else None
            if now != was:  # (the one in effect ended: the previous one, or none, takes over)
                n.clock.set_strobe(world.loop.now, now[1] if now else 0, now[2] if now else 0)
        _stepped(world, nodes)

    _span(world, f, nodes, begin, end)


def _ntp_lie(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    """The node's NTP server is ``by`` off: ntpd steps the clock to it, the guard sees no error."""

    def lie(by: int) -> None:
        for n in nodes:
            n.ntp_bias += by
            n.clock.jump(by)
            n.guard_last = None  # the step is ntpd's own: the guard expects it
        _stepped(world, nodes)

    _span(world, f, nodes, lambda: lie(f.by_ms), lambda: lie(-f.by_ms))


def _store_down(world: World) -> None:
    """One more fault holds the store down."""
    _holds(world).store_down += 1
    world.store.up = False


def _store_up(world: World) -> None:
    """One fault holding the store down ended: it is up again if no other one still holds it."""
    holds = _holds(world)
    holds.store_down = max(0, holds.store_down - 1)
    world.store.up = not holds.store_down


def _store_restart(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    def down() -> None:
        _store_down(world)

    def up() -> None:
        _store_up(world)
        if f.lose_state:  # (its own restart lost the state, whether or not another fault holds it down)
            world.store.state = world.strategy.make_stores(world)
            world.reached("store restarted empty")

    _span(world, f, [], down, up)


def _store_refuse(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    """The store answers, but refuses every write with an error: the core's ``REFUSED`` path.

    The agent takes that path for an error answer that is not an outage (a script's, a key of
    the wrong type); Redis's out-of-memory and ``READONLY`` refusals it takes for outages
    (``StoreUnavailable``), which the other store faults explore. So the error is a script's.
    """

    holds = _holds(world)

    def refuse() -> None:
        holds.refusing += 1
        world.store.refusing = "WRONGTYPE Operation against a key holding the wrong kind of value"
        world.update_all_health()

    def accept() -> None:
        holds.refusing = max(0, holds.refusing - 1)
        if not holds.refusing:
            world.store.refusing = ""
        world.update_all_health()

    _span(world, f, [], refuse, accept)


def _store_failover(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    """The primary dies at ``at``; a replica that is ``by`` behind takes over ``for`` later."""
    saved: dict[str, Any] = {}

    def snapshot() -> None:
        saved["state"] = world.store.state.snapshot()
        saved["writes"] = world.store.writes
        world.store.lagging = True

    def down() -> None:
        _store_down(world)
        world.store.lagging = False
        lost = world.store.writes - saved.get("writes", 0)
        world.store.state = saved.get("state") or world.strategy.make_stores(world)
        if lost:
            world.reached("failover lost writes", writes=lost)

    def up() -> None:
        _store_up(world)

    def begin() -> None:
        down()
        _mark(world, f, "begin", [], lost_ms=f.by_ms)
        world.update_all_health()

    def end() -> None:
        up()
        _mark(world, f, "end", [])
        world.update_all_health()

    # A replica behind by more than the run so far has nothing: it lags from the start.
    _at(world, f, -min(f.by_ms, f.at_ms), snapshot)
    _at(world, f, 0, begin)
    _at(world, f, f.for_ms, end)


def _deploy(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    def restart(node: SimNode) -> None:
        node.specs[f.job] = f.spec  # (a node another fault still holds down boots with it later)
        _release(world, node)

    for i, node in enumerate(nodes):
        _at(world, f, i * f.period_ms, _hold_down, world, node, "rolling deploy")
        _at(world, f, i * f.period_ms + f.for_ms, restart, node)
    _at(world, f, 0, lambda: _mark(world, f, "begin", nodes, job=f.job, spec=f.spec))


def _reload(world: World, fid: int, f: Fault, nodes: list[SimNode]) -> None:
    """Each node's config changes in turn, ``period`` apart, and goes back ``for`` later."""

    def change(node: SimNode, back: bool) -> None:
        if back:  # (only what this reload changed: another reload or a deploy may have set a spec)
            if f.remove:
                node.removed.discard(f.job)
            elif node.specs.get(f.job) == f.spec:
                del node.specs[f.job]
        elif f.remove:
            node.removed.add(f.job)
        else:
            node.specs[f.job] = f.spec
        world.reload(node)

    for i, node in enumerate(nodes):
        _at(world, f, i * f.period_ms, change, node, False)
        if f.for_ms > 0:
            _at(world, f, i * f.period_ms + f.for_ms, change, node, True)
    _at(world, f, 0, lambda: _mark(world, f, "begin", nodes, job=f.job, spec=f.spec, remove=f.remove))


_INSTALL: dict[str, Callable[[World, int, Fault, list[SimNode]], None]] = {
    "partition": _partition,
    "flap": _flap,
    "swizzle": _swizzle,
    "loss": _link_mod,
    "delay": _link_mod,
    "pause": _pause,
    "crash": _crash,
    "outage": _outage,
    "clock_jump": _clock_jump,
    "clock_drift": _clock_drift,
    "clock_strobe": _clock_strobe,
    "ntp_lie": _ntp_lie,
    "store_restart": _store_restart,
    "store_failover": _store_failover,
    "store_refuse": _store_refuse,
    "deploy": _deploy,
    "reload": _reload,
    "reconfigure": _reconfigure,
    "finish": _finish,
    "stale_config": _stale_config,
    "rogue": _rogue,
}
