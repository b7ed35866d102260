"""The one mapping from a core store action to a store call.

:class:`~quorum_cron.core.node.NodeCore` emits store actions (``Vote``,
``Start``, ``Renew``, ``Finish``, ...) and takes the store method's return
value back in ``on_reply``. :func:`perform` is the only code that turns an
action into its call, for every caller: the agent's store worker
(:mod:`quorum_cron.agent.storeio`, on a real Redis), the simulator
(:mod:`sim.quorum`, on the memory model) and the core unit tests'
driver (``tests/core_driver.py``). So what the simulator checks is what the
agent sends — retries and their backoff included.

Pure: it imports the core and the ``Store`` protocol, no store
implementation.
"""

from __future__ import annotations

from quorum_cron.core.node import (
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
from quorum_cron.store.base import Store

__all__ = ["perform"]


def perform(store: Store, node: str, action: StoreAction) -> object:
    """Call the store method ``action`` stands for, as node ``node``; return its reply.

    Raises whatever the store raises (``StoreUnavailable``, ``StoreError``):
    the caller reports it to the core with ``on_failure``.
    """
    match action:
        case Vote():
            return store.vote(action.requests)
        case Start():
            return store.start(action.job, action.fire_ms, node, action.token, action.lease_ms)
        case Renew():
            return store.renew(action.job, action.fire_ms, node, action.token, action.lease_ms)
        case Finish():
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
        case Sweep():
            return store.sweep(action.params)
        case ReadSlots():
            return store.read_slots(action.slots)
        case ReadHighWater():
            return store.high_waters(action.jobs)
        case RecordMissed():
            return store.record_missed(action.job, action.fire_ms, action.deadline_ms, action.reason)
    raise TypeError(f"not a store action: {action!r}")
