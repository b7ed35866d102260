"""The simulated world: hosts with clocks, links to the store, the store host.

A :class:`World` owns the event loop and carries out what node processes
ask for: store calls over a lossy, delaying, partitionable link; timers on
the node's own (drifting) monotonic clock; job processes that run for a
drawn duration. It knows nothing of the protocol: a :class:`Strategy` makes
the node processes (the quorum core, or a baseline) and executes their store
calls on the store host. Faults (``sim.faults``, handed to :meth:`World.run`) act on
the world's hosts.

Message semantics, per store call:

* the request may be lost (random loss, or the link is cut when it is sent
  or when it arrives, or the store is down): the node's call times out;
* otherwise it executes on the store when it arrives, atomically — even if
  the node has given up on it by then;
* the reply may be lost the same ways, or arrive after the node's timeout:
  the node sees a failure although the call took effect ("lost reply");
* delays are drawn per message, so two calls can overtake each other.

A paused node queues everything addressed to it and handles it on resume; a
crashed node loses it (and its job processes die with it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from quorum_cron.core.outcomes import LOCAL_DETAIL
from sim.clocks import HostClock
from sim.loop import Loop
from sim.rng import Streams
from sim.scenario import JobDef, Scenario, dumps
from sim.trace import Trace

__all__ = ["Link", "Process", "SimNode", "StoreHost", "Strategy", "World"]


RESUBSCRIBE_MS = 100
"""How often a node whose notice was lost tries to subscribe again (the agent's listener backs off
from 50 ms)."""


class Process(Protocol):
    """A node's software, as a strategy builds it; the world calls these."""

    def boot(self) -> None: ...
    def wake(self) -> None: ...
    def reply(self, payload: Any, reply: Any) -> None: ...
    def failure(self, payload: Any, refused: str = "") -> None:
        """The call failed: no answer, or (``refused``) the store's error answer."""
        ...

    def notice(self, payload: Any) -> None: ...
    def subscribed(self) -> None:
        """The node's notice subscription is back after a lost notice (:meth:`World.notify`)."""
        ...

    def run_finished(self, job: str, fire_ms: int, token: int, ok: bool, detail: str) -> None: ...
    def set_trust(self, trusted: bool, why: str) -> None: ...
    def reload(self) -> None:
        """The node's config changed (``SimNode.specs``, ``SimNode.removed``): take it live."""
        ...


class Strategy(Protocol):
    """How nodes coordinate: makes their processes, executes their store calls."""

    name: str

    def make_process(self, world: World, node: SimNode) -> Process: ...

    def make_stores(self, world: World) -> Any:
        """Fresh, empty store state on the store host (anything with ``snapshot()``)."""
        ...

    def execute(self, world: World, node: SimNode, payload: Any) -> Any:
        """Carry out one store call atomically on ``world.store.state``; return the reply."""
        ...

    def mutates(self, payload: Any) -> bool:
        """Whether the call can change store state (for counting lost writes)."""
        ...


@dataclass
class Link:
    """The path between one node and the store."""

    delay_ms: tuple[int, int]
    loss: float
    reply_loss: float
    cuts: int = 0
    """Active partitions covering this link (they may overlap)."""
    mods: dict[int, tuple[float, float, tuple[int, int]]] = field(default_factory=dict)
    """Active loss/delay faults by id: (loss, reply_loss, delay range)."""
    base: tuple[float, float, tuple[int, int]] = (0.0, 0.0, (0, 0))

    def __post_init__(self) -> None:
        self.base = (self.loss, self.reply_loss, self.delay_ms)

    def modify(self, fault_id: int, mod: tuple[float, float, tuple[int, int]] | None) -> None:
        """Add (or with ``None`` remove) a loss/delay fault; the worst active value wins."""
        if mod is None:
            self.mods.pop(fault_id, None)
        else:
            self.mods[fault_id] = mod
        loss, reply_loss, delay = self.base
        for m_loss, m_reply, m_delay in self.mods.values():
            loss, reply_loss = max(loss, m_loss), max(reply_loss, m_reply)
            if m_delay != (0, 0):
                delay = (max(delay[0], m_delay[0]), max(delay[1], m_delay[1]))
        self.loss, self.reply_loss, self.delay_ms = loss, reply_loss, delay

    @property
    def degraded(self) -> bool:
        return bool(self.mods)


@dataclass(eq=False)
class SimNode:
    """One host running one node process (or none while crashed)."""

    id: str
    clock: HostClock
    link: Link
    up: bool = False
    paused: bool = False
    pause_until: int = 0
    """True time the node's pause ends (the latest end of the pauses that overlap)."""
    incarnation: int = 0
    process: Process | None = None
    inbox: list[tuple[Callable[..., None], tuple[Any, ...]]] = field(default_factory=list)
    wake_at: int | None = None
    wake_gen: int = 0
    runs: dict[tuple[str, int, int], int] = field(default_factory=dict)
    """(job, fire_ms, token) → run id of the job processes alive on this host."""
    locals: set[tuple[str, int]] = field(default_factory=set)
    """(job, fire_ms) of the local runs (``start_local_run``) going on this host."""
    adopted: dict[tuple[str, int], int] = field(default_factory=dict)
    """(job, fire_ms) → the token a local run still going was adopted under (the agent's
    ``Executions.start``: a slot the store assigns here while its local run goes is not run twice)."""
    local_results: dict[tuple[str, int], tuple[bool, str]] = field(default_factory=dict)
    """(job, fire_ms) → (ok, detail) of a local run that ended, reported under the token instead of
    running the slot again should the store assign it here after all (the agent keeps them too)."""
    trusted: bool = False
    trust_why: str = "clock not checked yet"
    ntp_bias: int = 0
    """How far the NTP server this node asks is off (a lying server)."""
    guard_last: tuple[int, int] | None = None
    specs: dict[str, str] = field(default_factory=dict)
    """Job name → spec hash override (a rolling deploy, a reload)."""
    removed: set[str] = field(default_factory=set)
    """Jobs a reload took out of this node's config (``reload`` with ``remove``)."""
    health: str = "?"
    health_check_at: int = -1
    resubscribing: bool = False
    """A notice to this node was lost: its subscription comes back once its link does."""


@dataclass(eq=False)
class StoreHost:
    """The store's host: its clock, whether it is up, and the strategy's store state."""

    clock: HostClock
    state: Any = None
    up: bool = True
    writes: int = 0
    """Mutating calls executed so far (to tell whether a failover lost any)."""
    lagging: bool = False
    """The replica a coming failover promotes has stopped taking this primary's writes."""
    caller: SimNode | None = None
    """The node whose call is executing (only planted mutants look at it)."""
    refusing: str = ""
    """While set, the store answers every write with this error (``store_refuse``)."""


@dataclass(eq=False)
class PauseTrigger:
    when: str
    from_ms: int
    for_ms: int


class World:
    """One simulated cluster run: build it, :meth:`run` it, read :attr:`trace`."""

    def __init__(self, scenario: Scenario, seed: int, strategy: Strategy) -> None:
        self.scenario = scenario
        self.seed = seed
        self.strategy = strategy
        self.streams = Streams(seed)
        self.net_rng = self.streams.fork("network")
        self._net_below: Callable[[int], int] = self.net_rng._randbelow  # type: ignore[attr-defined]
        """``randint(lo, hi)`` is ``lo + _net_below(hi - lo + 1)``, the same draw without its
        argument checks (a draw per message: the simulator's hottest random call)."""
        self.fault_rng = self.streams.fork("faults")
        self.clock_rng = self.streams.fork("clocks")
        self.job_rng = self.streams.fork("jobs")
        self.loop = Loop(scenario.start_ms)
        self.trace = Trace()
        self.start_ms = scenario.start_ms
        self.end_ms = scenario.start_ms + scenario.duration_ms
        self.settings = scenario.settings
        self.uses_membership = scenario.uses_membership
        """``scenario.uses_membership``, computed once: the trace reads it for every commit and
        ledger entry (the property looks through every fault each time)."""
        self._timeout_ms = scenario.network.timeout_ms
        self.max_skew_ms = scenario.settings.max_skew_ms
        self.jobs: dict[str, JobDef] = {j.name: j for j in scenario.jobs}
        self.store = StoreHost(clock=HostClock(since=self.start_ms))
        self.store.state = strategy.make_stores(self)
        self.nodes: dict[str, SimNode] = {}
        net = scenario.network
        ck = scenario.clocks
        for nid in scenario.node_ids:
            clock = HostClock(since=self.start_ms)
            clock.jump(self.clock_rng.randint(-ck.skew_ms, ck.skew_ms))
            clock.set_drift(self.start_ms, self.clock_rng.randint(-ck.drift_ppm, ck.drift_ppm))
            clock.mono_at_since = self.clock_rng.randint(0, 10**9)
            self.nodes[nid] = SimNode(
                id=nid,
                clock=clock,
                link=Link(delay_ms=net.delay_ms, loss=net.loss, reply_loss=net.reply_loss),
            )
        self.pause_trigger: PauseTrigger | None = None
        self.stale_config: set[str] = set()
        """Nodes that learn no membership record from heartbeats (``stale_config`` faults)."""
        self.membership_traced = ""
        """The namespace record last traced (sim/faults.py traces each change once)."""
        self.reached_counts: dict[str, int] = {}
        self._run_ids = 0

    # -- running -------------------------------------------------------------

    def run(self, install_faults: Callable[[World], None]) -> Trace:
        """Run the scenario to its end; the trace ends with the store's ledger.

        ``install_faults`` (:func:`sim.faults.install_faults`) schedules the scenario's faults once
        the nodes' boots are: the caller passes it because the faults act on the world, so
        ``sim.faults`` imports this module and not the other way round.
        """
        self.trace.emit(
            self.start_ms,
            "header",
            scenario=dumps(self.scenario),
            seed=self.seed,
            strategy=self.strategy.name,
        )
        for i, node in enumerate(self.nodes.values()):
            # Guards and boots are spread a little so nodes do not act in lockstep.
            self.loop.at(
                self.start_ms + self.clock_rng.randint(0, self.scenario.clocks.check_ms),
                self._guard_tick,
                node,
            )
            self.loop.at(self.start_ms + i, self.boot, node)
        install_faults(self)
        self.loop.run_until(self.end_ms)
        finish = getattr(self.strategy, "finish_trace", None)
        if finish is not None:
            finish(self)
        self.trace.emit(self.end_ms, "final", records=len(self.trace.records))
        return self.trace

    def reached(self, what: str, **details: Any) -> None:
        """Note that the run reached a dangerous state (the "sometimes" report)."""
        self.reached_counts[what] = self.reached_counts.get(what, 0) + 1
        self.trace.emit(self.loop.now, "reached", what=what, **details)

    # -- node life -----------------------------------------------------------

    def boot(self, node: SimNode) -> None:
        """Start a node process on a host that is down (or booting for the first time)."""
        if node.up:
            return
        node.up = True
        node.paused = False
        node.incarnation += 1
        node.resubscribing = False  # (a process subscribes as it boots)
        node.trusted = False
        node.trust_why = "clock not checked yet"
        node.guard_last = None
        node.process = self.strategy.make_process(self, node)
        # (``removed`` only when a reload removed a job: the traces of other runs stay as they were.)
        gone = {"removed": sorted(node.removed)} if node.removed else {}
        self.trace.emit(
            self.loop.now, "boot", node=node.id, incarnation=node.incarnation, specs=dict(node.specs), **gone
        )
        self._guard_check(node)
        node.process.boot()
        self.update_health(node)

    def crash(self, node: SimNode, why: str) -> None:
        """Kill the node process and its job processes; everything in memory is lost."""
        if not node.up:
            return
        for job, fire_ms, token in sorted(node.runs):
            self._trace_kill(
                node, job, fire_ms, node.adopted.get((job, fire_ms), token) if token == 0 else token, why
            )
        node.runs.clear()
        node.locals.clear()
        node.adopted.clear()
        node.local_results.clear()
        node.inbox.clear()
        node.up = False
        node.paused = False
        node.process = None
        node.wake_at = None
        node.incarnation += 1
        self.trace.emit(self.loop.now, "crash", node=node.id, why=why)
        self.update_health(node)

    def pause(self, node: SimNode, for_ms: int, why: str) -> None:
        """Stop the node process for ``for_ms``; its job processes keep running.

        Pauses nest: one on a node already paused lasts until the later of their ends (traced
        again, for what it adds: the checker reads each ``pause`` record as one stretch)."""
        until = self.loop.now + for_ms
        if not node.up or (node.paused and until <= node.pause_until):
            return
        node.pause_until = until
        if node.paused:
            self.trace.emit(self.loop.now, "pause", node=node.id, why=why, ms=for_ms)
            self.loop.at(until, self._resume, node, node.incarnation)
            return
        node.paused = True
        if node.runs and for_ms > self.settings.lease_ms:
            self.reached("executor paused past its lease", node=node.id)
        self.trace.emit(self.loop.now, "pause", node=node.id, why=why, ms=for_ms)
        self.update_health(node)
        self.loop.at(self.loop.now + for_ms, self._resume, node, node.incarnation)

    def _resume(self, node: SimNode, incarnation: int) -> None:
        if node.incarnation != incarnation or not node.paused or self.loop.now < node.pause_until:
            return  # (a later pause that overlapped this one still holds it)
        node.paused = False
        self.trace.emit(self.loop.now, "resume", node=node.id)
        self.update_health(node)
        while node.inbox and not node.paused and node.incarnation == incarnation:
            fn, args = node.inbox.pop(0)
            fn(*args)
        if node.process is not None and not node.paused and node.incarnation == incarnation:
            node.wake_at = None
            node.process.wake()

    def reload(self, node: SimNode) -> None:
        """The node's config file changed (``node.specs``, ``node.removed``): its process takes it
        live, as on SIGHUP (a paused one once it resumes); a host that is down reads it at boot."""
        if node.up and node.process is not None:
            self._deliver(node, node.incarnation, node.process.reload)

    def _deliver(self, node: SimNode, incarnation: int, fn: Callable[..., None], *args: Any) -> None:
        if node.incarnation != incarnation or not node.up:
            return
        if node.paused:
            node.inbox.append((fn, args))
        else:
            fn(*args)

    # -- services a process uses ---------------------------------------------

    def wall(self, node: SimNode) -> int:
        return node.clock.wall(self.loop.now)

    def mono(self, node: SimNode) -> int:
        return node.clock.mono(self.loop.now)

    def wake_in(self, node: SimNode, mono_ms: int) -> None:
        """Wake the node process after ``mono_ms`` of its own monotonic clock."""
        t = node.clock.true_after(mono_ms, self.loop.now)
        if node.wake_at is None or t < node.wake_at:
            node.wake_at = t
            node.wake_gen += 1
            self.loop.at(t, self._wake, node, node.incarnation, node.wake_gen)

    def clock_stepped(self, node: SimNode) -> None:
        """The node's clock was stepped or re-rated: its timers are re-read at once.

        (Its earlier wake-up was computed on the old clock.)
        """
        if node.up and not node.paused and node.process is not None:
            node.wake_at = None
            self.wake_in(node, 0)

    def _wake(self, node: SimNode, incarnation: int, gen: int) -> None:
        if node.incarnation != incarnation or node.wake_gen != gen or node.paused or node.process is None:
            return
        node.wake_at = None
        node.process.wake()

    def _delay(self, lo: int, hi: int) -> int:
        """One message's delay, ``randint(lo, hi)`` of the network stream (no draw when fixed)."""
        return lo if lo == hi else lo + self._net_below(hi - lo + 1)

    def send(self, node: SimNode, payload: Any) -> None:
        """A store call from ``node``; the process hears ``reply`` or ``failure`` later."""
        loop = self.loop
        now = loop.now
        link = node.link
        deadline = node.clock.true_after(self._timeout_ms, now)
        call = (node, node.incarnation, payload, deadline)
        if link.cuts or (link.loss and self.net_rng.random() < link.loss):
            loop.at(deadline, self._failed, call)
            return
        lo, hi = link.delay_ms
        loop.at(now + self._delay(lo, hi), self._arrive, call)

    def _arrive(self, call: tuple[SimNode, int, Any, int]) -> None:
        node, _, payload, deadline = call
        store = self.store
        link = node.link
        loop = self.loop
        if link.cuts or not store.up:
            loop.at(deadline, self._failed, call)
            return
        strategy = self.strategy
        mutates = strategy.mutates(payload)
        if mutates:
            if store.refusing:
                # The store answers at once, with an error: nothing ran.
                self.reached("write refused by the store", node=node.id, call=type(payload).__name__)
                lo, hi = link.delay_ms
                arrive = loop.now + self._delay(lo, hi)
                if arrive <= deadline:
                    loop.at(arrive, self._refused, call, store.refusing)
                else:
                    loop.at(deadline, self._failed, call)
                return
            store.writes += 1
        reply = strategy.execute(self, node, payload)
        if mutates and store.lagging and self.settings.wait_replicas:
            waits = getattr(strategy, "waits", None)
            if waits is not None and waits(payload):
                # WAIT: no replica acknowledges the write before the failover that
                # loses it, so the caller never hears it succeed (WAIT times out,
                # or the connection dies with the primary): a failed call.
                self.reached("write held unacknowledged by WAIT", node=node.id, call=type(payload).__name__)
                loop.at(deadline, self._failed, call)
                return
        now = loop.now
        lo, hi = link.delay_ms
        arrive = now + self._delay(lo, hi)
        if (link.reply_loss and self.net_rng.random() < link.reply_loss) or arrive > deadline:
            self.reached("reply lost after the call ran", node=node.id, call=type(payload).__name__)
            lost_commit = getattr(self.strategy, "reply_commits", None)
            if lost_commit is not None and lost_commit(node, reply):
                self.reached("reply lost after commit", node=node.id)
            self.loop.at(deadline, self._failed, call)
            return
        self.loop.at(arrive, self._replied, call, reply)

    def _replied(self, call: tuple[SimNode, int, Any, int], reply: Any) -> None:
        node, incarnation, payload, deadline = call
        if node.link.cuts:
            self.reached("reply lost after the call ran", node=node.id, call=type(payload).__name__)
            self.loop.at(deadline, self._failed, call)
            return
        if node.process is not None:
            self._deliver(node, incarnation, node.process.reply, payload, reply)

    def _failed(self, call: tuple[SimNode, int, Any, int]) -> None:
        node, incarnation, payload, _ = call
        if node.process is not None:
            self._deliver(node, incarnation, node.process.failure, payload)

    def _refused(self, call: tuple[SimNode, int, Any, int], error: str) -> None:
        node, incarnation, payload, deadline = call
        if node.link.cuts:
            self.loop.at(deadline, self._failed, call)
            return
        if node.process is not None:
            self._deliver(node, incarnation, node.process.failure, payload, error)

    def notify(self, node: SimNode, payload: Any) -> None:
        """A message from the store host to ``node`` (an assignment notice over pub/sub)."""
        link = node.link
        if not node.up:
            return
        if link.cuts or (link.reply_loss and self.net_rng.random() < link.reply_loss):
            self._notice_lost(node, node.incarnation)
            return
        lo, hi = link.delay_ms
        self.loop.at(
            self.loop.now + lo + self._net_below(hi - lo + 1), self._notified, node, node.incarnation, payload
        )

    def _notified(self, node: SimNode, incarnation: int, payload: Any) -> None:
        if node.link.cuts or node.process is None:
            self._notice_lost(node, incarnation)
            return
        self._deliver(node, incarnation, node.process.notice, payload)

    def _notice_lost(self, node: SimNode, incarnation: int) -> None:
        """Pub/sub loses a message only with its connection: the node's listener sees that and
        subscribes again once its link is back (every ``RESUBSCRIBE_MS`` until then), and the
        node hears of it (``Process.subscribed``), as the agent's listener tells its core."""
        if node.resubscribing or node.incarnation != incarnation or not node.up:
            return
        node.resubscribing = True
        self.loop.at(self.loop.now + RESUBSCRIBE_MS, self._resubscribe, node, incarnation)

    def _resubscribe(self, node: SimNode, incarnation: int) -> None:
        if node.incarnation != incarnation or not node.up:
            return  # (a crash: the next boot subscribes)
        if node.link.cuts:
            self.loop.at(self.loop.now + RESUBSCRIBE_MS, self._resubscribe, node, incarnation)
            return
        node.resubscribing = False
        self.reached("notices subscribed again after a lost notice", node=node.id)
        if node.process is not None:
            self._deliver(node, incarnation, node.process.subscribed)

    def start_local_run(self, node: SimNode, job: str, fire_ms: int, timeout_ms: int) -> None:
        """Start a ``run-local`` job process (no store, token 0): the ``run_local`` trace record."""
        now = self.loop.now
        self.trace.emit(now, "run_local", node=node.id, job=job, fire=fire_ms, wall=node.clock.wall(now))
        node.locals.add((job, fire_ms))
        self._start_process(node, job, fire_ms, 0, timeout_ms)

    def start_run(self, node: SimNode, job: str, fire_ms: int, token: int, timeout_ms: int) -> None:
        """Start the job process: its side effect happens now (the ``run`` trace record).

        As the agent does (``Executions.start``), a slot this node ran locally is not run again:
        a local run still going is adopted (it ends under ``token``), and one that ended is
        reported under ``token`` at once. The ``run`` record then says ``adopted``: the side
        effect began at the ``run_local`` record.
        """
        now = self.loop.now
        slot = (job, fire_ms)
        ended = node.local_results.pop(slot, None)
        if ended is not None or slot in node.locals:
            self.trace.emit(now, "run", node=node.id, job=job, fire=fire_ms, token=token, adopted=True)
            self.reached("local run adopted under a token", node=node.id)
            if ended is None:
                node.adopted[slot] = token
            else:
                self._run_ids += 1
                node.runs[(job, fire_ms, token)] = self._run_ids
                ok, detail = ended
                key = (job, fire_ms, token)
                detail = f"{LOCAL_DETAIL}: {detail}"
                self.loop.at(now, self._run_ended, node, node.incarnation, key, self._run_ids, ok, detail)
            return
        self.trace.emit(now, "run", node=node.id, job=job, fire=fire_ms, token=token)
        self._start_process(node, job, fire_ms, token, timeout_ms)

    def _start_process(self, node: SimNode, job: str, fire_ms: int, token: int, timeout_ms: int) -> None:
        now = self.loop.now
        spec = self.jobs[job]
        lo, hi = spec.run_ms
        duration = lo if lo == hi else self.job_rng.randint(lo, hi)
        ok = not (spec.fail_rate and self.job_rng.random() < spec.fail_rate)
        detail = "exit 0" if ok else "exit 1"
        if duration > timeout_ms:
            duration, ok, detail = timeout_ms, False, "timed out"
        self._run_ids += 1
        key = (job, fire_ms, token)
        node.runs[key] = self._run_ids
        self.loop.at(now + duration, self._run_ended, node, node.incarnation, key, self._run_ids, ok, detail)
        trig = self.pause_trigger
        if trig is not None and trig.when == "run" and now >= trig.from_ms:
            self.pause_trigger = None
            self.pause(node, trig.for_ms, "paused right after starting a job")

    def _run_ended(
        self, node: SimNode, incarnation: int, key: tuple[str, int, int], run_id: int, ok: bool, detail: str
    ) -> None:
        if node.runs.get(key) != run_id:
            return
        del node.runs[key]
        job, fire_ms, token = key
        if token == 0 and (job, fire_ms) in node.locals:  # (a baseline's runs have token 0 too)
            node.locals.discard((job, fire_ms))
            adopted = node.adopted.pop((job, fire_ms), None)
            if adopted is None:
                node.local_results[(job, fire_ms)] = (ok, detail)
            else:
                token, detail = adopted, f"{LOCAL_DETAIL}: {detail}"
        self.trace.emit(
            self.loop.now,
            "end",
            node=node.id,
            job=job,
            fire=fire_ms,
            token=token,
            ok=ok,
            st=self.store.clock.wall(self.loop.now),
        )
        if node.process is not None:
            self._deliver(node, incarnation, node.process.run_finished, job, fire_ms, token, ok, detail)

    def kill_run(self, node: SimNode, job: str, fire_ms: int, token: int, why: str) -> None:
        """Stop a job process (the side effect of its start cannot be undone).

        As in the agent, the process's end is then reported like any run's (failed, "stopped by
        the agent"): the core gets ``run_finished`` for the token it killed. A crash reports none.
        """
        slot = (job, fire_ms)
        local = node.adopted.get(slot) == token  # (the local run adopted under it)
        key = (job, fire_ms, 0) if local else (job, fire_ms, token)
        if node.runs.pop(key, None) is None:
            return
        if local:
            del node.adopted[slot]
            node.locals.discard(slot)
        self._trace_kill(node, job, fire_ms, token, why)
        detail = f"stopped by the agent ({why})"
        detail = f"{LOCAL_DETAIL}: {detail}" if local else detail
        self.loop.at(self.loop.now, self._killed, node, node.incarnation, job, fire_ms, token, detail)

    def _trace_kill(self, node: SimNode, job: str, fire_ms: int, token: int, why: str) -> None:
        now = self.loop.now
        st = self.store.clock.wall(now)
        self.trace.emit(now, "kill", node=node.id, job=job, fire=fire_ms, token=token, why=why, st=st)

    def _killed(
        self, node: SimNode, incarnation: int, job: str, fire_ms: int, token: int, detail: str
    ) -> None:
        if node.process is not None:
            self._deliver(node, incarnation, node.process.run_finished, job, fire_ms, token, False, detail)

    def on_started(self, executor: SimNode) -> None:
        """The store just let ``executor`` start a slot (its reply is on the way): "pause on start"."""
        trig = self.pause_trigger
        if trig is not None and trig.when == "start" and self.loop.now >= trig.from_ms and executor.up:
            self.pause_trigger = None
            self.reached("executor paused between its start and the reply", node=executor.id)
            self.pause(executor, trig.for_ms, "paused while its start reply was in flight")

    def on_commit(self, executor: SimNode) -> None:
        """A slot was committed to ``executor``: fire an armed "pause on commit" fault."""
        trig = self.pause_trigger
        if trig is not None and trig.when == "commit" and self.loop.now >= trig.from_ms and executor.up:
            self.pause_trigger = None
            self.reached("executor paused between commit and start", node=executor.id)
            self.pause(executor, trig.for_ms, "paused right after being chosen executor")

    # -- clock trust (a simple model of the skew guard) -----------------------

    def _guard_tick(self, node: SimNode) -> None:
        if node.up and not node.paused:
            self._guard_check(node)
        self.loop.at(self.loop.now + self.scenario.clocks.check_ms, self._guard_tick, node)

    def _guard_check(self, node: SimNode) -> None:
        """Measure the node's clock against NTP (which may lie) and set its trust."""
        t = self.loop.now
        wall, mono = node.clock.wall(t), node.clock.mono(t)
        measured = wall - (t + node.ntp_bias) + self.clock_rng.randint(-3, 3)
        bound = abs(measured) + 8
        stepped = 0
        if node.guard_last is not None:
            stepped = (wall - node.guard_last[0]) - (mono - node.guard_last[1])
        node.guard_last = (wall, mono)
        if abs(stepped) > self.max_skew_ms:
            self.set_trust(node, False, f"wall clock stepped by {stepped} ms")
        elif bound > self.max_skew_ms:
            self.set_trust(node, False, f"clock error bound {bound} ms > max skew {self.max_skew_ms} ms")
        else:
            self.set_trust(node, True, f"clock error bound {bound} ms")

    def set_trust(self, node: SimNode, trusted: bool, why: str) -> None:
        changed = trusted != node.trusted
        if changed:
            self.trace.emit(self.loop.now, "trust", node=node.id, trusted=trusted, why=why)
        node.trusted, node.trust_why = trusted, why
        if node.process is not None and node.up:
            node.process.set_trust(trusted, why)
        if changed:
            self.update_health(node)

    # -- health (for the liveness check) --------------------------------------

    def update_health(self, node: SimNode) -> None:
        """Re-evaluate and trace whether the node is healthy (up, unpaused, linked, trusted, clock ok)."""
        t = self.loop.now
        half = self.max_skew_ms // 2
        err = abs(node.clock.error(t)) + node.clock.strobe_ms
        why = (
            "down"
            if not node.up
            else "paused"
            if node.paused
            else "store down"
            if not self.store.up
            else "store refusing writes"
            if self.store.refusing
            else "partitioned"
            if node.link.cuts
            else "degraded link"
            if node.link.degraded
            else "untrusted"
            if not node.trusted
            else f"clock off by {err} ms"
            if err > half
            else ""
        )
        if why != node.health:
            node.health = why
            self.trace.emit(t, "health", node=node.id, ok=not why, why=why)
        crossing = node.clock.crossing(t, half - node.clock.strobe_ms)
        if crossing is not None and crossing <= self.end_ms and crossing != node.health_check_at:
            node.health_check_at = crossing
            self.loop.at(crossing, self.update_health, node)

    def update_all_health(self) -> None:
        for node in self.nodes.values():
            self.update_health(node)
