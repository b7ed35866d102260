"""What a ``quorum-cron members`` change asks for: the new member set, checked, as one line per problem.

Pure (no store, no click), so that every refusal can be tested on its own:
given the member ids the store enforces now and the operator's words
(``add``, ``remove``, ``replace``, ``set``), :func:`plan` returns the new set
or raises :class:`PlanError` with one line naming the value and what was
expected. The store call that moves the cluster to the joint configuration
is the command's (:mod:`.members`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from quorum_cron.agent.membership import node_id_problem
from quorum_cron.core.model import Configuration

__all__ = [
    "MAX_MEMBERS",
    "PlanError",
    "check_words",
    "no_tolerance",
    "nobody_stays",
    "parse_id_list",
    "plan",
    "target",
]

MAX_MEMBERS: Final = 100
"""As many ids as ``[cluster] members`` may list."""


class PlanError(ValueError):
    """A change that cannot be made as asked (one line)."""


def _shown(members: Sequence[str]) -> str:
    return ", ".join(members) if members else "(none)"


def _check_ids(ids: Sequence[str]) -> None:
    for node in ids:
        problem = node_id_problem(node)
        if problem is not None:
            raise PlanError(problem)
    seen: set[str] = set()
    for node in ids:
        if node in seen:
            raise PlanError(f"node id {node!r} is given twice (expected distinct node ids)")
        seen.add(node)


def parse_id_list(text: str) -> tuple[str, ...]:
    """``a,b,c`` (spaces allowed around the commas) as ids, each checked; PlanError otherwise."""
    ids = tuple(part.strip() for part in text.split(","))
    if not text.strip() or any(not part for part in ids):
        raise PlanError(f"{text!r} is not a list of node ids (expected e.g. 'node-a,node-b,node-c')")
    _check_ids(ids)
    return ids


def check_words(op: str, args: Sequence[str]) -> None:
    """The ids themselves (valid, distinct), before the store is read: bad input is refused first."""
    if op == "set":
        (text,) = args
        parse_id_list(text)
    else:
        _check_ids(args)


def plan(current: Sequence[str], op: str, args: Sequence[str]) -> tuple[str, ...]:
    """The sorted member set after ``op`` (``add`` / ``remove`` / ``replace`` / ``set``) on ``current``."""
    result = _members_after(current, op, args)
    if result == tuple(sorted(current)):
        raise PlanError(f"the members are already {_shown(result)}: nothing to change")
    return result


def target(current: Configuration, op: str, args: Sequence[str], quorum: int | None = None) -> Configuration:
    """The configuration the change moves to: :func:`plan`'s members with their quorum.

    The quorum is ``quorum`` (``--quorum``: a majority of the new members up
    to all of them), else a majority. A record whose quorum is above a
    majority is never lowered silently: without ``quorum`` the change is
    refused, naming the store's quorum. Refused too: a change to exactly
    the configuration in force. Keeping the same member ids is a change
    when it closes open seats of "size = N" mode or sets another quorum.
    """
    members = _members_after(current.members, op, args)
    n = len(members)
    low = n // 2 + 1
    if quorum is not None:
        if not low <= quorum <= n:
            raise PlanError(
                f"--quorum {quorum} is not possible with {n} member(s): expected {low}-{n} "
                f"(a majority of {_shown(members)} up to all of them)"
            )
    elif current.quorum > current.size // 2 + 1:
        raise PlanError(
            f"the store enforces a quorum of {current.quorum} of {current.size}, above a majority: expected "
            f"--quorum Q ({low}-{n} for {_shown(members)}), so that the change does not lower it unasked"
        )
    new = Configuration.of(members, quorum=quorum)
    if new == current:
        raise PlanError(f"the members are already {current.describe()}: nothing to change")
    return new


def nobody_stays(epoch: int, current: Configuration, new: Configuration) -> str | None:
    """Why a change that keeps no member of ``current`` is refused without ``--force``, or None.

    A job takes a newer record only from a vote of a member of the record it
    enforces (docs/protocol.md). When no old member stays, a job that no old
    member's vote reaches while the change is in progress (an infrequent job;
    every job when the old hosts are down, as with a one-node cluster whose
    host died) keeps the old record and refuses every new member for good.
    """
    if not current.members or set(current.members) & set(new.members):
        return None
    old, fresh = ", ".join(current.members), ", ".join(new.members)
    same_id = f" (--node-id {current.members[0]})" if len(current.members) == 1 else ""
    return (
        f"no member of epoch {epoch} ({old}) stays in the new members ({fresh}): a job that no vote of "
        f"{old} reaches before the change ends (every job, if they are down) would refuse {fresh} for good; "
        f"expected a change that keeps a member (replace a majority in steps), or the new host started "
        f"under the old id{same_id} with no change — or --force, then clear each such job's record "
        f'(docs/operations.md, "Replace a host")'
    )


def _members_after(current: Sequence[str], op: str, args: Sequence[str]) -> tuple[str, ...]:
    now = tuple(sorted(current))
    members = set(now)
    if op == "set":
        (text,) = args
        new = set(parse_id_list(text))
    elif op == "add":
        _check_ids(args)
        for node in args:
            if node in members:
                raise PlanError(f"node {node!r} is already a member (members: {_shown(now)})")
        new = members | set(args)
    elif op == "remove":
        _check_ids(args)
        for node in args:
            if node not in members:
                raise PlanError(f"node {node!r} is not a member (members: {_shown(now)})")
        new = members - set(args)
    elif op == "replace":
        old, fresh = args
        _check_ids((old, fresh))
        if old not in members:
            raise PlanError(f"node {old!r} is not a member: nothing to replace (members: {_shown(now)})")
        if fresh in members:
            raise PlanError(f"node {fresh!r} is already a member (members: {_shown(now)})")
        new = (members - {old}) | {fresh}
    else:
        raise ValueError(f"unknown membership change {op!r}")
    if not new:
        raise PlanError(f"that would leave no member (members: {_shown(now)}; expected at least one)")
    if len(new) > MAX_MEMBERS:
        raise PlanError(f"that would make {len(new)} members (expected at most {MAX_MEMBERS})")
    return tuple(sorted(new))


def no_tolerance(new: Configuration) -> str | None:
    """The warning for new members that tolerate no node failure (a quorum of all of them), or None.

    Such a change is allowed (one node, or ``--quorum`` = the size, may be what is meant), but
    nothing in its one line of output said that one member down now stops every job.
    """
    if new.quorum < new.size:
        return None
    return (
        f"warning: the new configuration {new.describe()} tolerates no node failure: "
        f"with any member down, no slot commits"
    )
