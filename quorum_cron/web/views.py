"""What each page shows, read from the store: plain JSON-ready dicts, one function per page.

The HTML pages and the JSON API render the same dicts, so a tool reading
``/api/...`` sees exactly what a person sees. Everything here reads; the
only writes of the web face are in :mod:`quorum_cron.web.app` (trigger,
pause, resume), each one audited store call.

Nothing read from Redis is trusted: values are only copied into the dicts
(the templates escape them), lengths of free text are bounded, and a job
that the local config does not define has no page (job names come from
the config, not from the store; only the no_quorum problem names the jobs
a voter's published table adds, escaped and cut: :mod:`.quorum`).

**One corrupt job does not take the pages down.** A job key holding the
wrong type (a ledger that is not a stream, a meta that is not a hash) fails
a pipelined read of every job; then the jobs are read one by one, like
``history`` does, and the corrupt one is shown as corrupt with its key
named (:func:`corrupt_message`) while the others, the cluster and the audit
pages are shown as usual. On the job's own page each part (control, slots,
ledger, audit) is read on its own, so what can be read is shown and what
cannot is named. An unreachable store (:class:`StoreUnavailable`) is still
the page's 503: there is nothing to isolate.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

from quorum_cron.config.membership import awaited_members, members_hint, membership_facts, spec_hashes
from quorum_cron.config.settings import Config, JobSpec
from quorum_cron.core import model
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.redact import redact_text
from quorum_cron.store import keys as store_keys
from quorum_cron.store.base import (
    AuditEntry,
    JobControl,
    LedgerEntry,
    Member,
    ObservedStore,
    SlotState,
    SlotView,
)
from quorum_cron.store.connect import store_failure
from quorum_cron.store.ledger_json import ledger_doc
from quorum_cron.store.ports import with_job_tables
from quorum_cron.store.rendezvous import weight
from quorum_cron.web.alerts import recent_alerts
from quorum_cron.web.decided import accounts, membership_then, slot_account
from quorum_cron.web.quorum import down_of, health_text, no_quorum
from quorum_cron.web.recent import NOT_PAUSED, SPARK, RecentLedger, corrupt_message
from quorum_cron.web.timeline import timeline, walk_start
from quorum_cron.web.triggered import marked_entries

__all__ = [
    "FILTERS",
    "PAGE_SIZE",
    "SPARK",
    "RecentLedger",
    "audit_view",
    "cluster_view",
    "control_doc",
    "corrupt_message",
    "entry_doc",
    "fmt_ms",
    "job_view",
    "jobs_view",
    "slot_view",
]

_T = TypeVar("_T")

PAGE_SIZE = 50
MAX_TEXT = 4000
"""Free text from Redis (reasons, output tails) is cut to this many characters for display."""
FILTERS = ("all", "failed", "missed", "paused")
_BAD = {SlotState.FAILED, SlotState.LOST}
_MISSED = {SlotState.MISSED}


def fmt_ms(ms: int, tz: str = "UTC") -> str:
    """Epoch ms as ``2026-05-01 12:00:00.000`` in ``tz`` (with ``Z`` for UTC)."""
    if ms <= 0:
        return "-"
    try:
        when = dt.datetime.fromtimestamp(ms / 1000, dt.UTC if tz == "UTC" else zoneinfo.ZoneInfo(tz))
    except (OverflowError, ValueError, OSError):  # a value read from Redis, beyond year 9999
        return f"{ms} ms"
    text = when.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"
    return text + "Z" if tz == "UTC" else f"{text} {when.strftime('%Z')}"


def _cut(text: str) -> str:
    """Free text from Redis as shown: URL passwords masked (as the alerts' are), then bounded.

    A job's output tail is in its ledger entry as the job printed it; the
    dashboard is readable by whoever reaches it, so a ``redis://:pw@host``
    a job printed is shown ``redis://:***@host`` here, as on the Cluster
    page's alerts of the same failure (``quorum-cron history --detail``,
    which needs the store's credentials, shows it whole).
    """
    text = redact_text(text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " …"


def entry_doc(e: LedgerEntry) -> dict[str, Any]:
    """A ledger entry as JSON (the ``history --json`` fields, and the delay)."""
    return ledger_doc(e, _cut) | {
        "delay_ms": e.started_ms - e.fire_ms if e.started_ms else None,
        # (A lost slot's end is its lease running out, not the run's: no duration to show.)
        "ran_ms": e.finished_ms - e.started_ms
        if e.started_ms and e.finished_ms and e.state != SlotState.LOST
        else None,
    }


def audit_doc(a: AuditEntry) -> dict[str, Any]:
    return {"job": a.job, "action": str(a.action), "by": a.by, "at_ms": a.at_ms, "detail": _cut(a.detail)}


def control_doc(c: JobControl) -> dict[str, Any]:
    return {"paused": c.paused, "by": c.by, "at_ms": c.at_ms, "reason": _cut(c.reason)}


def _role(node: str, stored: model.Membership | None) -> str:
    if stored is None:
        return "-"
    record = stored.record
    if record.current.has(node):
        return "joining" if record.old is not None and not record.old.has(node) else "member"
    return "leaving" if record.old is not None and record.old.has(node) else "refused"


def _member_doc(m: Member, now: int, config: Config, stored: model.Membership | None) -> dict[str, Any]:
    voting = _cut(m.info.get("voting", ""))
    clock = _cut(m.info.get("clock", ""))
    why_not = ""
    role = _role(m.node, stored)
    if voting != "yes":
        why_not = m.info.get("clock_reason", "") if clock != "trusted" else "voting stopped"
    if role == "refused":
        why_not = "not a member of the store's membership record"
    hashes = spec_hashes(m)
    differs = sorted(s.name for s in config.jobs if s.name in hashes and hashes[s.name] != s.spec_hash)
    return {
        "node": m.node,
        "role": role,
        "epoch": m.epoch,
        "host": _cut(m.info.get("host", "")),
        "incarnation": _cut(m.incarnation),
        "seen_ms": m.seen_ms,
        "age_ms": max(0, now - m.seen_ms),
        "expires_ms": m.expires_ms,
        "clock": clock,
        "clock_reason": _cut(m.info.get("clock_reason", "")),
        "clock_offset_ms": m.clock_offset_ms,
        "voting": voting,
        "why_not": _cut(why_not),
        "definitions_differ": differs,
    }


def cluster_view(
    store: ObservedStore, config: Config, shown_url: str, recent: RecentLedger | None = None
) -> dict[str, Any]:
    """Members, quorum health, the store, the agents' recent alerts (stored), and problems seen now.

    ``problems`` are derived on each read (member state, each job's newest
    ledger entries); ``alerts`` are what the agents raised, newest first,
    from the store's capped alert stream (:mod:`.alerts`).
    """
    cluster = config.cluster
    now = store.time_ms()
    members = with_job_tables(store, store.members())
    stored = store.membership()
    try:
        server = store.server_info()
    except StoreError as exc:
        server = {"error": store_failure(exc)}
    facts = membership_facts(stored, members, cluster, config.source)
    health, down = facts.health, down_of(stored, members)
    member_docs = [_member_doc(m, now, config, stored) for m in members]
    problems: list[dict[str, Any]] = []
    if not health.ok:
        problems.append(
            {"kind": "quorum_lost", "at_ms": now, "message": f"quorum lost: {health_text(health, down)}"}
        )
    for refused in facts.refused:
        problems.append(
            {
                "kind": "not_a_member",
                "at_ms": refused.seen_ms,
                "message": f"{refused.node} (epoch {refused.epoch}) is alive but not a member: "
                f"the store refuses its votes",
            }
        )
    if facts.disagreement is not None:
        problems.append({"kind": "membership_mismatch", "at_ms": now, "message": _cut(facts.disagreement)})
    for m in member_docs:
        if m["voting"] != "yes" and m["role"] != "refused":  # a refused node is its own problem (above)
            problems.append(
                {"kind": "not_voting", "at_ms": m["seen_ms"], "message": f"{m['node']}: {m['why_not']}"}
            )
        if m["definitions_differ"]:
            problems.append(
                {
                    "kind": "spec_mismatch",
                    "at_ms": m["seen_ms"],
                    "message": f"{m['node']} runs other definitions of {', '.join(m['definitions_differ'])}",
                }
            )
    voters = [
        m
        for m, d in zip(members, member_docs, strict=True)
        if d["voting"] == "yes" and d["role"] != "refused"
    ]
    problems += no_quorum(voters, config, stored, health.quorum, now)
    names = [s.name for s in config.jobs]
    for name, (entries, _, _, corrupt) in zip(
        names, (recent or RecentLedger()).read_checked(store, names, cluster.namespace), strict=True
    ):
        if corrupt:
            problems.append({"kind": "corrupt", "at_ms": now, "job": name, "message": f"{name}: {corrupt}"})
        for e in entries:
            if e.state in _BAD or e.state in _MISSED:
                problems.append(
                    {
                        "kind": f"slot_{e.state}",
                        "at_ms": e.finished_ms,
                        "job": e.job,
                        "slot_ms": e.fire_ms,
                        "message": f"{e.job} slot {fmt_ms(e.fire_ms)} {e.state}: {_cut(e.reason)}",
                    }
                )
    problems.sort(key=lambda p: int(p["at_ms"]), reverse=True)
    alerts = recent_alerts(store)
    return {
        "namespace": cluster.namespace,
        "store_time_ms": now,
        "store": {"url": shown_url, **server},
        **facts.doc(),
        "down": down,
        "finish_hint": members_hint("finish", config.source).strip("`"),  # (the CLI's, run as pasted)
        "waiting": awaited_members(stored.record, members) if stored is not None else [],
        "force_hint": members_hint("finish --force", config.source).strip("`"),
        "voting": sum(1 for m in member_docs if m["voting"] == "yes" and m["role"] != "refused"),
        "members": member_docs,
        "problems": problems[:50],
        "alerts": alerts["alerts"],
        "alerts_skipped": alerts["skipped"],
        "alerts_error": alerts["error"],
    }


def _schedule_doc(spec: JobSpec, now: int, count: int) -> dict[str, Any]:
    nexts: list[int] = []
    t = now
    for _ in range(count):
        t = spec.schedule.next_after(t)
        nexts.append(t)
    return {
        "expr": spec.schedule_expr,
        "resolved": spec.schedule.resolved_expr,
        "timezone": spec.timezone,
        "dst": spec.schedule.dst,
        "next_ms": nexts,
    }


def _state_of(last: list[LedgerEntry], control: JobControl) -> set[str]:
    states = {"all"}
    if control.paused:
        states.add("paused")
    if last and last[0].state in _BAD:
        states.add("failed")
    if last and last[0].state in _MISSED:
        states.add("missed")
    return states


def jobs_view(
    store: ObservedStore, config: Config, state: str = "all", recent: RecentLedger | None = None
) -> dict[str, Any]:
    """Every configured job: schedule, next fires, pause, last outcome, recent outcomes; filtered by state."""
    if state not in FILTERS:
        raise ValueError(f"unknown filter {state!r}: expected one of {', '.join(FILTERS)}")
    now = store.time_ms()
    jobs: list[dict[str, Any]] = []
    counts = dict.fromkeys(FILTERS, 0)
    names = [s.name for s in config.jobs]
    summaries = (recent or RecentLedger()).read_checked(store, names, config.cluster.namespace)
    for spec, (last, outcomes, control, corrupt) in zip(config.jobs, summaries, strict=True):
        states = _state_of(last, control)
        if corrupt:
            states.add("failed")  # something an operator must look at
        for s in states:
            counts[s] += 1
        if state not in states:
            continue
        jobs.append(
            {
                "job": spec.name,
                "schedule": _schedule_doc(spec, now, 3),
                "control": control_doc(control),
                "last": entry_doc(last[0]) if last else None,
                "recent": outcomes[::-1],
                "corrupt": corrupt,
            }
        )
    return {"store_time_ms": now, "filter": state, "counts": counts, "jobs": jobs}


def _find(config: Config, job: str) -> JobSpec:
    for spec in config.jobs:
        if spec.name == job:
            return spec
    raise KeyError(job)


def default_window_ms(spec: JobSpec) -> int:
    """About 60 slots of the job, between 1 minute and 7 days."""
    return max(60_000, min(7 * 86_400_000, 60 * spec.schedule.min_interval_ms))


def job_view(
    store: ObservedStore,
    config: Config,
    job: str,
    *,
    window_ms: int | None = None,
    to_ms: int | None = None,
    page: int = 0,
) -> dict[str, Any]:
    """One job: schedule, control, the expected-vs-actual timeline of a window, a page of its ledger."""
    spec = _find(config, job)
    now = store.time_ms()
    span = window_ms or default_window_ms(spec)
    end = now if to_ms is None else to_ms
    start = end - span
    first = walk_start(spec.schedule, start, end)
    corrupt: list[str] = []
    ns = config.cluster.namespace

    def part(suffix: str, read: Callable[[], _T], default: _T) -> _T:
        try:
            return read()
        except StoreUnavailable:
            raise
        except StoreError as exc:
            corrupt.append(corrupt_message(ns, job, suffix, exc))
            return default

    slots = part(
        store_keys.OPEN + ", " + store_keys.SLOTS + " or a " + store_keys.SLOT + "<fire ms>",
        lambda: store.slots(job, first + 1, end),
        list[SlotView](),
    )
    triggers = part(store_keys.TRIGGERS, lambda: store.triggers(job, first), list[int]())
    rows, cut = timeline(spec.schedule, slots, start, end, now, spec.starting_deadline_ms, triggers)
    entries = part(
        store_keys.LEDGER, lambda: store.ledger(job, (page + 1) * PAGE_SIZE + 1), list[LedgerEntry]()
    )
    control = part(store_keys.META, lambda: store.control(job), NOT_PAUSED)
    audit = part(store_keys.AUDIT, lambda: store.audit(job, 10), list[AuditEntry]())
    has_more = len(entries) > (page + 1) * PAGE_SIZE
    history = entries[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
    told, problem = accounts(store, config, history)
    corrupt += [problem] if problem else []
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {
        "job": job,
        "store_time_ms": now,
        "schedule": _schedule_doc(spec, now, 5),
        "deadline_ms": spec.starting_deadline_ms,
        "overlap": str(spec.overlap),
        "delivery": str(spec.delivery),
        "retries": spec.retries,
        "spec_hash": spec.spec_hash,
        "control": control_doc(control),
        "corrupt": corrupt,
        "window": {"from_ms": start, "to_ms": end, "span_ms": span, "cut": cut, "counts": counts},
        "timeline": [asdict(r) | {"reason": _cut(r.reason)} for r in rows],
        "history": {
            "page": page,
            "page_size": PAGE_SIZE,
            "has_more": has_more,
            "entries": marked_entries(store, history, told, entry_doc),
        },
        "audit": [audit_doc(a) for a in audit],
    }


def _ranking(job: str, fire_ms: int, nodes: Sequence[str]) -> list[dict[str, str]]:
    # pick_executor's order: highest weight first, the smaller id on a tie.
    ranked = sorted(sorted(nodes), key=lambda n: weight(job, fire_ms, n), reverse=True)
    return [{"node": n, "weight": weight(job, fire_ms, n)[:12]} for n in ranked]


MEMBERSHIP_LOG_READ = 50
"""How far back a slot page looks in the membership's log for the record a slot was decided under."""


def slot_view(store: ObservedStore, config: Config, job: str, fire_ms: int) -> dict[str, Any]:
    """One slot: voters and the spec hash each voted with, quorum, executor and why, token, times, output."""
    spec = _find(config, job)
    view: SlotView = store.slot(job, fire_ms)
    # A slot's entries are among the newest unless it is old; an old slot whose
    # record expired (retention) may still be in the ledger: read all of it then.
    # Only for a fire time the schedule has and older than the newest entries: a
    # made-up URL must not make the server read the whole ledger.
    newest = store.ledger(job, 200)
    entries = [e for e in newest if e.fire_ms == fire_ms]
    older = len(newest) == 200 and fire_ms < min(e.fire_ms for e in newest)
    scheduled = fire_ms in spec.schedule.fire_times(fire_ms - 1, fire_ms)
    if not entries and view.state == SlotState.ABSENT and older and scheduled:
        entries = [e for e in store.ledger(job, config.cluster.ledger_maxlen) if e.fire_ms == fire_ms]
    final = next((e for e in entries if e.state != SlotState.RETRYING), None)
    votes = [
        {"node": node, "spec_hash": digest, "agrees": digest == spec.spec_hash} for node, digest in view.votes
    ]
    if not votes and final is not None:
        votes = [{"node": n, "spec_hash": "", "agrees": None} for n in final.voters]
    agreed = [str(v["node"]) for v in votes if v["spec_hash"] == view.spec_hash] if view.spec_hash else []
    candidates = agreed or [str(v["node"]) for v in votes]
    state = str(view.state) if view.state != SlotState.ABSENT or final is None else str(final.state)
    committed = view.committed_ms or (final.committed_ms if final else 0)
    decided = committed or view.finished_ms or (final.finished_ms if final else 0) or fire_ms
    then, when = membership_then(store, decided, MEMBERSHIP_LOG_READ)
    apart = slot_account(store, config, view, final)
    why = apart.apart()
    conf = then.record.current if then is not None else None
    return {
        "job": job,
        "slot_ms": fire_ms,
        "state": state,
        "in_store": view.state != SlotState.ABSENT,
        "quorum": conf.quorum if conf is not None else config.cluster.quorum,
        "size": conf.size if conf is not None else config.cluster.size,
        "membership": then.record.describe() if then is not None else "",
        "membership_when": when,
        "membership_changed_ms": then.changed_ms if then is not None else 0,
        "decided_ms": decided,
        "local_spec_hash": spec.spec_hash,
        "agreed_spec_hash": view.spec_hash,
        "votes": [v | {"not_counted": why.get(str(v["node"]), "")} for v in votes],
        **apart.doc(),
        "executor": view.executor or (final.executor if final else ""),
        "ranking": _ranking(job, fire_ms, candidates),
        "token": view.token or (final.token if final else 0),
        "attempt": view.attempt,
        "runs": view.runs,
        "reason": _cut(view.reason or (final.reason if final else "")),
        "committed_ms": committed,
        "started_ms": view.started_ms or (final.started_ms if final else 0),
        "lease_until_ms": view.lease_until_ms,
        "finished_ms": view.finished_ms or (final.finished_ms if final else 0),
        "not_before_ms": view.not_before_ms,
        "detail": _cut(view.detail or (final.detail if final else "")),
        "ledger": [entry_doc(e) for e in entries],
    }


def _membership_audit_doc(m: model.Membership) -> dict[str, Any]:
    return {
        "job": "",
        "action": "membership",
        "by": m.by,
        "at_ms": m.changed_ms,
        "detail": _cut(f"{m.record.describe()}: {m.reason}"),
    }


def audit_view(store: ObservedStore, config: Config, limit: int = 200) -> dict[str, Any]:
    """Operator actions on every configured job and the membership's changes, newest first."""
    entries: list[AuditEntry] = []
    corrupt: list[dict[str, str]] = []
    for spec in config.jobs:
        try:
            entries.extend(store.audit(spec.name, limit))
        except StoreUnavailable:
            raise
        except StoreError as exc:  # this job's audit stream is corrupt: name it, show the others
            message = corrupt_message(config.cluster.namespace, spec.name, store_keys.AUDIT, exc)
            corrupt.append({"job": spec.name, "message": message})
    docs = [audit_doc(a) for a in entries] + [_membership_audit_doc(m) for m in store.membership_log(limit)]
    docs.sort(key=lambda a: int(a["at_ms"]), reverse=True)
    return {"store_time_ms": store.time_ms(), "entries": docs[:limit], "corrupt": corrupt}
