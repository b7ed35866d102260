"""A minimal synchronous driver for NodeCore unit tests.

It runs several cores against one MemoryStore in virtual time with no faults
except the ones a test injects by hand (a node that stops ticking, a clock
offset). The full fault-injecting simulator lives in ``sim/``; this driver
exists so the core's rules can be tested without it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from quorum_cron.core.model import SlotState, SlotView
from quorum_cron.core.node import (
    Abstain,
    Action,
    CoreJob,
    Kill,
    NodeCore,
    NodeSettings,
    Now,
    ReadHighWater,
    Refused,
    Run,
)
from quorum_cron.core.perform import perform
from quorum_cron.store.memory import MemoryStore


@dataclass
class DriverNode:
    core: NodeCore
    offset_ms: int = 0
    alive: bool = True
    runs: list[Run] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    abstains: list[Abstain] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


class Driver:
    """Nodes, a store and virtual time; jobs 'run' for ``run_ms`` then succeed."""

    def __init__(
        self,
        jobs: list[CoreJob],
        n: int = 3,
        *,
        start_ms: int = 1_699_999_980_000,
        run_ms: int = 100,
        settings: Callable[[str], NodeSettings] | None = None,
        seed: int = 0,
    ) -> None:
        self.now_ms = start_ms
        self.mono_ms = 0
        self.store = MemoryStore(lambda: self.now_ms)
        self.run_ms = run_ms
        make = settings or (lambda node: NodeSettings(node_id=node, quorum=n // 2 + 1))
        self.nodes = {f"n{i}": DriverNode(NodeCore(make(f"n{i}"), jobs)) for i in range(1, n + 1)}
        for node in self.nodes.values():
            node.core.set_trust(True)
        self.executions: list[tuple[str, str, int, int]] = []
        """(node, job, fire_ms, token) for every Run."""
        self._ends: list[tuple[int, str, Run]] = []
        self._rng = random.Random(seed)
        self.succeeds: Callable[[Run], bool] = lambda run: True
        """Whether a run succeeds (tests replace it to make runs fail)."""

    def _now(self, node: DriverNode) -> Now:
        return Now(wall_ms=self.now_ms + node.offset_ms, mono_ms=self.mono_ms)

    def _apply(self, name: str, actions: list[Action]) -> None:
        node = self.nodes[name]
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            if isinstance(action, Run):
                node.runs.append(action)
                self.executions.append((name, action.job, action.fire_ms, action.token))
                self._ends.append((self.mono_ms + self.run_ms, name, action))
            elif isinstance(action, Kill):
                node.kills.append(action)
                self._ends = [e for e in self._ends if not (e[1] == name and e[2].fire_ms == action.fire_ms)]
            elif isinstance(action, Abstain):
                node.abstains.append(action)
            elif isinstance(action, Refused):
                node.refused.append(action)
            else:
                reply = perform(self.store, name, action)
                queue.extend(node.core.on_reply(action, reply, self._now(node)))
                self._notify(name, reply if isinstance(reply, list) else [reply])

    def _notify(self, caller: str, replies: list[object]) -> None:
        """Deliver assignment notices, as the agent's pub/sub channel would."""
        for r in replies:
            view = getattr(r, "slot", r)
            if (
                isinstance(view, SlotView)
                and view.state == SlotState.COMMITTED
                and view.executor != caller
                and self.nodes[view.executor].alive
            ):
                target = self.nodes[view.executor]
                acts = target.core.on_assigned(view.job, view.fire_ms, view.token, self._now(target))
                self._apply(view.executor, acts)

    def run_until(self, end_ms: int) -> None:
        """Advance virtual time to ``end_ms``, waking nodes when they ask."""
        while self.now_ms < end_ms:
            order = sorted(self.nodes)
            self._rng.shuffle(order)  # who votes first varies, as with real network jitter
            for name in order:
                node = self.nodes[name]
                if node.alive:
                    self._apply(name, node.core.tick(self._now(node)))
            for end, name, run in sorted(self._ends, key=lambda e: (e[0], e[1])):
                if end <= self.mono_ms:
                    self._ends.remove((end, name, run))
                    node = self.nodes[name]
                    if node.alive:
                        now = self._now(node)
                        ok = self.succeeds(run)
                        detail = "exit 0" if ok else "exit 1"
                        acts = node.core.on_run_finished(run.job, run.fire_ms, run.token, ok, detail, now)
                        self._apply(name, acts)
            waits = [n.core.next_wakeup(self._now(n)) for n in self.nodes.values() if n.alive]
            waits += [max(0, e[0] - self.mono_ms) for e in self._ends]
            step = max(1, min(waits, default=1000))
            step = min(step, end_ms - self.now_ms)
            self.now_ms += step
            self.mono_ms += step


@dataclass(frozen=True)
class Every:
    """A fixed-period schedule anchored to the epoch (independent of schedule.py)."""

    period_ms: int

    def next_after(self, ms: int) -> int:
        return (ms // self.period_ms + 1) * self.period_ms

    def fire_times(self, start_ms: int, end_ms: int) -> Iterator[int]:
        t = self.next_after(start_ms)
        while t <= end_ms:
            yield t
            t += self.period_ms


def boot(core: NodeCore, now: Now, high_water: int = 0) -> list[Action]:
    """The first tick of ``core`` with its high-water reads answered (``high_water``; 0: a new
    job), then a second tick at the same instant: votes wait for those reads, so this returns
    the first tick's actions, what the replies caused, and the votes that followed."""
    first = core.tick(now)
    out = list(first)
    for a in first:
        if isinstance(a, ReadHighWater):
            out.extend(core.on_reply(a, [high_water] * len(a.jobs), now))
    out.extend(core.tick(now))
    return out
