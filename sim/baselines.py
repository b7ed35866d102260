"""The baselines: a leader lease and a per-slot lock, in the same simulator.

Both keep their coordination state in a tiny key-value model of Redis
(:class:`KvStore`: ``SET NX PX``, a fenced ``SET XX PX`` if the value is
ours, a fenced ``DEL``) on the same store host, so they suffer the same
faults as the quorum protocol, and both decide *when* a slot is due the way
most schedulers do: every wake-up fires the fire times in ``(previous wall
reading, current wall reading]`` of the node's own clock.

* ``leader`` (Celery RedBeat, rq-scheduler, a Kubernetes lease): one node
  holds ``leader`` for ``lease`` by ``SET NX PX`` and renews it every
  ``lease/3`` with a fenced set. It believes it leads until a renewal is
  refused — between renewals it fires what its clock says is due. A new
  leader starts from its own clock.
* ``lock`` (ShedLock without ``lockAtLeastFor``): every node fires every
  slot its clock says is due, guarded by ``SET lock:<job>:<fire> NX PX
  <timeout>``; the lock is released when the run ends.

Their known failures show up in the checker as duplicate runs: a paused or
partitioned leader that wakes up and fires what a new leader already fired,
a clock stepped back that fires the same slots again, a node whose late
clock takes a lock that was already released.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.quorum import MemoSchedule, make_schedule
from sim.world import SimNode, World

__all__ = ["KvStore", "LeaderStrategy", "LockStrategy"]


class KvStore:
    """Keys with values and expiry in store time: the Redis commands the baselines use."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._data: dict[str, tuple[str, int]] = {}

    def _live(self, key: str) -> str | None:
        item = self._data.get(key)
        if item is None:
            return None
        if item[1] <= self._clock():
            del self._data[key]
            return None
        return item[0]

    def set_nx_px(self, key: str, value: str, px: int) -> bool:
        """``SET key value NX PX px``."""
        if self._live(key) is not None:
            return False
        self._data[key] = (value, self._clock() + px)
        return True

    def renew(self, key: str, value: str, px: int) -> bool:
        """Extend ``key`` by ``px`` only while it holds ``value`` (a fenced renew script)."""
        if self._live(key) != value:
            return False
        self._data[key] = (value, self._clock() + px)
        return True

    def release(self, key: str, value: str) -> bool:
        """Delete ``key`` only while it holds ``value`` (a fenced release script)."""
        if self._live(key) != value:
            return False
        del self._data[key]
        return True

    def snapshot(self) -> KvStore:
        copy = KvStore(self._clock)
        copy._data = dict(self._data)
        return copy


@dataclass(frozen=True, slots=True)
class KvCall:
    """One command: ``op`` is ``acquire``, ``renew`` or ``release``."""

    op: str
    key: str
    value: str
    px: int = 0
    job: str = ""
    fire_ms: int = 0


class _Baseline:
    """What both baselines share: the KV store and the naive due-slot loop."""

    name = ""

    def __init__(self) -> None:
        self._schedules: dict[str, MemoSchedule] = {}

    def schedules(self, world: World) -> dict[str, MemoSchedule]:
        if not self._schedules:
            self._schedules = {j.name: MemoSchedule(make_schedule(j)) for j in world.scenario.jobs}
        return self._schedules

    def make_stores(self, world: World) -> KvStore:
        store_clock, loop = world.store.clock, world.loop
        return KvStore(lambda: store_clock.wall(loop.now))

    @staticmethod
    def mutates(payload: Any) -> bool:
        return True

    def execute(self, world: World, node: SimNode, call: KvCall) -> bool:
        kv: KvStore = world.store.state
        if call.op == "acquire":
            ok = kv.set_nx_px(call.key, call.value, call.px)
        elif call.op == "renew":
            ok = kv.renew(call.key, call.value, call.px)
        else:
            ok = kv.release(call.key, call.value)
        if call.op != "renew" or not ok:
            world.trace.emit(world.loop.now, "kv", node=node.id, op=call.op, key=call.key, ok=ok)
        return ok


class _BaselineProcess:
    """A node that fires due slots by its own wall clock, from the previous reading on."""

    def __init__(self, world: World, node: SimNode, schedules: dict[str, MemoSchedule]) -> None:
        self.world = world
        self.node = node
        self.schedules = schedules
        self.prev_wall = world.wall(node)

    def due(self) -> list[tuple[str, int]]:
        """Slots in (previous wall reading, this one] — repeated if the clock stepped back."""
        wall = self.world.wall(self.node)
        slots = [(name, t) for name, s in self.schedules.items() for t in s.fire_times(self.prev_wall, wall)]
        self.prev_wall = wall
        return slots

    def until_next_slot(self) -> int:
        wall = self.world.wall(self.node)
        return min(s.next_after(wall) for s in self.schedules.values()) - wall

    def notice(self, payload: Any) -> None:
        return None

    def subscribed(self) -> None:
        return None

    def set_trust(self, trusted: bool, why: str) -> None:
        return None  # the baselines do not look at clock quality

    def reload(self) -> None:
        return None  # no live reload (and no reload fault is installed for them)


class LeaderProcess(_BaselineProcess):
    def __init__(self, world: World, node: SimNode, schedules: dict[str, MemoSchedule]) -> None:
        super().__init__(world, node, schedules)
        self.lease_ms = world.settings.lease_ms
        self.leader = False
        self.renew_at = 0
        self.in_flight = False

    def boot(self) -> None:
        self.wake()

    def wake(self) -> None:
        world, node = self.world, self.node
        mono = world.mono(node)
        if mono >= self.renew_at and not self.in_flight:
            op = "renew" if self.leader else "acquire"
            world.send(node, KvCall(op, "leader", node.id, self.lease_ms))
            self.in_flight = True
            self.renew_at = mono + self.lease_ms // 3
        due = self.due()
        if self.leader:
            for job, fire in due:
                world.start_run(node, job, fire, 0, world.jobs[job].timeout_ms)
        world.wake_in(node, max(1, min(self.renew_at - mono, self.until_next_slot())))

    def _lead(self, leader: bool, why: str) -> None:
        if leader != self.leader:
            self.leader = leader
            self.world.trace.emit(self.world.loop.now, "leader", node=self.node.id, leader=leader, why=why)
        if leader:
            self.prev_wall = self.world.wall(self.node)  # a new leader starts from its own clock

    def reply(self, payload: Any, reply: Any) -> None:
        self.in_flight = False
        if payload.op == "acquire" and reply:
            self._lead(True, "acquired the lease")
        elif payload.op == "renew" and not reply:
            self._lead(False, "renew refused")

    def failure(self, payload: Any, refused: str = "") -> None:
        self.in_flight = False  # keep believing: the lease may still be ours

    def run_finished(self, job: str, fire_ms: int, token: int, ok: bool, detail: str) -> None:
        return None


class LockProcess(_BaselineProcess):
    def boot(self) -> None:
        self.wake()

    def wake(self) -> None:
        world, node = self.world, self.node
        for job, fire in self.due():
            px = world.jobs[job].timeout_ms
            world.send(node, KvCall("acquire", f"lock:{job}:{fire}", node.id, px, job, fire))
        world.wake_in(node, max(1, self.until_next_slot()))

    def reply(self, payload: Any, reply: Any) -> None:
        if payload.op == "acquire" and reply:
            job = self.world.jobs[payload.job]
            self.world.start_run(self.node, payload.job, payload.fire_ms, 0, job.timeout_ms)

    def failure(self, payload: Any, refused: str = "") -> None:
        return None  # a lost lock request: this node skips the slot

    def run_finished(self, job: str, fire_ms: int, token: int, ok: bool, detail: str) -> None:
        self.world.send(self.node, KvCall("release", f"lock:{job}:{fire_ms}", self.node.id))


class LeaderStrategy(_Baseline):
    name = "leader"

    def make_process(self, world: World, node: SimNode) -> LeaderProcess:
        return LeaderProcess(world, node, self.schedules(world))


class LockStrategy(_Baseline):
    name = "lock"

    def make_process(self, world: World, node: SimNode) -> LockProcess:
        return LockProcess(world, node, self.schedules(world))
