"""The checker: reads a trace and says what went wrong, and what dangerous states were reached.

It proves, for the run it reads (not for all runs):

* **no slot executed twice** — every ``run`` record is a side effect; for an
  ``at-most-once`` job (and for every job under the baseline strategies) a
  second ``run`` of the same slot fails the run. An ``at-least-once`` job
  may run again only with a token higher than every earlier run's, i.e.
  after the store fenced the earlier executor out by a takeover;
* **the members change only through joint configurations** — each namespace
  record one epoch after another is a joint one whose old half is the
  members before it, the finish of one (its current half kept) once every
  member of that half held the joint epoch by a live heartbeat (traced as
  ``hb`` while a change is joint), or an open seat of "size = N" filled
  (``MEMBERSHIP_UNJOINT``); a record that went back or skipped ahead (lost
  writes, a store restarted empty) is not judged so;
* **the store hands a slot only to whom it may** — every commit, retry and
  takeover names an executor among the slot's voters that agreed on the
  committed spec and are members (current or, while joint, old) of the
  record the job enforced at that commit (``NOT_ELIGIBLE``); and a start
  folded into a commit happens at or after the fire time by the store's
  clock (``STARTED_EARLY``; a start a node sends is timed by its own clock,
  within ``max_skew``, and not judged so);
* **no execution under a stale token** — a ``run`` whose token is lower than
  one the store already committed for that slot;
* **commits are majority decisions inside the window** — every commit has at
  least ``Q`` voters agreeing on the committed spec hash (``Q`` computed from
  the scenario's cluster size, not from what nodes were told), and every
  vote the store counted arrived, by store time, no earlier than
  ``fire - max_skew`` and no later than ``fire + deadline``;
* **commits have a quorum of every configuration current at the commit** —
  in scenarios that simulate membership (issue 22), every commit has
  agreeing voters that hold a quorum of the job's current configuration and,
  while the job's record is joint, of its old one too; "current" is the
  record the store enforced for that job at the commit (traced with it),
  which must be the record the cluster held under that epoch (a traced
  ``membership`` record) and never older than one the job enforced before
  (docs/simulator.md § Membership says why this is the right notion);
* **every due slot is accounted for** — each fire time of each job between
  the start and the end of the run (less a tail long enough for a slot and
  its retries to finish) has a terminal entry in the store's final ledger
  (``retrying`` is not terminal: a retry chain must end);
* **the ledger agrees with what ran** — ``succeeded``/``failed`` name a run
  of that token by that executor that ended that way, recorded after it
  ended; ``missed``/``skipped`` slots never ran; ``lost`` names a start the
  store accepted and no finish it accepted; every voter named voted; a slot
  ends once;
* **no run outlives its lease** — an ``at-least-once`` run (the delivery
  under which the store hands an expired lease to another node) ends, or is
  killed, no later by store time than the lease the store last granted it
  (on its start or an accepted renew); the core kills it ``lease_margin``
  before then by its own clock. A run whose node was paused meanwhile is
  exempt (a documented limit: a paused process cannot be stopped), as is
  one whose last lease was granted in writes a failover lost;
* **overlap ``forbid`` holds** — no run of an ``overlap = "forbid"`` job
  begins while a run of another of its slots is still going (``OVERLAPPED``):
  the store commits such a slot only while no other is committed or
  running, and the executor stops a run before its lease ends in the store
  (after which the store ends the slot). Exempt: an earlier run whose node
  was paused during its lease, and slots with writes a failover or a store
  restarted empty lost;
* **liveness** — a due slot whose whole window (from ``max_skew + sweep``
  plus the clock error the clock faults near the slot can cause, to its
  deadline) saw at least ``Q`` healthy nodes (up, unpaused, linked,
  trusted, clock within ``max_skew/2``, store up) and no node change
  health, ran (or was skipped for a pause or by the overlap policy). With
  membership, the healthy nodes counted are members of each configuration
  in force, a node frozen by a ``stale_config`` fault only while every
  record it may hold has it (else it abstains as a non-member);
* **a reload changes what is due, not what ran** — a live reload that takes
  a job out of a node's config (``reload`` with ``remove``) leaves that node
  out of the job's slots from then on: liveness counts only the healthy
  nodes that had the job when they would vote, and a slot no store call
  touched and nobody ran is exempt from accounting only if every node
  lacked the job at some time between the slot's window and the node's
  first chance to record it, or had no chance at all (its first came with a
  restart whose catch-up starts past the slot, a later one decided before
  it), and one node at least lacked it (``JOB_REMOVED``). A slot any node voted for,
  wrote or ran must still end in the ledger ("what is already voted,
  committed or running finishes", core/jobswap.py), unless every node
  restarted without the job before it ended (``REMOVED_UNSWEPT``, a known
  limit);
* **a retry or takeover goes to a voter not tried yet** when one is left:
  an agreeing voter that is a member of the record the store enforced for
  the job at that commit (a voter the membership removed is not "left");
  when every one has had it, to the one whose last turn is the oldest.

Every exemption is counted under its own name (``Report.exempt`` and the
known limits' violation kinds), never merged, and is as narrow as the
physics: ``cut off`` only for slots no node could *reach the store* to
record (an untrusted clock can, and must record "missed: clock
untrusted"), and for slots only a voter can end (a due retry, an
unfinished at-least-once start) no voter long enough for its turn and a
run; the failover limits only for slots that had a write executed in the
writes the failover lost; a paused node's lease exemption only for a pause
that overlapped that lease.

It cannot prove anything about runs it did not see, about slots whose
window saw a health change (they are exempt from liveness), or about the
job's own downstream writes beyond the token it was handed.
"""

from __future__ import annotations

import bisect
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from quorum_cron.core.model import Configuration, Delivery, MembershipRecord, Overlap
from quorum_cron.core.retries import MAX_RETRY_DOUBLINGS
from quorum_cron.core.timers import max_sweep_gap
from sim.quorum import make_schedule
from sim.scenario import JobDef, Scenario, loads
from sim.trace import Record

__all__ = [
    "BUSY_LOOP",
    "CUT_OFF",
    "DECIDING_EPOCH",
    "EARLY_OUTCOME",
    "ENDED_TWICE",
    "FAILOVER_LOSS",
    "FAILOVER_STALL",
    "FIRST_RECORD_FORGED",
    "ILLEGAL_STEP",
    "JOB_REMOVED",
    "KNOWN_LIMITS",
    "LATE_RUN",
    "LEASE_LOST",
    "LEASE_PAUSED",
    "LEDGER_CONTRADICTS",
    "LIVENESS",
    "LOCAL_KILLED",
    "MEMBERSHIP_BACKWARD",
    "MEMBERSHIP_FOREIGN",
    "MEMBERSHIP_QUORUM",
    "MEMBERSHIP_SETTLING",
    "MEMBERSHIP_UNJOINT",
    "NEVER_SEEN",
    "NOT_ELIGIBLE",
    "OUTLIVED_LEASE",
    "OVERLAPPED",
    "OVERLAP_LOST",
    "OVERLAP_PAUSED",
    "REMOVED_UNSWEPT",
    "RETRY_SLOW",
    "RETRY_UNENDED",
    "STARTED_EARLY",
    "STRAY_VOTER",
    "UNACCOUNTED",
    "UNVOTED",
    "Report",
    "Violation",
    "check",
]

RAN_STATES = frozenset({"succeeded", "failed"})
_NOBODY: frozenset[str] = frozenset()  # (no node: shared, as most slots have nobody late or gone)

SKIP_REASONS = ("paused by ", "overlap forbidden: ", "replaced by slot ")
"""The reasons a ``skipped`` slot counts as decided for liveness: an operator's pause, the overlap
policy. A slot skipped for anything else (a bug) did not run when it should have."""

JOB_REMOVED = "slot of a job a reload took out of nodes' config"
"""Exemption (``Report.exempt``): a slot no store call touched and nobody ran, while every node
lacked the job at some time between the slot's window and its first chance to record it, or had
none (a restart past the slot: :func:`_restarted_past`), one node at least lacking it; or,
for liveness, a slot that had a quorum of healthy nodes only with those that lacked the job
when they would vote for it."""

BUSY_LOOP = "busy wakeup loop"
ILLEGAL_STEP = "phase step outside the lifecycle table"
"""A node's core moved a slot record between phases the table (``core/lifecycle.py``) does not
list: a bug in the core. The simulator's core reports it and takes the step, as the agent's
logs it and takes it, so the run goes on and the explorer names the seed."""
UNVOTED = "slot nobody could vote for left unaccounted"
LATE_RUN = "run started after its lease expired"
OUTLIVED_LEASE = "run outlived its lease in the store"
FAILOVER_LOSS = "slot forgotten by a failover that lost writes"
FAILOVER_STALL = "slot whose window fell in writes a failover lost"
NEVER_SEEN = "slot of a job the store never saw, forgotten by a restart of every node"
LEDGER_CONTRADICTS = "ledger contradicts the runs"
EARLY_OUTCOME = "outcome recorded before the run ended"
STRAY_VOTER = "ledger names a voter that never voted"
NOT_ELIGIBLE = "slot handed to a node that was not an agreeing member voter"
STARTED_EARLY = "start folded into a commit before the fire time"
RETRY_UNENDED = "retry chain never ended"
RETRY_SLOW = "retry chain outlasted its bound"
ENDED_TWICE = "slot ended twice in the ledger"
UNACCOUNTED = "due slot not accounted for"
LIVENESS = "liveness"
MEMBERSHIP_QUORUM = "commit without a quorum of each configuration"
MEMBERSHIP_FOREIGN = "commit under a record the cluster never held"
MEMBERSHIP_BACKWARD = "job's membership record moved backward"
DECIDING_EPOCH = "slot names another record than the one that decided it"
"""The store keeps on a slot, and copies into its ledger entry, the epoch of the record whose
quorum decided it (``history`` reads it to tell which voters counted): a vote's commit whose
slot names another epoch than the record the job enforced, or a ledger entry naming another
epoch than its slot's last deciding commit (0 for a slot no vote committed)."""
FIRST_RECORD_FORGED = "job's first membership record taken from a stranger's vote"
MEMBERSHIP_UNJOINT = "namespace's membership changed outside a joint configuration"
MEMBERSHIP_SETTLING = "membership change near the window"
"""An exemption from liveness (counted in ``Report.exempt``): the slot's window began less than
``_MembershipTimeline.SETTLE_MS`` after the namespace record changed, or contains a change."""
CUT_OFF = "cut off"
LEASE_PAUSED = "lease: node paused during it"
LEASE_LOST = "lease: granted in writes a failover lost"
OVERLAPPED = "two slots of an overlap-forbid job ran at once"
OVERLAP_PAUSED = "overlap: the earlier run's node paused during its lease"
OVERLAP_LOST = "overlap: the earlier run's slot had writes a failover or an empty restart lost"
REMOVED_UNSWEPT = "open slot of a job every node removed, then restarted without"
LOCAL_KILLED = "slot only run locally, its records lost to a restart of every node"
KNOWN_LIMITS = frozenset(
    {FAILOVER_LOSS, FAILOVER_STALL, NEVER_SEEN, REMOVED_UNSWEPT, LOCAL_KILLED, FIRST_RECORD_FORGED}
)
"""Violation kinds that are documented limits of the design, not bugs (docs/protocol.md).

* ``FAILOVER_LOSS``: without ``wait_replicas`` a failover can lose
  acknowledged writes, forgetting a slot or running it twice;
* ``FAILOVER_STALL``: a slot whose whole window fell while the primary's
  replica had stopped taking its writes cannot run, with or without
  ``wait_replicas`` (nothing written then survives the failover; with
  ``WAIT`` no node is told it did). It ends ``missed`` — accounted for —
  where the liveness rule would otherwise demand a run;
* ``NEVER_SEEN``: a slot of a job no store call had named yet (its
  high-water mark is unset), due while no node could reach the store, then
  every node restarted: the nodes keep no state and the store has none, so
  nobody knows the slot was due (a limit of the current store contract);
* ``REMOVED_UNSWEPT``: a slot some node voted for or wrote, of a job a
  reload removed from every node, whose every process then restarted
  without it before the slot ended: a node sweeps only the jobs it defines
  (a removed one until its process ends), so nobody ends it;
* ``LOCAL_KILLED``: a slot nobody's vote was counted for, which nodes ran
  locally (the store away for its window), then every node restarted
  before one of their records landed, after a later slot of the job was
  decided: the record that carries a local run's outcome goes only when
  the run ends (and after those of earlier slots run locally), the later
  slot raised the high-water mark past the slot, and no restart's catch-up
  reaches it (docs/protocol.md; explorer seed 60376);
* ``FIRST_RECORD_FORGED``: a job's first record is taken from the first
  vote with an epoch, whoever sent it (no member yet to hold a stranger
  to): a node outside every record the namespace held, voting first with a
  record of its own making that lists it, sets the job's (docs/protocol.md,
  "A job's first record"; explorer seed 89269). A foreign record over one
  the job already had stays ``MEMBERSHIP_FOREIGN``.

They are reported under their own names and counted separately (the
explorer's "known limits"), never silently dropped.
"""


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken property, at true time ``t``."""

    kind: str
    job: str
    fire_ms: int
    t: int
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.job}@{self.fire_ms} at t={self.t}: {self.detail}"


@dataclass
class Report:
    """The checker's verdict on one trace."""

    scenario: str
    seed: int
    strategy: str
    violations: list[Violation] = field(default_factory=list)
    due: int = 0
    runs: int = 0
    duplicates: int = 0
    """Slots executed more often than their delivery allows."""
    reruns: int = 0
    """Legal re-runs of at-least-once slots after a takeover."""
    retries: int = 0
    """Legal re-runs of failed slots under a retry's new token."""
    local_runs: int = 0
    """``run-local`` runs (no store, no quorum: by design outside "executed once")."""
    misses: int = 0
    """Due slots that never ran (whatever the reason; for comparing strategies)."""
    liveness_checked: int = 0
    cut_off: int = 0
    """Due slots without a ledger entry whose accounting the end of the run cut off: no node could
    reach the store long enough after their deadline to record them (a fault lasting to the end)."""
    exempt: Counter[str] = field(default_factory=Counter)
    """Each exemption the checker granted, by name (``CUT_OFF``, ``LEASE_PAUSED``, ``LEASE_LOST``);
    the known limits are violations of their own kinds (``by_kind``)."""
    reached: Counter[str] = field(default_factory=Counter)

    @property
    def liveness_share(self) -> float:
        """The share of due slots the liveness rule judged (the rest saw a health change)."""
        return self.liveness_checked / self.due if self.due else 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    def unexpected(self, known: frozenset[str] = KNOWN_LIMITS) -> list[Violation]:
        """Violations other than those of known, reported core bugs."""
        return [v for v in self.violations if v.kind not in known]

    def by_kind(self) -> Counter[str]:
        return Counter(v.kind for v in self.violations)

    def summary(self) -> str:
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(self.by_kind().items())) or "no violations"
        return (
            f"{self.scenario} seed={self.seed} strategy={self.strategy}: {kinds}; "
            f"due={self.due} runs={self.runs} duplicates={self.duplicates} misses={self.misses}"
        )


_decode_text = functools.lru_cache(maxsize=1024)(MembershipRecord.decode)


def _decode_record(text: str) -> MembershipRecord:
    """``MembershipRecord.decode``, remembered: a record is immutable and its text names it (a text
    that does not parse raises ValueError each time, as the decoder does; a value that is not text
    goes to the decoder unremembered, which refuses it). A membership trace carries the same few
    records on every commit; decoding one (validating each id) costs about 15 µs, and a commit was
    decoded two or three times: most of what checking such a trace cost."""
    if type(text) is not str:
        return MembershipRecord.decode(text)
    return _decode_text(text)


class _Health:
    """Per-node health over time, from ``health`` records."""

    def __init__(self) -> None:
        self.times: dict[str, list[int]] = {}
        self.oks: dict[str, list[bool]] = {}
        self._cluster: tuple[list[int], list[frozenset[str]]] | None = None
        """:meth:`cluster`, once built (``add`` drops it)."""

    def add(self, node: str, t: int, ok: bool) -> None:
        self.times.setdefault(node, []).append(t)
        self.oks.setdefault(node, []).append(ok)
        self._cluster = None

    def cluster(self) -> tuple[list[int], list[frozenset[str]]] | None:
        """The whole cluster's health as one timeline: every time at which some node's health was
        recorded (ascending, distinct), and the nodes healthy from each of those times on by
        their last records then. Built once: the liveness rule asks for every due slot how many
        nodes stayed healthy through its window, which this answers with one bisection instead
        of two a node. ``None`` if some node's records are out of time order (a hand-made trace):
        the per-node bisections give their answer for those."""
        if self._cluster is None:
            changes: list[tuple[int, str, bool]] = []
            for node, times in self.times.items():
                if times != sorted(times):
                    return None
                changes.extend(zip(times, [node] * len(times), self.oks[node], strict=True))
            changes.sort(key=lambda c: c[0])  # (stable: a node's records at one time keep their order)
            at: list[int] = []
            healthy: list[frozenset[str]] = []
            now: dict[str, bool] = {}
            for i, (t, node, ok) in enumerate(changes):
                now[node] = ok
                if i + 1 == len(changes) or changes[i + 1][0] != t:
                    at.append(t)
                    healthy.append(frozenset(n for n, good in now.items() if good))
            self._cluster = (at, healthy)
        return self._cluster

    def longest_healthy(self, lo: int, hi: int, among: frozenset[str] | None = None) -> int:
        """The longest stretch of [lo, hi] during which one node (of ``among`` if given) stayed
        healthy (ms)."""
        best = 0
        for node, times in self.times.items():
            if among is not None and node not in among:
                continue
            oks = self.oks[node]
            i = max(0, bisect.bisect_right(times, lo) - 1)
            while i < len(times) and times[i] <= hi:
                if oks[i]:
                    end = times[i + 1] if i + 1 < len(times) else hi
                    best = max(best, min(end, hi) - max(times[i], lo))
                i += 1
        return best

    def first_ok(self, node: str, t: int, end: int) -> int:
        """The first time at or after ``t`` the node is healthy (``end`` if none before it)."""
        times = self.times.get(node, [])
        i = bisect.bisect_right(times, t) - 1
        if i >= 0 and self.oks[node][i]:
            return t
        for j in range(max(i + 1, 0), len(times)):
            if self.oks[node][j]:
                return min(times[j], end)
        return end

    def healthy_throughout(self, node: str, lo: int, hi: int) -> bool:
        times = self.times.get(node, [])
        i = bisect.bisect_right(times, lo) - 1
        return i >= 0 and self.oks[node][i] and bisect.bisect_right(times, hi) - 1 == i

    def stable_healthy(self, lo: int, hi: int, among: frozenset[str] | None = None) -> tuple[int, bool]:
        """(nodes healthy throughout [lo, hi] — of ``among`` if given —, whether no node changed in it)."""
        cluster = self.cluster()
        if cluster is not None:
            at, healthy_from = cluster
            i = bisect.bisect_right(at, lo) - 1
            stable = bisect.bisect_right(at, hi) - 1 == i
            if i < 0:
                return 0, stable
            nodes = healthy_from[i]
            return len(nodes if among is None else nodes & among), stable
        return self.per_node(lo, hi, among)

    def per_node(self, lo: int, hi: int, among: frozenset[str] | None = None) -> tuple[int, bool]:
        """:meth:`stable_healthy` node by node: for histories out of time order (hand-made traces),
        and the answer the cluster's timeline is tested against."""
        healthy, stable = 0, True
        for node, times in self.times.items():
            i = bisect.bisect_right(times, lo) - 1
            if bisect.bisect_right(times, hi) - 1 != i:
                stable = False
            if i >= 0 and self.oks[node][i] and (among is None or node in among):
                healthy += 1
        return healthy, stable


class _Removals:
    """When a live reload had taken each job out of each node's config (``reload`` records, and
    ``boot`` records, which carry the config a restarted node read): such a node neither votes
    for the job's slots nor accounts for them."""

    def __init__(self) -> None:
        self.open: dict[str, dict[str, int]] = {}
        """Job → node → removed since (true time), still removed at the last record (by job: the
        liveness rule asks for one job's nodes at every due slot)."""
        self.spans: dict[str, list[tuple[str, int, int]]] = {}
        """Job → (node, from, to) of the removals that ended."""
        self.booted_without: dict[str, frozenset[str]] = {}
        """Node → the jobs its current process booted without."""

    def boot(self, node: str, t: int, removed: Sequence[str]) -> None:
        self.booted_without[node] = frozenset(removed)
        self.config(node, t, removed)

    def config(self, node: str, t: int, removed: Sequence[str]) -> None:
        """``node``'s config, from ``t`` on, lacks the jobs ``removed``."""
        gone = set(removed)
        for job, nodes in self.open.items():
            since = nodes.get(node)
            if since is not None and job not in gone:
                self.spans.setdefault(job, []).append((node, since, t))
                del nodes[node]
        for job in gone:
            self.open.setdefault(job, {}).setdefault(node, t)

    def lacked(self, node: str, job: str, lo: int, hi: int) -> bool:
        """Whether ``node`` lacked ``job`` at some time in [lo, hi]."""
        since = self.open.get(job, {}).get(node)
        if since is not None and since <= hi:
            return True
        return any(n == node and a <= hi and lo <= b for n, a, b in self.spans.get(job, ()))

    def nodes_near(self, job: str, lo: int, hi: int) -> frozenset[str]:
        """The nodes that lacked ``job`` at some time in [lo, hi]."""
        spans, nodes = self.spans.get(job), self.open.get(job)
        if not spans and not nodes:
            return _NOBODY  # (most jobs of most runs: no reload ever took them out)
        near = {n for n, a, b in spans or () if a <= hi and lo <= b}
        near.update(n for n, since in (nodes or {}).items() if since <= hi)
        return frozenset(near)

    def orphaned(self, job: str, nodes: frozenset[str]) -> bool:
        """Whether every node lacks ``job`` at the end and its process booted without it: no
        process sweeps the job's open slots any more."""
        removed = self.open.get(job, {})
        return all(n in removed and job in self.booted_without.get(n, ()) for n in nodes)


_REACHABLE_WHYS = ("untrusted", "clock off by")
"""Health reasons of a node that can still reach the store (the world's ``update_health`` lists
reasons in order, so these mean up, unpaused, linked, and the store up and taking writes)."""


class _Facts:
    """What the world saw happen to each slot, for judging the ledger against it."""

    __slots__ = (
        "decided", "deciding_epochs", "eligible", "ended", "finished", "killed", "ledger", "local",
        "lost", "ran", "runs", "starts", "token_leases", "voted", "writes",
    )  # fmt: skip

    def __init__(self) -> None:
        self.runs: dict[tuple[str, int], list[tuple[str, int, int]]] = {}
        """Per slot, (node, token, t) of every ``run``."""
        self.ran: set[tuple[str, str, int, int]] = set()
        """(node, job, fire, token) of every ``run``: ``runs`` by run, for the ledger rule's
        "which never ran" (asked once per ledger entry)."""
        self.ended: dict[tuple[str, str, int, int], tuple[int, bool]] = {}
        """(node, job, fire, token) → (t, ok) of the run's end; ok is False for a kill."""
        self.starts: dict[tuple[str, int], dict[int, tuple[str, int]]] = {}
        """Per slot, token → (node, t) of each start the store accepted (folded ones included),
        whether or not a run followed (its reply may be lost, its node crash first)."""
        self.killed: set[tuple[str, str, int, int]] = set()
        """(node, job, fire, token) of the runs that ended by a kill (no finish can follow)."""
        self.token_leases: dict[tuple[str, str, int, int], int] = {}
        """(node, job, fire, token) → the latest lease end the store granted that token."""
        self.finished: dict[tuple[str, str, int, int], list[int]] = {}
        """(node, job, fire, token) → true times the store accepted its finish."""
        self.voted: dict[tuple[str, int], set[str]] = {}
        """Per slot, the nodes whose vote the store counted."""
        self.local: dict[tuple[str, int], set[str]] = {}
        """Per slot, the nodes that ran it locally (``run-local``, the store unreachable)."""
        self.decided: dict[tuple[str, int], list[tuple[int, str]]] = {}
        """Per slot, (t, state) of each decision a sweep, vote or missed record made."""
        self.ledger: dict[tuple[str, int], list[Record]] = {}
        """Per slot, its ledger entries in the order written (``retrying`` ones, then the end)."""
        self.lost: list[tuple[int, int, bool]] = []
        """(from, to, waited) of each failover's lost writes, true time (the model's snapshot)."""
        self.writes: dict[tuple[str, int], list[int]] = {}
        """Per slot, true times the store executed a write for it."""
        self.eligible: dict[tuple[str, int], frozenset[str]] = {}
        """Per slot, the voters its latest commit (a vote's, a takeover's, a retry's) could hand
        it to: agreeing, and members of the record the store enforced (:func:`_may_execute`)."""
        self.deciding_epochs: dict[tuple[str, int], int] = {}
        """Per slot, the epoch of the record its latest vote commit was decided under (traced in
        membership scenarios only: ``DECIDING_EPOCH``)."""

    def lease(self, key4: tuple[str, str, int, int], until: int) -> None:
        """The store granted the run ``key4`` (node, job, fire, token) a lease to ``until``."""
        if until > self.token_leases.get(key4, 0):
            self.token_leases[key4] = until

    def finish_landed(self, key4: tuple[str, str, int, int]) -> bool:
        """Whether the store accepted a finish of that run outside the writes a failover lost."""
        return any(not self.in_lost_window(t) for t in self.finished.get(key4, ()))

    def recordable_from(self, job: str, fire: int, deadline_ms: int) -> int:
        """When the slot's end could first be written: its deadline; if it started, once its last
        run ended (the executor's finish), or, for a start whose run's end nobody saw (no run
        followed, its node crashed, or the run outlasted the trace), once the lease the store
        granted that token ran out (a sweep)."""
        at = fire + deadline_ms
        began = {(node, token): t for node, token, t in self.runs.get((job, fire), ())}
        for token, (node, t) in self.starts.get((job, fire), {}).items():
            began.setdefault((node, token), t)
        for (node, token), t in began.items():
            key4 = (node, job, fire, token)
            ended = self.ended.get(key4)
            at = max(at, ended[0] if ended is not None else self.token_leases.get(key4, t))
        return at

    def last_start(self, job: str, fire: int) -> tuple[str, str, int, int] | None:
        """(node, job, fire, token) of the start the store accepted under the slot's highest
        token: the store's current run (a stale run's token is lower), or None."""
        starts = self.starts.get((job, fire))
        if not starts:
            return None
        token = max(starts)
        return (starts[token][0], job, fire, token)

    def wrote(self, key: tuple[str, int], t: int) -> None:
        self.writes.setdefault(key, []).append(t)

    def in_lost(self, key: tuple[str, int], *, unwaited_only: bool) -> bool:
        """Whether the store executed a write for ``key`` inside the writes a failover lost (only
        failovers without WAIT, whose lost writes had been acknowledged, if ``unwaited_only``)."""
        ts = self.writes.get(key)
        if not ts or not self.lost:
            return False
        return any(
            lo <= t <= hi for lo, hi, waited in self.lost if not (unwaited_only and waited) for t in ts
        )

    def in_lost_window(self, t: int) -> bool:
        return any(lo <= t <= hi for lo, hi, _ in self.lost)


def _check_ledger(
    sc: Scenario,
    report: Report,
    facts: _Facts,
    started: Mapping[tuple[str, str, int, int], int],
    health: _Health,
) -> None:
    """Every ledger entry against the runs the world saw (succeeded/failed ↔ a run of that token by
    that executor that ended that way, recorded after it ended; missed/skipped ↔ no run; lost ↔ an
    accepted start and no accepted finish), its voters against the votes counted, and one end
    per slot; a retry chain ends within its bound (:func:`_retry_bound`) while its voters stay
    healthy. A contradiction in a slot that had writes a failover without WAIT lost is that
    limit (``FAILOVER_LOSS``), not a bug."""
    out = report.violations
    jobs = {j.name: j for j in sc.jobs}
    for key, entries in facts.ledger.items():
        job, fire = key
        excused = facts.in_lost(key, unwaited_only=True)
        problems: list[tuple[str, str]] = []
        ends = [e for e in entries if e["state"] != "retrying"]
        if len(ends) > 1:
            problems.append((ENDED_TWICE, ", then ".join(e["state"] for e in ends)))
        voted = facts.voted.get(key, set())
        for e in entries:
            if "epoch" in e and e["epoch"] != facts.deciding_epochs.get(key, 0):
                said = facts.deciding_epochs.get(key, 0)
                problems.append(
                    (DECIDING_EPOCH, f"{e['state']} entry names epoch {e['epoch']}; decided under {said}")
                )
            if not voted.issuperset(e["voters"]):
                stray = sorted(set(e["voters"]) - voted)
                problems.append(
                    (STRAY_VOTER, f"{e['state']} entry names {stray}; counted votes: {sorted(voted)}")
                )
            problem = _contradiction(e, key, facts, started)
            if problem is not None:
                problems.append(problem)
        job_def = jobs.get(job)
        if job_def is not None and len(ends) == 1 and len(entries) > 1:
            overrun = _retry_overrun(sc, job_def, key, entries, facts, health)
            if overrun is not None:
                problems.append((RETRY_SLOW, overrun))
        for kind, detail in problems:
            if excused:
                kind, detail = FAILOVER_LOSS, f"{kind}: {detail} (the slot had writes a failover lost)"
            out.append(Violation(kind, job, fire, fire, detail))


def _retry_overrun(
    sc: Scenario, job: JobDef, key: tuple[str, int], entries: Sequence[Record], facts: _Facts, health: _Health
) -> str | None:
    """How a retry chain outlasted its bound, from the first failed attempt's accepted finish to the
    terminal entry's (a finish, or the sweep's decision), while every voter stayed healthy
    throughout the bound (``None``: it did not, or the times are unknown)."""
    first, last = entries[0], entries[-1]
    if first["state"] != "retrying":
        return None
    begin = facts.finished.get((first["executor"], key[0], key[1], first["token"]))
    if not begin:
        return None
    t0 = min(begin)
    if last["state"] in ("succeeded", "failed"):
        ends = facts.finished.get((last["executor"], key[0], key[1], last["token"]), [])
    else:
        ends = [t for t, state in facts.decided.get(key, ()) if state == last["state"]]
    if not ends:
        return None
    bound = _retry_bound(sc, job)
    took = max(ends) - t0
    if took <= bound or not all(health.healthy_throughout(n, t0, t0 + bound) for n in last["voters"]):
        return None
    return f"{len(entries) - 1} retries took {took} ms, bound {bound} ms, with every voter healthy"


def _contradiction(
    e: Record, key: tuple[str, int], facts: _Facts, started: Mapping[tuple[str, str, int, int], int]
) -> tuple[str, str] | None:
    """What is wrong with one ledger entry, judged by what ran (``None``: nothing)."""
    state, node, token, why = e["state"], e["executor"], e["token"], e["why"]
    key4 = (node, key[0], key[1], token)
    runs = facts.runs.get(key, [])
    if state in ("missed", "skipped"):
        # A slot the overlap policy ``replace`` skipped while a retry (or a takeover) was
        # committed ran under its earlier tokens; under the token it ended with, never.
        if state == "skipped" and why.startswith("replaced by slot "):
            runs = [run for run in runs if run[1] == token]
        if runs:
            ran = ", ".join(f"{n} token {tok}" for n, tok, _ in runs)
            return LEDGER_CONTRADICTS, f"{state} ({why}) under token {token}, but {ran} ran"
        return None
    if state == "lost":
        if key4 not in started:
            return LEDGER_CONTRADICTS, f"lost under {node}'s token {token}, which the store never started"
        kept = [t for t in facts.finished.get(key4, ()) if not facts.in_lost_window(t)]
        if kept:
            return LEDGER_CONTRADICTS, f"lost, but the store accepted {node}'s finish of token {token}"
        return None
    if state == "failed" and why.startswith("replaced by slot "):
        # (The overlap policy ``replace`` ends a running slot: the store started it; the run may
        # not have begun, or may still be going.)
        if key4 not in started:
            return LEDGER_CONTRADICTS, f"failed ({why}) under token {token}, which the store never started"
        return None
    if state not in ("succeeded", "failed", "retrying"):
        return None
    if key4 not in facts.ran:
        return LEDGER_CONTRADICTS, f"{state} under {node}'s token {token}, which never ran"
    end = facts.ended.get(key4)
    finishes = facts.finished.get(key4)
    if end is None or (finishes and min(finishes) < end[0]):
        when = "never ended" if end is None else f"ended at t={end[1]}"
        return EARLY_OUTCOME, f"{state} recorded for {node}'s token {token}, whose run {when}"
    if end[1] != (state == "succeeded"):
        how = "succeeded" if end[1] else "failed or was killed"
        return LEDGER_CONTRADICTS, f"{state}, but {node}'s run of token {token} {how}"
    return None


def _near_clock_error(
    base_error: int, faults: Sequence[tuple[int, int, int, tuple[str, ...]]], lo: int, hi: int
) -> int:
    """An upper bound on how far a node's wall clock can be from true time near ``[lo, hi]``.

    A node whose clock runs ahead handles a slot early — and may give up on
    it by its own clock — before the slot's window opens; the liveness check
    looks back this far for health changes. Only the clock faults whose
    effect can reach the slot count: one of error ``e`` in effect (a step or
    lie until it is undone, a drift's offset for good) at some time in
    ``[lo - e, hi]``. ``faults``: (begin, effect end, error, nodes) from
    :func:`_clock_faults` (``ahead``: a clock behind handles the slot late, not early).
    ``base_error``: :func:`_base_clock_error` of the scenario (asked once per check, not per slot).
    """
    if not faults:
        return base_error
    per_node = _clock_errors_near(faults, lo, hi)
    return base_error + max(per_node.values(), default=0)


def _base_clock_error(sc: Scenario) -> int:
    """How far any node's wall clock can be from true time without a clock fault."""
    return sc.clocks.skew_ms + sc.clocks.drift_ppm * sc.duration_ms // 1_000_000


def _clock_errors_near(
    faults: Sequence[tuple[int, int, int, tuple[str, ...]]], lo: int, hi: int
) -> dict[str, int]:
    """Node → the sum of the errors of the clock faults whose effect can reach ``[lo, hi]``
    (see :func:`_near_clock_error`); a node no such fault may hit is left out."""
    per_node: dict[str, int] = {}
    for begin, until, error, nodes in faults:
        if begin <= hi and until >= lo - error:
            for node in nodes:
                per_node[node] = per_node.get(node, 0) + error
    return per_node


def _clock_faults(sc: Scenario, *, ahead: bool) -> list[tuple[int, int, int, tuple[str, ...]]]:
    """(begin, end of its effect, largest error, nodes it may hit) of each clock fault, true time:
    how far it may put a node's wall clock ahead of true time (``ahead``), else behind it.

    A step or lie of ``by`` puts it that far one way only (and back at its end); a strobe both
    ways; a drift of ``ppm`` accumulates an offset one way (for good). A node stepped back an hour
    never handles a slot early, so it must not stretch the liveness look-back by an hour (a user
    audit: the look-back then took in the step itself for every later slot, and judged none).
    """
    out = []
    forever = 1 << 62
    for f in sc.faults:
        begin = sc.start_ms + f.at_ms
        if f.kind in ("clock_jump", "ntp_lie", "clock_strobe"):
            # (A step or lie moves the clock one way only; a strobe swings it both ways.)
            error = abs(f.by_ms) if f.kind == "clock_strobe" else max(f.by_ms if ahead else -f.by_ms, 0)
            until = begin + f.for_ms if f.for_ms else forever
        elif f.kind == "clock_drift":
            ppm = max(f.ppm if ahead else -f.ppm, 0)
            error = ppm * (f.for_ms or sc.duration_ms) // 1_000_000
            until = forever  # (the offset a drift accumulated stays after it ends)
        else:
            continue
        if error:
            out.append((begin, until, error, f.nodes or sc.node_ids))  # ``pick`` may choose any node
    return out


def check(records: Sequence[Record], scenario: Scenario | None = None) -> Report:
    """Check one trace (the records of one run, in order).

    ``scenario``: the scenario the header holds, when the caller has it
    (``sim.run``, which wrote the header from it): parsing a hundred jobs
    back from the header's TOML costs about 5 ms a run. A trace read from a
    file is checked from its header alone.
    """
    header = records[0]
    if header.get("ev") != "header":
        raise ValueError("not a simulator trace: the first record is not a header")
    sc = scenario if scenario is not None else loads(header["scenario"], "<trace header>")
    strategy = header["strategy"]
    report = Report(scenario=sc.name, seed=header["seed"], strategy=strategy)
    q = sc.nodes // 2 + 1
    jobs = {j.name: j for j in sc.jobs}
    quorum_mode = strategy == "quorum"
    committed: dict[tuple[str, int], int] = {}
    counted: dict[tuple[str, int], dict[str, str]] = {}
    """Per slot, the spec hash of each node's vote the store counted (as the node sent it)."""
    executors: dict[tuple[str, int], list[str]] = {}
    lagging: list[tuple[int, int]] = []
    """Windows in which the store's writes were about to be lost by a failover (WAIT or not)."""
    waits = sc.settings.wait_replicas > 0
    """With WAIT, a failover loses no acknowledged write: nothing it does is excused."""
    started: dict[tuple[str, str, int, int], int] = {}
    """(node, job, fire, token) → store time the start was accepted."""
    slot_starts: dict[tuple[str, int], list[int]] = {}
    lost: list[tuple[int, int]] = []
    """Windows of store writes that failovers lost."""
    runs: dict[tuple[str, int], list[int]] = {}
    retry_tokens: dict[tuple[str, int], set[int]] = {}
    """Per slot, the tokens the store handed out to retry a failed run."""
    retry_counts: dict[tuple[str, int], int] = {}
    retry_at: dict[tuple[str, int, int], int] = {}
    """(job, fire, token) of a retry → store time before which it must not start."""
    alive: dict[tuple[str, int], tuple[str, int]] = {}
    """Slots whose job process is alive: (node, token) of the run."""
    alive_fires: dict[str, set[int]] = {}
    """Per job, the fire times of its slots in ``alive`` (the overlap rule looks at one job's)."""
    leases: dict[tuple[str, str, int, int], tuple[int, int]] = {}
    """(node, job, fire, token) of a run → (store time its lease ends, true time it was granted)."""
    unbound: set[tuple[str, str, int, int]] = set()
    """Runs exempt from the lease rule: their node was paused, or their lease lost by a failover."""
    local_seen: set[tuple[str, int, str, int]] = set()
    first_decided: dict[str, int] = {}
    """Per job, when the store first decided one of its slots (raising its high-water mark)."""
    decided_at: dict[str, list[tuple[int, int]]] = {}
    """Per job, (fire, true time) of every commit and decision (a later slot's raises the mark)."""
    boots: dict[str, list[int]] = {}
    marks_read: dict[str, list[int]] = {}
    """Per node, when the store answered each of its high-water reads (a boot's catch-up)."""
    commit_log: list[tuple[int, tuple[str, int], int, str, str]] = []
    """(t, slot, token, executor, by) of every commit, to forget those a failover lost."""
    deadlines: dict[tuple[str, int], int] = {}
    """Per slot, the largest deadline a counted vote carried: the store judges the window by it."""
    health = _Health()
    reach = _Health()
    """Per node, whether it could reach the store (health without the clock: an untrusted node can)."""
    facts = _Facts()
    pauses: dict[str, list[tuple[int, int]]] = {}
    held: dict[int, str] = {}
    """Epoch → the namespace membership record traced under it."""
    job_epochs: dict[str, int] = {}
    """Per job, the highest epoch a commit was made under."""
    first_records: dict[str, str] = {}
    """Job → the record its first judged commit enforced."""
    changes: list[tuple[int, str]] = []
    """(true time, text) of each change of the namespace record (liveness exempts windows near them)."""
    beats: dict[str, tuple[int, int]] = {}
    """Node → (epoch, store time its entry expires) of its last heartbeat while a change was joint."""
    stale = _StaleNodes()
    removals = _Removals()
    emptied: list[int] = []
    """True times at which the store came back from a restart that lost its state."""
    out = report.violations
    for r in records:
        ev = r["ev"]
        # (One branch per kind of record, mutually exclusive; the commonest kinds of a typical
        # trace first, as each record is compared with every kind before its own.)
        if ev == "commit":
            key = (r["job"], r["fire"])
            facts.wrote(key, r["t"])
            earlier_executors = executors.get(key, [])
            eligible = _may_execute(r)
            facts.eligible[key] = frozenset(eligible)
            if r["executor"] not in eligible:
                out.append(
                    Violation(
                        NOT_ELIGIBLE,
                        r["job"],
                        r["fire"],
                        r["t"],
                        f"{r['by']} gave token {r['token']} to {r['executor']}; the store may hand it "
                        f"only to {', '.join(eligible) or 'nobody'} (agreeing voters, members of its record)",
                    )
                )
            if r.get("folded") and r["st"] < r["fire"]:
                out.append(
                    Violation(
                        STARTED_EARLY,
                        r["job"],
                        r["fire"],
                        r["t"],
                        f"the commit of token {r['token']} started it at store time {r['st']}, "
                        f"{r['fire'] - r['st']} ms before its fire time",
                    )
                )
            if r["by"] in ("retry", "takeover") and r["executor"] in earlier_executors:
                forgotten = facts.in_lost(key, unwaited_only=True)
                out.extend(_repick_violations(r, eligible, earlier_executors, forgotten))
            previous = committed.get(key, 0)
            if (
                r["by"] == "takeover"
                and previous in retry_tokens.get(key, ())
                and previous not in runs.get(key, ())
            ):
                # A retry that never started, taken over: the new token carries the same attempt.
                retry_tokens[key].add(r["token"])
            if r["by"] == "retry":
                retry_tokens.setdefault(key, set()).add(r["token"])
                retry_counts[key] = retry_counts.get(key, 0) + 1
                job = jobs.get(r["job"])
                if job is not None:
                    retry_at[(r["job"], r["fire"], r["token"])] = r["st"] + job.retry_backoff_ms
                    if retry_counts[key] > job.retries:
                        out.append(
                            Violation(
                                "more retries than max_retries",
                                r["job"],
                                r["fire"],
                                r["t"],
                                f"retry {retry_counts[key]} of a job with retries = {job.retries}",
                            )
                        )
            executors.setdefault(key, []).append(r["executor"])
            committed[key] = max(committed.get(key, 0), r["token"])
            first_decided.setdefault(r["job"], r["t"])
            decided_at.setdefault(r["job"], []).append((r["fire"], r["t"]))
            commit_log.append((r["t"], key, r["token"], r["executor"], r["by"]))
            sent, spec = counted.get(key, {}), r["spec"]
            agreeing = sorted(n for n, h in sent.items() if h == spec)
            if "mr" in r:
                if _check_membership(r, agreeing, held, job_epochs, out, first_records):
                    report.reached["slot committed under a joint membership"] += 1
                if "ep" in r and r.get("by") == "vote":
                    out.extend(_deciding_epoch(r, facts))
            elif r["by"] == "vote" and len(agreeing) < q:
                out.append(
                    Violation(
                        "commit without a majority",
                        r["job"],
                        r["fire"],
                        r["t"],
                        f"{len(agreeing)} of {sc.nodes} agreeing voters {agreeing}, need {q}",
                    )
                )
        elif ev == "start" and r["ok"]:
            # (The slot's and the run's keys built once: a start, a run and an end per slot.)
            key, t = (r["job"], r["fire"]), r["t"]
            key4 = (r["node"], r["job"], r["fire"], r["token"])
            started[key4] = t
            facts.starts.setdefault(key, {})[r["token"]] = (r["node"], t)
            facts.wrote(key, t)
            if "lease" in r:
                leases[key4] = (r["lease"], t)
                facts.lease(key4, r["lease"])
            slot_starts.setdefault(key, []).append(t)
            not_before = retry_at.get((r["job"], r["fire"], r["token"]))
            if not_before is not None and r.get("st", not_before) < not_before:
                out.append(
                    Violation(
                        "retry started before its backoff ended",
                        r["job"],
                        r["fire"],
                        r["t"],
                        f"{r['node']} started token {r['token']} at store time {r['st']}, "
                        f"{not_before - r['st']} ms before its backoff ended",
                    )
                )
        elif ev == "run":
            key = (r["job"], r["fire"])
            key4 = (r["node"], r["job"], r["fire"], r["token"])
            facts.runs.setdefault(key, []).append((r["node"], r["token"], r["t"]))
            facts.ran.add(key4)
            started_at = started.get(key4)
            late = started_at is not None and r["t"] - started_at > sc.settings.lease_ms
            forgotten = bool(lost) and any(lo <= s <= hi for s in slot_starts.get(key, ()) for lo, hi in lost)
            job_def = jobs.get(r["job"])
            if quorum_mode and job_def is not None and job_def.overlap == Overlap.FORBID:
                fires = alive_fires.get(r["job"])
                if fires and (len(fires) > 1 or r["fire"] not in fires):
                    _check_overlap(r, report, alive, fires, facts, leases, unbound, pauses, emptied)
            other = alive.get(key)
            if other is not None and r["token"] in retry_tokens.get(key, ()):
                # A retry is handed out only once the failed run reported its end.
                report.violations.append(
                    Violation(
                        "two runs of a slot at once",
                        r["job"],
                        r["fire"],
                        r["t"],
                        f"{r['node']} started token {r['token']} while {other[0]}'s token {other[1]} ran",
                    )
                )
            alive[key] = (r["node"], r["token"])
            alive_fires.setdefault(r["job"], set()).add(r["fire"])
            _on_run(r, report, jobs, committed, runs, quorum_mode, late, forgotten, retry_tokens)
        elif ev == "ledger":
            facts.ledger.setdefault((r["job"], r["fire"]), []).append(r)
        elif ev == "finish":
            if r["ok"]:
                facts.wrote((r["job"], r["fire"]), r["t"])
                facts.finished.setdefault((r["node"], r["job"], r["fire"], r["token"]), []).append(r["t"])
        elif ev in ("end", "kill"):
            key4 = (r["node"], r["job"], r["fire"], r["token"])
            facts.ended.setdefault(key4, (r["t"], r.get("ok", False)))
            if ev == "kill":
                facts.killed.add(key4)
            _check_lease(r, key4, report, jobs, leases, unbound, quorum_mode, pauses)
            key = (r["job"], r["fire"])
            if alive.get(key) == (r["node"], r["token"]):
                del alive[key]
                alive_fires[r["job"]].discard(r["fire"])
        elif ev == "vote":
            _on_vote(r, sc, out, counted, deadlines, facts, decided_at, first_decided)
        elif ev == "run_local":
            _on_local_run(r, report, local_seen, len(boots.get(r["node"], ())))
            facts.local.setdefault((r["job"], r["fire"]), set()).add(r["node"])
        elif ev == "renew" and r["ok"] and "lease" in r:
            key4 = (r["node"], r["job"], r["fire"], r["token"])
            facts.wrote((r["job"], r["fire"]), r["t"])
            leases[key4] = (r["lease"], r["t"])
            facts.lease(key4, r["lease"])
            if key4 in started:
                # A renew accepted before the run began (a start reply held half a lease is
                # confirmed this way) extends the lease the run may start under.
                started[key4] = r["t"]
        elif ev == "pause":
            pauses.setdefault(r["node"], []).append((r["t"], r["t"] + r["ms"]))
        elif ev == "fault" and r["kind"] == "store_failover" and r["phase"] == "begin":
            lagging.append((r["t"] - r["lost_ms"], r["t"]))
            facts.lost.append((r["t"] - r["lost_ms"], r["t"], waits))
            unbound.update(k for k, (_, granted) in leases.items() if granted >= r["t"] - r["lost_ms"])
            if not waits:
                lost.append((r["t"] - r["lost_ms"], r["t"]))
            else:
                # With WAIT, no node acted on a write the failover lost: its commits never
                # happened for anyone (the new primary may hand the same tokens out again).
                _forget_commits(r["t"] - r["lost_ms"], commit_log, committed, executors, retry_counts)
        elif ev == "fault" and r["kind"] == "stale_config":
            for node in r["nodes"]:
                if r["phase"] == "begin":
                    stale.begin(node, r["t"], changes)
                else:
                    stale.end(node, r["t"])
        elif ev == "refused":
            taught = held.get(r["store_epoch"])
            if taught is not None:
                stale.learned(r["node"], r["t"], taught)
        elif ev == "decided":
            first_decided.setdefault(r["job"], r["t"])
            decided_at.setdefault(r["job"], []).append((r["fire"], r["t"]))
            facts.wrote((r["job"], r["fire"]), r["t"])
            facts.decided.setdefault((r["job"], r["fire"]), []).append((r["t"], r["state"]))
            if "ep" in r and r.get("by") == "vote":
                out.extend(_deciding_epoch(r, facts))
        elif ev == "boot":
            boots.setdefault(r["node"], []).append(r["t"])
            removals.boot(r["node"], r["t"], r.get("removed", ()))
            # (It reads the store's record; the first one if the store has none to give.)
            stale.learned(r["node"], r["t"], *(text for _, text in changes[:1] + changes[-1:]))
        elif ev == "high_water":
            marks_read.setdefault(r["node"], []).append(r["t"])
        elif ev == "health":
            health.add(r["node"], r["t"], r["ok"])
            reach.add(r["node"], r["t"], r["ok"] or r["why"].startswith(_REACHABLE_WHYS))
        elif ev == "reload":
            removals.config(r["node"], r["t"], r["removed"])
        elif ev == "reached":
            report.reached[r["what"]] += 1
            if r["what"] == "store restarted empty":
                emptied.append(r["t"])
        elif ev == "membership":
            held.setdefault(r["epoch"], r["record"])
            if changes:
                out.extend(_membership_step(changes[-1][1], r, beats))
            changes.append((r["t"], r["record"]))
        elif ev == "hb":
            beats[r["node"]] = (r["epoch"], r["st"] + r["ttl"])
        elif ev == "untrusted_vote":
            out.append(
                Violation(
                    "vote sent by an untrusted node",
                    "",
                    0,
                    r["t"],
                    f"{r['node']} voted while its clock was not trusted ({r['why']})",
                )
            )
        elif ev == "illegal_step":
            out.append(Violation(ILLEGAL_STEP, "", 0, r["t"], f"{r['node']}: {r['why']}"))
        elif ev == "spin":
            out.append(
                Violation(
                    BUSY_LOOP,
                    "",
                    0,
                    r["t"],
                    f"{r['node']}: next_wakeup() is 0 right after a tick that did nothing",
                )
            )
    split = {key for key, sent in counted.items() if len(set(sent.values())) > 1}
    if quorum_mode:
        _check_ledger(sc, report, facts, started, health)
    _check_due(
        sc,
        report,
        runs,
        facts,
        health,
        reach,
        quorum_mode,
        executors,
        split,
        lagging,
        lambda job, fire: _never_seen(fire, job, first_decided, boots, sc),
        lambda job, fire: _lost_to_restarts(job, fire, decided_at, boots, sc),
        _MembershipTimeline(changes, stale) if sc.uses_membership else None,
        removals,
        lambda node, job, fire, lo, hi: _restarted_past(
            node, job, fire, lo, hi, decided_at, boots, marks_read
        ),
    )
    return report


class _StaleNodes:
    """What each node under a ``stale_config`` fault may hold: such a node learns no record from
    heartbeats, only from a refused vote's reply (the store's record) or a restart (it reads the
    store's record), so it can act on a record older than the one in force.

    Liveness counts it as a voter only if it is a member of every record it may hold: then it
    votes, and a refusal teaches it the record in force (and it votes again). A node that froze
    on a record without it abstains as a non-member and never learns (seed 90218: n2 froze on an
    epoch that had removed it, and the joint one that re-added it never reached it).
    """

    SETTLE_MS = 3_000
    """How long after a change a node may still hold the record before it (a heartbeat is 1 s)."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[int, int | None]]] = {}
        """Per node, (begin, end or None) of each ``stale_config`` fault."""
        self.held: dict[str, list[tuple[int, frozenset[str]]]] = {}
        """Per node under a fault, (t, the records it may hold from t), in time order."""

    def begin(self, node: str, t: int, changes: Sequence[tuple[int, str]]) -> None:
        # The record in force a settle time before and every one traced since: any may be held.
        i = bisect.bisect_right([c for c, _ in changes], t - self.SETTLE_MS) - 1
        texts = frozenset(text for _, text in changes[max(i, 0) :])
        self.spans.setdefault(node, []).append((t, None))
        self.held.setdefault(node, []).append((t, texts))

    def end(self, node: str, t: int) -> None:
        spans = self.spans.get(node)
        if spans and spans[-1][1] is None:
            spans[-1] = (spans[-1][0], t)

    def learned(self, node: str, t: int, *texts: str) -> None:
        """A refusal's reply or a restart taught ``node`` one of the records ``texts``."""
        if texts and node in self.held:
            self.held[node].append((t, frozenset(texts)))

    def unaware(self, lo: int, hi: int) -> frozenset[str]:
        """Nodes under a fault near [lo, hi] that may hold, at ``lo``, a record without them."""
        out = set()
        for node, spans in self.spans.items():
            if not any(b <= hi and (e is None or e + self.SETTLE_MS >= lo) for b, e in spans):
                continue
            held = self.held[node]
            i = bisect.bisect_right([t for t, _ in held], lo) - 1
            if i >= 0 and not all(_decode_record(text).is_member(node) for text in held[i][1]):
                out.add(node)
        return frozenset(out)


class _MembershipTimeline:
    """When the namespace record changed, and what it was: liveness counts healthy members only,
    and of those only the ones that can act on the record in force (``_StaleNodes``)."""

    SETTLE_MS = 3_000
    """How long after a change a window is exempt: every node learns a record within a heartbeat
    (1 s) of it, and a refused vote is retried after the reply teaches the newer record."""

    def __init__(self, changes: list[tuple[int, str]], stale: _StaleNodes | None = None) -> None:
        self.changes = [t for t, _ in changes]
        self.records = [_decode_record(text) for _, text in changes]
        self.stale = stale if stale is not None else _StaleNodes()

    def near_change(self, lo: int, hi: int) -> bool:
        return any(lo - self.SETTLE_MS <= t <= hi for t in self.changes)

    def unaware(self, lo: int, hi: int) -> frozenset[str]:
        return self.stale.unaware(lo, hi)

    def configs_at(self, t: int) -> list[Configuration]:
        """The configurations in force at ``t`` (the latest record traced by then)."""
        rec = self.records[max(bisect.bisect_right(self.changes, t) - 1, 0)]
        return [rec.current] + ([rec.old] if rec.old is not None else [])


def _check_lease(
    r: Record,
    key: tuple[str, str, int, int],
    report: Report,
    jobs: Mapping[str, JobDef],
    leases: dict[tuple[str, str, int, int], tuple[int, int]],
    unbound: set[tuple[str, str, int, int]],
    quorum_mode: bool,
    pauses: Mapping[str, list[tuple[int, int]]],
) -> None:
    """A run's end (or kill) came no later, by store time, than the lease the store last granted it.

    Exempt (each counted in ``report.exempt``): a lease granted in writes a failover lost, and a
    run whose node was paused at some time between that lease's grant and the run's end (a paused
    process cannot stop its job); a pause before the grant or after the end excuses nothing.
    ``key``: the run's (node, job, fire, token).
    """
    lease = leases.pop(key, None)
    job = jobs.get(r["job"])
    if lease is None or not quorum_mode or job is None or job.delivery != Delivery.AT_LEAST_ONCE:
        unbound.discard(key)
        return
    if "st" in r and r["st"] > lease[0]:
        if key in unbound:
            unbound.discard(key)
            report.exempt[LEASE_LOST] += 1
            return
        granted = lease[1]
        if any(a <= r["t"] and granted <= b for a, b in pauses.get(r["node"], ())):
            report.exempt[LEASE_PAUSED] += 1
            return
        report.violations.append(
            Violation(
                OUTLIVED_LEASE,
                r["job"],
                r["fire"],
                r["t"],
                f"{r['node']}'s run of token {r['token']} {r['ev']}ed at store time {r['st']}, "
                f"{r['st'] - lease[0]} ms after its lease ended",
            )
        )


def _check_overlap(
    r: Record,
    report: Report,
    alive: Mapping[tuple[str, int], tuple[str, int]],
    fires: set[int],
    facts: _Facts,
    leases: Mapping[tuple[str, str, int, int], tuple[int, int]],
    unbound: set[tuple[str, str, int, int]],
    pauses: Mapping[str, list[tuple[int, int]]],
    emptied: Sequence[int],
) -> None:
    """A run of an ``overlap = "forbid"`` job began while no run of another slot of the job ran.

    The store commits such a slot only while no other slot of the job is ``committed`` or
    ``running`` (docs/protocol.md, step 8), and the executor stops a run before the store can
    end it by its lease (``lost`` or handed on), so no two slots' processes overlap. Exempt
    (each counted in ``report.exempt``): an earlier run whose node was paused at some time
    between its last lease's grant and this start (a paused process cannot stop its job), and
    one whose slot, or this one, had writes a failover lost or whose lease a failover or a
    store restarted empty forgot. A run adopted from a local run (no store) is not judged: its
    side effect began at the ``run_local`` record, under the store-unavailable policy.
    """
    if r.get("adopted"):
        return
    job, fire, t = r["job"], r["fire"], r["t"]
    for other_fire in sorted(fires):
        if other_fire == fire:
            continue
        node, token = alive[(job, other_fire)]
        key4 = (node, job, other_fire, token)
        granted = leases[key4][1] if key4 in leases else _run_began(facts, job, other_fire, node, token, t)
        if (
            key4 in unbound
            or any(granted <= e <= t for e in emptied)
            or facts.in_lost((job, other_fire), unwaited_only=False)
            or facts.in_lost((job, fire), unwaited_only=False)
        ):
            report.exempt[OVERLAP_LOST] += 1
            continue
        if any(a <= t and granted <= b for a, b in pauses.get(node, ())):
            report.exempt[OVERLAP_PAUSED] += 1
            continue
        report.violations.append(
            Violation(
                OVERLAPPED,
                job,
                fire,
                t,
                f"{r['node']} started token {r['token']} while {node}'s run of slot {other_fire} "
                f"(token {token}) still ran",
            )
        )


def _run_began(facts: _Facts, job: str, fire: int, node: str, token: int, default: int) -> int:
    """True time the run of ``(job, fire)`` by ``node`` under ``token`` began (its ``run`` record)."""
    for n, tok, t in facts.runs.get((job, fire), ()):
        if n == node and tok == token:
            return t
    return default


def _on_run(
    r: Record,
    report: Report,
    jobs: Mapping[str, JobDef],
    committed: dict[tuple[str, int], int],
    runs: dict[tuple[str, int], list[int]],
    quorum_mode: bool,
    late: bool,
    forgotten: bool,
    retry_tokens: Mapping[tuple[str, int], set[int]],
) -> None:
    key = (r["job"], r["fire"])
    token = r["token"]
    report.runs += 1
    current = committed.get(key, 0)
    if late:
        # The core ran a job whose start lease had run out before the run began
        # (a start reply handled after a long pause): whatever else this run
        # breaks follows from that, so it is reported once, as that.
        report.violations.append(
            Violation(
                LATE_RUN,
                r["job"],
                r["fire"],
                r["t"],
                f"{r['node']} ran token {token} more than a lease after its start",
            )
        )
        report.duplicates += bool(runs.get(key))
        runs.setdefault(key, []).append(token)
        return
    if token < current:
        report.violations.append(
            Violation(
                "execution under a stale token",
                r["job"],
                r["fire"],
                r["t"],
                f"{r['node']} ran token {token}, store had committed {current}",
            )
        )
    earlier = runs.setdefault(key, [])
    if earlier:
        job = jobs.get(r["job"])
        again = quorum_mode and job is not None and job.delivery == Delivery.AT_LEAST_ONCE
        retried = token in retry_tokens.get(key, ())
        if retried and token <= max(earlier):
            # (A start among the writes a failover lost: the new primary handed the retry's token
            # out again, the known limit below, not a store that reuses tokens: seed 105216.)
            report.duplicates += forgotten and token in earlier
            report.violations.append(
                Violation(
                    FAILOVER_LOSS if forgotten else "retry without a higher token",
                    r["job"],
                    r["fire"],
                    r["t"],
                    f"{r['node']} ran retry token {token} after tokens {earlier}"
                    + (": the store lost the start of that retry" if forgotten else ""),
                )
            )
        elif retried:
            report.retries += 1
            report.reached["failed run retried"] += 1
        elif again and token > max(earlier):
            report.reruns += 1
            report.reached["at-least-once slot re-run after a takeover"] += 1
        elif forgotten:
            # The earlier start was among the writes a failover lost: the new
            # primary saw a slot that never started and handed it on.
            report.duplicates += 1
            report.violations.append(
                Violation(
                    FAILOVER_LOSS,
                    r["job"],
                    r["fire"],
                    r["t"],
                    f"{r['node']} ran token {token}: the store lost the start of tokens {earlier}",
                )
            )
        else:
            report.duplicates += 1
            report.violations.append(
                Violation(
                    "slot executed twice",
                    r["job"],
                    r["fire"],
                    r["t"],
                    f"{r['node']} ran token {token} after tokens {earlier}",
                )
            )
    earlier.append(token)


def _never_seen(
    fire: int, job: str, first_decided: Mapping[str, int], boots: Mapping[str, list[int]], sc: Scenario
) -> bool:
    """Whether nobody can know slot ``fire`` of ``job`` was due: every node restarted after it
    (losing what it knew) while the store still had no decided slot of the job (so the restart's
    catch-up had no high-water mark to count from)."""
    decided = first_decided.get(job, 1 << 62)
    return all(any(fire < b < decided for b in boots.get(n, ())) for n in sc.node_ids)


def _lost_to_restarts(
    job: str,
    fire: int,
    decided_at: Mapping[str, list[tuple[int, int]]],
    boots: Mapping[str, list[int]],
    sc: Scenario,
) -> bool:
    """Whether every node restarted after slot ``fire`` of ``job``, and a later slot of the job
    was decided before the first of those restarts: the mark then stood past the slot, so no
    restart's catch-up reaches it (the ``LOCAL_KILLED`` limit)."""
    after = [min((b for b in boots.get(n, ()) if b > fire), default=None) for n in sc.node_ids]
    if any(b is None for b in after):
        return False
    first = min(b for b in after if b is not None)
    return any(f > fire and t < first for f, t in decided_at.get(job, ()))


def _restarted_past(
    node: str,
    job: str,
    fire: int,
    lo: int,
    hi: int,
    decided_at: Mapping[str, list[tuple[int, int]]],
    boots: Mapping[str, list[int]],
    marks_read: Mapping[str, list[int]] | None = None,
) -> bool:
    """Whether ``node`` booted in (``lo``, ``hi``] and a slot of ``job`` later than ``fire`` was
    decided before that boot's catch-up read the job's high-water mark: the catch-up starts at
    the mark, past the slot, so a node whose first chance to record the slot came only with it
    (it was down, or its records held in memory were lost to the restart) never had one.

    The read is the store's answer to the boot's first high-water read (``marks_read``; the boot
    itself without one): a decision between the boot and that answer raised the mark the
    catch-up started at, as the sweep that decided a slot 2 ms after n4 booted did (explorer
    seed 98304, where judging by the boot left the slots before it "unaccounted")."""
    later = [t for f, t in decided_at.get(job, ()) if f > fire]
    if not later:
        return False
    first = min(later)
    reads = (marks_read or {}).get(node, ())
    node_boots = sorted(boots.get(node, ()))
    for i, b in enumerate(node_boots):
        if not lo < b <= hi:
            continue
        until = node_boots[i + 1] if i + 1 < len(node_boots) else None
        read = min((t for t in reads if t >= b and (until is None or t < until)), default=b)
        if first < read:
            return True
    return False


def _forget_commits(
    since: int,
    log: list[tuple[int, tuple[str, int], int, str, str]],
    committed: dict[tuple[str, int], int],
    executors: dict[tuple[str, int], list[str]],
    retry_counts: dict[tuple[str, int], int],
) -> None:
    """Drop the commits made at true time ``since`` or later from what the checker holds as true."""
    lost = [e for e in log if e[0] >= since]
    if not lost:
        return
    log[:] = [e for e in log if e[0] < since]
    for key in {e[1] for e in lost}:
        kept = [e for e in log if e[1] == key]
        if kept:
            committed[key] = max(e[2] for e in kept)
            executors[key] = [e[3] for e in kept]
        else:
            committed.pop(key, None)
            executors.pop(key, None)
        retry_counts[key] = sum(1 for e in kept if e[4] == "retry")


def _on_local_run(r: Record, report: Report, seen: set[tuple[str, int, str, int]], boot: int) -> None:
    """A ``run-local`` run: never before the fire time by the node's clock, once per slot per node
    process (``boot``: a restarted node keeps no memory of the local runs before)."""
    report.local_runs += 1
    report.reached["slot run locally while the store was unreachable"] += 1
    key = (r["node"], boot, r["job"], r["fire"])
    if r["wall"] < r["fire"]:
        report.violations.append(
            Violation(
                "local run before its fire time",
                r["job"],
                r["fire"],
                r["t"],
                f"{r['node']} ran it locally {r['fire'] - r['wall']} ms early by its own clock",
            )
        )
    if key in seen:
        report.violations.append(
            Violation("slot run locally twice on one node", r["job"], r["fire"], r["t"], f"on {r['node']}")
        )
    seen.add(key)


def _quorum_short(config: Configuration, agreeing: Sequence[str]) -> str:
    """Why ``agreeing`` is not a quorum of ``config`` ("" when it is), counted here, not by the model."""
    members = set(config.members)
    have = [n for n in agreeing if n in members]
    if len(have) >= config.quorum:
        return ""
    return f"{len(have)} of {', '.join(config.members)} agreeing {have}, need {config.quorum}"


def _repick_violations(
    r: Record, agreeing: Sequence[str], earlier: Sequence[str], forgotten: bool
) -> list[Violation]:
    """A retry or takeover ``r`` that gave the slot to ``earlier``'s executor again: wrong while an
    ``agreeing`` member voter (:func:`_may_execute`) never had it, or (every one had) while
    another's last turn is older.
    Both need the store's whole list of assignments, so neither is judged after a failover lost
    some (``forgotten``: the store may count a voter as fresh that the trace saw assigned)."""
    if forgotten:
        return []
    fresh = [n for n in agreeing if n not in earlier]
    why = ""
    if fresh:
        kind, why = "executor re-picked while another voter was left", f"{', '.join(fresh)} never had it"
    else:
        last = {n: i for i, n in enumerate(earlier)}
        oldest = min((n for n in agreeing if n in last), key=last.__getitem__, default=r["executor"])
        if oldest != r["executor"]:
            kind = "executor re-picked ahead of a voter that waited longer"
            why = f"{oldest}'s last turn came before {r['executor']}'s"
    if not why:
        return []
    text = f"{r['by']} gave token {r['token']} to {r['executor']} again; {why}"
    return [Violation(kind, r["job"], r["fire"], r["t"], text)]


def _membership_step(before: str, r: Record, beats: dict[str, tuple[int, int]]) -> list[Violation]:
    """The namespace's record went from ``before`` to ``r``'s: a change of members must pass
    through the joint state (``old`` the members before it), and only a finish leaves it (its
    ``current`` kept). Judged where the epoch grew by one: a record that went back or skipped
    ahead is a failover's lost writes or a store restarted empty, whose records the membership
    rule judges at each commit instead (docs/protocol.md, "Why it is safe")."""
    try:
        prev, now = _decode_record(before), _decode_record(r["record"])
    except ValueError:
        return []  # (a record that does not parse: the membership rule reports it at a commit)
    if now.epoch != prev.epoch + 1:
        return []
    if now.joint:
        ok = not prev.joint and now.old == prev.current
        what = "a joint record whose old members are not the members before it"
    elif prev.joint:
        ok = now.current == prev.current
        what = "a finish that changed the members"
        # A finish waits until every new member holds the joint epoch, by a live heartbeat (the
        # simulator never forces one): else a member still on the old record could form, with
        # the old members, a quorum the new configuration never agreed to.
        held_until = {n: beats.get(n, (0, 0)) for n in prev.current.members}
        lagging = [n for n, (e, until) in held_until.items() if e < prev.epoch or until <= r.get("st", 0)]
        if ok and lagging and "st" in r:
            ok = False
            what = f"a finish before {', '.join(lagging)} held epoch {prev.epoch} (by a live heartbeat)"
    else:
        # ("size = N": an open seat filled by the id that registered, size and quorum kept.)
        was, got = prev.current, now.current
        ok = (
            was.open_seats > 0
            and (got.size, got.quorum) == (was.size, was.quorum)
            and len(got.members) == len(was.members) + 1
            and set(was.members) < set(got.members)
        )
        what = "members changed without a joint phase"
    if ok:
        return []
    text = f"epoch {prev.epoch} {before!r} became epoch {now.epoch} {r['record']!r} by {r['by']}: {what}"
    return [Violation(MEMBERSHIP_UNJOINT, "", 0, r["t"], text)]


def _may_execute(r: Record) -> list[str]:
    """The voters the store may hand the slot of commit ``r``, in vote order: agreeing, and members
    (current or, while joint, old) of the record the store enforced for the job at that commit,
    traced with it as ``mr`` (any agreeing voter on a job without one). A voter the membership
    removed since it voted is not "left" for a retry or takeover (docs/protocol.md § Membership);
    a record that does not parse is the membership rule's to report, and hides nobody here."""
    spec = r["spec"]
    agreeing = [n for n, h in r["votes"] if h == spec]
    text = r.get("mr")
    if text is None:
        return agreeing
    try:
        record = _decode_record(text)
    except ValueError:
        return agreeing
    return [n for n in agreeing if record.is_member(n)]


def _deciding_epoch(r: Record, facts: _Facts) -> list[Violation]:
    """A vote's decision: the epoch its slot names is the record the job enforced when a quorum
    decided it (a commit, or a skip for overlap after the quorum), 0 when none did (missed,
    paused) or the job had no record; kept for the slot's ledger entry (``DECIDING_EPOCH``)."""
    text = r["mr"]
    quorum = r["ev"] == "commit" or r["why"].startswith("overlap forbidden")
    head = text.split(";", 1)[0]
    want = int(head) if quorum and head.isdecimal() else 0
    facts.deciding_epochs[(r["job"], r["fire"])] = r["ep"]
    if r["ep"] == want:
        return []
    why = f"the {r.get('state', 'committed')} slot names epoch {r['ep']}; it was decided under epoch {want}"
    return [Violation(DECIDING_EPOCH, r["job"], r["fire"], r["t"], why)]


def _check_membership(
    r: Record,
    agreeing: list[str],
    held: dict[int, str],
    job_epochs: dict[str, int],
    out: list[Violation],
    first_records: dict[str, str],
) -> bool:
    """The membership rule for one commit (see the module docstring); True for a joint one."""
    job, fire, t = r["job"], r["fire"], r["t"]
    text = r["mr"]
    try:
        record = _decode_record(text)
    except ValueError as exc:
        out.append(Violation(MEMBERSHIP_FOREIGN, job, fire, t, f"the job's record is not one: {exc}"))
        return False
    before = job_epochs.get(job, 0)
    if held.get(record.epoch) != text:
        why = f"the job enforces {text!r}; the cluster's epoch {record.epoch} was {held.get(record.epoch)!r}"
        # A job's first record is taken from the first vote with an epoch, whoever sent it: no
        # member yet to hold a stranger to (docs/protocol.md, "A job's first record"). A record
        # naming a node no record of the namespace ever held, on a job no commit had judged (or
        # still the one it started with), is that documented limit; any other foreign record is
        # a violation (a job taking a stranger's record over one it had: a planted bug).
        members = {n for h in held.values() for n in _decode_record(h).members}
        stranger = any(n not in members for n in record.members)
        first = first_records.setdefault(job, text) == text and before in (0, record.epoch)
        out.append(
            Violation(FIRST_RECORD_FORGED if stranger and first else MEMBERSHIP_FOREIGN, job, fire, t, why)
        )
    if record.epoch < before:
        why = f"committed under epoch {record.epoch} after a commit under epoch {before}"
        out.append(Violation(MEMBERSHIP_BACKWARD, job, fire, t, why))
    job_epochs[job] = max(before, record.epoch)
    if r["by"] != "vote":
        return False  # (a retry or takeover re-commits a slot its votes decided earlier)
    configs = [("new", record.current)] + ([("old", record.old)] if record.old is not None else [])
    for name, config in configs:
        short = _quorum_short(config, agreeing)
        if short:
            out.append(Violation(MEMBERSHIP_QUORUM, job, fire, t, f"epoch {record.epoch} {name}: {short}"))
    return record.old is not None


def _on_vote(
    r: Record,
    sc: Scenario,
    out: list[Violation],
    counted: dict[tuple[str, int], dict[str, str]],
    deadlines: dict[tuple[str, int], int],
    facts: _Facts,
    decided_at: dict[str, list[tuple[int, int]]],
    first_decided: dict[str, int],
) -> None:
    """One vote call, slot by slot (a hundred slots a vote at a burst, so one pass over them, the
    lookups hoisted and :meth:`_Facts.wrote` inlined): what the store wrote and whose vote it
    counted, the slots the vote decided, and each counted vote judged against the slot's window."""
    t, st, node, max_skew = r["t"], r["st"], r["node"], sc.settings.max_skew_ms
    writes, voted = facts.writes, facts.voted
    for job, fire, status, own_deadline, spec in r["slots"]:
        key = (job, fire)
        if status in ("missed", "skipped"):
            writes.setdefault(key, []).append(t)
            if status == "skipped":
                voted.setdefault(key, set()).add(node)
            # This vote ended the slot (past its deadline; the job paused): the store
            # decided it here, raising the job's mark, as a commit does (seed 123058).
            decided_at.setdefault(job, []).append((fire, t))
            first_decided.setdefault(job, t)
            continue
        if status not in ("recorded", "committed"):
            continue
        writes.setdefault(key, []).append(t)
        voted.setdefault(key, set()).add(node)
        counted.setdefault(key, {})[node] = spec
        # A proposed slot keeps the largest deadline any vote carried (a run-once catch-up
        # widens it; docs/protocol.md): a later vote with a shorter one is judged by that.
        deadline = deadlines[key] = max(deadlines.get(key, 0), own_deadline)
        if st < fire - max_skew:
            out.append(
                Violation(
                    "vote counted before its window",
                    job,
                    fire,
                    t,
                    f"{node}'s vote counted at store time {st}, {fire - st} ms before the slot",
                )
            )
        elif st > fire + deadline:
            out.append(
                Violation(
                    "vote counted after its deadline",
                    job,
                    fire,
                    t,
                    f"{node}'s vote counted {st - fire - deadline} ms after the deadline",
                )
            )


def _end_clock_errors(sc: Scenario) -> dict[str, int]:
    """Node → an upper bound on how far its wall clock can be off near the end of the run: the
    steps and lies still in effect then, what drifts accumulated, and the initial skew and drift."""
    base = sc.clocks.skew_ms + sc.clocks.drift_ppm * sc.duration_ms // 1_000_000
    per_node = dict.fromkeys(sc.node_ids, base)
    for f in sc.faults:
        lasting = f.for_ms == 0 or f.at_ms + f.for_ms >= sc.duration_ms
        if f.kind in ("clock_jump", "ntp_lie") and lasting:
            error = abs(f.by_ms)
        elif f.kind == "clock_drift":  # (what a drift accumulated stays after it ends)
            error = abs(f.ppm) * (f.for_ms or sc.duration_ms - f.at_ms) // 1_000_000
        else:
            continue
        for node in f.nodes or sc.node_ids:
            per_node[node] += error
    return per_node


def _end_clock_error(sc: Scenario, errors: Mapping[str, int] | None = None) -> int:
    """How much the end-of-run clock error shrinks the judged range: the error of the node with the
    quorum-th smallest one (:func:`_end_clock_errors`), so a minority of nodes whose clocks stay
    far off to the end does not stop the checker judging the slots the others decide. A slot judged
    only thanks to that, whose tail some nodes' errors still exceed (``late`` in
    :func:`_check_due`), is judged without them: they count neither as nodes that could record it
    nor as healthy voters or sound executors (a user audit: one node stepped back an hour
    for good judged no slot of a 5-node cluster, ``checker/one-clock-back-for-good.toml``)."""
    errors = _end_clock_errors(sc) if errors is None else errors
    ordered = sorted(errors.values())
    if not ordered:
        return 0
    return ordered[min(sc.nodes // 2, len(ordered) - 1)]


def _tail_ms(sc: Scenario, job: JobDef) -> int:
    """How long before the end of the run a slot of ``job`` must be due to be judged: its deadline,
    a start timeout, a lease and a run, three sweep gaps and a margin, and the retry bound."""
    s = sc.settings
    # (A slot created after a node's sweep waits for the next one, up to the sweep gap's cap.)
    gap = max_sweep_gap(s.sweep_ms, s.start_timeout_ms)
    run_hi = min(job.run_ms[1], job.timeout_ms)
    return (
        job.deadline_ms + s.start_timeout_ms + s.lease_ms + run_hi + 3 * gap + 5_000 + _retry_bound(sc, job)
    )


def _cut_off(
    sc: Scenario,
    facts: _Facts,
    job: JobDef,
    fire: int,
    retrying: bool,
    recorders: _Health,
    settle: int,
    late: frozenset[str] = frozenset(),
    behind: Mapping[str, int] | None = None,
) -> bool:
    """Whether the end of the run came before an unended slot could be recorded: like a slot in
    the tail, not checkable in this run (``CUT_OFF``).

    Most slots any node can end once they can be recorded (:meth:`_Facts.recordable_from`): a
    sweep (missed, lost) or the executor's finish, so they count as cut off when no node could
    reach the store for ``settle`` after that. Two kinds need one of the slot's own voters to run
    it: a due retry (the failed run's finish landed, the retry has not started), and an
    at-least-once start whose finish never landed (its lease runs out and the store hands the slot
    on). Those are cut off only when no voter the store could hand it to could reach the store
    long enough for its turn to come (the store goes round them, one start timeout and a sweep
    gap each), the backoff and the run; and, for the at-least-once run, its executor could not
    have finished it within that run's lease (a killed run it cannot finish).

    ``late``: nodes whose clock may still run behind at the end by more than the slot's slack
    (:func:`_end_clock_error`): they come to the slot too late to count for any of this.
    ``behind``: for a slot nobody touched, how far each node's clock may run behind near it
    (:func:`_clock_errors_near`): a node comes to record it that much later, so the record can
    land no sooner than the least behind of them allows (explorer seed 100095: every clock a
    minute back for good, and every node cut off from the store a minute after the last slots).
    """
    key = (job.name, fire)
    among = frozenset(sc.node_ids) - late if late else None
    end = sc.start_ms + sc.duration_ms
    start = facts.recordable_from(job.name, fire, job.deadline_ms)
    last = facts.last_start(job.name, fire)
    unfinished = last is not None and not facts.finish_landed(last)
    due_retry = retrying and not unfinished
    if not due_retry and not (job.delivery == Delivery.AT_LEAST_ONCE and unfinished):
        if behind:
            start += min(behind.get(n, 0) for n in (among if among is not None else sc.node_ids))
        return recorders.longest_healthy(start, end, among) < settle
    s = sc.settings
    voters = facts.eligible.get(key, frozenset()) - late
    turns = len(voters) * (s.start_timeout_ms + max_sweep_gap(s.sweep_ms, s.start_timeout_ms))
    rerun = turns + min(job.run_ms[1], job.timeout_ms) + (job.retry_backoff_ms if due_retry else 0)
    if due_retry or last is None:
        return recorders.longest_healthy(start, end, voters) < settle + rerun
    lease = facts.token_leases.get(last, start)
    ended = facts.ended.get(last)
    if ended is not None and last not in facts.killed and last[0] not in late:
        alone = frozenset({last[0]})
        if recorders.longest_healthy(ended[0], min(lease, end), alone) >= settle:
            return False  # its executor could have finished it
    return recorders.longest_healthy(max(start, lease), end, voters) < settle + rerun


def _retry_bound(sc: Scenario, job: JobDef) -> int:
    """How long a ``retrying`` chain may last before its terminal entry: per retry, the backoff,
    then a start (a start timeout and a sweep gap if its executor does not start it, so a
    takeover), the run, and a lease and a sweep gap if its executor vanishes mid-run."""
    s = sc.settings
    gap = max_sweep_gap(s.sweep_ms, s.start_timeout_ms)
    run_hi = min(job.run_ms[1], job.timeout_ms)
    return job.retries * (job.retry_backoff_ms + s.start_timeout_ms + run_hi + s.lease_ms + 2 * gap)


def _could_record(health: _Health, reach: _Health) -> _Health:
    """The timeline the cut-off exemption reads: which nodes could reach the store. A node whose
    clock is untrusted can, and must record "missed: clock untrusted" (``sim.mutants`` plants the
    lenient reading, ``health``, to show a test catches it)."""
    return reach


def _check_due(
    sc: Scenario,
    report: Report,
    runs: dict[tuple[str, int], list[int]],
    facts: _Facts,
    health: _Health,
    reach: _Health,
    quorum_mode: bool,
    executors: dict[tuple[str, int], list[str]],
    split: set[tuple[str, int]],
    lagging: list[tuple[int, int]],
    never_seen: Callable[[str, int], bool],
    lost_to_restarts: Callable[[str, int], bool],
    membership: _MembershipTimeline | None = None,
    removals: _Removals | None = None,
    restarted_past: Callable[[str, str, int, int, int], bool] = lambda *_: False,
) -> None:
    q = sc.nodes // 2 + 1
    everyone = frozenset(f"n{i}" for i in range(1, sc.nodes + 1))
    removals = removals or _Removals()
    end = sc.start_ms + sc.duration_ms
    ahead_faults = _clock_faults(sc, ahead=True)
    behind_faults = _clock_faults(sc, ahead=False)
    end_errors = _end_clock_errors(sc)
    end_error = _end_clock_error(sc, end_errors)
    # (No slot's ``late`` set can hold a node unless its slack is below the largest end error.)
    worst_end_error = max(end_errors.values(), default=0)
    early = sc.settings.max_skew_ms + sc.settings.sweep_ms
    base_error = _base_clock_error(sc)
    # Long enough for one node to vote: a call timing out, the retry, and a second call.
    enough = 2 * sc.network.timeout_ms + sc.settings.retry_ms + sc.settings.max_skew_ms
    # Long enough, once a node is healthy again, for the records it held to land: its probe's
    # longest gap, then a sweep's, then a call (quorum_cron/core/retries.py).
    settle = (
        enough
        + (sc.settings.retry_ms << MAX_RETRY_DOUBLINGS)
        + max_sweep_gap(sc.settings.sweep_ms, sc.settings.start_timeout_ms)
    )
    recorders = _could_record(health, reach)
    out = report.violations
    for job in sc.jobs:
        schedule = make_schedule(job)
        # (A node whose clock still runs behind at the end handles a slot that much later.)
        tail = _tail_ms(sc, job)
        last = end - tail - end_error
        for fire in schedule.fire_times(sc.start_ms, last):
            key = (job.name, fire)
            # Nodes whose clock may run behind at the end by more than this slot leaves them:
            # judged without them (a minority, :func:`_end_clock_error`).
            slack = end - tail - fire
            late = _NOBODY
            if slack < worst_end_error:
                late = frozenset(n for n, e in end_errors.items() if e > slack)
            report.due += 1
            ran = key in runs
            if not ran:
                report.misses += 1
            if not quorum_mode:
                continue
            entries = facts.ledger.get(key, ())
            final = next((e for e in reversed(entries) if e["state"] != "retrying"), None)
            state = final["state"] if final is not None else None
            hi = fire + job.deadline_ms
            lo = fire - early - _near_clock_error(base_error, ahead_faults, fire - early, hi)
            if state is None:
                retrying = bool(entries)
                # A reload had taken the job from every node before it could record the slot,
                # and nothing of the slot happened: nobody owes it a record.
                untouched = not (ran or key in facts.local or key in facts.voted or key in facts.writes)
                # (A node whose clock runs behind comes to the slot that much later: its first
                # chance to record it is when its clock reads the deadline; explorer seed 71193.)
                behind = _clock_errors_near(behind_faults, lo, hi) if untouched else {}
                unowned = False
                if removals.nodes_near(job.name, lo, end):
                    # (A node whose first chance came only with a restart whose catch-up starts
                    # past the slot, a later one decided before it, never had one: seed 76003.
                    # Nor did one that could not reach the store until too near the end for a
                    # record to land: the others lacking the job, nobody could record it. A node
                    # that voted for the slot, ran it or was handed it keeps it although a reload
                    # removed the job (core/jobswap.py): it is never one that lacked it.)
                    holders = facts.voted.get(key, set()) | facts.local.get(key, set())
                    holders |= set(executors.get(key, ()))
                    chances = {
                        n: end
                        if n in late
                        else recorders.first_ok(n, hi + base_error + behind.get(n, 0), end)
                        for n in everyone
                    }
                    lacking = {
                        n
                        for n, c in chances.items()
                        if n not in holders and removals.lacked(n, job.name, lo, c)
                    }
                    unowned = bool(lacking) and all(
                        n in lacking
                        or c + settle > end
                        or (untouched and restarted_past(n, job.name, fire, hi, c))
                        for n, c in chances.items()
                    )
                orphan = not untouched and removals.orphaned(job.name, everyone)
                local = facts.local.get(key, set())
                killed = bool(local) and key not in facts.voted and lost_to_restarts(job.name, fire)
                cut = _cut_off(sc, facts, job, fire, retrying, recorders, settle, late, behind)
                _unaccounted(
                    report,
                    facts,
                    job,
                    fire,
                    retrying,
                    never_seen,
                    health,
                    enough,
                    cut,
                    unowned,
                    orphan,
                    killed,
                )
            # Nodes that lacked the job when they would vote for the slot (its vote lead, within
            # the clock error a healthy node may have): they do not vote.
            at = fire - sc.settings.vote_lead_ms
            gone = removals.nodes_near(job.name, at - sc.settings.max_skew_ms, at + sc.settings.max_skew_ms)
            timely = everyone - late
            healthy, stable = health.stable_healthy(lo, hi, timely if late else None)
            # A slot committed to an unhealthy executor waits for a takeover
            # (start timeout), which the deadline may not leave room for.
            sound = all(
                n not in late and health.healthy_throughout(n, lo, hi) for n in executors.get(key, [])
            )
            # Voters with different definitions (a deploy in progress) must not fire.
            if membership is not None and membership.records:
                # Membership: healthy members of every configuration in force, no change nearby.
                if membership.near_change(lo, hi):
                    report.exempt[MEMBERSHIP_SETTLING] += 1
                    continue
                enough_members = enough_with_gone = True
                unaware = membership.unaware(lo, hi) | late
                for config in membership.configs_at(lo):
                    aware = frozenset(config.members) - unaware
                    have, _ = health.stable_healthy(lo, hi, aware - gone)
                    enough_members = enough_members and have >= config.quorum
                    if gone:
                        have, _ = health.stable_healthy(lo, hi, aware)
                        enough_with_gone = enough_with_gone and have >= config.quorum
                if not (stable and sound and key not in split and enough_members):
                    if gone and stable and sound and key not in split and enough_with_gone:
                        report.exempt[JOB_REMOVED] += 1  # (a quorum only with the nodes that lacked it)
                    continue
            else:
                kept_healthy = health.stable_healthy(lo, hi, timely - gone)[0] if gone else healthy
                if not (stable and sound and key not in split and kept_healthy >= q):
                    if gone and stable and sound and key not in split and healthy >= q:
                        report.exempt[JOB_REMOVED] += 1  # (a quorum only with the nodes that lacked it)
                    continue
            report.liveness_checked += 1
            decided = ran or state in RAN_STATES
            if state == "skipped" and final is not None and final["why"].startswith(SKIP_REASONS):
                decided = True
            if decided:
                continue
            ended = state or ("retrying" if entries else "unaccounted")
            if facts.in_lost(key, unwaited_only=False) and any(a <= hi and lo <= b for a, b in lagging):
                out.append(
                    Violation(
                        FAILOVER_STALL,
                        job.name,
                        fire,
                        fire,
                        f"{healthy} nodes healthy throughout the window, but its writes went to "
                        f"a primary whose replica had stopped taking them; slot ended {ended}",
                    )
                )
            else:
                why = f" ({final['why']})" if final is not None else ""
                out.append(
                    Violation(
                        LIVENESS,
                        job.name,
                        fire,
                        fire,
                        f"{healthy} nodes healthy throughout the window, slot ended {ended}{why}",
                    )
                )


def _unaccounted(
    report: Report,
    facts: _Facts,
    job: JobDef,
    fire: int,
    retrying: bool,
    never_seen: Callable[[str, int], bool],
    health: _Health,
    enough: int,
    cut_off: bool,
    unowned: bool = False,
    orphan: bool = False,
    killed_local: bool = False,
) -> None:
    """A due slot with no terminal ledger entry: a known limit, cut off by the end of the run
    (:func:`_cut_off`), or a violation (the slot's retry chain never ended, nobody could vote,
    or nobody recorded it)."""
    key = (job.name, fire)
    if facts.in_lost(key, unwaited_only=True):
        kind, detail = FAILOVER_LOSS, "the store failed over to a replica without the slot's writes"
    elif never_seen(job.name, fire):
        kind, detail = (
            NEVER_SEEN,
            "no store call had named the job before the slot, and every node restarted "
            "before one could record it",
        )
    elif cut_off:
        report.cut_off += 1
        report.exempt[CUT_OFF] += 1
        return
    elif retrying:
        kind, detail = RETRY_UNENDED, "its last ledger entry is 'retrying': no retry ended it"
    elif unowned:
        report.exempt[JOB_REMOVED] += 1
        return
    elif orphan:
        kind, detail = (
            REMOVED_UNSWEPT,
            "every node restarted without the job (a reload removed it) before the slot ended",
        )
    elif killed_local:
        kind, detail = (
            LOCAL_KILLED,
            "only run locally; every node restarted before a record of it landed, a later "
            "slot having raised the high-water mark past it",
        )
    elif (voted := facts.voted.get(key)) or health.longest_healthy(fire, fire + job.deadline_ms) >= enough:
        by = f" (voted by {', '.join(sorted(voted))})" if voted else ""
        kind, detail = UNACCOUNTED, f"no terminal ledger entry at the end of the run{by}"
    else:
        kind, detail = (
            UNVOTED,
            "no node could vote in its window (store unreachable or every "
            "clock untrusted) and no terminal ledger entry at the end",
        )
    report.violations.append(Violation(kind, job.name, fire, fire, detail))
