"""Every rule of the simulator's checker, shown to fire — and its exemptions shown to be narrow.

Each rule gets a hand-built trace (a few records, the smallest story that
breaks it) on which exactly that rule reports; the same trace with the bug
taken out reports nothing, so the builder itself is sound. A checker that
went blind to a rule fails here. Planted protocol bugs that break accounting
and liveness are in tests/test_sim_mutants.py; a planted checker bug (a
lenient cut-off) is caught at the end of this file.
"""

from __future__ import annotations

import ast
import functools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sim
import sim.checker as checker
from sim.checker import check
from sim.mutants import CHECKER_MUTANTS, checker_mutant
from sim.scenario import DEFAULT_START_MS

T0 = DEFAULT_START_MS
FIRE = T0 + 60_000
"""The one due slot of ``DUE`` (every minute, a two-minute run: the second minute is the tail)."""
LATER = T0 + 120_000
"""A slot past the checked part of the run (rules about runs and votes, not accounting)."""
NODES = ("n1", "n2", "n3")

DUE = """
name = "rules"
nodes = 3
duration = "{duration}"
[settings]
wait_replicas = {wait}
[[jobs]]
name = "a"
every = "1m"
deadline = "5s"
run = "100ms..1s"
delivery = "{delivery}"
retries = {retries}
retry_backoff = "2s"
"""

Rec = dict[str, Any]


def _text(wait: int = 1, delivery: str = "at-most-once", retries: int = 0) -> str:
    # (Retries lengthen the tail by the retry bound: a longer run keeps FIRE the one due slot.)
    duration = "3m" if retries else "2m"
    return DUE.format(wait=wait, delivery=delivery, retries=retries, duration=duration)


def _trace(
    *records: Rec, wait: int = 1, delivery: str = "at-most-once", retries: int = 0, extra: str = ""
) -> list[Rec]:
    scenario = sim.dumps(sim.loads(_text(wait, delivery, retries) + extra))
    header = {"ev": "header", "t": T0, "scenario": scenario, "seed": 0, "strategy": "quorum"}
    return [header, *sorted(records, key=lambda r: r["t"])]


def health(t: int, ok: bool = True, why: str = "", nodes: tuple[str, ...] = NODES) -> list[Rec]:
    return [{"ev": "health", "t": t, "node": n, "ok": ok, "why": "" if ok else why} for n in nodes]


def vote(node: str, t: int, fire: int = FIRE, status: str = "recorded", st: int | None = None) -> Rec:
    slot = ["a", fire, status, 5_000, "h"]
    return {"ev": "vote", "t": t, "node": node, "st": t if st is None else st, "slots": [slot]}


def commit(t: int, token: int, executor: str, by: str = "vote", fire: int = FIRE, **kw: Any) -> Rec:
    votes = kw.pop("votes", [["n1", "h"], ["n2", "h"]])
    return {
        "ev": "commit", "t": t, "job": "a", "fire": fire, "token": token, "executor": executor,
        "votes": votes, "spec": "h", "st": kw.pop("st", t), "by": by,
    }  # fmt: skip


def slot_ev(ev: str, node: str, t: int, token: int, fire: int = FIRE, **kw: Any) -> Rec:
    return {"ev": ev, "t": t, "node": node, "job": "a", "fire": fire, "token": token, **kw}


def ledger(state: str, why: str, executor: str = "", token: int = 0, voters: tuple[str, ...] = ()) -> Rec:
    return {
        "ev": "ledger", "t": T0 + 120_000, "job": "a", "fire": FIRE, "state": state, "why": why,
        "executor": executor, "token": token, "voters": list(voters),
    }  # fmt: skip


def ran_ok(node: str = "n1", token: int = 1, at: int = FIRE, ok: bool = True) -> list[Rec]:
    """Slot ``at`` voted by n1 and n2, committed to ``node``, started, run and finished."""
    return [
        vote("n1", at + 1, fire=at),
        vote("n2", at + 2, fire=at, status="committed"),
        commit(at + 2, token, node, fire=at),
        slot_ev("start", node, at + 5, token, fire=at, ok=True, why="", st=at + 5, lease=at + 15_005),
        slot_ev("run", node, at + 6, token, fire=at),
        slot_ev("end", node, at + 500, token, fire=at, ok=ok, st=at + 500),
        slot_ev("finish", node, at + 510, token, fire=at, ok=True, why=""),
    ]


def kinds(records: list[Rec]) -> Counter[str]:
    return check(records).by_kind()


# -- the story every accounting test departs from ------------------------------------------------


def test_a_slot_that_ran_and_says_so_passes() -> None:
    rep = check(_trace(*health(T0), *ran_ok(), ledger("succeeded", "exit 0", "n1", 1, ("n1", "n2"))))
    assert rep.violations == [] and rep.due == 1 and rep.liveness_checked == 1 and rep.runs == 1


# -- the ledger against what ran -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("story", "entry", "kind"),
    [
        ("ran-ok", ledger("failed", "job failed", "n1", 1, ("n1", "n2")), checker.LEDGER_CONTRADICTS),
        ("ran-failed", ledger("succeeded", "exit 0", "n1", 1, ("n1", "n2")), checker.LEDGER_CONTRADICTS),
        ("ran-ok", ledger("succeeded", "exit 0", "n2", 1, ("n1", "n2")), checker.LEDGER_CONTRADICTS),
        ("ran-ok", ledger("succeeded", "exit 0", "n1", 7, ("n1", "n2")), checker.LEDGER_CONTRADICTS),
        ("ran-ok", ledger("missed", "deadline passed", "n1", 1, ("n1", "n2")), checker.LEDGER_CONTRADICTS),
        ("ran-ok", ledger("skipped", "overlap forbidden: slot 1 active", "", 0, ("n1", "n2")),
         checker.LEDGER_CONTRADICTS),
        ("voted", ledger("lost", "lease of n1 expired mid-run", "n1", 1, ("n1", "n2")),
         checker.LEDGER_CONTRADICTS),
        ("ran-ok", ledger("lost", "lease of n1 expired mid-run", "n1", 1, ("n1", "n2")),
         checker.LEDGER_CONTRADICTS),
        ("ran-ok", ledger("succeeded", "exit 0", "n1", 1, ("n1", "n2", "n3")), checker.STRAY_VOTER),
        ("early", ledger("succeeded", "exit 0", "n1", 1, ("n1", "n2")), checker.EARLY_OUTCOME),
        ("ran-failed", ledger("retrying", "attempt 1 of 2 failed", "n1", 1, ("n1", "n2")),
         checker.RETRY_UNENDED),
    ],
)  # fmt: skip
def test_a_ledger_entry_that_contradicts_what_ran_is_reported(story: str, entry: Rec, kind: str) -> None:
    records = health(T0)
    if story == "ran-ok":
        records += ran_ok()
    elif story == "ran-failed":
        records += ran_ok(ok=False)
    elif story == "voted":
        records += [vote("n1", FIRE + 1), vote("n2", FIRE + 2, status="committed"), commit(FIRE + 2, 1, "n1")]
        records += health(FIRE + 1_000, ok=False, why="partitioned", nodes=("n3",))  # (liveness not judged)
    elif story == "early":  # the finish was accepted before the job process ended
        records += [r if r["ev"] != "finish" else {**r, "t": FIRE + 100} for r in ran_ok()]
    retries = 1 if entry["state"] == "retrying" else 0
    assert kinds(_trace(*records, entry, retries=retries)) == {kind: 1}


def test_a_slot_that_ends_twice_is_reported() -> None:
    entries = [ledger("succeeded", "exit 0", "n1", 1, ("n1", "n2")), ledger("failed", "job failed", "n1", 1)]
    assert kinds(_trace(*health(T0), *ran_ok(), *entries)) == {
        checker.ENDED_TWICE: 1,
        checker.LEDGER_CONTRADICTS: 1,  # (the second entry also says the successful run failed)
    }


@pytest.mark.parametrize(("after", "kinds_"), [(2_100, {}), (40_000, {checker.RETRY_SLOW: 1})])
def test_a_retry_chain_ending_in_a_terminal_entry_within_its_bound_accounts_for_the_slot(
    after: int, kinds_: dict[str, int]
) -> None:
    """The retry starts ``after`` ms after the failed attempt: 2 s (its backoff) is in time; 40 s,
    with every voter healthy, outlasts the bound (28 s for one retry here)."""
    first = ran_ok(ok=False)
    at = FIRE + 510 + after
    retry = [
        commit(FIRE + 520, 2, "n2", by="retry", st=FIRE + 520),
        slot_ev("start", "n2", at, 2, ok=True, why="", st=at, lease=at + 15_000),
        slot_ev("run", "n2", at + 1, 2),
        slot_ev("end", "n2", at + 400, 2, ok=True, st=at + 400),
        slot_ev("finish", "n2", at + 410, 2, ok=True, why=""),
    ]
    entries = [
        ledger("retrying", "attempt 1 of 2 failed; retry after 2000 ms", "n1", 1, ("n1", "n2")),
        ledger("succeeded", "exit 0", "n2", 2, ("n1", "n2")),
    ]
    rep = check(_trace(*health(T0), *first, *retry, *entries, retries=1))
    assert rep.by_kind() == kinds_ and rep.retries == 1


# -- due slots ------------------------------------------------------------------------------------


def test_an_unaccounted_slot_some_node_could_vote_for_is_reported() -> None:
    # n3 changes health in the window (liveness is not judged), n1 and n2 stay healthy.
    records = [*health(T0), *health(FIRE + 1_000, ok=False, why="partitioned", nodes=("n3",))]
    assert kinds(_trace(*records)) == {checker.UNACCOUNTED: 1}


def test_an_unaccounted_slot_nobody_could_vote_for_is_reported_as_unvoted_not_cut_off() -> None:
    """Every clock untrusted to the end: the nodes still reach the store, so they must record the
    slot "missed: clock untrusted"; the end of the run cut nothing off."""
    rep = check(_trace(*health(T0, ok=False, why="untrusted")))
    assert rep.by_kind() == {checker.UNVOTED: 1} and rep.cut_off == 0


def test_an_unaccounted_slot_nobody_could_reach_the_store_to_record_is_cut_off() -> None:
    rep = check(_trace(*health(T0, ok=False, why="partitioned")))
    assert rep.violations == [] and rep.cut_off == 1 and rep.exempt == {checker.CUT_OFF: 1}


@pytest.mark.parametrize(("run_end", "cut_off"), [(FIRE + 20_000, True), (FIRE + 1_000, False)])
def test_a_slot_that_ran_is_cut_off_only_if_nobody_could_reach_the_store_once_its_run_ended(
    run_end: int, cut_off: bool
) -> None:
    """Every node is cut off from FIRE + 18.5 s to the end: 13.5 s after the deadline, more than
    the settle time. A run that ended inside the cut (its lease renewed past it) could not be
    finished: cut off. One that ended at FIRE + 1 s had 17.5 s to be: unaccounted."""
    run = [
        vote("n1", FIRE + 1),
        vote("n2", FIRE + 2, status="committed"),
        commit(FIRE + 2, 1, "n1"),
        slot_ev("start", "n1", FIRE + 5, 1, ok=True, why="", st=FIRE + 5, lease=FIRE + 15_005),
        slot_ev("run", "n1", FIRE + 6, 1),
        slot_ev("renew", "n1", FIRE + 10_000, 1, ok=True, why="", st=FIRE + 10_000, lease=FIRE + 25_000),
        slot_ev("end", "n1", run_end, 1, ok=True, st=run_end),
    ]
    cut = health(FIRE + 18_500, ok=False, why="partitioned")
    rep = check(_trace(*health(T0), *run, *cut))
    if cut_off:
        assert rep.violations == [] and rep.exempt == {checker.CUT_OFF: 1}
    else:
        assert rep.by_kind() == {checker.UNACCOUNTED: 1} and rep.cut_off == 0


def _cut(node: str, at: int, back: int | None = None) -> list[Rec]:
    """``node`` partitioned from ``at`` (to the end, or until ``back``)."""
    return health(at, ok=False, why="partitioned", nodes=(node,)) + (
        [] if back is None else health(back, nodes=(node,))
    )


@pytest.mark.parametrize(
    ("delivery", "ended_by", "faults", "cut_off"),
    [
        # n2 back 29 s before the end: short of 29.25 s; 30 s: long enough.
        ("at-least-once", "end", (("n1", FIRE + 400, None), ("n2", FIRE + 400, LATER - 29_000)), True),
        ("at-least-once", "end", (("n1", FIRE + 400, None), ("n2", FIRE + 400, LATER - 30_000)), False),
        # n1 healthy from its run's end to its lease's (14.5 s): it could have finished it.
        ("at-least-once", "end", (("n1", FIRE + 15_005, None), ("n2", FIRE + 400, None)), False),
        # ... not a run it killed, nor a start no run followed: nothing to finish.
        ("at-least-once", "kill", (("n1", FIRE + 15_005, None), ("n2", FIRE + 400, None)), True),
        ("at-least-once", "", (("n1", FIRE + 400, None), ("n2", FIRE + 400, None)), True),
        # n1 back for 20 s after its lease: too late to finish (the slot was handed on), too
        # short for a turn and a run.
        ("at-least-once", "end", (("n1", FIRE + 400, LATER - 20_000), ("n2", FIRE + 400, None)), True),
        # n2 healthy until 25 s after the lease ran out: 39.5 s from the run's end, but a voter's
        # turn comes only once the lease has run out.
        ("at-least-once", "end", (("n1", FIRE + 400, None), ("n2", FIRE + 40_000, None)), True),
        ("at-most-once", "end", (("n1", FIRE + 400, None), ("n2", FIRE + 400, None)), False),
    ],
)
def test_an_unfinished_at_least_once_run_is_cut_off_only_if_no_voter_could_run_it_again(
    delivery: str, ended_by: str, faults: tuple[tuple[str, int, int | None], ...], cut_off: bool
) -> None:
    """n1's start is accepted (lease to FIRE + 15 s) and its finish never lands. Under
    at-least-once only a voter (n1, n2) can end the slot now: the store hands it on once the lease
    runs out, so n3, healthy throughout but no voter, cannot (seed 639, sim/findings/README.md).
    Cut off unless a voter could reach the store, after the lease, for the settle time (13.25 s),
    both voters' turns (2 x 7.5 s) and a run (1 s): 29.25 s; or n1 could have finished its run
    within its lease. Under at-most-once any node's sweep ends it."""
    run = ran_ok(at=FIRE)[:4]  # the votes, the commit, the start
    if ended_by:
        run.append(slot_ev("run", "n1", FIRE + 6, 1))
        end = {"ok": True} if ended_by == "end" else {"why": "crashed"}
        run.append(slot_ev(ended_by, "n1", FIRE + 500, 1, st=FIRE + 500, **end))
    cuts = [r for node, at, back in faults for r in _cut(node, at, back)]
    rep = check(_trace(*health(T0), *run, *cuts, delivery=delivery))
    if cut_off:
        assert rep.violations == [] and rep.exempt == {checker.CUT_OFF: 1}
        return
    assert rep.by_kind() == {checker.UNACCOUNTED: 1} and rep.cut_off == 0
    assert rep.violations[0].detail.endswith("(voted by n1, n2)")


@pytest.mark.parametrize(("n3_cut_at", "cut_off"), [(FIRE + 19_000, True), (FIRE + 30_000, False)])
def test_a_start_no_run_followed_can_be_recorded_once_its_lease_ran_out(
    n3_cut_at: int, cut_off: bool
) -> None:
    """At-most-once: the store accepted n1's start (lease to FIRE + 15 s) and nothing ran (its
    reply was lost); n1 and n2 are cut off. Only a sweep once the lease ran out can end the slot
    (lost), not one at the deadline: n3, healthy 4 s past the lease, had too little time (the
    14 s past the deadline do not count); 15 s was enough."""
    cuts = _cut("n1", FIRE + 400) + _cut("n2", FIRE + 400) + _cut("n3", n3_cut_at)
    rep = check(_trace(*health(T0), *ran_ok(at=FIRE)[:4], *cuts))
    if cut_off:
        assert rep.violations == [] and rep.exempt == {checker.CUT_OFF: 1}
    else:
        assert rep.by_kind() == {checker.UNACCOUNTED: 1}


@pytest.mark.parametrize(("landed_at", "cut_off"), [(FIRE + 510, True), (FIRE - 10_000, False)])
def test_a_finish_whose_write_a_failover_lost_did_not_land(landed_at: int, cut_off: bool) -> None:
    """At-least-once, n1's finish was accepted, but a failover (with WAIT) lost the writes of the
    second around it: the store still has the slot running, so only a voter can end it, and
    both are cut off to the end. With the lost second elsewhere the finish landed: any node
    (n3) could have recorded the slot, so it is unaccounted."""
    run = [*ran_ok(at=FIRE)[:6], slot_ev("finish", "n1", FIRE + 510, 1, ok=True, why="")]
    failover = _failover(landed_at + 600, 1_000)
    cuts = _cut("n1", FIRE + 1_200) + _cut("n2", FIRE + 400)
    rep = check(_trace(*health(T0), *run, failover, *cuts, delivery="at-least-once"))
    if cut_off:
        assert rep.violations == [] and rep.exempt == {checker.CUT_OFF: 1}
    else:
        assert rep.by_kind() == {checker.UNACCOUNTED: 1}


@pytest.mark.parametrize(
    ("n2_back", "kinds_"), [(T0 + 150_000, {}), (T0 + 148_000, {checker.RETRY_UNENDED: 1})]
)
def test_a_due_retry_is_cut_off_only_if_no_voter_could_run_it(n2_back: int, kinds_: dict[str, int]) -> None:
    """n1's run failed and the retry went to n2; both voters are cut off from FIRE + 600 ms, n3
    (no voter) stays healthy. Only a voter can run the retry, so the slot counts as cut off
    unless n2 came back with the settle time, the backoff, both turns and a run to go (31.25 s):
    32 s before the end (3 min) it had them, 30 s before it did not."""
    retried = [
        *ran_ok(ok=False),
        commit(FIRE + 520, 2, "n2", by="retry", st=FIRE + 520),
        ledger("retrying", "attempt 1 of 2 failed; retry after 2000 ms", "n1", 1, ("n1", "n2")),
    ]
    faults = [
        *health(FIRE + 600, ok=False, why="partitioned", nodes=("n1", "n2")),
        *health(n2_back, nodes=("n2",)),
    ]
    rep = check(_trace(*health(T0), *retried, *faults, retries=1))
    assert rep.by_kind() == kinds_
    assert rep.exempt == ({} if kinds_ else {checker.CUT_OFF: 1})


@pytest.mark.parametrize("ran", [True, False])
def test_a_started_retry_whose_finish_never_landed_any_node_can_end(ran: bool) -> None:
    """The store accepted the retry's start (n2 ran it, or its reply was lost and nothing ran)
    and no finish landed: under at-most-once a sweep by any node ends it lost once its lease runs
    out, so n3, healthy throughout but no voter, could have: the chain never ended, not cut off
    (a due retry's voters-only rule does not apply)."""
    retried = [
        *ran_ok(ok=False),
        commit(FIRE + 520, 2, "n2", by="retry", st=FIRE + 520),
        ledger("retrying", "attempt 1 of 2 failed; retry after 2000 ms", "n1", 1, ("n1", "n2")),
        slot_ev("start", "n2", FIRE + 2_600, 2, ok=True, why="", st=FIRE + 2_600, lease=FIRE + 17_600),
    ]
    if ran:
        retried += [
            slot_ev("run", "n2", FIRE + 2_601, 2),
            slot_ev("end", "n2", FIRE + 3_000, 2, ok=True, st=FIRE + 3_000),
        ]
    faults = health(FIRE + 2_900, ok=False, why="partitioned", nodes=("n1", "n2"))
    rep = check(_trace(*health(T0), *retried, *faults, retries=1))
    assert rep.by_kind() == {checker.RETRY_UNENDED: 1} and rep.cut_off == 0


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        ("nothing", {checker.NEVER_SEEN: 1}),
        ("a commit", {checker.UNACCOUNTED: 1}),
        ("a decided slot", {checker.UNACCOUNTED: 1}),
        ("a late vote that ended a slot missed", {checker.UNACCOUNTED: 1}),
    ],
)
def test_a_slot_of_a_job_the_store_never_saw_forgotten_by_every_node_restarting_is_a_known_limit(
    before: str, expected: dict[str, int]
) -> None:
    """Once the store decided a slot of the job, a restart's catch-up counts from its mark: the
    limit no longer applies. A vote that ends a slot is such a decision (its reply the only
    record of it)."""
    boots = [{"ev": "boot", "t": FIRE + 10_000, "node": n, "incarnation": 2, "specs": {}} for n in NODES]
    earlier = FIRE - 60_000
    known: list[Rec] = {
        "nothing": [],
        "a commit": [
            vote("n1", earlier - 1, fire=earlier),
            vote("n2", earlier, fire=earlier, status="committed"),
            commit(earlier, 3, "n1", fire=earlier),
        ],
        "a decided slot": [KNOWN_JOB],
        "a late vote that ended a slot missed": [vote("n1", earlier + 5_000, fire=earlier, status="missed")],
    }[before]
    assert kinds(_trace(*health(T0), *FLICKER, *known, *boots)) == expected


# -- a reload that removes the job ----------------------------------------------------------------


FLICKER = [
    *health(FIRE + 1_000, ok=False, why="partitioned", nodes=("n2",)),
    *health(FIRE + 2_000, nodes=("n2",)),
]
"""n2 cut off for a second inside the slot's window: liveness does not judge the slot (these
stories are about accounting), and n2 can record once its window is over."""


KNOWN_JOB: Rec = {"ev": "decided", "t": T0 + 10, "job": "a", "fire": T0, "state": "missed"}
"""A slot before the run's first due one, decided: the store knew the job (no restart forgets it:
``NEVER_SEEN`` does not apply)."""


def removed(t: int, nodes: tuple[str, ...] = NODES, job: str = "a") -> list[Rec]:
    """A live reload at ``t`` takes ``job`` out of the config of ``nodes``."""
    return [
        {"ev": "reload", "t": t, "node": n, "specs": {}, "removed": [job], "changed": [], "gone": [job]}
        for n in nodes
    ]


@pytest.mark.parametrize(
    ("story", "expected"),
    [
        ("every node, before the slot", {}),
        ("two of three, before the slot", {checker.UNACCOUNTED: 1}),
        ("every node, but n1 voted first", {checker.UNACCOUNTED: 1}),
        ("every node, after they could have recorded it", {checker.UNACCOUNTED: 1}),
        ("every node, n3 down through the window and removed once back", {}),
        ("two of three, n3 down through the window, back after a later slot was decided", {}),
        (
            "two of three, n3 down through the window, back before a later slot was decided",
            {checker.UNACCOUNTED: 1},
        ),
        (
            "two of three, n3 down through the window, back before a later slot was decided, "
            "its catch-up read after",
            {},
        ),
        (
            "two of three, n3 down through the window, back before a later slot was decided, "
            "its catch-up read before",
            {checker.UNACCOUNTED: 1},
        ),
    ],
)
def test_a_slot_nobody_touched_is_exempt_only_if_every_node_lacked_the_job_before_it_could_record_it(
    story: str, expected: dict[str, int]
) -> None:
    """``JOB_REMOVED``: a node a reload took the job from neither votes for its slots nor records
    them; a node that had it, and could reach the store once the slot's window was over, owes it a
    record (its catch-up, if it was down); and a slot some node voted for is owed its end."""
    records: list[Rec] = [*health(T0), *FLICKER]
    if story == "every node, before the slot":
        records += removed(FIRE - 10_000)
    elif story == "two of three, before the slot":
        records += removed(FIRE - 10_000, ("n1", "n2"))
    elif story == "every node, but n1 voted first":
        records += [vote("n1", FIRE - 40), *removed(FIRE + 1_000)]
    elif story == "every node, after they could have recorded it":
        records += removed(FIRE + 30_000)
    elif story == "every node, n3 down through the window and removed once back":
        # (n3 is back after the window, its config already without the job)
        records += removed(FIRE - 10_000, ("n1", "n2"))
        records += health(FIRE - 20_000, ok=False, why="down", nodes=("n3",))
        records += [*removed(FIRE + 20_000, ("n3",)), *health(FIRE + 20_000, nodes=("n3",))]
    else:
        # Explorer seed 76003: n3 is back with the job after the window; its restart's catch-up
        # starts at the high-water mark, past the slot if a later one was decided before it.
        # Explorer seed 98304: what counts is when the store answered the boot's high-water read
        # (its catch-up starts at the marks of then), not the boot: a sweep decided a later slot
        # 2 ms after n3 booted, before its read reached the store.
        decided_at = FIRE + 15_000 if "after a later slot was decided" in story else FIRE + 25_000
        later: Rec = {"ev": "decided", "t": decided_at, "job": "a", "fire": FIRE + 10_000, "state": "missed"}
        boot = {"ev": "boot", "t": FIRE + 20_000, "node": "n3", "incarnation": 2, "specs": {}}
        records += [*removed(FIRE - 10_000, ("n1", "n2")), KNOWN_JOB, later, boot]
        if story.endswith("its catch-up read after"):
            records.append({"ev": "high_water", "t": decided_at + 2, "node": "n3"})
        elif story.endswith("its catch-up read before"):
            records.append({"ev": "high_water", "t": decided_at - 2, "node": "n3"})
        records += health(FIRE - 20_000, ok=False, why="down", nodes=("n3",))
        records += health(FIRE + 20_000, nodes=("n3",))
    rep = check(_trace(*records))
    assert rep.by_kind() == expected
    assert rep.exempt == ({checker.JOB_REMOVED: 1} if not expected else {})


@pytest.mark.parametrize(("behind", "expected"), [(NODES, {}), (("n3",), {checker.UNACCOUNTED: 1})])
def test_a_node_whose_clock_runs_behind_comes_to_record_a_slot_that_much_later(
    behind: tuple[str, ...], expected: dict[str, int]
) -> None:
    """Explorer seed 71193: a reload takes the job from every node 15 s after the fire time, 10 s
    after the deadline. With every clock 20 s behind, no node's clock had reached the deadline, so
    none could record the slot before it lacked the job: exempt. With n3's alone behind, n1 and
    n2 could, and owed it a record."""
    clock = f'\n[[faults]]\nkind = "clock_jump"\nat = "10s"\nnodes = {list(behind)}\nby = "-20s"\n'
    rep = check(_trace(*health(T0), *FLICKER, *removed(FIRE + 15_000), extra=clock.replace("'", '"')))
    assert rep.by_kind() == expected
    assert rep.exempt == ({checker.JOB_REMOVED: 1} if not expected else {})


@pytest.mark.parametrize(("by", "expected"), [("-40s", {}), ("", {checker.UNVOTED: 1})])
def test_a_slot_its_nodes_come_to_only_once_they_are_cut_off_is_cut_off(
    by: str, expected: dict[str, int]
) -> None:
    """Explorer seed 100095: every clock steps back (untrusted: nobody votes), and every node is
    cut off from the store 35 s after the slot's deadline, to the end. Their clocks 40 s behind,
    they come to record the slot only when already cut off: nobody could, it is cut off. With
    true clocks they had 35 s to record it and did not: a violation."""
    clock = f'\n[[faults]]\nkind = "clock_jump"\nat = "10s"\nnodes = {list(NODES)}\nby = "{by}"\n'
    records = [*health(T0), *health(T0 + 10_000, ok=False, why="untrusted")]
    records += health(FIRE + 40_000, ok=False, why="partitioned")
    # (retries=1 only for the 3-minute run: in 2 the clocks' end error leaves the slot unjudged.)
    rep = check(_trace(*records, KNOWN_JOB, retries=1, extra=clock.replace("'", '"') if by else ""))
    assert rep.by_kind() == expected
    assert rep.exempt == ({checker.CUT_OFF: 1} if not expected else {})


@pytest.mark.parametrize(
    ("removed_at", "expected"), [(FIRE - 10_000, {}), (FIRE + 2_000, {checker.LIVENESS: 1})]
)
def test_liveness_counts_only_the_nodes_that_had_the_job_when_they_would_vote(
    removed_at: int, expected: dict[str, int]
) -> None:
    """n1 and n2 lose the job: before the slot, n3 alone is left to vote and cannot commit it
    (exempt: a quorum only with the nodes that lacked it); two seconds after the fire time, they
    had voted already (or should have), and the slot must have run."""
    entry = ledger("missed", "deadline passed before quorum", voters=("n3",))
    rep = check(_trace(*health(T0), *removed(removed_at, ("n1", "n2")), vote("n3", FIRE - 40), entry))
    assert rep.by_kind() == expected
    assert rep.exempt == ({checker.JOB_REMOVED: 1} if not expected else {})


@pytest.mark.parametrize("restarted", [True, False])
def test_an_open_slot_of_a_job_every_node_removed_then_restarted_without_is_a_known_limit(
    restarted: bool,
) -> None:
    """n1 voted for the slot; a reload takes the job from every node; then every node restarts
    without it (``boot`` records carry the config read): nothing sweeps the job, and the slot never
    ends (``REMOVED_UNSWEPT``). With the processes that removed the job still up, their sweep owes
    it its end."""
    boots = [
        {"ev": "boot", "t": FIRE + 3_000, "node": n, "incarnation": 2, "specs": {}, "removed": ["a"]}
        for n in NODES
    ]
    seen = KNOWN_JOB
    records = [*health(T0), *FLICKER, seen, vote("n1", FIRE - 40), *removed(FIRE + 1_000)]
    records += boots if restarted else []
    assert kinds(_trace(*records)) == (
        {checker.REMOVED_UNSWEPT: 1} if restarted else {checker.UNACCOUNTED: 1}
    )


@pytest.mark.parametrize(
    ("story", "expected"),
    [
        ("restarted after a later commit", {checker.LOCAL_KILLED: 1}),
        ("not restarted", {checker.UNACCOUNTED: 1}),
        ("restarted, no later commit", {checker.UNACCOUNTED: 1}),
        ("restarted after a later commit, but n1 had voted", {checker.UNACCOUNTED: 1}),
        ("restarted after a late vote ended a later slot missed", {checker.LOCAL_KILLED: 1}),
        ("restarted after a vote ended a later slot of a paused job", {checker.LOCAL_KILLED: 1}),
    ],
)
def test_a_slot_only_run_locally_lost_to_a_restart_of_every_node_past_the_mark_is_a_known_limit(
    story: str, expected: dict[str, int]
) -> None:
    """Every node ran the slot locally (the store away for its window); a quorum then committed a
    later slot, raising the high-water mark past it; every node restarted before a record of it
    landed: no catch-up reaches it (``LOCAL_KILLED``). Without the restart, the nodes owe the
    record; without the later commit, the restarts' catch-up does; with a vote counted, the
    store has the slot and its sweep does."""
    local = [
        {"ev": "run_local", "t": FIRE + 5, "node": n, "job": "a", "fire": FIRE, "wall": FIRE} for n in NODES
    ]
    nxt = FIRE + 10_000  # (a later slot: a trigger's, say)
    later = [
        vote("n1", nxt - 1, fire=nxt),
        vote("n2", nxt, fire=nxt, status="committed"),
        commit(nxt, 7, "n1", fire=nxt),
    ]
    seen = KNOWN_JOB
    boots = [{"ev": "boot", "t": FIRE + 20_000, "node": n, "incarnation": 2, "specs": {}} for n in NODES]
    records: list[Rec] = [*health(T0), *FLICKER, seen, *local]
    if "vote ended" in story:
        records.append(vote("n1", nxt + 2_000, fire=nxt, status="missed" if "missed" in story else "skipped"))
    elif story != "restarted, no later commit":
        records += later
    if story != "not restarted":
        records += boots
    if story.endswith("n1 had voted"):
        records.append(vote("n1", FIRE - 40))
    assert kinds(_trace(*records)) == expected


# -- liveness --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "fires"),
    [
        (ledger("missed", "deadline passed before quorum", voters=("n1",)), True),
        (ledger("skipped", "skipped", voters=("n1", "n2")), True),
        (ledger("skipped", "overlap forbidden: slot 1700000000000 active", voters=("n1", "n2")), False),
        (ledger("skipped", "paused by ops: maintenance", voters=("n1", "n2")), False),
    ],
)
def test_a_slot_with_a_healthy_majority_throughout_must_run_or_be_skipped_for_a_reason(
    entry: Rec, fires: bool
) -> None:
    votes = [
        vote(n, FIRE + 1, status="skipped" if entry["state"] == "skipped" else "recorded")
        for n in entry["voters"]
    ]
    rep = check(_trace(*health(T0), *votes, entry))
    assert rep.by_kind() == ({checker.LIVENESS: 1} if fires else {}) and rep.liveness_checked == 1


@pytest.mark.parametrize(("at", "judged"), [("100s", 1), ("50s", 0)])
def test_liveness_looks_back_only_over_clock_faults_near_the_slot(at: str, judged: int) -> None:
    """n1's clock steps a minute ahead for 10 s: 50 s after the slot, that cannot have made any
    node act on it early, and the slot is judged; 10 s before it, the look-back grows by the
    minute and takes in the health change 50 s before the slot, so it is not (a look-back that
    added up every clock fault of the run judged neither)."""
    extra = f'[[faults]]\nkind = "clock_jump"\nat = "{at}"\nfor = "10s"\nby = "60s"\nnodes = ["n1"]\n'
    records = [*health(T0 + 10_000), *ran_ok(), ledger("succeeded", "exit 0", "n1", 1, ("n1", "n2"))]
    rep = check(_trace(*records, extra=extra))
    assert rep.violations == [] and rep.liveness_checked == judged


# -- one clock off to the end: the judged range and who counts --------------------------------------


def _stepped(by: str, at: str = "30s") -> str:
    return f'[[faults]]\nkind = "clock_jump"\nat = "{at}"\nby = "{by}"\nnodes = ["n1"]\n'


def _decided_by_n2_and_n3() -> list[Rec]:
    votes = [["n2", "h"], ["n3", "h"]]
    return [
        vote("n2", FIRE + 1),
        vote("n3", FIRE + 2, status="committed"),
        commit(FIRE + 2, 1, "n2", votes=votes),
        slot_ev("start", "n2", FIRE + 5, 1, ok=True, why="", st=FIRE + 5, lease=FIRE + 15_005),
        slot_ev("run", "n2", FIRE + 6, 1),
        slot_ev("end", "n2", FIRE + 500, 1, ok=True, st=FIRE + 500),
        slot_ev("finish", "n2", FIRE + 510, 1, ok=True, why=""),
        ledger("succeeded", "exit 0", "n2", 1, ("n2", "n3")),
    ]


@pytest.mark.parametrize(("by", "liveness"), [("-60s", 1), ("60s", 0)])
def test_one_node_stepped_off_for_good_leaves_the_slots_the_others_decide_judged(
    by: str, liveness: int
) -> None:
    """n1's clock steps a minute off at 30 s and stays there (a user audit: one node of five
    stepped back an hour judged no slot at all). The end-of-run tail shrinks by the error of the
    quorum-th best clock, not the worst, so the slot n2 and n3 decide is judged; n1 is held to
    nothing for it. Stepped back, n1 never handles it early, so the liveness look-back does not
    stretch back over its step; stepped ahead, it may have, and the slot is left unjudged."""
    records = [*health(T0), *health(T0 + 30_000, ok=False, why="clock off by 60000 ms", nodes=("n1",))]
    rep = check(_trace(*records, *_decided_by_n2_and_n3(), extra=_stepped(by)))
    assert rep.violations == [] and rep.due == 1 and rep.liveness_checked == liveness


def test_a_slot_only_a_node_whose_clock_runs_behind_past_the_end_could_record_is_cut_off() -> None:
    """n1's clock is a minute behind from 30 s on: it reads the slot's fire time only at the end
    of the run. n2 and n3 cannot reach the store. Nobody could record the slot in this run: cut
    off, not "nobody could vote" (n1, reaching the store, counted as one that could record it)."""
    records = [
        *health(T0, ok=False, why="partitioned", nodes=("n2", "n3")),
        *health(T0, nodes=("n1",)),
        *health(T0 + 30_000, ok=False, why="clock off by 60000 ms", nodes=("n1",)),
    ]
    rep = check(_trace(*records, extra=_stepped("-60s")))
    assert rep.violations == [] and rep.due == 1 and rep.exempt == {checker.CUT_OFF: 1}
    # (A node on time, reaching the store, must have recorded it.)
    assert check(_trace(*records)).by_kind() == {checker.UNVOTED: 1}


# -- failover exemptions: only slots with writes the failover lost -------------------------------


def _failover(t: int, lost_ms: int) -> Rec:
    return {
        "ev": "fault",
        "t": t,
        "kind": "store_failover",
        "phase": "begin",
        "nodes": [],
        "lost_ms": lost_ms,
    }


@pytest.mark.parametrize(
    ("vote_at", "kind"), [(FIRE + 1, checker.FAILOVER_LOSS), (FIRE - 40_000, checker.UNACCOUNTED)]
)
def test_without_wait_an_unaccounted_slot_is_a_failover_loss_only_if_it_had_writes_in_the_lost_window(
    vote_at: int, kind: str
) -> None:
    records = [*health(T0), *health(FIRE + 1_000, ok=False, why="partitioned", nodes=("n3",))]
    records += [vote("n1", vote_at, st=max(vote_at, FIRE - 250)), _failover(FIRE + 100, 1_000)]
    assert kinds(_trace(*records, wait=0)) == {kind: 1}


@pytest.mark.parametrize(
    ("vote_at", "kind"), [(FIRE + 1_500, checker.FAILOVER_STALL), (FIRE + 1, checker.LIVENESS)]
)
def test_a_slot_that_did_not_run_is_a_failover_stall_only_if_its_writes_fell_in_the_lost_window(
    vote_at: int, kind: str
) -> None:
    records = [*health(T0), vote("n1", vote_at), _failover(FIRE + 3_000, 2_000)]
    records.append(ledger("missed", "deadline passed before quorum", voters=("n1",)))
    assert kinds(_trace(*records)) == {kind: 1}


def test_a_run_repeated_after_a_failover_lost_its_start_is_the_no_wait_limit() -> None:
    records = [*ran_ok(at=LATER)[:5], _failover(LATER + 50, 100)]
    records += [
        commit(LATER + 6_000, 1, "n2", by="takeover", fire=LATER),
        slot_ev("run", "n2", LATER + 6_010, 1, fire=LATER),
    ]
    assert kinds(_trace(*records, wait=0)) == {checker.FAILOVER_LOSS: 1}


@pytest.mark.parametrize(("lost_from", "repicked"), [(LATER + 5_000, 0), (LATER + 6_500, 1)])
def test_no_repick_rule_is_judged_after_a_failover_lost_the_assignments(
    lost_from: int, repicked: int
) -> None:
    """Without WAIT a failover loses n2's takeover (its commit at LATER + 6 s), so the store, back
    to n1 alone assigned, hands n2 the slot again: no rule broken. With the commit outside the
    lost writes the store knew n2 had it, so n1 was the one waiting longer."""
    records = [
        *ran_ok(at=LATER)[:3],
        commit(LATER + 6_000, 2, "n2", by="takeover", fire=LATER),
        _failover(LATER + 7_000, LATER + 7_000 - lost_from),
        commit(LATER + 12_000, 3, "n2", by="takeover", fire=LATER),
    ]
    got = kinds(_trace(*records, wait=0))
    assert got["executor re-picked ahead of a voter that waited longer"] == repicked, got


# -- leases ----------------------------------------------------------------------------------------


def _outlived(pause_at: int | None) -> list[Rec]:
    records = [
        *ran_ok(at=LATER)[:5],
        slot_ev("end", "n1", LATER + 20000, 1, fire=LATER, ok=True, st=LATER + 20000),
    ]
    if pause_at is not None:
        records.append({"ev": "pause", "t": pause_at, "node": "n1", "why": "pause fault", "ms": 1_000})
    return _trace(*records, delivery="at-least-once")


def test_a_run_that_outlived_its_lease_is_reported_unless_its_node_was_paused_during_the_lease() -> None:
    assert kinds(_outlived(None)) == {checker.OUTLIVED_LEASE: 1}
    assert kinds(_outlived(LATER - 5_000)) == {checker.OUTLIVED_LEASE: 1}  # a pause before the lease
    rep = check(_outlived(LATER + 8_000))
    assert rep.violations == [] and rep.exempt[checker.LEASE_PAUSED] == 1


def test_a_run_started_after_its_lease_expired_is_reported() -> None:
    records = [*ran_ok(at=LATER)[:4], slot_ev("run", "n1", LATER + 16000, 1, fire=LATER)]
    assert kinds(_trace(*records)) == {checker.LATE_RUN: 1}


def _overlapping(a_ends: int, pause_at: int | None = None, overlap: str = "forbid") -> list[Rec]:
    """Slot LATER runs on n1 until ``a_ends``; the next slot, a minute on, starts on n2 at +6 ms."""
    nxt = LATER + 60_000
    records = [
        *ran_ok("n1", 1, at=LATER)[:5],
        slot_ev("end", "n1", a_ends, 1, fire=LATER, ok=True, st=a_ends),
        *ran_ok("n2", 2, at=nxt)[:5],
    ]
    if pause_at is not None:
        records.append({"ev": "pause", "t": pause_at, "node": "n1", "why": "pause fault", "ms": 1_000})
    return _trace(*records, extra=f'overlap = "{overlap}"\n')


def test_a_run_of_an_overlap_forbid_job_beside_another_slots_run_is_reported_unless_paused() -> None:
    nxt = LATER + 60_000
    assert kinds(_overlapping(nxt + 30_000)) == {checker.OVERLAPPED: 1}
    assert kinds(_overlapping(nxt + 30_000, pause_at=LATER - 5_000)) == {checker.OVERLAPPED: 1}  # before
    assert kinds(_overlapping(nxt - 1)) == {}  # the earlier run ended first
    assert kinds(_overlapping(nxt + 30_000, overlap="allow")) == {}
    rep = check(_overlapping(nxt + 30_000, pause_at=LATER + 20_000))  # paused during its lease
    assert rep.violations == [] and rep.exempt[checker.OVERLAP_PAUSED] == 1


@pytest.mark.parametrize(
    ("extra", "exempt"),
    [
        ([_failover(LATER + 30_000, 30_000)], True),  # the earlier slot's start lost with the writes
        ([_failover(LATER + 30_000, 1_000)], False),  # lost writes after them: the store knew
        ([{"ev": "reached", "t": LATER + 30_000, "what": "store restarted empty"}], True),
    ],
)
def test_an_overlap_after_the_store_forgot_the_earlier_run_is_exempt(extra: list[Rec], exempt: bool) -> None:
    records = [*_overlapping(LATER + 90_000)[1:], *extra]
    rep = check(_trace(*records, wait=0))
    if exempt:
        assert rep.by_kind() == {} and rep.exempt[checker.OVERLAP_LOST] == 1, rep.by_kind()
    else:
        assert rep.by_kind() == {checker.OVERLAPPED: 1}


# -- runs, tokens, retries ----------------------------------------------------------------------------


def test_a_second_run_and_a_stale_token_are_reported() -> None:
    again = [*ran_ok(at=LATER)[:5], slot_ev("run", "n1", LATER + 900, 1, fire=LATER)]
    assert kinds(_trace(*again)) == {"slot executed twice": 1}
    stale = [*ran_ok(at=LATER)[:3], commit(LATER + 4, 2, "n2", by="takeover", fire=LATER)]
    stale.append(slot_ev("run", "n1", LATER + 9, 1, fire=LATER))
    assert kinds(_trace(*stale)) == {"execution under a stale token": 1}


def _retried(
    token: int = 2, start_st: int = LATER + 3_000, end_first: bool = True, retries: int = 1
) -> list[Rec]:
    first = ran_ok(at=LATER, ok=False)[:5]
    if end_first:
        first.append(slot_ev("end", "n1", LATER + 500, 1, fire=LATER, ok=False, st=LATER + 500))
    retry = [
        commit(LATER + 510, token, "n2", by="retry", fire=LATER, st=LATER + 510),
        slot_ev(
            "start", "n2", start_st, token, fire=LATER, ok=True, why="", st=start_st, lease=start_st + 15_000
        ),
        slot_ev("run", "n2", start_st + 1, token, fire=LATER),
    ]
    return _trace(*first, *retry, retries=retries)


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        ({"start_st": LATER + 1_000}, "retry started before its backoff ended"),
        ({"end_first": False}, "two runs of a slot at once"),
        ({"retries": 0}, "more retries than max_retries"),
    ],
)
def test_retry_rules(change: dict[str, Any], kind: str) -> None:
    assert kinds(_retried()) == {}
    assert kinds(_retried(**change)) == {kind: 1}


def test_a_retry_under_a_token_no_higher_than_an_earlier_run_is_reported() -> None:
    records = [
        slot_ev("run", "n1", LATER + 6, 5, fire=LATER),
        slot_ev("end", "n1", LATER + 50, 5, fire=LATER, ok=False, st=0),
    ]
    records += [
        commit(LATER + 60, 4, "n2", by="retry", fire=LATER),
        slot_ev("run", "n2", LATER + 70, 4, fire=LATER),
    ]
    assert kinds(_trace(*records, retries=1)) == {"retry without a higher token": 1}


def test_a_takeover_handing_the_slot_back_to_its_executor_while_a_voter_never_had_it_is_reported() -> None:
    records = [*ran_ok(at=LATER)[:3], commit(LATER + 6000, 2, "n1", by="takeover", fire=LATER)]
    assert kinds(_trace(*records)) == {"executor re-picked while another voter was left": 1}


@pytest.mark.parametrize(("third", "fourth"), [("n1", "n2"), ("n2", "n1")])
def test_once_every_voter_had_the_slot_a_takeover_goes_to_the_one_waiting_longest(
    third: str, fourth: str
) -> None:
    """Committed to n1, taken over by n2, then again: n1's turn is the older one. Handing it to n2
    again (the store's old rule sent it back to the rendezvous winner every time) is reported."""
    records = [
        *ran_ok(at=LATER)[:3],
        commit(LATER + 6_000, 2, "n2", by="takeover", fire=LATER),
        commit(LATER + 12_000, 3, third, by="takeover", fire=LATER),
        commit(LATER + 18_000, 4, fourth, by="takeover", fire=LATER),
    ]
    expected = {} if third == "n1" else {"executor re-picked ahead of a voter that waited longer": 1}
    assert kinds(_trace(*records)) == expected


# -- votes ------------------------------------------------------------------------------------------


def test_vote_rules() -> None:
    assert kinds(_trace(commit(LATER + 1, 1, "n1", fire=LATER))) == {"commit without a majority": 1}
    assert kinds(_trace(vote("n1", LATER - 300, fire=LATER))) == {"vote counted before its window": 1}
    assert kinds(_trace(vote("n1", LATER + 5_001, fire=LATER))) == {"vote counted after its deadline": 1}
    untrusted = {"ev": "untrusted_vote", "t": LATER, "node": "n1", "why": "clock not checked yet"}
    assert kinds(_trace(untrusted)) == {"vote sent by an untrusted node": 1}
    assert kinds(_trace({"ev": "spin", "t": LATER, "node": "n1"})) == {checker.BUSY_LOOP: 1}
    why = "slot phase due -> running is not in the lifecycle table: expected due -> one of ... (slot 0)"
    illegal = {"ev": "illegal_step", "t": LATER, "node": "n1", "why": why}
    assert kinds(_trace(illegal)) == {checker.ILLEGAL_STEP: 1}


def test_local_run_rules() -> None:
    def local(t: int, wall: int) -> Rec:
        return {"ev": "run_local", "t": t, "node": "n1", "job": "a", "fire": LATER, "wall": wall}

    assert kinds(_trace(local(LATER, LATER - 1))) == {"local run before its fire time": 1}
    assert kinds(_trace(local(LATER, LATER), local(LATER + 5, LATER + 5))) == {
        "slot run locally twice on one node": 1
    }


# -- membership (issue 22) ----------------------------------------------------------------------------

MEMBERSHIP = '\n[[faults]]\nkind = "finish"\nat = "1m59s"\n'
"""A membership fault makes the scenario one that simulates membership (in a hand-built trace it
never acts; a fault at or past the end of the run is refused as one that never happens)."""
EPOCH1 = "1;3,2,n1,n2,n3"
JOINT = "2;3,2,n1,n2,n4;3,2,n1,n2,n3"
"""Replacing n3 by n4: while joint, a commit needs two of n1, n2, n4 and two of n1, n2, n3."""


def held(t: int, record: str) -> Rec:
    return {
        "ev": "membership",
        "t": t,
        "epoch": int(record.split(";")[0]),
        "record": record,
        "by": "op",
        "why": "",
    }


def joint_commit(
    voters: tuple[str, ...], mr: str = JOINT, fire: int = LATER, t: int = LATER + 2
) -> list[Rec]:
    votes = [vote(n, t - 1, fire=fire) for n in voters]
    return [*votes, {**commit(t, 1, voters[0], fire=fire, votes=[[n, "h"] for n in voters]), "mr": mr}]


@pytest.mark.parametrize(
    ("records", "fires"),
    [
        ((EPOCH1, JOINT, "3;3,2,n1,n2,n4"), False),  # a change and its finish
        ((EPOCH1, "2;3,2,n1,n2,n4"), True),  # n3 replaced by n4 at once: no joint phase
        ((EPOCH1, JOINT, "3;3,2,n1,n2,n3"), True),  # a "finish" that went back to the old members
        ((EPOCH1, "2;3,2,n1,n2,n4;2,2,n1,n2"), True),  # joint, but its old half is not epoch 1's
        (("1;3,2,n1", "2;3,2,n1,n2", "3;3,2,n1,n2,n3"), False),  # "size = 3": seats filled
        ((EPOCH1, "1;3,2,n1,n2,n4"), False),  # back to epoch 1 (a store restarted empty): not judged
    ],
)
def test_the_namespaces_record_changes_members_only_through_a_joint_configuration(
    records: tuple[str, ...], fires: bool
) -> None:
    """A mutation audit made ``members`` changes skip the joint phase, and the finish not wait
    for the new members; every commit still matched a record the cluster held, so the checker
    passed it. The sequence of namespace records now must step through joint configurations."""
    history = [held(T0 + 1_000 * i, rec) for i, rec in enumerate(records)]
    found = kinds(_trace(*history, extra=MEMBERSHIP))
    assert found.get(checker.MEMBERSHIP_UNJOINT, 0) == (1 if fires else 0), found


@pytest.mark.parametrize(
    ("beats", "fires"),
    [
        ((("n1", 2, 0), ("n2", 2, 0), ("n4", 2, 0)), False),  # every new member holds epoch 2
        ((("n1", 2, 0), ("n2", 2, 0)), True),  # n4 never heartbeated under it
        ((("n1", 2, 0), ("n2", 2, 0), ("n4", 1, 0)), True),  # n4 still on epoch 1
        ((("n1", 2, 0), ("n2", 2, 0), ("n4", 2, -5_000)), True),  # n4's entry expired before it
    ],
)
def test_a_finish_waits_for_every_new_member_to_hold_the_joint_epoch(
    beats: tuple[tuple[str, int, int], ...], fires: bool
) -> None:
    """The store ends a joint configuration only once every member of its new half heartbeated
    under it (a live entry): a mutation audit dropped that wait and the checker passed it."""
    finish_at = T0 + 10_000
    history = [
        {**held(T0, EPOCH1), "st": T0},
        {**held(T0 + 1_000, JOINT), "st": T0 + 1_000},
        *[
            {
                "ev": "hb",
                "t": finish_at - 500 + ago,
                "node": n,
                "epoch": e,
                "st": finish_at - 500 + ago,
                "ttl": 3_000,
            }
            for n, e, ago in beats
        ],
        {**held(finish_at, "3;3,2,n1,n2,n4"), "st": finish_at},
    ]
    found = kinds(_trace(*history, extra=MEMBERSHIP))
    assert found.get(checker.MEMBERSHIP_UNJOINT, 0) == (1 if fires else 0), found


def test_membership_rules() -> None:
    history = (held(T0, EPOCH1), held(T0 + 90_000, JOINT))
    # A majority of the new set alone (n1, n4) is not a majority of the old one (n1 only).
    assert kinds(_trace(*history, *joint_commit(("n1", "n4")), extra=MEMBERSHIP)) == {
        checker.MEMBERSHIP_QUORUM: 1
    }
    assert kinds(_trace(*history, *joint_commit(("n1", "n2")), extra=MEMBERSHIP)) == {}
    # A record the cluster never held under its epoch (a vote's forged record adopted by a job).
    forged = "2;4,3,n1,n2,n3,n4"
    assert kinds(_trace(*history, *joint_commit(("n1", "n2", "n4"), forged), extra=MEMBERSHIP)) == {
        checker.MEMBERSHIP_FOREIGN: 1
    }
    # A job whose record goes back to an older epoch.
    back = [*joint_commit(("n1", "n2")), *joint_commit(("n1", "n2"), EPOCH1, LATER + 10_000, LATER + 10_002)]
    assert kinds(_trace(*history, *back, extra=MEMBERSHIP)) == {checker.MEMBERSHIP_BACKWARD: 1}


def test_a_slot_and_its_ledger_entry_must_name_the_record_that_decided_it() -> None:
    """``history`` tells which voters counted from the epoch the slot names (store/voters.py):
    the checker holds the store to it. A vote's commit must name the record the job enforced, a
    slot skipped for overlap after its quorum too, a missed one none; the ledger entry must copy
    what its slot's deciding step named."""
    history = (held(T0, EPOCH1), held(T0 + 90_000, JOINT))

    def entry(epoch: int) -> Rec:
        return {**ledger("missed", "x", voters=("n1", "n2")), "epoch": epoch}

    def committed(ep: int) -> list[Rec]:
        *votes, c = joint_commit(("n1", "n2"))
        return [*votes, {**c, "ep": ep}]

    def decided(why: str, ep: int) -> Rec:
        return {
            "ev": "decided", "t": LATER + 2, "job": "a", "fire": LATER, "state": "skipped", "why": why,
            "by": "vote", "mr": JOINT, "ep": ep,
        }  # fmt: skip

    def found(*records: Rec) -> int:
        return kinds(_trace(*history, *records, extra=MEMBERSHIP)).get(checker.DECIDING_EPOCH, 0)

    assert found(*committed(2)) == 0
    assert found(*committed(1)) == 1  # names the job's older record
    assert found(*committed(0)) == 1
    assert found(decided("overlap forbidden: slot 1 active", 2)) == 0
    assert found(decided("overlap forbidden: slot 1 active", 0)) == 1
    assert found(decided("paused by op", 0)) == 0
    assert found(decided("paused by op", 2)) == 1  # no quorum decided a paused slot
    # The ledger entry (of slot FIRE, which no vote decided here) must say 0.
    assert found(entry(0)) == 0
    assert found(entry(2)) == 1


N2_LEAVING = "2;3,2,n1,n3,n4;3,2,n1,n2,n3"
N2_LEFT = "3;3,2,n1,n3,n4"
"""Replacing n2 by n4: while joint, n2 is still a member (of the old set); then it is not."""


@pytest.mark.parametrize(
    ("mr", "fires"), [(N2_LEFT, False), (N2_LEAVING, True), (EPOCH1, True), (None, True)]
)
def test_a_voter_the_membership_removed_is_not_left_for_a_retry_or_takeover(
    mr: str | None, fires: bool
) -> None:
    """n1 and n2 voted, n1 ran; n2 then left the membership. The store hands a slot only to a
    member of the record it enforces for the job (traced as the commit's ``mr``), so going back
    to n1 is right once n2 has left (seeds 90216, 90479, 90695, 90830) — and still a violation
    while n2 is a member, also of a joint record's old half, or on a job without a record."""
    takeover = commit(LATER + 6_000, 2, "n1", by="takeover", fire=LATER)
    if mr is not None:
        takeover["mr"] = mr
    history = (held(T0, EPOCH1), held(T0 + 90_000, N2_LEAVING), held(T0 + 100_000, N2_LEFT))
    records = [*history, *ran_ok(at=LATER)[:3], takeover]
    expected = {"executor re-picked while another voter was left": 1} if fires else {}
    assert kinds(_trace(*records, extra=MEMBERSHIP)) == expected


@pytest.mark.parametrize(
    ("executor", "mr", "fires"),
    [("n3", None, True), ("n2", None, False), ("n2", N2_LEFT, True), ("n2", N2_LEAVING, False)],
)
def test_a_slot_handed_to_a_node_that_was_not_an_agreeing_member_voter_is_reported(
    executor: str, mr: str | None, fires: bool
) -> None:
    """n1 and n2 voted, n1 ran. A takeover may go to n2 (a voter), never to n3 (no vote), nor to
    n2 once the membership removed it (members of the record the job enforced, traced as ``mr``).
    A mutation audit made the store's pick skip the membership filter and only the store's own
    tests saw it."""
    takeover = commit(LATER + 6_000, 2, executor, by="takeover", fire=LATER)
    if mr is not None:
        takeover["mr"] = mr
    history = (held(T0, EPOCH1), held(T0 + 90_000, N2_LEAVING), held(T0 + 100_000, N2_LEFT))
    records = [*history, *ran_ok(at=LATER)[:3], takeover]
    found = kinds(_trace(*records, extra=MEMBERSHIP))
    assert found.get(checker.NOT_ELIGIBLE, 0) == (1 if fires else 0), found


@pytest.mark.parametrize(("st", "fires"), [(LATER - 1, True), (LATER, False), (LATER + 3, False)])
def test_a_start_folded_into_a_commit_before_the_fire_time_is_reported(st: int, fires: bool) -> None:
    """The store folds the executor's start into its committing vote only once the fire time has
    come by its own clock (``st``); a mutation audit dropped that condition and no rule saw the
    runs start up to 49 ms early (a start a node sends is timed by its clock, within max_skew)."""
    records = [*ran_ok(at=LATER)[:2], {**commit(LATER + 2, 1, "n1", fire=LATER, st=st), "folded": True}]
    found = kinds(_trace(*records))
    assert found.get(checker.STARTED_EARLY, 0) == (1 if fires else 0), found


def _but_shorthand(rep: checker.Report) -> dict[str, int]:
    """The report's kinds but the structural one: these histories go from epoch to epoch without
    the joint records between (shorthand for a change and its finish), which
    ``MEMBERSHIP_UNJOINT`` reports, each once; it is not the rule under test here."""
    kinds = dict(rep.by_kind())
    assert kinds.pop(checker.MEMBERSHIP_UNJOINT, 0) == 2, rep.summary()
    return kinds


@pytest.mark.parametrize(
    ("stale_at", "judged"), [(T0 + 20_000, 0), (T0 + 40_000, 1), (T0 + 5_000, 1), (None, 1)]
)
def test_liveness_counts_no_member_that_froze_on_a_record_without_it(
    stale_at: int | None, judged: int
) -> None:
    """n3 left (epoch 2) and came back (epoch 3); n2 is cut off, n1 and n3 are healthy: a quorum
    of epoch 3, so the slot must run. But if n3 stopped learning records (a ``stale_config``
    fault) while it held epoch 2, it abstains as a non-member of it and never learns epoch 3: it
    is no healthy voter and the slot is not judged (seed 90218). Frozen on epoch 3, or on epoch 1
    (a member: it votes, the refusal teaches it epoch 3, it votes again; seed 90501), or never
    frozen, n3 is a voter and the missed slot is reported."""
    records = [
        held(T0, EPOCH1),
        held(T0 + 15_000, "2;2,2,n1,n2"),
        held(T0 + 30_000, "3;3,2,n1,n2,n3"),
        *health(T0),
        *health(T0 + 1_000, ok=False, why="partitioned", nodes=("n2",)),
        vote("n1", FIRE + 1),
        ledger("missed", "no quorum before the deadline (n3 abstained)", voters=("n1",)),
    ]
    if stale_at is not None:
        records.append(
            {"ev": "fault", "t": stale_at, "kind": "stale_config", "phase": "begin", "nodes": ["n3"]}
        )
    rep = check(_trace(*records, extra=MEMBERSHIP))
    assert _but_shorthand(rep) == ({checker.LIVENESS: 1} if judged else {}) and rep.liveness_checked == judged


def test_a_refusal_or_a_restart_teaches_a_frozen_node_the_record() -> None:
    """n3, frozen on epoch 2 (without it), learns epoch 3 from a refused vote's reply or from a
    restart (it reads the store's record): from then on it is a voter again."""
    base = [
        held(T0, EPOCH1),
        held(T0 + 15_000, "2;2,2,n1,n2"),
        held(T0 + 30_000, "3;3,2,n1,n2,n3"),
        *health(T0),
        *health(T0 + 1_000, ok=False, why="partitioned", nodes=("n2",)),
        {"ev": "fault", "t": T0 + 20_000, "kind": "stale_config", "phase": "begin", "nodes": ["n3"]},
        vote("n1", FIRE + 1),
        ledger("missed", "no quorum before the deadline", voters=("n1",)),
    ]
    refused = {
        "ev": "refused", "t": T0 + 45_000, "node": "n3", "job": "a", "fire": T0 + 45_000,
        "epoch": 2, "store_epoch": 3, "why": "n3 votes with membership epoch 2, the job enforces epoch 3",
    }  # fmt: skip
    boot = {"ev": "boot", "t": T0 + 45_000, "node": "n3", "incarnation": 2, "specs": {}}
    for taught in (refused, boot):
        rep = check(_trace(*base, taught, extra=MEMBERSHIP))
        assert _but_shorthand(rep) == {checker.LIVENESS: 1} and rep.liveness_checked == 1


# -- every rule is covered above ---------------------------------------------------------------------

COVERED = {
    checker.LEDGER_CONTRADICTS, checker.STRAY_VOTER, checker.EARLY_OUTCOME, checker.RETRY_UNENDED,
    checker.ENDED_TWICE, checker.RETRY_SLOW, checker.UNACCOUNTED, checker.UNVOTED,
    checker.NEVER_SEEN, checker.LIVENESS, checker.REMOVED_UNSWEPT, checker.LOCAL_KILLED,
    checker.FAILOVER_LOSS, checker.FAILOVER_STALL, checker.OUTLIVED_LEASE, checker.LATE_RUN,
    checker.BUSY_LOOP, checker.ILLEGAL_STEP, "slot executed twice", "execution under a stale token",
    "retry started before its backoff ended", "two runs of a slot at once", "more retries than max_retries",
    "retry without a higher token", "executor re-picked while another voter was left",
    "executor re-picked ahead of a voter that waited longer",
    "commit without a majority", "vote counted before its window", "vote counted after its deadline",
    "vote sent by an untrusted node", "local run before its fire time", "slot run locally twice on one node",
    checker.MEMBERSHIP_QUORUM, checker.MEMBERSHIP_FOREIGN, checker.MEMBERSHIP_BACKWARD,
    checker.NOT_ELIGIBLE, checker.STARTED_EARLY, checker.MEMBERSHIP_UNJOINT, checker.OVERLAPPED,
    checker.DECIDING_EPOCH,
}  # fmt: skip


def _rules_in_the_checker() -> set[str]:
    """Every violation kind sim/checker.py can report: the first argument of each ``Violation(...)``
    (a literal or a constant), and the first of each ``(KIND, detail)`` pair the ledger rules
    collect before making them violations."""
    tree = ast.parse(Path(checker.__file__).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Violation":
            first = node.args[0]
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2:
            first = node.elts[0]
        else:
            continue
        if isinstance(first, ast.Constant) and isinstance(node, ast.Call):
            found.add(first.value)
        elif isinstance(first, ast.Name) and first.id.isupper():
            value = getattr(checker, first.id)
            if isinstance(value, str):
                found.add(value)
    return found


def test_every_rule_of_the_checker_has_a_test_that_makes_it_fire() -> None:
    rules = _rules_in_the_checker()
    assert {checker.ENDED_TWICE, checker.RETRY_SLOW, checker.LIVENESS} <= rules  # (the scan sees all forms)
    assert rules <= COVERED, rules - COVERED


# -- a planted checker bug is caught -----------------------------------------------------------------

UNTRUSTED_TO_THE_END = sim.Scenario(
    name="untrusted-to-the-end",
    nodes=3,
    duration_ms=300_000,
    jobs=(sim.JobDef(name="job0", every_ms=2_000, deadline_ms=1_000, run_ms=(100, 200)),),
    faults=(sim.Fault(kind="clock_jump", at_ms=120_000, by_ms=30_000, nodes=NODES),),
)


@functools.cache
def _untrusted_runs() -> tuple[sim.RunResult, sim.RunResult]:
    return sim.run(UNTRUSTED_TO_THE_END, 0), sim.run(UNTRUSTED_TO_THE_END, 0, mutant="never-record-missed")


def _untrusted_slots_are_accounted_for_and_never_cut_off() -> None:
    """Every clock steps 30 s ahead for good at minute 2: the nodes reach the store but never trust
    their clocks again. The real protocol records each slot "missed" (abstained); a core that
    never records a missed slot leaves them unaccounted, and the checker must say so."""
    real, broken = _untrusted_runs()
    report = check(real.trace.records, UNTRUSTED_TO_THE_END)
    assert report.violations == [] and report.cut_off == 0
    abstained = [r for r in real.trace.records if r["ev"] == "ledger" and "abstained" in r["why"]]
    assert len(abstained) > 40
    report = check(broken.trace.records, UNTRUSTED_TO_THE_END)
    assert report.by_kind()[checker.UNVOTED] > 40 and report.cut_off == 0


def test_slots_of_nodes_with_untrusted_clocks_are_never_cut_off() -> None:
    _untrusted_slots_are_accounted_for_and_never_cut_off()


@pytest.mark.parametrize("name", sorted(CHECKER_MUTANTS))
def test_a_lenient_cut_off_planted_in_the_checker_is_caught(name: str) -> None:
    with checker_mutant(name), pytest.raises(AssertionError):
        _untrusted_slots_are_accounted_for_and_never_cut_off()
    _untrusted_slots_are_accounted_for_and_never_cut_off()  # (and the real checker is back)


def test_the_tail_grows_by_the_retry_bound() -> None:
    """A slot due so late that its retries could not have ended by the end of the run is not judged:
    the tail left at the end grows, per retry, by the backoff, a start timeout, a run, a lease and
    two sweep gaps."""
    plain = sim.loads(_text())
    retried = sim.loads(_text(retries=1))
    s = plain.settings
    gap = checker.max_sweep_gap(s.sweep_ms, s.start_timeout_ms)
    per_retry = 2_000 + s.start_timeout_ms + 1_000 + s.lease_ms + 2 * gap
    assert checker._tail_ms(retried, retried.jobs[0]) - checker._tail_ms(plain, plain.jobs[0]) == per_retry
