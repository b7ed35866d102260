"""What the web face's three writes do: trigger, pause, resume — the store call each is, and its answer.

One place for both ways of acting (a page's form, the JSON API): the JSON
answer (:func:`perform`) and the line the job's page then says once
(:func:`said`). Each action is one audited store call; a resume's answer says
whether the job was paused at all (see :func:`perform`).
"""

from __future__ import annotations

from typing import Any

from quorum_cron.store.base import ObservedStore
from quorum_cron.web.views import control_doc, fmt_ms

__all__ = ["ACTIONS", "perform", "said"]

ACTIONS = ("trigger", "pause", "resume")


def perform(store: ObservedStore, job: str, action: str, who: str, reason: str) -> dict[str, Any]:
    """Do ``action`` on ``job`` as ``who``; the JSON answer. Raises the store's errors.

    A resume of a job that is not paused changes nothing and writes no audit
    entry (the store's contract: a retry after a lost reply must not record a
    second resume, and the audit stays the job's pause history, each resume
    ending a pause). The answer says so instead: ``was_paused`` is false, and
    ``control`` names who resumed it last and when — the entry an operator
    auditing "who resumed it" finds. Whether this call ended the pause is
    the store's answer (``JobControl.changed``): told from a read before and
    the state after, two sessions resuming as the same ``who`` at once were
    both told they had.
    """
    if action == "trigger":
        # Read first: a store that failed after the trigger answered 503 "cannot trigger" of a
        # trigger made (a second ran the job twice). A paused job's slot then ends skipped: said.
        paused = store.control(job).paused
        fire_ms = store.trigger(job, who)
        return {"job": job, "action": action, "by": who, "slot_ms": fire_ms, "paused": paused}
    if action == "pause":
        control = store.pause(job, who, reason)  # (changed: false for the same pause again)
        return {"job": job, "action": action, "by": who, "paused": control.paused, "changed": control.changed}
    after = store.resume(job, who)
    was_paused = after.changed
    return {
        "job": job,
        "action": action,
        "by": who,
        "paused": after.paused,
        "was_paused": was_paused,
        "control": control_doc(after),
    }


def said(done: dict[str, Any]) -> str:
    """The line the job's page says once after ``done`` (an answer of :func:`perform`)."""
    who = done["by"]
    if done["action"] == "trigger":
        skipped = " (the job is paused: this slot will be recorded skipped)" if done["paused"] else ""
        return f"triggered by {who}: slot {fmt_ms(done['slot_ms'])}{skipped}"
    if done["action"] == "pause":
        return (
            f"paused by {who}" if done.get("changed", True) else f"already paused by {who}: nothing changed"
        )
    if done["was_paused"]:
        return f"resumed by {who}"
    control = done["control"]
    last = f" (resumed by {control['by']} at {fmt_ms(control['at_ms'])})" if control["by"] else ""
    return f"not paused{last}: nothing to resume, nothing changed"
