"""Every outcome the core reports about a slot, built in one place: missed records, results and kills.

A slot this node held ends in one of a few ways it must tell the store or
the runtime about: a missed record (it could not be voted, or nobody was
alive to), the result of a run (``Finish``), or a run stopped (``Kill``).
The actions, and the wording of their reasons, are made here and nowhere
else, so a reader finds every reason a ledger can show for a slot this
node accounted for in one file, and a consumer learns what happened from
a field (``RecordMissed.ran_locally``) instead of searching the text.
"""

from __future__ import annotations

from quorum_cron.core.actions import CoreJob, Finish, Kill, RecordMissed
from quorum_cron.core.backoff import retry_delay_ms
from quorum_cron.core.model import SlotView
from quorum_cron.core.slots import LOCAL_ENDED, Pending

__all__ = [
    "LOCAL_DETAIL",
    "finished",
    "killed_lease_ended",
    "killed_lease_expired_unreachable",
    "killed_renew_refused",
    "killed_stale",
    "missed_no_node_alive",
    "missed_not_running",
    "missed_unvoted",
]


LOCAL_DETAIL = "ran locally while the store was unreachable"
"""How a run's result begins when it was a local run the store then assigned to this node (the
agent adopts it rather than run the slot twice; the simulator models that)."""


def missed_not_running(job: CoreJob, fire_ms: int, me: str) -> RecordMissed:
    """A slot this node slept through (a pause, a wall-clock jump): too late to vote, not to account."""
    return RecordMissed(job.name, fire_ms, job.deadline_ms, f"{me} was not running when the slot was due")


def missed_no_node_alive(job: CoreJob, fire_ms: int) -> RecordMissed:
    """A slot between the job's high-water mark and this node's start: nobody was there to vote."""
    return RecordMissed(job.name, fire_ms, job.deadline_ms, "no node alive to vote before its deadline")


def missed_unvoted(
    job: str, p: Pending, me: str, may_vote: bool, abstain_reason: str, trust_reason: str
) -> RecordMissed:
    """A slot this node could not get voted by its deadline, and why (or how its local run went)."""
    if p.local == LOCAL_ENDED:
        reason = f"no quorum before the deadline; ran locally on {me} ({p.local_detail})"
        return RecordMissed(job, p.fire_ms, p.deadline_ms, reason, ran_locally=True)
    if p.abstained and not may_vote:
        why = f"{me} abstained: {abstain_reason}"
    elif p.why:
        why = f"{me} could not vote: {p.why}"
    elif p.abstained:  # (trusted again, too late: why it abstained then, not the verdict now)
        why = f"{me} abstained: {p.abstain_why or trust_reason}"
    else:
        why = f"{me} could not vote"
    return RecordMissed(job, p.fire_ms, p.deadline_ms, f"no quorum before the deadline ({why})")


def finished(
    job: str,
    fire_ms: int,
    token: int,
    succeeded: bool,
    detail: str,
    spec: CoreJob | None,
    attempt: int = 0,
) -> Finish:
    """The result of this node's run under ``token`` (retried per ``spec``: a job it no longer has, none).

    ``attempt`` is the slot's run count this run started as (``SlotView.runs`` of its start
    reply; 0 when unknown, taken as the first): the store waits the backoff for that attempt
    (:func:`~quorum_cron.core.backoff.retry_delay_ms`) before the retry may start.
    """
    if spec is None:
        return Finish(job, fire_ms, token, succeeded, detail, 0, 0)
    backoff = spec.retry_backoff_ms
    if not succeeded and spec.retries:
        backoff = retry_delay_ms(job, fire_ms, attempt, backoff, spec.retry_backoff_max_ms, spec.retry_jitter)
    return Finish(job, fire_ms, token, succeeded, detail, spec.retries, backoff)


def killed_lease_ended(job: str, fire_ms: int, token: int) -> Kill:
    """At-least-once: no renew sent since the last accepted one was accepted in time."""
    return Kill(job, fire_ms, token, "lease ended before a renew was accepted")


def killed_lease_expired_unreachable(job: str, fire_ms: int, token: int) -> Kill:
    """The lease ran out while the store did not answer the renewals."""
    return Kill(job, fire_ms, token, "lease expired while the store was unreachable")


def killed_stale(job: str, token: int, view: SlotView) -> Kill:
    """A read shows the slot no longer this node's under ``token``."""
    return Kill(job, view.fire_ms, token, f"slot is {view.state}: {view.reason}")


def killed_renew_refused(job: str, fire_ms: int, token: int, reason: str) -> Kill:
    """The store refused a renew: the slot is no longer this node's."""
    return Kill(job, fire_ms, token, f"renew refused: {reason}")
