"""The checker: ground truth + ledger + fault log of a run → violations, figures, per-fault table.

What it demands (each failure is one line in ``violations``; any makes the
exit status 1):

* **duplicate** — no slot ``(job, fire time)`` started more than once
  (the jobs are at-most-once);
* **token order** — per job, no fencing token is used by two runs, and a
  slot's runs (re-runs, takeovers) have strictly increasing tokens in the
  order they really started (the baseline has no tokens: not checked).
  Across slots the protocol orders tokens by commit, not process starts: a
  start reply that reaches its executor late (packet loss) can launch an
  older slot's run after a newer slot's, which is counted in a note, not a
  violation (a resource fencing by token would refuse the older one: that
  is what the token is for);
* **early** — no run started before its fire time minus ``max_skew`` by the
  real clock (bash's ``$EPOCHREALTIME``, which libfaketime leaves alone);
* **phantom** — no run of a slot that is not on the job's schedule;
* **unaccounted** — every due slot either ran or has a ledger entry
  (missed, lost, skipped...); **no reason** — and that entry says why;
* **unrecorded** — every due slot that ran has a ledger entry too (the
  product's promise: each slot ends in one), on the quorum scheduler only
  (the baseline keeps no ledger). A run that started less than
  ``lease_ms`` + :data:`SETTLE_MS` before the nodes were stopped is *in
  flight*: its finish, or the sweep that calls it lost once its lease
  expires, may not have landed yet, so it is counted in a note, not judged;
* **ledger contradicts** — no slot recorded ``missed``/``skipped`` that ran,
  none recorded ``succeeded`` that never started, and none whose entry names
  another executor or token than its one run;
* **crash** — no node process exited by itself during the run;
* **coverage** — of the due slots during which a quorum of nodes could
  reach Redis (no impairing fault on them from one second before the fire
  time to the starting deadline, counting ``recovery_s`` after each heal),
  at least 99 % ran. A slot that ended ``lost`` because its executor was
  itself hit by an impairing fault around its start is not counted: an
  at-most-once slot whose executor vanished must not be re-run (it may have
  started); the report shows how many.

Due slots are those from two seconds after the run's start to its end.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.plan import IMPAIRING, REDIS_KINDS

__all__ = ["COVERAGE_MIN", "Report", "Run", "RunDirError", "check", "check_dir", "load_truth"]

COVERAGE_MIN = 0.99
WARMUP_MS = 2000
LEAD_MS = 1000
"""A node must have been healthy this long before a fire time for the slot to count in coverage."""
SETTLE_MS = 1000
"""Beyond one lease: how long a run's slot may take to get its ledger entry (its finish, or a
sweep calling it lost once the lease expired) before a missing one is a violation."""
TAIL_MS = 3000
"""What the harness waits past the last due slot's starting deadline before it stops the nodes
(``chaos.run``): the stop time of a ``run.json`` written before ``stopped_ms`` was recorded."""


@dataclass(frozen=True)
class Run:
    """One ground-truth line: a job process that really started."""

    job: str
    slot: int
    node: str
    start_ms: float
    token: int | None


def load_truth(path: Path) -> list[Run]:
    """``JOB SLOT NODE START [TOKEN]`` lines (the baseline's jobs write no token)."""
    runs = []
    for raw in path.read_text().splitlines():
        p = raw.split()
        if len(p) not in (4, 5):
            continue
        token = int(p[4]) if len(p) == 5 and p[4].isdigit() else None
        runs.append(Run(p[0], int(p[1]), p[2], float(p[3]) * 1000, token))
    return runs


@dataclass
class FaultRow:
    index: int
    kind: str
    targets: str
    at_s: float
    secs: float
    due: int = 0
    ran: int = 0
    ledger_only: Counter[str] = field(default_factory=Counter)
    unaccounted: int = 0
    duplicates: int = 0
    early: int = 0
    eligible: int = 0
    eligible_ran: int = 0


@dataclass
class Report:
    scheduler: str
    seed: int
    nodes: int
    slots_due: int = 0
    ran: int = 0
    duplicates: int = 0
    early: int = 0
    unaccounted: int = 0
    unrecorded: int = 0
    eligible: int = 0
    eligible_ran: int = 0
    lost_to_fault: int = 0
    states: Counter[str] = field(default_factory=Counter)
    faults_by_kind: Counter[str] = field(default_factory=Counter)
    rows: list[FaultRow] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)
    not_run: Counter[tuple[int, str, str, str]] = field(default_factory=Counter)
    """Due slots that did not run, by (fault row, its kind, ledger state, ledger reason): the
    report's answer to "why", from ledger.json (the run's Redis is gone when it is read)."""
    notes: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return self.eligible_ran / self.eligible if self.eligible else 1.0

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "seed": self.seed,
            "nodes": self.nodes,
            "slots_due": self.slots_due,
            "ran": self.ran,
            "duplicates": self.duplicates,
            "early": self.early,
            "unaccounted": self.unaccounted,
            "unrecorded": self.unrecorded,
            "coverage": round(self.coverage, 4),
            "eligible": self.eligible,
            "lost_to_fault": self.lost_to_fault,
            "faults": sum(self.faults_by_kind.values()),
            "faults_by_kind": dict(sorted(self.faults_by_kind.items())),
            "ledger_states": dict(sorted(self.states.items())),
            "violations": len(self.violations),
            "ok": self.ok,
        }

    def render(self, max_lines: int = 30) -> str:
        out = [
            f"chaos report: {self.scheduler}, {self.nodes} nodes, seed {self.seed}",
            "",
            f"{'#':>3} {'fault':<19} {'targets':<12} {'at s':>6} {'secs':>5} {'due':>4} {'ran':>4} "
            f"{'ledger only':<18} {'unacc':>5} {'dup':>4} {'early':>5} {'cov':>7}",
        ]
        for r in self.rows:
            ledger = ",".join(f"{k}:{v}" for k, v in sorted(r.ledger_only.items())) or "-"
            cov = f"{r.eligible_ran}/{r.eligible}" if r.eligible else "-"
            out.append(
                f"{r.index:>3} {r.kind:<19} {r.targets:<12} {r.at_s:>6.1f} {r.secs:>5.1f} "
                f"{r.due:>4} {r.ran:>4} {ledger:<18} {r.unaccounted:>5} {r.duplicates:>4} "
                f"{r.early:>5} {cov:>7}"
            )
        s = self.summary()
        out += [
            "",
            f"slots due {s['slots_due']}, ran {s['ran']}, ledger states {s['ledger_states']}",
            f"faults {s['faults']}: {s['faults_by_kind']}",
            f"duplicates {self.duplicates}, early {self.early}, unaccounted {self.unaccounted}, "
            f"unrecorded {self.unrecorded}, "
            f"coverage while a quorum could reach Redis {self.coverage:.2%} "
            f"({self.eligible_ran}/{self.eligible}, need >= {COVERAGE_MIN:.0%}); "
            f"{self.lost_to_fault} lost with their executor (at-most-once, not counted)",
        ]
        out += [f"note: {n}" for n in self.notes]
        if self.not_run:
            out.append("not run, by fault row and ledger reason (ledger.json):")
            reasons = sorted(self.not_run.items(), key=lambda kv: (kv[0][0] < 0, kv[0]))
            out += [
                f"  row {i:>3} {kind:<19} {n:>3} {state}: {reason or '(no reason)'}"
                for (i, kind, state, reason), n in reasons[:max_lines]
            ]
            if len(reasons) > max_lines:
                out.append(f"  ... and {len(reasons) - max_lines} more")
        if self.uncovered:
            out.append("not run although a quorum could reach Redis:")
            out += [f"  {u}" for u in self.uncovered[:max_lines]]
        if self.violations:
            out.append(f"VIOLATIONS ({len(self.violations)}):")
            out += [f"  {v}" for v in self.violations[:max_lines]]
            if len(self.violations) > max_lines:
                out.append(f"  ... and {len(self.violations) - max_lines} more")
        else:
            out.append("OK: no violation")
        return "\n".join(out)


def _impaired(
    faults: list[dict[str, Any]], nodes: list[str], kinds: frozenset[str] | None = IMPAIRING
) -> list[tuple[int, int, frozenset[str]]]:
    """Each fault of ``kinds`` (None: every kind) as (start, recovered, the nodes it touched)."""
    spans = []
    for f in faults:
        if kinds is None or f["kind"] in kinds:
            who = frozenset(nodes) if f["kind"] in REDIS_KINDS else frozenset(f["targets"])
            spans.append((int(f["start_ms"]), int(f["recovered_ms"]), who))
    return spans


def check(record: dict[str, Any], runs: list[Run], ledger: dict[str, list[dict[str, Any]]]) -> Report:
    """Judge one run (``record``: the ``run.json`` document)."""
    o = record["options"]
    period, skew = int(o["period_ms"]), int(o["max_skew_ms"])
    deadline = int(o.get("starting_deadline_ms", period // 2))
    nodes = [f"n{i}" for i in range(1, int(o["nodes"]) + 1)]
    quorum = len(nodes) // 2 + 1
    jobs = [f"job{i}" for i in range(int(o["jobs"]))]
    t0, end = int(record["t0_ms"]), int(record["end_ms"])
    faults = record["faults"]
    rep = Report(o["scheduler"], int(o["seed"]), len(nodes))
    rep.faults_by_kind.update(f["kind"] for f in faults)
    rep.notes = list(record.get("notes", []))
    rep.violations += [f"crash: {c}" for c in record.get("crashes", [])]
    spans = _impaired(faults, nodes)
    touches = _impaired(faults, nodes, None)
    keeps_ledger = o["scheduler"] == "quorum"
    stopped = int(record.get("stopped_ms") or end + deadline + TAIL_MS)
    settle = int(o.get("lease_ms", 2000)) + SETTLE_MS
    in_flight = 0

    first = math.ceil((t0 + WARMUP_MS) / period) * period
    due = [(j, t) for j in jobs for t in range(first, end + 1, period)]
    due_set = set(due)
    by_slot: dict[tuple[str, int], list[Run]] = defaultdict(list)
    for r in runs:
        by_slot[(r.job, r.slot)].append(r)
        if r.job not in jobs or r.slot % period:
            rep.violations.append(
                f"phantom: {r.job}@{r.slot} is not a slot of the schedule (ran on {r.node})"
            )
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for job, entries in ledger.items():
        for e in reversed(entries):  # newest first in the file: keep each slot's latest entry
            latest[(job, int(e["fire_ms"]))] = e

    # Token order, per job, in real start order (all runs, not only due ones).
    late = 0
    for job in jobs:
        seq = sorted((r for r in runs if r.job == job and r.token is not None), key=lambda r: r.start_ms)
        holder: dict[int, Run] = {}
        last: dict[int, Run] = {}
        for b in seq:
            assert b.token is not None
            a = holder.get(b.token)
            if a is not None:
                rep.violations.append(
                    f"token order: {job}@{b.slot} token {b.token} on {b.node} reuses the token of "
                    f"{job}@{a.slot} on {a.node}"
                )
            holder[b.token] = b
            before = last.get(b.slot)
            if before is not None and b.token <= (before.token or 0):
                rep.violations.append(
                    f"token order: {job}@{b.slot} token {b.token} on {b.node} started after the same "
                    f"slot's token {before.token} on {before.node}"
                )
            last[b.slot] = b
        late += sum(
            1
            for a, b in itertools.pairwise(seq)
            if a.token is not None and b.token is not None and b.token < a.token
        )
    if late:
        rep.notes.append(
            f"{late} run(s) started after a run of a later slot with a higher token "
            "(a start reply that reached its executor late; tokens are ordered per slot and by commit)"
        )

    rows = [
        FaultRow(
            int(f["index"]),
            f["kind"],
            ",".join(f["targets"]) or "redis",
            (int(f["start_ms"]) - t0) / 1000,
            (int(f["end_ms"]) - int(f["start_ms"])) / 1000,
        )
        for f in faults
    ]
    quiet = FaultRow(-1, "(no fault)", "-", 0.0, 0.0)

    for job, t in due:
        mine = by_slot.get((job, t), [])
        entry = latest.get((job, t))
        row = next(
            (
                r
                for r, f in zip(rows, faults, strict=True)
                if int(f["start_ms"]) - LEAD_MS <= t <= int(f["recovered_ms"]) + deadline
            ),
            quiet,
        )
        row.due += 1
        rep.slots_due += 1
        if entry is not None:
            rep.states[str(entry["state"])] += 1
        if mine:
            rep.ran += 1
            row.ran += 1
        if len(mine) > 1:
            rep.duplicates += 1
            row.duplicates += 1
            where = ", ".join(f"{r.node} token {r.token if r.token is not None else '-'}" for r in mine)
            rep.violations.append(f"duplicate: {job}@{t} started {len(mine)} times ({where})")
        for r in mine:
            if r.start_ms < t - skew:
                rep.early += 1
                row.early += 1
                rep.violations.append(
                    f"early: {job}@{t} started on {r.node} {t - r.start_ms:.0f} ms before its fire time "
                    f"(max_skew {skew} ms)"
                )
        if not mine:
            if entry is None:
                rep.unaccounted += 1
                row.unaccounted += 1
                rep.violations.append(f"unaccounted: {job}@{t} did not run and has no ledger entry")
            else:
                row.ledger_only[str(entry["state"])] += 1
                rep.not_run[
                    (row.index, row.kind, str(entry["state"]), str(entry.get("reason", "")).strip())
                ] += 1
                if entry["state"] == "succeeded":
                    # The job's first act is its ground-truth line: exit 0 without it is a ledger
                    # that claims a run no process made.
                    rep.violations.append(
                        f"ledger contradicts: {job}@{t} is recorded succeeded (executor "
                        f"{entry.get('executor')}, token {entry.get('token')}) but never started"
                    )
                elif not str(entry.get("reason", "")).strip():
                    rep.violations.append(
                        f"no reason: {job}@{t} did not run; its ledger entry "
                        f"({entry['state']}) gives no reason"
                    )
        elif entry is None:
            newest = max(mine, key=lambda r: r.start_ms)
            if keeps_ledger and stopped - newest.start_ms < settle:
                in_flight += 1
            elif keeps_ledger:
                rep.unrecorded += 1
                rep.violations.append(
                    f"unrecorded: {job}@{t} ran on {newest.node} (token "
                    f"{newest.token if newest.token is not None else '-'}) but has no ledger entry"
                )
        elif entry["state"] in ("missed", "skipped"):
            rep.violations.append(
                f"ledger contradicts: {job}@{t} ran on {mine[0].node} but is recorded {entry['state']} "
                f"({entry.get('reason', '')})"
            )
        elif len(mine) == 1 and mine[0].token is not None and "executor" in entry:
            # At-most-once: the one run is the one the store fenced, so the entry must name its
            # node and token (a takeover gets a new token only for a slot that never started).
            r = mine[0]
            if (entry["executor"], entry.get("token")) != (r.node, r.token):
                rep.violations.append(
                    f"ledger contradicts: {job}@{t} ran on {r.node} with token {r.token} but the ledger "
                    f"names {entry['executor']}, token {entry.get('token')} ({entry['state']})"
                )
        lo, hi = t - LEAD_MS, t + deadline
        hurt: set[str] = set()
        for since, until, who in spans:
            if since <= hi and until >= lo:
                hurt |= who
        hit: set[str] = set()
        for since, until, who in touches:
            if since <= hi and until >= lo:
                hit |= who
        if not mine and entry is not None and entry["state"] == "lost" and entry.get("executor") in hit:
            # At-most-once by design: a fault of any kind hit the executor around its start (a
            # kill, or a lossy link that kept a folded start's reply and its renewals from it
            # past the lease: docs/protocol.md, "A start folded into the commit"), so the slot
            # may have started and is never re-run. Counted apart, not as a coverage miss.
            rep.lost_to_fault += 1
        elif len(nodes) - len(hurt) >= quorum:
            rep.eligible += 1
            row.eligible += 1
            if mine:
                rep.eligible_ran += 1
                row.eligible_ran += 1
            else:
                why = f"{entry['state']}: {entry.get('reason', '')}" if entry else "no ledger entry"
                rep.uncovered.append(f"{job}@{t} (+{(t - t0) / 1000:.1f}s, fault row {row.index}): {why}")

    if in_flight:
        rep.notes.append(
            f"{in_flight} slot(s) ran less than {settle} ms before the nodes stopped and have no ledger "
            "entry yet (in flight: not judged)"
        )
    # Slots outside the due range (the warm-up, the tail) must not run twice either.
    for job, t in sorted(set(by_slot) - due_set):
        if len(by_slot[(job, t)]) > 1:
            rep.duplicates += 1
            rep.violations.append(
                f"duplicate: {job}@{t} started {len(by_slot[(job, t)])} times (outside the due range)"
            )
    if rep.coverage < COVERAGE_MIN:
        rep.violations.append(
            f"coverage: {rep.eligible_ran} of {rep.eligible} slots due while a quorum could reach Redis ran "
            f"({rep.coverage:.2%} < {COVERAGE_MIN:.0%})"
        )
    rep.rows = [*rows, quiet]
    return rep


class RunDirError(ValueError):
    """``run_dir`` holds no complete run the checker can judge (the message names the file and why)."""


def check_dir(run_dir: Path) -> Report:
    """Check the run stored in ``run_dir`` (``run.json``, ``ground-truth.log``, ``ledger.json``).

    Raises :class:`RunDirError` when one of them is missing or unreadable: a run that was
    interrupted or failed writes no ``run.json``, and judging a run without its ledger would
    report every slot that did not run as unaccounted.
    """
    if not (run_dir / "run.json").is_file():
        raise RunDirError(f"{run_dir} is not a finished run directory (no run.json)")
    for name in ("ledger.json", "ground-truth.log"):
        if not (run_dir / name).is_file():
            raise RunDirError(f"{run_dir}: no {name} (the run did not finish)")
    try:
        record = json.loads((run_dir / "run.json").read_text())
        ledger = json.loads((run_dir / "ledger.json").read_text())
        runs = load_truth(run_dir / "ground-truth.log")
        return check(record, runs, ledger)
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise RunDirError(
            f"{run_dir}: not a run the checker can read ({type(exc).__name__}: {exc})"
        ) from None
