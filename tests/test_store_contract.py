"""The contract suite: the Redis scripts against the Python model, step by step.

A hypothesis state machine applies the same generated operations to a
``RedisStore`` on a real redis-server and to a ``MemoryStore``, both on one
virtual clock, and demands identical replies (full dataclass equality) after
every step, plus identical full state (every slot, ledger, high-water mark)
in an invariant. On top of equality it checks the safety properties the model
itself must have: at most one commit per slot, tokens strictly increasing per
job (commits, takeovers and retries), stale tokens refused, no commit without
a quorum of agreeing votes inside the slot's window, a paused job commits
nothing, and a retry never starts before its backoff ends.

Operator control runs through the same machine: pause / resume / trigger
(compared replies, then control, audit and triggers compared in the
invariant), votes for triggered fire times, and finish with retries.

Operations come from small fixed vocabularies (5 nodes, 3 jobs, 2 spec
hashes, fire times on a 10 s grid around the clock) so that they collide:
repeated votes, competing spec hashes, takeovers, leases that run out, slots
that expire past retention. Some vote and sweep calls carry more items than
the store's ``max_batch``, so the Redis side splits them over several script
calls (the model has no batches: the replies must not show the split).

Store time: the compared stores share the injected clock, so their
``time_ms`` says nothing about the server's clock. A third ``RedisStore``
without a clock reads the server's ``TIME`` (in ``time_ms`` and inside a
script, through a heartbeat's ``now``): both must fall between two ``TIME``
reads taken around the call.

What a walk reached is counted (:data:`STATS`): a fixed walk reaches every
operation and outcome of :data:`WALK_GOALS` on every run, and the random walk
must reach the common ones (:data:`RANDOM_WALK_GOALS`) on every run, so
neither can fail on an unlucky draw or a new hypothesis release.
"""

from __future__ import annotations

import queue
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import hypothesis.strategies as st
import pytest
import redis
from hypothesis import HealthCheck, currently_in_test_context, event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from redis.cluster import RedisCluster

from quorum_cron.core.model import (
    Delivery,
    FencedRequest,
    MissedRequest,
    Overlap,
    SlotState,
    SlotView,
    SweepParams,
    TransitionResult,
    VoteRequest,
    VoteStatus,
)
from quorum_cron.store.base import ALERTS_MAXLEN, Notice, NoticeListening, ObservedStore, StoredAlert, Trigger
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.embedded.topology import EmbeddedCluster
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.rendezvous import pick_executor
from tests.topologies import cluster_client

NODES = ("n1", "n2", "n3", "n4", "n5")
JOBS = ("alpha", "beta", "gamma")
SPECS = ("h1", "h2")
BASE_MS = 1_700_000_000_000
GRID_MS = 20_000
RETENTION_MS = 600_000
LEDGER_MAXLEN = 4
AUDIT_MAXLEN = 3
TRIGGER_MAXLEN = 2
SKEW_MS = 250
MAX_BATCH = 5
"""The Redis store's ``max_batch`` here: the big-batch rules send more items than this."""

SETTINGS = settings(
    max_examples=200,
    stateful_step_count=40,  # hypothesis ends some runs early: this averages > 30 steps
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

quorums = st.sampled_from((3, 3, 3, 3, 3, 2, 4))
"""Mostly the cluster's quorum; sometimes a misconfigured node's."""
deadlines = st.sampled_from((5_000, 30_000, 30_000))
skews = st.sampled_from((SKEW_MS, SKEW_MS, 1_000))
overlaps = st.sampled_from((Overlap.ALLOW, Overlap.ALLOW, Overlap.FORBID, Overlap.REPLACE))
advances = st.sampled_from(
    (0, 100, 300, 1_000, 1_000, 3_000, 3_000, 6_000, 9_000, 20_000, 31_000, 120_000, 700_000)
)
"""Small steps, steps past leases and start timeouts, past deadlines, past retention."""
fire_offsets = st.integers(min_value=-3, max_value=2)
round_offsets = st.sampled_from((0, 0, 0, 0, -1, 1, -3))
"""A voting round mostly targets the slot that is due now."""
leases = st.sampled_from((300, 1_000, 5_000))
start_leases = st.sampled_from((0, 0, 1_000, 5_000))
"""A voting round's start lease: mostly none (the commit only), else the start folded into it."""
variants = st.sampled_from(("current", "current", "current", "current", "stale", "future", "other-node"))
operators = st.sampled_from(("ops", "alice", "ünï"))
pause_reasons = st.sampled_from(("maintenance", "incident: db down", ""))
retry_counts = st.sampled_from((0, 1, 2, 2))
backoffs = st.sampled_from((0, 5_000, 30_000))

Vote = tuple[str, int, str, str, int, int, int, Overlap]
"""job, fire_ms, node, spec_hash, quorum, max_skew_ms, deadline_ms, overlap."""

STATS: Counter[str] = Counter()
"""What the suite exercised, over all examples; the test checks it so coverage cannot silently rot."""


def split(jobs: Iterable[str]) -> bool:
    """Whether the Redis store sends items of these jobs in more than one call: it packs whole
    jobs into calls of up to ``max_batch`` items, so exactly when there are more items than that
    and more than one job."""
    items = list(jobs)
    return len(items) > MAX_BATCH and len(set(items)) > 1


def note(what: str) -> None:
    STATS[what] += 1
    if currently_in_test_context():  # (the fixed walk runs outside hypothesis)
        event(what)


class StoreParity(RuleBasedStateMachine):
    """Drive both stores through the same operations and compare every reply."""

    server: EmbeddedRedis | None = None
    cluster: EmbeddedCluster | None = None
    """Set by the test: a standalone server, or a Redis Cluster (the same rules, per-node pipelines)."""
    namespace = "contract"

    def __init__(self) -> None:
        super().__init__()
        self.now = BASE_MS + 1_000
        self.client: redis.Redis | RedisCluster
        if self.cluster is not None:
            self.client = cluster_client(self.cluster)
        else:
            assert self.server is not None, "StoreParity.server or .cluster must be set by the test"
            self.client = self.server.client(retry=None, socket_timeout=5.0)
        self.client.flushall()
        bounds = {
            "ledger_maxlen": LEDGER_MAXLEN,
            "audit_maxlen": AUDIT_MAXLEN,
            "trigger_maxlen": TRIGGER_MAXLEN,
        }
        self.redis = RedisStore(
            self.client,
            self.namespace,
            clock=self.clock,
            retention_ms=RETENTION_MS,
            max_batch=MAX_BATCH,
            **bounds,
        )
        self.model = MemoryStore(self.clock, retention_ms=RETENTION_MS, **bounds)
        self.live = RedisStore(self.client, self.namespace + "-live", max_batch=MAX_BATCH)
        """No injected clock: its time is the server's ``TIME`` (:meth:`check_store_time`)."""
        self.known: list[tuple[str, int]] = []
        self.commits: dict[tuple[str, int], int] = defaultdict(int)
        self.max_token: dict[str, int] = defaultdict(int)
        self.max_quorum: dict[str, int] = defaultdict(int)
        self.max_deadline: dict[tuple[str, int], int] = defaultdict(int)
        """Per slot, the largest deadline a stored vote carried (the slot's deadline is at most that)."""

    def clock(self) -> int:
        return self.now

    def teardown(self) -> None:
        self.client.close()

    # -- helpers -------------------------------------------------------------

    def same(self, op: str, got: Any, want: Any) -> None:
        assert got == want, f"{op}: redis replied\n  {got!r}\nmodel replied\n  {want!r}"

    def fire(self, offset: int) -> int:
        return (self.now // GRID_MS + offset) * GRID_MS

    def pick_slot(self, data: st.DataObject) -> tuple[str, int]:
        if self.known and data.draw(st.integers(0, 4), label="known slot?") > 0:
            return data.draw(st.sampled_from(self.known), label="slot")
        return data.draw(st.sampled_from(JOBS), label="job"), self.fire(
            data.draw(fire_offsets, label="offset")
        )

    def saw_assignment(self, job: str, token: int, where: str) -> None:
        assert token > self.max_token[job], (
            f"{where}: token {token} for job {job!r} does not exceed {self.max_token[job]} seen before"
        )
        self.max_token[job] = token

    def server_ms(self) -> int:
        """The server's own ``TIME`` in ms (on a cluster: the master with the live store's members hash)."""
        if self.cluster is not None:
            client = self.cluster.master_of(self.live.members_key).client()
            try:
                sec, usec = client.time()
            finally:
                client.close()
        else:
            sec, usec = self.client.time()
        return int(sec) * 1000 + int(usec) // 1000

    def check_store_time(self) -> None:
        """The model's time is the injected clock; an unclocked Redis store's is the server's ``TIME``."""
        self.same("model time_ms", self.model.time_ms(), self.now)
        before = self.server_ms()
        got = self.live.time_ms()
        after = self.server_ms()
        assert before <= got <= after, f"time_ms {got} outside the server's TIME [{before}, {after}]"
        before = self.server_ms()
        beat = self.live.heartbeat("probe", "i-probe", 1_000, {})
        after = self.server_ms()
        assert before <= beat.now_ms <= after, (
            f"a script's now {beat.now_ms} outside the server's TIME [{before}, {after}]"
        )
        note("op time_ms")

    # -- operations ----------------------------------------------------------

    @initialize(
        jobs=st.lists(st.sampled_from(JOBS), max_size=3, unique=True),
        voters=st.lists(st.sampled_from(NODES), min_size=3, max_size=5, unique=True),
    )
    def seed(self, jobs: list[str], voters: list[str]) -> None:
        """Most examples start with committed slots, so starts, runs and takeovers get exercised."""
        self.same("members", self.redis.members(), self.model.members())
        for job in jobs:
            self._vote([(job, self.fire(0), n, SPECS[0], 3, SKEW_MS, 30_000, Overlap.ALLOW) for n in voters])

    @rule(dt=advances)
    def advance(self, dt: int) -> None:
        self.now += dt

    @rule(
        votes=st.lists(
            st.tuples(
                st.sampled_from(JOBS),
                fire_offsets,
                st.sampled_from(NODES),
                st.sampled_from(SPECS),
                quorums,
                skews,
                deadlines,
                overlaps,
            ),
            min_size=1,
            max_size=4,
        )
    )
    def vote(self, votes: list[Vote]) -> None:
        """A mixed batch: several jobs and slots in one call (one script call per job)."""
        self._vote([(j, self.fire(k), n, h, q, s, d, o) for j, k, n, h, q, s, d, o in votes])

    @rule(
        job=st.sampled_from(JOBS),
        offset=round_offsets,
        spec=st.sampled_from((SPECS[0], SPECS[0], SPECS[1])),
        voters=st.lists(
            st.tuples(st.sampled_from(NODES), st.sampled_from((None, None, None, None, SPECS[1])), quorums),
            min_size=2,
            max_size=5,
            unique_by=lambda v: v[0],
        ),
        deadline=deadlines,
        overlap=overlaps,
        batched=st.booleans(),
        lease=start_leases,
    )
    def vote_round(
        self,
        job: str,
        offset: int,
        spec: str,
        voters: list[tuple[str, str | None, int]],
        deadline: int,
        overlap: Overlap,
        batched: bool,
        lease: int,
    ) -> None:
        """Several nodes vote for the same slot, mostly agreeing: the path to commits (and, with
        a start lease, to starts folded into them)."""
        fire = self.fire(offset)
        votes = [(job, fire, n, other or spec, q, SKEW_MS, deadline, overlap) for n, other, q in voters]
        if batched:
            self._vote(votes, lease)
        else:
            for v in votes:
                self._vote([v], lease)

    @rule(
        job=st.sampled_from(JOBS),
        spec=st.sampled_from(SPECS),
        voters=st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True),
    )
    def vote_catch_up(self, job: str, spec: str, voters: list[str]) -> None:
        """Late voters join the slot due now, one call each (completes earlier rounds)."""
        for n in voters:
            self._vote([(job, self.fire(0), n, spec, 3, SKEW_MS, 30_000, Overlap.ALLOW)])

    @rule(
        votes=st.lists(
            st.tuples(
                st.sampled_from(JOBS),
                round_offsets,
                st.sampled_from(NODES),
                st.sampled_from((SPECS[0], SPECS[0], SPECS[1])),
                quorums,
                overlaps,
            ),
            min_size=MAX_BATCH + 1,
            max_size=3 * MAX_BATCH,
        )
    )
    def vote_big_batch(self, votes: list[tuple[str, int, str, str, int, Overlap]]) -> None:
        """More votes than ``max_batch`` in one call: the Redis store splits them between jobs."""
        self._vote([(j, self.fire(k), n, h, q, SKEW_MS, 30_000, o) for j, k, n, h, q, o in votes])

    def _vote(self, votes: list[Vote], lease: int = 0) -> None:
        requests = [
            VoteRequest(
                job=j,
                fire_ms=f,
                node=n,
                spec_hash=h,
                quorum=q,
                max_skew_ms=s,
                deadline_ms=d,
                overlap=o,
                start_lease_ms=lease,
                incarnation=f"inc-{n}",
            )
            for j, f, n, h, q, s, d, o in votes
        ]
        paused = {j for j in JOBS if self.model.control(j).paused}
        active = {
            k: self.model.slot(*k).state
            for k in self.known
            if self.model.slot(*k).state in (SlotState.COMMITTED, SlotState.RUNNING)
        }
        got = self.redis.vote(requests)
        want = self.model.vote(requests)
        self.same("vote", got, want)
        note("op vote")
        if split(r.job for r in requests):
            note("vote split over calls")
        for key, was in active.items():
            now = self.model.slot(*key)
            if now.reason.startswith("replaced by slot "):
                note(f"replace {was} -> {now.state}")
                ended = SlotState.FAILED if was == SlotState.RUNNING else SlotState.SKIPPED
                assert now.state == ended, f"slot {key} was {was}, replaced, now {now.state}"
                replacer = (key[0], int(now.reason.rsplit(" ", 1)[1]))
                assert [r for r in got if (r.slot.job, r.slot.fire_ms) == replacer], (
                    f"slot {key} replaced by {replacer}, which no vote of this call committed"
                )
        for req, res in zip(requests, got, strict=True):
            note(f"vote {res.status} -> {res.slot.state}")
            if req.job in paused:
                assert res.status in (VoteStatus.SKIPPED, VoteStatus.DECIDED, VoteStatus.EARLY), (
                    f"vote for paused job {req.job!r} ended {res.status}"
                )
                if res.status == VoteStatus.SKIPPED:
                    assert res.slot.state == SlotState.SKIPPED and res.slot.reason.startswith("paused by ")
            else:
                assert res.status != VoteStatus.SKIPPED
            key = (req.job, req.fire_ms)
            if key not in self.known and res.slot.state != SlotState.ABSENT:
                self.known.append(key)
            if res.status in (VoteStatus.RECORDED, VoteStatus.COMMITTED):
                self.max_quorum[req.job] = max(self.max_quorum[req.job], req.quorum)
                self.max_deadline[key] = max(self.max_deadline[key], req.deadline_ms)
            if res.status != VoteStatus.COMMITTED:
                continue
            self.commits[key] += 1
            assert self.commits[key] == 1, f"slot {key} committed twice by vote"
            slot = res.slot
            agreeing = [n for n, h in slot.votes if h == slot.spec_hash]
            assert slot.spec_hash == req.spec_hash
            assert len(agreeing) >= self.max_quorum[req.job], (
                f"slot {key} committed with {agreeing} agreeing, quorum floor {self.max_quorum[req.job]}"
            )
            # Inside the window; the deadline is the largest any vote for the slot carried.
            assert req.fire_ms - req.max_skew_ms <= res.now_ms <= req.fire_ms + self.max_deadline[key]
            if slot.state == SlotState.COMMITTED:
                assert slot.executor in agreeing
                assert slot.committed_ms == res.now_ms and not slot.starter
                assert not (req.start_lease_ms and slot.executor == req.node and res.now_ms >= req.fire_ms), (
                    f"slot {key} committed to its voter {req.node} at {res.now_ms}, asked to start it"
                )
                self.saw_assignment(req.job, slot.token, "vote")
            elif slot.state == SlotState.RUNNING:
                # A start folded into the commit: only for the voter that asked, once due.
                note("vote committed and started")
                assert req.start_lease_ms and slot.executor == req.node and res.now_ms >= req.fire_ms
                assert slot.executor in agreeing and slot.runs == 1
                assert slot.committed_ms == slot.started_ms == res.now_ms
                assert slot.lease_until_ms == res.now_ms + req.start_lease_ms
                assert slot.starter == req.incarnation
                self.saw_assignment(req.job, slot.token, "vote")
            else:
                assert slot.state == SlotState.SKIPPED and req.overlap == Overlap.FORBID

    def _fenced_args(self, data: st.DataObject, want: SlotState) -> tuple[str, int, str, int, str]:
        """Mostly a slot in the state the operation needs, with its executor and token; else anything."""
        active = [k for k in self.known if self.model.slot(*k).state == want]
        if active and data.draw(st.integers(0, 4), label="active slot?") > 0:
            job, fire = data.draw(st.sampled_from(active), label="active slot")
        else:
            job, fire = self.pick_slot(data)
        cur = self.model.slot(job, fire)
        variant = data.draw(variants, label="variant")
        node, token = cur.executor or data.draw(st.sampled_from(NODES), label="node"), cur.token
        if variant == "stale":
            token -= 1
        elif variant == "future":
            token += 1
        elif variant == "other-node":
            node = data.draw(st.sampled_from([n for n in NODES if n != cur.executor]), label="other")
        return job, fire, node, token, variant

    @rule(data=st.data(), lease=leases)
    def start(self, data: st.DataObject, lease: int) -> None:
        job, fire, node, token, variant = self._fenced_args(data, SlotState.COMMITTED)
        self._start(job, fire, node, token, lease, variant)

    def _start(self, job: str, fire: int, node: str, token: int, lease: int, variant: str) -> bool:
        before = self.model.slot(job, fire)
        got = self.redis.start(job, fire, node, token, lease)
        want = self.model.start(job, fire, node, token, lease)
        self.same("start", got, want)
        note("op start")
        note(f"start {'ok' if got.ok else 'refused: ' + got.reason.split(' ')[0]}")
        if token != before.token:
            assert not got.ok, f"start with stale token {token} (current {before.token}) accepted"
        if got.ok:
            assert variant == "current" and got.slot.state == SlotState.RUNNING
            assert got.now_ms >= before.not_before_ms, "a retry started before its backoff ended"
            assert got.slot.runs == before.runs + 1
            if before.runs:
                note("start ok (re-run)")
        return got.ok

    @rule(data=st.data(), lease=leases)
    def renew(self, data: st.DataObject, lease: int) -> None:
        job, fire, node, token, _ = self._fenced_args(data, SlotState.RUNNING)
        self._renew(job, fire, node, token, lease)

    def _renew(self, job: str, fire: int, node: str, token: int, lease: int) -> None:
        before = self.model.slot(job, fire)
        got = self.redis.renew(job, fire, node, token, lease)
        self.same("renew", got, self.model.renew(job, fire, node, token, lease))
        note("op renew")
        note(f"renew {'ok' if got.ok else 'refused'}")
        if token != before.token:
            assert not got.ok
        if got.ok:
            assert got.slot.lease_until_ms == got.now_ms + lease and got.slot.state == SlotState.RUNNING

    @rule(
        data=st.data(),
        succeeded=st.sampled_from((True, False, False)),
        detail=st.sampled_from(("", "exit 3", 'ünï/"code"')),
        retries=retry_counts,
        backoff=backoffs,
    )
    def finish(self, data: st.DataObject, succeeded: bool, detail: str, retries: int, backoff: int) -> None:
        job, fire, node, token, _ = self._fenced_args(data, SlotState.RUNNING)
        self._finish(job, fire, node, token, succeeded, detail, retries, backoff)

    @rule(
        data=st.data(),
        ops=st.lists(st.sampled_from(("start", "start", "renew", "finish")), min_size=1, max_size=4),
        lease=leases,
        succeeded=st.booleans(),
    )
    def fenced(self, data: st.DataObject, ops: list[str], lease: int, succeeded: bool) -> None:
        """Several starts, renewals and finishes in one call (the agent's batches at a burst):
        the same replies from both stores, each what its one-slot call would have replied."""
        requests = []
        for op in ops:
            job, fire, node, token, _ = self._fenced_args(
                data, SlotState.COMMITTED if op == "start" else SlotState.RUNNING
            )
            detail = "exit 0" if succeeded else "exit 1"
            requests.append(
                FencedRequest(
                    op, job, fire, node, token, lease, succeeded, detail, retries=1, retry_backoff_ms=0
                )
            )
        self._fenced(requests)

    def _fenced(self, requests: list[FencedRequest]) -> None:
        got = self.redis.fenced(requests)
        self.same("fenced", got, self.model.fenced(requests))
        note("op fenced")
        for r, reply in zip(requests, got, strict=True):
            assert isinstance(reply, TransitionResult), f"fenced {r}: {reply!r}"
            if reply.ok:
                note(f"fenced {r.op} ok")
        if len(requests) > 1:
            note("fenced batch")

    @rule(
        data=st.data(),
        retries=st.sampled_from((1, 2)),
        backoff=st.sampled_from((0, 5_000, 30_000)),
        lease=leases,
        wait=st.booleans(),
    )
    def run_and_fail(self, data: st.DataObject, retries: int, backoff: int, lease: int, wait: bool) -> None:
        """The retry path end to end: start a committed slot, fail it with retries left, start the retry."""
        committed = [k for k in self.known if self.model.slot(*k).state == SlotState.COMMITTED]
        if not committed:
            return
        job, fire = data.draw(st.sampled_from(committed), label="committed slot")
        cur = self.model.slot(job, fire)
        if not self._start(job, fire, cur.executor, cur.token, lease, "current"):
            return
        self._finish(job, fire, cur.executor, cur.token, False, "exit 1", retries, backoff)
        retry = self.model.slot(job, fire)
        if retry.state == SlotState.COMMITTED:
            self.now += backoff if wait else 0
            self._start(job, fire, retry.executor, retry.token, lease, "current")

    @rule(
        data=st.data(),
        lease=leases,
        overlap=overlaps,
        outcome=st.sampled_from(("committed", "running", "succeeded", "failed")),
        late=st.sampled_from(NODES),
    )
    def run_then_next(
        self, data: st.DataObject, lease: int, overlap: Overlap, outcome: str, late: str
    ) -> None:
        """A slot runs (and maybe ends) when its job's next slot falls due and a quorum commits it
        under each overlap policy: the path to ``replace`` ending a running or committed slot,
        ``forbid`` skipping the new one, and a late vote for a slot that already ended."""
        active = [
            k for k in self.known if self.model.slot(*k).state in (SlotState.COMMITTED, SlotState.RUNNING)
        ]
        if not active:
            return
        job, fire = data.draw(st.sampled_from(active), label="active slot")
        cur = self.model.slot(job, fire)
        if cur.state == SlotState.COMMITTED and outcome != "committed":
            self._start(job, fire, cur.executor, cur.token, lease, "current")
            cur = self.model.slot(job, fire)
        if cur.state == SlotState.RUNNING and outcome == "running":
            self._renew(job, fire, cur.executor, cur.token, lease)
        elif cur.state == SlotState.RUNNING and outcome != "committed":
            self._finish(job, fire, cur.executor, cur.token, outcome == "succeeded", "", 0, 0)
            self._vote([(job, fire, late, SPECS[0], 3, SKEW_MS, 30_000, Overlap.ALLOW)])
        nxt = fire + GRID_MS
        self.now = max(self.now, nxt)
        self._vote([(job, nxt, n, SPECS[0], 3, SKEW_MS, 30_000, overlap) for n in NODES[:3]])

    def _finish(
        self,
        job: str,
        fire: int,
        node: str,
        token: int,
        succeeded: bool,
        detail: str,
        retries: int,
        backoff: int,
    ) -> None:
        before = self.model.slot(job, fire)
        if retries or backoff:
            got = self.redis.finish(job, fire, node, token, succeeded, detail, retries, backoff)
            want = self.model.finish(job, fire, node, token, succeeded, detail, retries, backoff)
        else:  # the pre-retry call shape must keep working
            got = self.redis.finish(job, fire, node, token, succeeded, detail)
            want = self.model.finish(job, fire, node, token, succeeded, detail)
        self.same("finish", got, want)
        note("op finish")
        if token != before.token:
            assert not got.ok
        if not got.ok:
            note("finish refused")
            return
        if got.slot.state == SlotState.COMMITTED:  # a retry
            note("finish -> retry")
            assert not succeeded and before.runs < 1 + retries and not self.model.control(job).paused
            assert got.slot.not_before_ms == got.now_ms + backoff
            assert got.slot.executor in [n for n, h in got.slot.votes if h == got.slot.spec_hash]
            self.saw_assignment(job, got.slot.token, "retry")
            [entry] = self.model.ledger(job, 1)
            assert entry.state == SlotState.RETRYING and entry.token == token
        else:
            note(f"finish ok -> {got.slot.state}")
            assert got.slot.state == (SlotState.SUCCEEDED if succeeded else SlotState.FAILED)
            self._check_failures_before(job, fire, got)

    def _check_failures_before(self, job: str, fire: int, got: TransitionResult) -> None:
        """A success's ``failures_before`` is what the ledger says: the job's slots that ended
        failed or lost in a row before it, missed and skipped ones passed over (at least that
        many when the ledger's trimming dropped the success that started the count)."""
        if got.slot.state != SlotState.SUCCEEDED:
            assert got.failures_before == 0, got
            return
        count, ended = 0, False
        for entry in self.model.ledger(job, 10_000)[1:]:  # (newest first; [0] is this success)
            if entry.fire_ms == fire or entry.state in (SlotState.MISSED, SlotState.SKIPPED):
                continue
            if entry.state in (SlotState.FAILED, SlotState.LOST):
                count += 1
            elif entry.state == SlotState.SUCCEEDED:
                ended = True
                break
        assert got.failures_before == count if ended else got.failures_before >= count, (got, count)
        if got.failures_before:
            note("finish ok after failures")

    @rule(
        params=st.lists(
            st.builds(
                SweepParams,
                job=st.sampled_from(JOBS),
                deadline_ms=deadlines,
                start_timeout_ms=st.sampled_from((2_000, 8_000)),
                delivery=st.sampled_from(Delivery),
            ),
            min_size=1,
            max_size=3,
        ),
        dt=st.sampled_from((0, 0, 0, 300, 1_000, 6_000, 31_000)),
    )
    def sweep(self, params: list[SweepParams], dt: int) -> None:
        """Time passes (swarm testing may have disabled ``advance``), then a sweeper runs."""
        self.now += dt
        got = self.redis.sweep(params)
        self.same("sweep", got, self.model.sweep(params))  # (due_in_ms too)
        note("op sweep")
        if split(p.job for p in params):
            note("sweep split over calls")
        for view in got.changed:
            note(f"sweep -> {view.state} ({view.reason.split(' ')[0] or 'takeover'})")
            if view.state == SlotState.COMMITTED:
                agreeing = [n for n, h in view.votes if h == view.spec_hash]
                assert view.executor in agreeing
                if view.attempt > len(agreeing):
                    note("sweep -> committed (takeover, every voter had it)")
                self.saw_assignment(view.job, view.token, "sweep")

    @rule(
        params=st.lists(
            st.builds(
                SweepParams,
                job=st.sampled_from(JOBS),
                deadline_ms=deadlines,
                start_timeout_ms=st.sampled_from((2_000, 8_000)),
                delivery=st.sampled_from(Delivery),
            ),
            min_size=MAX_BATCH + 1,
            max_size=3 * MAX_BATCH,
        ),
    )
    def sweep_big_batch(self, params: list[SweepParams]) -> None:
        """More sweep items than ``max_batch``: the Redis store splits them between jobs."""
        self.sweep(params, 0)

    @rule(data=st.data(), deadline=deadlines, reason=st.sampled_from(("no node alive", "misfire: skip")))
    def record_missed(self, data: st.DataObject, deadline: int, reason: str) -> None:
        job, fire = self.pick_slot(data)
        self._record_missed(job, fire, deadline, reason)

    def _record_missed(self, job: str, fire: int, deadline: int, reason: str) -> None:
        got = self.redis.record_missed(job, fire, deadline, reason)
        self.same("record_missed", got, self.model.record_missed(job, fire, deadline, reason))
        note("op record_missed")
        note(f"record_missed -> {got.state}")
        if (job, fire) not in self.known and got.state != SlotState.ABSENT:
            self.known.append((job, fire))

    @rule(
        data=st.data(),
        n=st.integers(min_value=1, max_value=2 * MAX_BATCH + 1),
        deadline=deadlines,
        reason=st.sampled_from(("no quorum before the deadline", 'ünï/"why"')),
    )
    def record_missed_many(self, data: st.DataObject, n: int, deadline: int, reason: str) -> None:
        """Several missed records in one call (a node starting after a minute boundary), repeats
        and more than ``max_batch`` included: each reply what its one-slot call would have replied."""
        picked = [self.pick_slot(data) for _ in range(n)]
        self._record_missed_many([MissedRequest(job, fire, deadline, reason) for job, fire in picked])

    def _record_missed_many(self, requests: list[MissedRequest]) -> None:
        picked = [(r.job, r.fire_ms) for r in requests]
        got = self.redis.record_missed_many(requests)
        self.same("record_missed_many", got, self.model.record_missed_many(requests))
        note("op record_missed_many")
        for (job, fire), view in zip(picked, got, strict=True):
            assert isinstance(view, SlotView), f"record_missed_many {job}@{fire}: {view!r}"
            note(f"record_missed_many -> {view.state}")
            if (job, fire) not in self.known and view.state != SlotState.ABSENT:
                self.known.append((job, fire))

    @rule(
        data=st.data(),
        what=st.sampled_from(("slot", "read_slots", "slots", "ledger", "members")),
        a=fire_offsets,
        b=fire_offsets,
        limit=st.integers(min_value=0, max_value=6),
    )
    def read(self, data: st.DataObject, what: str, a: int, b: int, limit: int) -> None:
        """The read-only operations (the invariant also compares whole state after each step)."""
        if what == "slot":
            self._read(what, [self.pick_slot(data)])
        elif what == "read_slots":
            # Several slots in one call (a node's polls), repeats and unknown slots included.
            keys = [self.pick_slot(data) for _ in range(data.draw(st.integers(0, 4), label="reads"))]
            self._read(what, keys)
        else:
            job = data.draw(st.sampled_from(JOBS), label="job")
            self._read(what, [(job, self.fire(a))], self.fire(b), limit)

    def _read(self, what: str, keys: list[tuple[str, int]], hi: int = 0, limit: int = 0) -> None:
        """``what`` of both stores compared: ``slot`` of ``keys[0]``, ``read_slots`` of every key,
        ``slots`` of ``keys[0]``'s job from its fire time to ``hi``, its ``ledger`` or ``members``."""
        note(f"op {what}")
        job, fire = keys[0] if keys else (JOBS[0], 0)
        if what == "slot":
            self.same("slot", self.redis.slot(job, fire), self.model.slot(job, fire))
        elif what == "read_slots":
            self.same("read_slots", self.redis.read_slots(keys), self.model.read_slots(keys))
        elif what == "slots":
            self.same("slots", self.redis.slots(job, fire, hi), self.model.slots(job, fire, hi))
        elif what == "ledger":
            self.same("ledger", self.redis.ledger(job, limit), self.model.ledger(job, limit))
        else:
            self.same("members", self.redis.members(), self.model.members())
            self.check_store_time()

    # -- operator control ----------------------------------------------------

    @rule(
        job=st.sampled_from(JOBS),
        by=operators,
        reason=pause_reasons,
        op=st.sampled_from(("pause", "resume", "resume")),
    )
    def pause_resume(self, job: str, by: str, reason: str, op: str) -> None:
        """One rule for both (a paused job commits nothing, so pauses must not crowd out the rest)."""
        if op == "pause":
            self.pause(job, by, reason)
        else:
            self.resume(job, by)

    def pause(self, job: str, by: str, reason: str) -> None:
        was = self.model.control(job)
        got = self.redis.pause(job, by, reason)
        want = self.model.pause(job, by, reason)
        self.same("pause", (got, got.changed), (want, want.changed))  # (changed: compare=False)
        assert got.paused and got.by == by and got.reason == reason
        assert got.changed == (not (was.paused and was.by == by and was.reason == reason))
        note("pause")
        note("op pause")

    def resume(self, job: str, by: str) -> None:
        was = self.model.control(job)
        got = self.redis.resume(job, by)
        want = self.model.resume(job, by)
        self.same("resume", (got, got.changed), (want, want.changed))  # (changed: compare=False)
        assert not got.paused and got.changed == was.paused and not self.redis.control(job).changed
        note("op resume")
        if was.paused:
            assert (got.by, got.at_ms) == (by, self.now)
            note("resume")

    @rule(job=st.sampled_from(JOBS), by=operators, dt=st.sampled_from((0, 1, 1_000)))
    def trigger(self, job: str, by: str, dt: int) -> None:
        self.now += dt
        got = self.redis.trigger(job, by)
        self.same("trigger", got, self.model.trigger(job, by))
        assert got == self.now
        note("trigger")
        note("op trigger")

    @rule(
        job=st.sampled_from(JOBS),
        voters=st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True),
        since=st.sampled_from((None, 0, -1)),
    )
    def vote_trigger(self, job: str, voters: list[str], since: int | None) -> None:
        """Nodes react to a trigger: list triggers since a point, vote for the latest (off-grid slot)."""
        since_ms = 0 if since is None else self.now + since * 30_000
        got = self.redis.triggers(job, since_ms)
        self.same("triggers", got, self.model.triggers(job, since_ms))
        note("op triggers")
        assert got == sorted(set(got)) and all(f > since_ms for f in got)
        if got:
            fire = got[-1]
            self._vote([(job, fire, n, SPECS[0], 3, SKEW_MS, 30_000, Overlap.ALLOW) for n in voters])

    @rule(job=st.sampled_from(JOBS), limit=st.integers(min_value=0, max_value=4))
    def read_control(self, job: str, limit: int) -> None:
        self.same("control", self.redis.control(job), self.model.control(job))
        self.same("audit", self.redis.audit(job, limit), self.model.audit(job, limit))
        note("op control")

    @rule(
        node=st.sampled_from(NODES[:3]),
        incarnation=st.sampled_from(("i-a", "i-b")),
        ttl=st.sampled_from((500, 5_000)),
        info=st.dictionaries(
            st.sampled_from(("clock", "version")), st.sampled_from(("ok", "1.0", "é")), max_size=2
        ),
    )
    def heartbeat(self, node: str, incarnation: str, ttl: int, info: dict[str, str]) -> None:
        got = self.redis.heartbeat(node, incarnation, ttl, info)
        self.same("heartbeat", got, self.model.heartbeat(node, incarnation, ttl, info))
        note("op heartbeat")
        note(f"heartbeat {'ok' if got.ok else 'refused'}")
        if not got.ok:
            assert got.holder and got.holder != incarnation, got

    @rule(
        node=st.sampled_from(NODES[:3]),
        table=st.sampled_from(("", "a=0123456789abcdef", "a=0123456789abcdef,b=fedcba9876543210", "é=1")),
        asked=st.lists(st.sampled_from(NODES[:4]), max_size=4),
    )
    def publish_jobs(self, node: str, table: str, asked: list[str]) -> None:
        """A node's job table beside its heartbeat: kept as written, read back for the nodes asked."""
        self.redis.publish_jobs(node, table)
        self.model.publish_jobs(node, table)
        got = self.redis.published_jobs(asked)
        self.same("published_jobs", got, self.model.published_jobs(asked))
        assert set(got) <= set(asked) and (node not in asked or got[node] == table), (got, node, table)
        note("op publish_jobs")

    @rule(node=st.sampled_from(NODES[:3]), incarnation=st.sampled_from(("i-a", "i-b")))
    def leave(self, node: str, incarnation: str) -> None:
        self.redis.leave(node, incarnation)
        self.model.leave(node, incarnation)
        self.same("members after leave", self.redis.members(), self.model.members())
        note("op leave")

    # -- whole-state comparison ---------------------------------------------

    @invariant()
    def same_state(self) -> None:
        self.same("high_waters", self.redis.high_waters(JOBS), self.model.high_waters(JOBS))
        for job in JOBS:
            self.same(f"slots({job})", self.redis.slots(job, 0, 2**52), self.model.slots(job, 0, 2**52))
            self.same(f"ledger({job})", self.redis.ledger(job, 10), self.model.ledger(job, 10))
            self.same(f"control({job})", self.redis.control(job), self.model.control(job))
            self.same(f"audit({job})", self.redis.audit(job, 10), self.model.audit(job, 10))
            self.same(f"triggers({job})", self.redis.triggers(job, 0), self.model.triggers(job, 0))


COVERAGE_GOALS = (
    "vote committed -> committed",
    "vote committed -> running",
    "vote recorded -> proposed",
    "vote early -> absent",
    "vote missed -> missed",
    "start ok",
    "start ok (re-run)",
    "start refused: retry",
    "finish ok -> succeeded",
    "finish ok -> failed",
    "finish -> retry",
    "finish ok after failures",
    "vote skipped -> skipped",
    "pause",
    "resume",
    "trigger",
    "op time_ms",
    "sweep -> committed (takeover, every voter had it)",
)
"""The outcomes the first part of the fixed walk was written for (:func:`_fixed_walk`)."""

OPERATIONS: tuple[str, ...] = (
    "vote",
    "start",
    "renew",
    "finish",
    "sweep",
    "record_missed",
    "slot",
    "read_slots",
    "slots",
)
OPERATIONS += ("ledger", "members", "time_ms", "pause", "resume", "trigger", "triggers", "control")
OPERATIONS += ("heartbeat", "leave", "fenced", "publish_jobs", "record_missed_many")
"""Every store operation the machine calls (``op <name>`` in :data:`STATS`)."""

WALK_GOALS = (
    *COVERAGE_GOALS,
    *(f"op {op}" for op in OPERATIONS),
    "vote decided -> committed",
    "vote decided -> succeeded",
    "vote committed -> skipped",
    "vote missed -> missed",
    "start refused: starting",
    "start refused: stale",
    "start refused: slot",
    "renew ok",
    "renew refused",
    "finish refused",
    "replace running -> failed",
    "replace committed -> skipped",
    "sweep -> lost (lease)",
    "sweep -> committed (takeover)",
    "sweep -> missed (deadline)",
    "record_missed -> missed",
    "record_missed_many -> missed",
    "heartbeat ok",
    "heartbeat refused",
    "vote split over calls",
    "sweep split over calls",
    "fenced batch",
    "fenced start ok",
    "fenced finish ok",
)
"""Every operation and outcome the suite must exercise: :func:`test_contract_reaches_every_goal`
reaches each on a fixed path, on every run. (The random walk once had to reach them all under
CI's derandomized profile; which examples that profile draws changes with hypothesis's
releases, and on 2026-12-06 the walk of hypothesis 6.170.27 missed one. Six walks of other
seeds reached some of them only 2 to 30 times: a demand on that walk could fail on unchanged
code.)"""

RANDOM_WALK_GOALS = (
    *(f"op {op}" for op in ("vote", "start", "renew", "finish", "sweep", "fenced", "heartbeat")),
    *(f"op {op}" for op in ("publish_jobs", "control", "trigger", "triggers", "record_missed")),
    "op record_missed_many",
    "vote recorded -> proposed",
    "vote committed -> committed",
    "vote decided -> committed",
    "vote early -> absent",
    "vote missed -> missed",
    "renew refused",
    "finish refused",
    "record_missed_many -> missed",
    "vote split over calls",
    "sweep split over calls",
)
"""What the random walk must reach on every run, whatever the profile: each came 128 times or
more in each of five walks of other seeds (4 to 8; none was among the eight rarest outcomes of
seeds 1 to 3), so a run missing one means the rules or their weights changed (starving it), not
an unlucky draw."""


def test_redis_store_matches_model(redis_server: EmbeddedRedis) -> None:
    """200 examples of up to 40 steps: the Redis scripts and the model never disagree.

    The walk must reach the common outcomes (:data:`RANDOM_WALK_GOALS`); the fixed walk below
    reaches every goal.
    """
    STATS.clear()
    StoreParity.server = redis_server
    try:
        run_state_machine_as_test(StoreParity, settings=SETTINGS)
    finally:
        StoreParity.server = None
    missing = [goal for goal in RANDOM_WALK_GOALS if not STATS[goal]]
    assert not missing, f"the walk never reached {missing}: {dict(sorted(STATS.items()))}"


def test_contract_reaches_every_goal(redis_server: EmbeddedRedis) -> None:
    """A fixed walk through the same machine (same comparisons, same invariant after each step)
    reaches every coverage goal and a sweep that changes a slot: deterministic, unlike the random
    walk above, so the goals are met on every run."""
    STATS.clear()
    StoreParity.server = redis_server
    try:
        _fixed_walk()
    finally:
        StoreParity.server = None
    for outcome in WALK_GOALS:
        assert STATS[outcome] > 0, f"the fixed walk never produced {outcome!r}: {dict(STATS)}"
    assert any(k.startswith("sweep -> ") for k in STATS), f"no sweep ever changed a slot: {dict(STATS)}"


def _fixed_walk() -> None:
    """The fixed walk of :func:`test_contract_reaches_every_goal` on whatever StoreParity is set to."""
    m = StoreParity()
    try:
        ok = (SPECS[0], 3, SKEW_MS, 30_000, Overlap.ALLOW)

        def step() -> None:
            m.same_state()

        def commit(job: str, fire: int) -> tuple[str, int]:
            m._vote([(job, fire, n, *ok) for n in NODES[:3]])
            step()
            cur = m.model.slot(job, fire)
            assert cur.state == SlotState.COMMITTED, cur
            return cur.executor, cur.token

        alpha = m.fire(0)
        m._vote([("gamma", alpha, "n1", *ok)])  # proposed, never completed: the sweep misses it
        executor, token = commit("alpha", alpha)
        m._vote([("alpha", m.fire(2), "n1", *ok)])  # 40 s ahead: early
        m._vote([("beta", m.fire(-3), "n1", SPECS[0], 3, SKEW_MS, 5_000, Overlap.ALLOW)])  # past deadline
        step()
        assert m._start("alpha", alpha, executor, token, 5_000, "current")
        m._finish("alpha", alpha, executor, token, False, "exit 1", 1, 5_000)  # retry after 5 s
        retry = m.model.slot("alpha", alpha)
        assert not m._start("alpha", alpha, retry.executor, retry.token, 5_000, "current")  # too soon
        m.advance(5_000)
        assert m._start("alpha", alpha, retry.executor, retry.token, 5_000, "current")  # the re-run
        m._finish("alpha", alpha, retry.executor, retry.token, True, "", 1, 5_000)
        step()
        m.pause("beta", "ops", "maintenance")
        m._vote([("beta", m.fire(0), "n2", *ok)])  # paused: skipped
        m.resume("beta", "ops")
        m.trigger("gamma", "ops", 0)
        step()
        m.advance(20_000)
        beta = m.fire(0)
        executor, token = commit("beta", beta)
        assert m._start("beta", beta, executor, token, 5_000, "current")
        m._finish("beta", beta, executor, token, False, "exit 3", 0, 0)  # no retries: failed
        m.advance(20_000)
        beta = m.fire(0)
        executor, token = commit("beta", beta)
        assert m._start("beta", beta, executor, token, 5_000, "current")
        m._finish("beta", beta, executor, token, True, "", 0, 0)  # recovered from 1 failure
        assert m.redis.ledger("beta", 1)[0].state == SlotState.SUCCEEDED
        # A start folded into the commit: the committing voter asks for it and is chosen.
        m.advance(20_000)
        fold = m.fire(0)
        winner = pick_executor("alpha", fold, NODES[:3])
        first = [n for n in NODES[:3] if n != winner]
        m._vote([("alpha", fold, n, *ok) for n in first], 5_000)
        m._vote([("alpha", fold, winner, *ok)], 5_000)
        step()
        assert m.model.slot("alpha", fold).state == SlotState.RUNNING
        # Asked for before the fire time (store time inside the skew window): a commit only.
        ahead = m.fire(1)
        m.advance(ahead - 200 - m.now)
        winner = pick_executor("beta", ahead, NODES[:3])
        m._vote([("beta", ahead, n, *ok) for n in NODES[:3] if n != winner], 5_000)
        m._vote([("beta", ahead, winner, *ok)], 5_000)
        step()
        before = m.model.slot("beta", ahead)
        assert (before.state, before.executor, before.starter) == (SlotState.COMMITTED, winner, ""), before
        m.advance(11_000)
        m.sweep([SweepParams("gamma", 30_000, 8_000)], 0)  # gamma's lone vote: missed
        step()
        # Nobody starts it: takeovers go round the three voters, then round again.
        m.advance(20_000)
        rounds = m.fire(0)
        commit("gamma", rounds)
        for _ in range(4):
            m.sweep([SweepParams("gamma", 30_000, 2_000)], 2_001)
            step()
        _fixed_walk_rarer(m, commit)
        m.check_store_time()
    finally:
        m.teardown()


def _fixed_walk_rarer(m: StoreParity, commit: Callable[[str, int], tuple[str, int]]) -> None:
    """The rest of the fixed walk: the outcomes of :data:`RARE_GOALS` and every operation."""

    def votes(job: str, fire: int, overlap: Overlap) -> None:
        m._vote([(job, fire, n, SPECS[0], 3, SKEW_MS, 30_000, overlap) for n in NODES[:3]])
        m.same_state()

    # A start with an old token, then a second start while the first runs.
    m.advance(40_000)
    base = m.fire(0)
    executor, token = commit("beta", base)
    assert not m._start("beta", base, executor, token - 1, 5_000, "stale")
    assert m._start("beta", base, executor, token, 60_000, "current")
    assert not m._start("beta", base, executor, token, 60_000, "current")
    # The next slots fall due while it runs: replace ends it, then the committed one; forbid skips.
    m.now = base + GRID_MS
    votes("beta", base + GRID_MS, Overlap.REPLACE)
    m.now = base + 2 * GRID_MS
    votes("beta", base + 2 * GRID_MS, Overlap.REPLACE)
    m.now = base + 3 * GRID_MS
    votes("beta", base + 3 * GRID_MS, Overlap.FORBID)
    # A start and a finish in one fenced call.
    m.advance(40_000)
    fenced = m.fire(0)
    executor, token = commit("alpha", fenced)
    m._fenced(
        [
            FencedRequest("start", "alpha", fenced, executor, token, 5_000, True, "", 1, 0),
            FencedRequest("finish", "alpha", fenced, executor, token, 5_000, True, "exit 0", 1, 0),
        ]
    )
    m.same_state()
    # At least once: the lease runs out with nobody renewing; the slot is lost.
    m.advance(40_000)
    lost = m.fire(0)
    executor, token = commit("gamma", lost)
    assert m._start("gamma", lost, executor, token, 1_000, "current")
    m.sweep([SweepParams("gamma", 30_000, 2_000, Delivery.AT_LEAST_ONCE)], 2_000)
    m.same_state()
    # A committed slot nobody starts before its deadline: a start then is refused; the sweep ends it.
    m.advance(40_000)
    late = m.fire(0)
    executor, token = commit("alpha", late)
    m.now = late + 31_000
    assert not m._start("alpha", late, executor, token, 5_000, "current")
    m.sweep([SweepParams("alpha", 30_000, 60_000)], 0)
    m.same_state()
    # Renewals, a finish and a renewal under an old token, late votes for decided slots.
    m.advance(40_000)
    run = m.fire(0)
    executor, token = commit("beta", run)
    assert m._start("beta", run, executor, token, 5_000, "current")
    m._renew("beta", run, executor, token, 5_000)
    m._renew("beta", run, executor, token - 1, 5_000)
    m._finish("beta", run, executor, token - 1, True, "", 0, 0)
    m._finish("beta", run, executor, token, True, "exit 0", 0, 0)
    m._vote([("beta", run, "n4", SPECS[0], 3, SKEW_MS, 30_000, Overlap.ALLOW)])
    executor, token = commit("gamma", run)
    m._vote([("gamma", run, "n4", SPECS[0], 3, SKEW_MS, 30_000, Overlap.ALLOW)])
    m.same_state()
    # More items than a call holds, of several jobs: the Redis store splits them over calls.
    ahead = m.fire(1)
    m._vote([(job, ahead, n, SPECS[0], 3, SKEW_MS, 30_000, Overlap.ALLOW) for job in JOBS[:2] for n in NODES])
    m.sweep([SweepParams(job, 30_000, 8_000) for job in JOBS for _ in range(2)], 0)
    gone = m.fire(-4)
    m._record_missed_many([MissedRequest(job, gone, 5_000, "no node alive") for job in JOBS])
    m.same_state()
    # A second process under a node id a live one holds; the reads, the control and the triggers.
    m.heartbeat("n1", "i-a", 5_000, {"clock": "ok"})
    m.heartbeat("n1", "i-b", 5_000, {})
    m.publish_jobs("n1", "a=0123456789abcdef", ["n1", "n2"])
    m.leave("n1", "i-a")
    m.read_control("beta", 4)
    m.trigger("alpha", "ops", 1)
    m.vote_trigger("alpha", list(NODES[:3]), None)
    m._record_missed("beta", m.fire(-3), 5_000, "no node alive")
    for what in ("slot", "read_slots", "slots", "ledger", "members"):
        m._read(what, [("beta", base), ("alpha", fenced)], m.fire(1), 3)
    m.same_state()


@pytest.mark.slow
def test_redis_store_on_a_cluster_matches_model(redis_cluster: EmbeddedCluster) -> None:
    """The same machine on a real 3-master cluster: per-node pipelines, cross-slot batches, sharded notices.

    Two jobs share a master and the third lives on another (checked), so a
    batched vote or sweep is one pipeline per node and one call covers two
    hash slots (the scripts' allow-cross-slot-keys variant); the model is
    unchanged. The random walk, then the fixed walk that reaches every goal.
    """
    namespace = "kc"
    owners = [redis_cluster.master_of(f"qc:{{{namespace}:{j}}}:meta").port for j in JOBS]
    assert len(set(owners)) == 2, f"jobs {JOBS} should live on exactly two masters: {owners}"
    StoreParity.cluster, StoreParity.namespace = redis_cluster, namespace
    try:
        run_state_machine_as_test(StoreParity, settings=settings(SETTINGS, max_examples=60))
        STATS.clear()
        _fixed_walk()
    finally:
        StoreParity.cluster, StoreParity.namespace = None, "contract"
    for outcome in WALK_GOALS:
        assert STATS[outcome] > 0, f"the fixed walk never produced {outcome!r}: {dict(STATS)}"
    assert any(k.startswith("sweep -> ") for k in STATS), f"no sweep ever changed a slot: {dict(STATS)}"


# -- a deadline widened by one vote holds for the slot ---------------------------------


def _server_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def _both_stores(redis_server: EmbeddedRedis, clock: Any) -> tuple[redis.Redis, list[Any]]:
    client = redis_server.client(retry=None, socket_timeout=5.0)
    client.flushall()
    return client, [RedisStore(client, "widened", clock=clock), MemoryStore(clock)]


def test_widened_deadline_keeps_a_proposed_slot_from_being_swept(redis_server: EmbeddedRedis) -> None:
    """A node catching up after an outage votes with a widened deadline: the slot stays proposed
    under the job's normal deadline (sweep, other votes, record_missed) and is missed once the
    widened one passed. Both stores, same replies."""
    fire, normal, widened = BASE_MS, 30_000, 300_000
    now = [fire + 120_000]  # the normal deadline passed long ago
    client, stores = _both_stores(redis_server, lambda: now[0])
    try:
        replies: list[list[Any]] = []
        for store in stores:
            got: list[Any] = []
            now[0] = fire + 120_000
            got.append(store.vote([VoteRequest("j", fire, "n1", "h1", 3, SKEW_MS, widened)]))
            got.append(store.vote([VoteRequest("j", fire, "n2", "h1", 3, SKEW_MS, normal)]))
            got.append(store.sweep([SweepParams("j", normal, 5_000)]))
            got.append(store.record_missed("j", fire, normal, "no quorum before the deadline"))
            now[0] = fire + widened
            got.append(store.sweep([SweepParams("j", normal, 5_000)]))  # the widened deadline is inclusive
            now[0] = fire + widened + 1
            got.append(store.sweep([SweepParams("j", normal, 5_000)]))
            replies.append(got)
        assert replies[0] == replies[1], f"redis replied\n  {replies[0]}\nmodel replied\n  {replies[1]}"
        first, second, swept, recorded, at_deadline, after = replies[1]
        assert [r.status for r in first + second] == [VoteStatus.RECORDED, VoteStatus.RECORDED]
        assert swept.changed == [] and at_deadline.changed == []
        # The sweeps say when the slot can next be due: 1 ms past the widened deadline.
        assert (swept.due_in_ms, at_deadline.due_in_ms) == (widened - 120_000 + 1, 1)
        assert swept.open_jobs == at_deadline.open_jobs == {"j"}  # (swept again by the nodes)
        assert recorded.state == SlotState.PROPOSED
        [missed] = after.changed
        assert after.due_in_ms == 0 and after.open_jobs == frozenset()  # nothing open any more
        assert (missed.state, missed.reason) == (SlotState.MISSED, "deadline passed before quorum")
        assert missed.votes == (("n1", "h1"), ("n2", "h1"))
    finally:
        client.close()


def test_widened_deadline_carries_to_the_commit_and_start(redis_server: EmbeddedRedis) -> None:
    """The quorum completed by normal-deadline votes commits, and the start deadline is the widened one."""
    fire, normal, widened = BASE_MS, 30_000, 300_000
    now = [fire + 120_000]
    client, stores = _both_stores(redis_server, lambda: now[0])
    try:
        replies: list[list[Any]] = []
        for store in stores:
            now[0] = fire + 120_000
            got: list[Any] = [store.vote([VoteRequest("j", fire, "n1", "h1", 3, SKEW_MS, widened)])]
            votes = [VoteRequest("j", fire, n, "h1", 3, SKEW_MS, normal) for n in ("n2", "n3")]
            got.append(store.vote(votes))
            slot = got[-1][-1].slot
            now[0] = fire + 200_000
            got.append(store.sweep([SweepParams("j", normal, 500_000)]))
            got.append(store.start("j", fire, slot.executor, slot.token, 5_000))
            replies.append(got)
        assert replies[0] == replies[1], f"redis replied\n  {replies[0]}\nmodel replied\n  {replies[1]}"
        _, votes_res, swept, started = replies[1]
        assert [r.status for r in votes_res] == [VoteStatus.RECORDED, VoteStatus.COMMITTED]
        assert swept.changed == []
        assert swept.due_in_ms == 500_000 - 80_000 + 1  # the start timeout, counted from the commit
        assert started.ok and started.slot.state == SlotState.RUNNING
    finally:
        client.close()


# -- takeovers and retries go round the voters ------------------------------------------------------


def _rendezvous_order(job: str, fire: int, voters: list[str]) -> list[str]:
    """The voters in rendezvous rank: the winner, then the winner of the rest, and so on."""
    left, order = list(voters), []
    while left:
        order.append(pick_executor(job, fire, left))
        left.remove(order[-1])
    return order


def test_takeovers_and_retries_go_round_the_voters(redis_server: EmbeddedRedis) -> None:
    """Once every agreeing voter has had the slot, a takeover or a retry goes to the one whose last
    turn is the oldest, not back to the rendezvous winner (seed 639, sim/findings/README.md): the
    voters in rank order, over and over, through start timeouts, at-least-once leases that run
    out and failed runs that are retried. Both stores, same replies."""
    fire, voters = BASE_MS, ["n1", "n2", "n3"]
    now = [fire]
    client, stores = _both_stores(redis_server, lambda: now[0])
    order = _rendezvous_order("j", fire, voters)
    sweep = [SweepParams("j", 3_600_000, 5_000, Delivery.AT_LEAST_ONCE)]
    try:
        replies: list[list[Any]] = []
        for store in stores:
            now[0] = fire
            votes = [VoteRequest("j", fire, n, "h1", 3, SKEW_MS, 30_000) for n in voters]
            got: list[Any] = [store.vote(votes)]
            seen = [store.slot("j", fire)]
            for _ in range(4):  # start timeouts: nobody starts it
                now[0] += 5_001
                got.append(store.sweep(sweep))
                seen.append(store.slot("j", fire))
            for _ in range(2):  # at-least-once: started, then its lease runs out
                got.append(store.start("j", fire, seen[-1].executor, seen[-1].token, 1_000))
                now[0] += 1_001
                got.append(store.sweep(sweep))
                seen.append(store.slot("j", fire))
            for _ in range(2):  # started and failed, retried
                got.append(store.start("j", fire, seen[-1].executor, seen[-1].token, 60_000))
                got.append(store.finish("j", fire, seen[-1].executor, seen[-1].token, False, "x", 9, 0))
                seen.append(store.slot("j", fire))
            replies.append([*got, *seen])
            executors = [v.executor for v in seen]
            assert executors == (order * 3)[: len(executors)], (store, executors, order)
            assert [v.token for v in seen] == list(range(1, len(seen) + 1)), store
        assert replies[0] == replies[1], f"redis replied\n  {replies[0]}\nmodel replied\n  {replies[1]}"
    finally:
        client.close()


# -- the ports beside the slot protocol: notices, the alerts journal, the faces' reads -------------


def _heard(store: Any, node: str) -> tuple[NoticeListening, queue.Queue[Notice | Trigger], list[int]]:
    """A started subscription of ``node`` to job ``j``'s notices: what it hears, each (re)subscription."""
    heard: queue.Queue[Notice | Trigger] = queue.Queue()
    subscribed: list[int] = []
    listening = store.listen_notices(node, ["j"], heard.put, lambda: subscribed.append(1))
    listening.start()
    assert listening.subscribed.wait(10), f"{store!r}: {node} never subscribed"
    return listening, heard, subscribed


def _until(heard: queue.Queue[Notice | Trigger], last: Trigger) -> list[Notice | Trigger]:
    """Everything heard up to ``last`` (published after all else: one connection keeps the order)."""
    out: list[Notice | Trigger] = []
    while not out or out[-1] != last:
        out.append(heard.get(timeout=10))
    return out


def test_notices_reach_the_executor_and_triggers_every_node_on_both_stores(
    redis_server: EmbeddedRedis,
) -> None:
    """listen_notices: a commit, a retried failure (new executor) and a takeover notify the executor
    with its token; a commit that starts the slot for its own voter notifies nobody; a trigger
    reaches every subscriber. Same notices from Redis pub/sub and the model."""
    fire = BASE_MS
    now = [fire]
    client, stores = _both_stores(redis_server, lambda: now[0])
    try:
        replies: list[list[Any]] = []
        for store in stores:
            now[0] = fire
            subs = {n: _heard(store, n) for n in ("n1", "n2", "n3")}
            votes = [VoteRequest("j", fire, n, "h1", 2, SKEW_MS, 30_000) for n in ("n1", "n2", "n3")]
            [_, committed, _] = store.vote(votes)
            first = committed.slot
            assert store.start("j", fire, first.executor, first.token, 5_000).ok
            retried = store.finish("j", fire, first.executor, first.token, False, "exit 1", 2, 0).slot
            now[0] += 10_000  # the retry's executor never starts it: a sweep takes it over
            [taken] = store.sweep([SweepParams("j", 30_000, 1_000)]).changed
            # A commit whose own voter is picked and asked for the start starts it: no notice.
            due = now[0]
            winner = pick_executor("j", due, ("n1", "n2", "n3"))
            other = next(n for n in ("n1", "n2", "n3") if n != winner)
            asks = [
                VoteRequest("j", due, n, "h1", 2, SKEW_MS, 30_000, start_lease_ms=5_000, incarnation=f"i-{n}")
                for n in (other, winner)
            ]
            store.vote(asks[:1])
            [folded] = store.vote(asks[1:])
            assert folded.slot.state == SlotState.RUNNING and folded.slot.executor == winner
            last = Trigger("j", store.trigger("j", "alice"))
            heard = {n: _until(q, last) for n, (_, q, _) in subs.items()}
            for listening, _, subscribed in subs.values():
                listening.stop()
                listening.join(5)
                assert subscribed == [1]
            replies.append([heard, first, retried, taken])
        assert replies[0] == replies[1], f"redis heard\n  {replies[0]}\nmodel heard\n  {replies[1]}"
        heard, first, retried, taken = replies[1]
        for slot in (first, retried, taken):
            assert Notice("j", fire, slot.token) in heard[slot.executor]
        assert all(h[-1] == Trigger("j", now[0]) for h in heard.values())
        assert sum(len(h) for h in heard.values()) == 3 + 3  # three assignments (no fourth), one trigger each
    finally:
        client.close()


def test_a_stopped_subscription_hears_nothing_more_on_the_model() -> None:
    """The model delivers inside the publishing call; after stop() nothing reaches the subscriber."""
    store = MemoryStore(lambda: BASE_MS)
    heard: list[Notice | Trigger] = []
    listening = store.listen_notices("n1", ["j"], heard.append)
    assert not listening.subscribed.is_set()
    listening.start()
    store.trigger("j", "alice")
    listening.stop()
    store.trigger("k", "bob")
    assert heard == [Trigger("j", BASE_MS)] and not listening.subscribed.is_set()


def test_the_alerts_journal_keeps_the_same_newest_alerts_on_both_stores(redis_server: EmbeddedRedis) -> None:
    """add_alert / alerts: newest first, exactly ALERTS_MAXLEN kept, fields as given; ids from the store."""
    now = [BASE_MS]
    client, stores = _both_stores(redis_server, lambda: now[0])
    try:
        replies: list[list[Any]] = []
        for store in stores:
            assert store.alerts(5).alerts == ()
            for i in range(ALERTS_MAXLEN + 25):
                now[0] = BASE_MS + i
                store.add_alert(
                    StoredAlert("slot_missed", "n1", now[0], f"slot {i}", {"job": "j", "i": str(i)})
                )
            newest, everything = store.alerts(3), store.alerts(10 * ALERTS_MAXLEN)
            ids = [a.id for a in everything.alerts]
            assert len(set(ids)) == len(ids) == ALERTS_MAXLEN and all(ids)
            assert [a.id for a in newest.alerts] == ids[:3]
            replies.append([[replace(a, id="") for a in page.alerts] for page in (newest, everything)])
            replies[-1].append([store.alerts(0).alerts, newest.skipped, everything.skipped])
        assert replies[0] == replies[1]
        newest, everything, (none, *skipped) = replies[1]
        assert [a.message for a in newest] == [f"slot {ALERTS_MAXLEN + 24 - k}" for k in range(3)]
        assert everything[-1].message == "slot 25" and newest[0].fields == {
            "job": "j",
            "i": str(ALERTS_MAXLEN + 24),
        }
        assert none == () and skipped == [0, 0]
    finally:
        client.close()


def test_the_faces_reads_agree_on_both_stores(redis_server: EmbeddedRedis) -> None:
    """ObservedStore: ledger_tails returns only what is newer than the id it gave, follow what came
    after its cursor (ledger and audit), ledgers every job's newest; the same entries on both stores."""
    now = [BASE_MS + 600_000]
    client, stores = _both_stores(redis_server, lambda: now[0])
    try:
        replies: list[list[Any]] = []
        for store in stores:
            assert isinstance(store, ObservedStore)
            got: list[Any] = []
            store.record_missed("j", BASE_MS, 30_000, "nobody voted")
            store.record_missed("k", BASE_MS, 30_000, "nobody voted")
            [(id_j, entries_j, control_j), (id_k, _, _), (id_none, none, _)] = store.ledger_tails(
                ["j", "k", "z"], 20, {}
            )
            assert id_j and id_k and id_none == ""
            got.append([entries_j, control_j, none])
            [(same_id, nothing, _)] = store.ledger_tails(["j"], 20, {"j": id_j})
            assert same_id == id_j
            got.append(nothing)
            if isinstance(store, RedisStore):
                # Redis's cursor counts the millisecond it is taken in as new (follow_cursor: an
                # entry of that very millisecond may be reported twice). Take it once the server's
                # clock has left the millisecond of the last write (CI contention run: k's entry,
                # written in the cursor's millisecond, came back from the first follow).
                last_ms = max(int(i.split("-")[0]) for i in (id_j, id_k))
                while _server_ms(client) <= last_ms:
                    pass
            cursor: dict[str, str] = {}
            start = store.follow_cursor()
            got.append(store.follow(["j", "k"], cursor, start, 1))
            store.record_missed("j", BASE_MS + 20_000, 30_000, "nobody voted")
            store.pause("k", "alice", "maintenance")
            got.append(store.follow(["j", "k"], cursor, start, 1))
            got.append(store.follow(["j", "k"], cursor, start, 1))
            [(new_id, new, control)] = store.ledger_tails(["j"], 20, {"j": id_j})
            assert new_id not in ("", id_j)
            got.append([new, control, store.ledger_tails(["k"], 20, {})[0][2]])
            got.append(store.ledgers(["j", "k", "z"], 1))
            assert store.server_info()
            replies.append(got)
        assert replies[0] == replies[1], f"redis replied\n  {replies[0]}\nmodel replied\n  {replies[1]}"
        _, nothing, before, followed, again, (new, _, paused), _ = replies[1]
        assert nothing == [] and before == [] and again == []
        assert [type(e).__name__ for e in followed] == ["LedgerEntry", "AuditEntry"]
        assert [e.fire_ms for e in new] == [BASE_MS + 20_000] and paused.paused
    finally:
        client.close()
