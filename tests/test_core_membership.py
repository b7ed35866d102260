"""The node core under a membership record (issue 22): who votes, refusals, changes, rolling deploys.

Cores run against one MemoryStore (the model of the Redis scripts, proven
equal to them by tests/test_store_membership.py) through the synchronous
driver, or by hand where one input's effect is the point. Properties: a
node outside the record it holds abstains with one reason and sends no vote;
a refused vote is reported once per epoch and the node moves to the job's
newer record; a grow / shrink / replace fed to the nodes as the store's
records never runs a slot twice, and every commit holds a quorum of each
configuration of the record its job enforced; during a rolling deploy of a
changed job (spec hash differs) each slot runs one definition — the one a
quorum agreed on — never one per definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quorum_cron.core.model import (
    Configuration,
    LedgerEntry,
    MembershipRecord,
    SlotState,
    VoteRequest,
    VoteStatus,
)
from quorum_cron.core.node import (
    Abstain,
    CoreJob,
    NodeCore,
    NodeSettings,
    Now,
    RecordMissed,
    Refused,
    Vote,
)
from quorum_cron.core.perform import perform
from quorum_cron.store.memory import MemoryStore
from tests.core_driver import Driver, DriverNode, Every, boot

T0 = 1_699_999_980_000
PERIOD = 10_000


def job(spec: str = "h1") -> CoreJob:
    return CoreJob(name="j", schedule=Every(PERIOD), spec_hash=spec, deadline_ms=3_000, timeout_ms=60_000)


def record(epoch: int, members: list[str], old: list[str] | None = None) -> MembershipRecord:
    return MembershipRecord(epoch, Configuration.of(members), Configuration.of(old) if old else None)


def driver(members: Mapping[str, MembershipRecord | None], specs: dict[str, str] | None = None) -> Driver:
    """A driver whose nodes are exactly ``members`` (node -> the record it boots with)."""
    d = Driver([job()], n=1)
    d.nodes = {}
    for name, rec in members.items():
        settings = NodeSettings(node_id=name, quorum=2)
        core = NodeCore(settings, [job((specs or {}).get(name, "h1"))], rec)
        core.set_trust(True)
        d.nodes[name] = DriverNode(core)
    return d


def ledger(d: Driver) -> list[LedgerEntry]:
    return sorted(d.store.ledger("j", 1_000), key=lambda e: e.fire_ms)


def runs_per_slot(d: Driver) -> dict[int, int]:
    out: dict[int, int] = {}
    for _, _, fire, _ in d.executions:
        out[fire] = out.get(fire, 0) + 1
    return out


ABC = record(1, ["a", "b", "c"])
NOT_X = "x is not a member of epoch 1: a, b, c (quorum 2 of 3)"


def test_a_non_member_abstains_with_one_reason_and_never_votes() -> None:
    d = driver({"a": ABC, "b": ABC, "c": ABC, "x": ABC})
    d.run_until(T0 + 5 * PERIOD)
    x = d.nodes["x"]
    assert not x.core.is_member and x.runs == []
    assert x.abstains and {a.reason for a in x.abstains} == {
        "x is not a member of epoch 1: a, b, c (quorum 2 of 3)"
    }
    fires = [a.fire_ms for a in x.abstains]
    assert len(fires) == len(set(fires)), "one Abstain per slot"
    assert runs_per_slot(d) and set(runs_per_slot(d).values()) == {1}
    for e in ledger(d):
        assert "x" not in e.voters, e


def test_a_stale_node_is_refused_once_per_epoch_then_votes_under_the_newer_record() -> None:
    grown = record(2, ["a", "b", "c", "d"])
    store = MemoryStore(lambda: now.wall_ms)
    core = NodeCore(NodeSettings(node_id="a", quorum=2), [job()], ABC)
    core.set_trust(True)
    now = Now(T0 + PERIOD, 0)
    # Another node already voted with epoch 2: the job enforces it.
    store.vote([VoteRequest("j", T0 + PERIOD, "d", "h1", 3, 250, 3_000, epoch=2, membership=grown.encode())])
    actions = boot(core, now)
    votes = [a for a in actions if isinstance(a, Vote)]
    assert votes and votes[0].requests[0].epoch == 1
    reply: Any = perform(store, "a", votes[0])
    assert reply[0].status == VoteStatus.REFUSED
    out = core.on_reply(votes[0], reply, now)
    assert [a for a in out if isinstance(a, Refused)] == [
        Refused("j", T0 + PERIOD, 1, 2, "a votes with membership epoch 1, the job enforces epoch 2", True)
    ]
    assert core.membership == grown
    again = [a for a in core.tick(now) if isinstance(a, Vote)]
    assert again and again[0].requests[0].epoch == 2 and again[0].requests[0].membership == grown.encode()
    res: Any = perform(store, "a", again[0])
    assert res[0].status == VoteStatus.RECORDED


def test_a_new_member_ahead_of_the_job_is_not_reported_and_votes_again_shortly() -> None:
    """Growing a, b, c -> + d: d holds the joint record and votes first on a job still at epoch 1.
    The job takes a newer record only from one of its members (explorer seed 90437: a stranger's
    record at the namespace's epoch), so d is refused; the refusal is not news (no Refused, no
    alert), and d votes again a moment later, counted once a member brought the joint record."""
    joint = record(2, ["a", "b", "c", "d"], ["a", "b", "c"])
    now = Now(T0 + PERIOD, 0)
    store = MemoryStore(lambda: now.wall_ms)
    store.vote([VoteRequest("j", T0, "a", "h1", 2, 250, 3_000, epoch=1, membership=ABC.encode())])
    core = NodeCore(NodeSettings(node_id="d", quorum=2, max_skew_ms=250), [job()], joint)
    core.set_trust(True)
    votes = [a for a in boot(core, now) if isinstance(a, Vote)]
    assert votes and votes[0].requests[0].epoch == 2
    reply: Any = perform(store, "d", votes[0])
    assert reply[0].status == VoteStatus.REFUSED and reply[0].epoch == 1
    out = core.on_reply(votes[0], reply, now)
    assert not [a for a in out if isinstance(a, (Refused, Vote))], out
    assert core.membership == joint
    # A member brings the joint record to the job; d's vote goes again after max_skew / 2.
    store.vote([VoteRequest("j", T0 + PERIOD, "a", "h1", 2, 250, 3_000, epoch=2, membership=joint.encode())])
    assert not [a for a in core.tick(Now(now.wall_ms + 100, 100)) if isinstance(a, Vote)]
    now = Now(now.wall_ms + 125, 125)
    again = [a for a in core.tick(now) if isinstance(a, Vote)]
    assert again and again[0].requests[0].epoch == 2
    res: Any = perform(store, "d", again[0])
    assert res[0].status == VoteStatus.RECORDED
    assert dict(store.slot("j", T0 + PERIOD).votes) == {"a": "h1", "d": "h1"}


def test_every_job_refused_in_one_batch_votes_again_under_the_newer_record() -> None:
    # Two jobs' votes go in one pipelined call and both are refused as stale. The first
    # refusal adopts the newer record; the second finds nothing newer to adopt, yet its vote
    # carried the old epoch too, so it must go again (CI run of stop 29: the second job's
    # slot ended missed, "n2 votes with membership epoch 2, the job enforces epoch 4").
    grown = record(2, ["a", "b", "c", "d"])
    store = MemoryStore(lambda: now.wall_ms)
    jobs = [
        job(),
        CoreJob(name="k", schedule=Every(PERIOD), spec_hash="h1", deadline_ms=3_000, timeout_ms=60_000),
    ]
    core = NodeCore(NodeSettings(node_id="a", quorum=2), jobs, ABC)
    core.set_trust(True)
    now = Now(T0 + PERIOD, 0)
    for name in ("j", "k"):
        store.vote(
            [VoteRequest(name, T0 + PERIOD, "d", "h1", 3, 250, 3_000, epoch=2, membership=grown.encode())]
        )
    votes = [a for a in boot(core, now) if isinstance(a, Vote)]
    assert len(votes) == 1 and sorted(r.job for r in votes[0].requests) == ["j", "k"]
    reply: Any = perform(store, "a", votes[0])
    assert [r.status for r in reply] == [VoteStatus.REFUSED, VoteStatus.REFUSED]
    core.on_reply(votes[0], reply, now)
    assert core.membership == grown
    again = [r for a in core.tick(now) if isinstance(a, Vote) for r in a.requests]
    assert sorted((r.job, r.epoch) for r in again) == [("j", 2), ("k", 2)]


def test_a_member_votes_again_under_a_newer_record_so_the_nodes_it_added_count() -> None:
    """a voted for a slot under epoch 1 (a, b, x); then the record became epoch 2 (a, b, d) and d
    voted: refused, the job is still behind and takes a newer record only from a member's vote.
    a, holding the newer record, votes again for the slots it awaits: the job moves to epoch 2
    and d's next try commits the slot (a + d). Without it an operator's trigger voted just
    before the other nodes joined missed (CI of stop 28: tests/test_ops_commands.py)."""
    first, replaced = record(1, ["a", "b", "x"]), record(2, ["a", "b", "d"])
    now = Now(T0 + PERIOD, 0)
    store = MemoryStore(lambda: now.wall_ms)
    a = NodeCore(NodeSettings(node_id="a", quorum=2, max_skew_ms=250), [job()], first)
    a.set_trust(True)
    votes = [x for x in boot(a, now) if isinstance(x, Vote)]
    reply: Any = perform(store, "a", votes[0])
    assert reply[0].status == VoteStatus.RECORDED
    a.on_reply(votes[0], reply, now)
    d = NodeCore(NodeSettings(node_id="d", quorum=2, max_skew_ms=250), [job()], replaced)
    d.set_trust(True)
    dv = [x for x in boot(d, now) if isinstance(x, Vote)]
    dr: Any = perform(store, "d", dv[0])
    assert dr[0].status == VoteStatus.REFUSED and dr[0].epoch == 1
    d.on_reply(dv[0], dr, now)
    assert a.set_membership(replaced)
    again = [r for x in a.tick(now) if isinstance(x, Vote) for r in x.requests]
    assert [(r.fire_ms, r.epoch) for r in again] == [(T0 + PERIOD, 2)]
    res: Any = perform(store, "a", Vote(tuple(again)))
    assert res[0].status == VoteStatus.RECORDED
    now = Now(now.wall_ms + 125, 125)
    dv = [x for x in d.tick(now) if isinstance(x, Vote)]
    dr = perform(store, "d", dv[0])
    assert dr[0].status == VoteStatus.COMMITTED
    assert dict(store.slot("j", T0 + PERIOD).votes) == {"a": "h1", "d": "h1"}


def test_a_subscribed_member_votes_again_for_a_slot_it_forgot_parked_when_a_newer_record_comes() -> None:
    """As above, but a is subscribed to its notices: no notice came within the poll gap, so a
    forgot the slot (parked: it takes the silence to mean another voter has it). d joins after
    that. a must still bring epoch 2 with a vote for the slot, or d is refused to the deadline and
    the slot voted by a alone misses (the known limit of 2026-12-07, an operator's trigger with one
    node of three up): inside the deadline a votes again, and a + d commit it."""
    first, replaced = record(1, ["a", "b", "x"]), record(2, ["a", "b", "d"])
    now = Now(T0 + PERIOD, 0)
    store = MemoryStore(lambda: now.wall_ms)
    a = NodeCore(NodeSettings(node_id="a", quorum=2, max_skew_ms=250), [job()], first)
    a.set_trust(True)
    a.notices_subscribed()
    votes = [x for x in boot(a, now) if isinstance(x, Vote)]
    reply: Any = perform(store, "a", votes[0])
    assert reply[0].status == VoteStatus.RECORDED
    a.on_reply(votes[0], reply, now)
    gap = Now(now.wall_ms + 1_600, 1_600)  # past the poll gap (half the 3 s deadline): forgotten
    assert not [x for x in a.tick(gap) if not isinstance(x, Abstain)]
    assert T0 + PERIOD not in a._jobs["j"].slots
    assert a.set_membership(replaced)
    sent = [x for x in a.tick(gap) if isinstance(x, Vote)]
    assert [(r.fire_ms, r.epoch) for x in sent for r in x.requests] == [(T0 + PERIOD, 2)]
    res: Any = perform(store, "a", sent[0])
    assert res[0].status == VoteStatus.RECORDED
    a.on_reply(sent[0], res, gap)
    d = NodeCore(NodeSettings(node_id="d", quorum=2, max_skew_ms=250), [job()], replaced)
    d.set_trust(True)
    dv = [x for x in boot(d, Now(gap.wall_ms, 0)) if isinstance(x, Vote)]
    dr: Any = perform(store, "d", dv[0])
    assert dr[0].status == VoteStatus.COMMITTED
    assert dict(store.slot("j", T0 + PERIOD).votes) == {"a": "h1", "d": "h1"}


def test_a_job_firing_faster_than_its_deadline_strands_none_of_its_forgotten_slots() -> None:
    """a (subscribed) votes every second for a job with a 30 s deadline and forgets each slot
    4 s later, parked; it keeps only the latest to vote again. d, added by epoch 2, is refused
    for every slot in its window while the job is behind. The first vote a sends under epoch 2
    (a slot it awaits, the latest it forgot, or simply the job's next slot, due within the
    deadline of the earlier ones) brings the job the record, and d's retries of the earlier
    slots then count with a's first votes: no forgotten slot is left undecided. So only a job's
    latest slot needs keeping (protocol.md, "votes again for a slot it forgot")."""
    first, replaced = record(1, ["a", "b", "x"]), record(2, ["a", "b", "d"])
    period, t = 1_000, T0 + 20_000
    clock = [t]
    store = MemoryStore(lambda: clock[0])

    def at(ms: int) -> Now:
        clock[0] = t + ms
        return Now(t + ms, ms)

    def drive(node: NodeCore, out: list[Any], now: Now) -> list[tuple[int, VoteStatus]]:
        seen = []
        for x in out:
            if isinstance(x, Vote):
                reply: Any = perform(store, node.settings.node_id, x)
                seen += [(q.fire_ms, r.status) for q, r in zip(x.requests, reply, strict=True)]
                node.on_reply(x, reply, now)
        return seen

    def fast() -> CoreJob:
        return CoreJob(
            name="j", schedule=Every(period), spec_hash="h1", deadline_ms=30_000, timeout_ms=60_000
        )

    a = NodeCore(NodeSettings(node_id="a", quorum=2, max_skew_ms=250), [fast()], first)
    a.set_trust(True)
    a.notices_subscribed()
    drive(a, boot(a, at(0)), at(0))
    for ms in range(100, 8_000, 100):
        drive(a, a.tick(at(ms)), at(ms))
    forgotten = a._jobs["j"].parked_out_ms
    assert forgotten > t and forgotten not in a._jobs["j"].slots  # (and so are the ones before it)
    d = NodeCore(NodeSettings(node_id="d", quorum=2, max_skew_ms=250), [fast()], replaced)
    d.set_trust(True)
    d.notices_subscribed()
    refused = drive(d, boot(d, at(8_000)), at(8_000))
    window = sorted(f for f, _ in refused)
    assert window[0] < forgotten - 2 * period and {st for _, st in refused} == {VoteStatus.REFUSED}
    assert a.set_membership(replaced)
    drive(a, a.tick(at(8_000)), at(8_000))
    for ms in range(8_100, 12_000, 100):
        drive(d, d.tick(at(ms)), at(ms))
    undecided = [f for f in window if store.slot("j", f).state == SlotState.PROPOSED]
    assert undecided == []


def test_a_vote_sent_again_after_the_deadline_is_dropped_not_recorded_missed() -> None:
    # The first vote stands and the slot's poll accounts for it: a second record would say
    # "missed" for a slot another node may have run under a wider deadline.
    first, replaced = record(1, ["a", "b", "x"]), record(2, ["a", "b", "d"])
    now = Now(T0 + PERIOD, 0)
    store = MemoryStore(lambda: now.wall_ms)
    a = NodeCore(NodeSettings(node_id="a", quorum=2, max_skew_ms=250), [job()], first)
    a.set_trust(True)
    votes = [x for x in boot(a, now) if isinstance(x, Vote)]
    a.on_reply(votes[0], perform(store, "a", votes[0]), now)
    a.set_membership(replaced)
    late = Now(now.wall_ms + 3_001, 3_001)
    out = a.tick(late)
    assert not [
        x for x in out if isinstance(x, (Vote, RecordMissed)) and getattr(x, "fire_ms", 0) == T0 + PERIOD
    ]
    assert not [r for x in out if isinstance(x, Vote) for r in x.requests if r.fire_ms == T0 + PERIOD]


def test_refused_is_reported_once_per_epoch_not_per_slot() -> None:
    # The node holds the same epoch as the store but is not in it (an extra node whose record
    # names it, say): every slot is refused, reported once.
    mine = record(1, ["a", "b", "x"])
    d = driver({"a": ABC, "b": ABC, "c": ABC, "x": mine})
    d.run_until(T0 + 6 * PERIOD)
    x = d.nodes["x"]
    assert (
        len(x.refused) == 1 and x.refused[0].reason == "x is not a member of epoch 1: a, b, c (quorum 2 of 3)"
    )
    assert x.runs == [] and set(runs_per_slot(d).values()) == {1}
    missed = [e for e in ledger(d) if e.state == SlotState.MISSED]
    assert missed == [], missed


def test_set_membership_only_moves_forward_and_a_removed_node_abstains() -> None:
    core = NodeCore(NodeSettings(node_id="c", quorum=2), [job()], ABC)
    assert core.set_membership(ABC) is False and core.set_membership(record(1, ["a", "b"])) is False
    assert core.is_member
    core.set_trust(True)
    shrink = record(2, ["a", "b"], ["a", "b", "c"])
    assert core.set_membership(shrink) and core.is_member  # still in old while joint
    assert core.set_membership(record(3, ["a", "b"])) and not core.is_member
    actions = boot(core, Now(T0 + PERIOD, 0))
    assert not [a for a in actions if isinstance(a, Vote)]
    assert [a.reason for a in actions if isinstance(a, Abstain)] == [
        "c is not a member of epoch 3: a, b (quorum 2 of 2)"
    ]


def _grow_shrink_replace(seed: int) -> Driver:
    """3 -> 5 -> 3 (other ids) -> replace one, each through a joint record fed to every node
    one period apart (the nodes learn it at different ticks, as heartbeats would)."""
    abc = ABC
    steps = [
        record(2, ["a", "b", "c", "d", "e"], ["a", "b", "c"]),
        record(3, ["a", "b", "c", "d", "e"]),
        record(4, ["c", "d", "e"], ["a", "b", "c", "d", "e"]),
        record(5, ["c", "d", "e"]),
        record(6, ["c", "d", "f"], ["c", "d", "e"]),
        record(7, ["c", "d", "f"]),
    ]
    d = driver({n: abc for n in "abcdef"})
    d._rng.seed(seed)
    t = T0 + PERIOD // 2
    for rec in steps:
        order = sorted(d.nodes)
        d._rng.shuffle(order)
        for k, name in enumerate(order):
            d.run_until(t + k * 700)
            d.nodes[name].core.set_membership(rec)
        t += 2 * PERIOD
    d.run_until(t + 3 * PERIOD)
    return d


def test_grow_shrink_replace_runs_each_slot_once_with_a_quorum_of_every_configuration() -> None:
    for seed in range(6):
        d = _grow_shrink_replace(seed)
        assert d.executions and set(runs_per_slot(d).values()) == {1}, (seed, runs_per_slot(d))
        job_rec = d.store._jobs["j"].record
        assert job_rec is not None and job_rec.epoch == 7
        for e in ledger(d):
            if e.state == SlotState.SUCCEEDED:
                assert len(e.voters) >= 2, e
        assert not [e for e in ledger(d) if e.state == SlotState.MISSED], (seed, ledger(d))


def test_every_commit_holds_the_quorums_of_the_record_its_job_enforced() -> None:
    """The commit rule checked as it happens: wrap the model's vote and judge each commit."""
    for seed in range(4):
        d = _grow_shrink_replace_checked(seed)
        assert d.executions


def _grow_shrink_replace_checked(seed: int) -> Driver:
    checked: list[int] = []

    class Checked(MemoryStore):
        def _vote_one(self, req, now):  # type: ignore[no-untyped-def]
            res = super()._vote_one(req, now)
            if res.status == VoteStatus.COMMITTED and res.slot.state == SlotState.COMMITTED:
                rec = self._jobs[req.job].record
                assert rec is not None
                agreeing = [n for n, h in res.slot.votes if h == res.slot.spec_hash]
                assert rec.commits(agreeing), (rec, res.slot)
                checked.append(res.slot.fire_ms)
            return res

    original = Driver.__init__

    def init(self: Driver, *a: object, **k: object) -> None:
        original(self, *a, **k)  # type: ignore[arg-type]
        self.store = Checked(lambda: self.now_ms)

    Driver.__init__ = init  # type: ignore[method-assign]
    try:
        d = _grow_shrink_replace(seed)
    finally:
        Driver.__init__ = original  # type: ignore[method-assign]
    assert checked, "no commit was checked"
    return d


# -- item 4: a changed job definition during a rolling deploy ------------------------


def test_rolling_deploy_each_slot_runs_the_definition_a_quorum_agreed_on_once() -> None:
    """Three members, the new definition (h2) reaching them one by one: while two hold h1, h1
    runs; once two hold h2, h2 runs; a slot never runs once per definition."""
    recs = {n: ABC for n in "abc"}
    for new in ([], ["a"], ["a", "b"], ["a", "b", "c"]):
        d = driver(recs, {n: "h2" for n in new})
        d.run_until(T0 + 4 * PERIOD)
        assert set(runs_per_slot(d).values()) == {1}, (new, runs_per_slot(d))
        want = "h2" if len(new) >= 2 else "h1"
        for fire in runs_per_slot(d):
            slot = d.store.slot("j", fire)
            assert slot.spec_hash == want, (new, slot)
            assert dict(slot.votes)[slot.executor] == want, "the executor runs the agreed definition"


def test_rolling_deploy_split_without_a_quorum_for_either_definition_runs_nothing() -> None:
    """Four members, two on each definition: neither has 3 of 4, so slots end missed — no slot
    runs twice, none runs a definition fewer than a quorum agreed on."""
    four = record(1, ["a", "b", "c", "d"])
    d = driver({n: four for n in "abcd"}, {"a": "h2", "b": "h2"})
    d.run_until(T0 + 4 * PERIOD)
    assert d.executions == []
    states = {e.state for e in ledger(d)}
    assert states == {SlotState.MISSED}, ledger(d)
