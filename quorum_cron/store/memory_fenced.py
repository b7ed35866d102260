"""The memory model's batches (:meth:`Store.fenced`, :meth:`Store.record_missed_many`): each request in turn.

On Redis the requests travel as ``fence.lua`` calls of many jobs each, every
request its own step, in order within its job; the model has no round trip
or call set-up to save, so it makes the one-slot calls one after another,
which is the same thing. A request
refused with a :class:`StoreError` gets it in its place, as on Redis; the
model never raises :class:`StoreUnavailable` (the simulator's store faults
sit in front of it, not in it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from quorum_cron.core.model import FencedRequest, MissedRequest, SlotView, TransitionResult
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.base import Store

__all__ = ["FencedInTurn", "MissedInTurn", "fenced_in_turn", "in_turn"]


def one_fenced(store: Store, r: FencedRequest) -> TransitionResult:
    """The one-slot call ``r.op`` names, with ``r``'s arguments."""
    if r.op == "start":
        return store.start(r.job, r.fire_ms, r.node, r.token, r.lease_ms)
    if r.op == "renew":
        return store.renew(r.job, r.fire_ms, r.node, r.token, r.lease_ms)
    if r.op == "finish":
        return store.finish(
            r.job, r.fire_ms, r.node, r.token, r.succeeded, r.detail, r.retries, r.retry_backoff_ms
        )
    raise ValueError(f"fenced request op {r.op!r}: expected 'start', 'renew' or 'finish'")


R = TypeVar("R")
V = TypeVar("V")


def in_turn(call: Callable[[R], V], requests: Sequence[R]) -> list[V | StoreError]:
    """``call`` of each request in turn; a :class:`StoreError` (not ``StoreUnavailable``) in the
    request's place, as the Redis scripts answer one job's corrupt key."""
    out: list[V | StoreError] = []
    for r in requests:
        try:
            out.append(call(r))
        except StoreUnavailable:
            raise
        except StoreError as exc:
            out.append(exc)
    return out


def fenced_in_turn(store: Store, requests: Sequence[FencedRequest]) -> list[TransitionResult | StoreError]:
    """Each request in turn; a :class:`StoreError` (not ``StoreUnavailable``) in the request's place."""
    return in_turn(lambda r: one_fenced(store, r), requests)


class FencedInTurn:
    """The memory model's :meth:`~quorum_cron.store.base.Store.fenced`."""

    def fenced(self: Store, requests: Sequence[FencedRequest]) -> list[TransitionResult | StoreError]:
        return fenced_in_turn(self, requests)


class MissedInTurn:
    """The memory model's :meth:`~quorum_cron.store.base.Store.record_missed_many`: each request in
    turn, a :class:`StoreError` in its place."""

    def record_missed_many(self: Store, requests: Sequence[MissedRequest]) -> list[SlotView | StoreError]:
        return in_turn(lambda r: self.record_missed(r.job, r.fire_ms, r.deadline_ms, r.reason), requests)
