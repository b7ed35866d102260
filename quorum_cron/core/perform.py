"""The one mapping from a core store action to a store call.

:class:`~quorum_cron.core.node.NodeCore` emits store actions (``Vote``,
``Start``, ``Renew``, ``Finish``, ...) and takes the store method's return
value back in ``on_reply``. :func:`perform` is the only code that turns an
action into its call, for every caller: the agent's store worker
(:mod:`quorum_cron.agent.storeio`, on a real Redis), the simulator
(:mod:`sim.quorum`, on the memory model) and the core unit tests'
driver (``tests/core_driver.py``). So what the simulator checks is what the
agent sends — retries and their backoff included.

Adding a store action type is its class in :mod:`quorum_cron.core.actions`, its call
here, and one handler in each consumer of replies (the core's ``_reply_*`` and
``_failed_*``, the agent's observer, the simulator), found by name through
:func:`quorum_cron.core.actions.handlers`: nothing switches on the types elsewhere.

Pure: it imports the core's actions and the ``Store`` protocol, no store
implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from quorum_cron.core.actions import (
    STORE_ACTIONS,
    Finish,
    ReadHighWater,
    ReadSlots,
    RecordMissed,
    Renew,
    Start,
    StoreAction,
    Sweep,
    Vote,
)
from quorum_cron.core.model import FencedRequest, MissedRequest
from quorum_cron.store.base import Store

__all__ = ["FENCED", "perform", "perform_fenced"]


def _vote(store: Store, node: str, action: Vote) -> object:
    return store.vote(action.requests)


def _start(store: Store, node: str, action: Start) -> object:
    return store.start(action.job, action.fire_ms, node, action.token, action.lease_ms)


def _renew(store: Store, node: str, action: Renew) -> object:
    return store.renew(action.job, action.fire_ms, node, action.token, action.lease_ms)


def _finish(store: Store, node: str, action: Finish) -> object:
    return store.finish(
        action.job,
        action.fire_ms,
        node,
        action.token,
        action.succeeded,
        action.detail,
        action.retries,
        action.retry_backoff_ms,
    )


def _sweep(store: Store, node: str, action: Sweep) -> object:
    return store.sweep(action.params)


def _read_slots(store: Store, node: str, action: ReadSlots) -> object:
    return store.read_slots(action.slots)


def _read_high_water(store: Store, node: str, action: ReadHighWater) -> object:
    return store.high_waters(action.jobs)


def _record_missed(store: Store, node: str, action: RecordMissed) -> object:
    return store.record_missed(action.job, action.fire_ms, action.deadline_ms, action.reason)


_CALLS: dict[type, Callable[[Store, str, Any], object]] = {
    Vote: _vote,
    Start: _start,
    Renew: _renew,
    Finish: _finish,
    Sweep: _sweep,
    ReadSlots: _read_slots,
    ReadHighWater: _read_high_water,
    RecordMissed: _record_missed,
}
"""Store action type → its store call: the one place an action becomes a call."""
if set(_CALLS) != set(STORE_ACTIONS):  # (a new action type needs its call here)
    raise TypeError(f"perform has calls for {sorted(t.__name__ for t in _CALLS)}: expected every StoreAction")


def perform(store: Store, node: str, action: StoreAction) -> object:
    """Call the store method ``action`` stands for, as node ``node``; return its reply.

    Raises whatever the store raises (``StoreUnavailable``, ``StoreError``):
    the caller reports it to the core with ``on_failure``.
    """
    call = _CALLS.get(type(action))
    if call is None:
        raise TypeError(f"not a store action: {action!r}")
    return call(store, node, action)


FENCED: tuple[type, ...] = (Start, Renew, Finish)
"""The actions :func:`perform_fenced` carries many of in one round trip (``Store.fenced``)."""


def _request(node: str, action: StoreAction) -> FencedRequest:
    if isinstance(action, Start | Renew):
        op = "start" if isinstance(action, Start) else "renew"
        return FencedRequest(op, action.job, action.fire_ms, node, action.token, lease_ms=action.lease_ms)
    if isinstance(action, Finish):
        return FencedRequest(
            "finish",
            action.job,
            action.fire_ms,
            node,
            action.token,
            succeeded=action.succeeded,
            detail=action.detail,
            retries=action.retries,
            retry_backoff_ms=action.retry_backoff_ms,
        )
    raise TypeError(f"not a fenced action: {action!r}")


def perform_fenced(store: Store, node: str, actions: Sequence[StoreAction]) -> list[object]:
    """Call ``store.fenced`` for several :data:`FENCED` actions at once; replies in action order.

    Each reply is what :func:`perform` of that action alone returns, or the
    :class:`~quorum_cron.errors.StoreError` it would have raised (one job's
    corrupt key fails only its own action). Raises ``StoreUnavailable`` for
    the whole batch, whose outcome is then unknown as for one lost reply.
    """
    return list(store.fenced([_request(node, a) for a in actions]))


def perform_missed(store: Store, node: str, actions: Sequence[StoreAction]) -> list[object]:
    """Call ``store.record_missed_many`` for several ``RecordMissed`` actions at once; replies in
    action order, each what :func:`perform` of that action alone returns or the
    :class:`~quorum_cron.errors.StoreError` it would have raised. Raises ``StoreUnavailable`` for
    the whole batch (``node`` is unused, as for one ``RecordMissed``)."""
    requests = []
    for a in actions:
        if not isinstance(a, RecordMissed):
            raise TypeError(f"not a RecordMissed action: {a!r}")
        requests.append(MissedRequest(a.job, a.fire_ms, a.deadline_ms, a.reason))
    return list(store.record_missed_many(requests))
