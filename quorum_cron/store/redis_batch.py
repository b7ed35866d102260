"""Packing many jobs' items into few script calls, and re-sending what a cluster redirected.

On a standalone server a call carries up to ``max_batch`` items of many
jobs; on a cluster a call carries only jobs whose hash slots live on one
master (:mod:`quorum_cron.store.cluster` sends each master's calls as one
pipeline); a job's items are never split. A multi-job call that a slot
migration redirected is re-sent one job per call. Separate from the
operations (:mod:`.redis_writes`) because the packing rules, not the
scripts' meaning, are what make a call valid on each topology.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from quorum_cron.errors import StoreError
from quorum_cron.store import keys as store_keys
from quorum_cron.store.base import Overlap, VoteRequest
from quorum_cron.store.cluster import REDIRECTED
from quorum_cron.store.redis_base import RedisBase
from quorum_cron.store.rendezvous import rank, ranking_seats
from quorum_cron.store.scripts import VOTE, Call, Wait

__all__ = ["RedisBatching"]

_OVERLAP = {Overlap.ALLOW: "a", Overlap.FORBID: "f", Overlap.REPLACE: "r"}


class RedisBatching(RedisBase):
    """Grouping items into script calls per node and per ``max_batch`` (the vote script's own layout too)."""

    def _node_order(
        self, groups: list[list[int]], job_of: Callable[[int], str]
    ) -> list[tuple[str, list[int]]]:
        """Job groups (lists of item indices) tagged with the cluster node that owns the job,
        stable-sorted by it so that a call never spans nodes; standalone: all tagged ""."""
        runner = self._cluster_runner
        if runner is None:
            return [("", g) for g in groups]
        tagged = [(runner.owner(self._job_prefix(job_of(g[0])) + store_keys.META).name, g) for g in groups]
        tagged.sort(key=lambda t: t[0])
        return tagged

    def _single(self, singles: bool) -> bool:
        """One job per call: asked for (a redirected batch), or ``cluster=True`` on a plain client."""
        return singles or (self._cluster and not self._sharded)

    def _grouped_calls(
        self,
        script: Any,
        now: str,
        jobs: Sequence[str],
        item_args: Callable[[int], Sequence[str | int]],
        *,
        singles: bool = False,
    ) -> list[tuple[Call, list[int]]]:
        """Pack the items (``jobs[i]`` is item i's job) into calls of a grouped script (sweep),
        with each call's item indices.

        A job's items form one group, never split. Groups are added to a call
        until it holds ``max_batch`` items; on a cluster a call holds only
        jobs of one node; with ``singles`` one group per call.
        """
        single = self._single(singles)
        out: list[tuple[Call, list[int]]] = []
        keys: list[str] = []
        start: list[str | int] = [now, *self._common_tail]
        args: list[str | int] = list(start)
        order: list[int] = []
        at = ""
        for node, idx in self._node_order(list(self._by_job(iter(jobs)).values()), lambda i: jobs[i]):
            if keys and (single or node != at or len(order) + len(idx) > self._max_batch):
                out.append((Call(script, keys, args), order))
                keys, args, order = [], list(start), []
            at = node
            keys.append(self._job_prefix(jobs[idx[0]]) + store_keys.META)
            args.append(len(idx))
            for i in idx:
                args.extend(item_args(i))
            order.extend(idx)
        out.append((Call(script, keys, args), order))
        return out

    @staticmethod
    def _by_job(jobs: Iterator[str]) -> dict[str, list[int]]:
        groups: dict[str, list[int]] = {}
        for i, job in enumerate(jobs):
            group = groups.get(job)
            if group is None:
                groups[job] = [i]
            else:
                group.append(i)
        return groups

    def _run_grouped(
        self,
        build: Callable[[Sequence[int], bool], list[tuple[Call, list[int]]]],
        # build(items, singles): calls for the given items, each with indices INTO ``items``
        n: int,
        wait: Wait | None,
        *,
        partial: bool = False,
    ) -> list[tuple[list[int], Any]]:
        """Run the calls ``build(items, singles)`` makes for items 0..n-1: (item indices, raw reply) per call.

        A cluster call that covers several jobs and was redirected (a slot
        moving between nodes) is re-sent one job per call, which the runner
        follows through MOVED / ASK. ``partial``: a call on a cluster master
        whose ``WAIT`` fell short has a ``WaitShortfall`` as its raw reply
        instead of failing every call (``ClusterScriptRunner.call_many``).
        """
        calls = build(range(n), False)
        replies = self._scripts.call_many([c for c, _ in calls], wait, partial=partial)
        out = [(order, raw) for (_, order), raw in zip(calls, replies, strict=True) if raw is not REDIRECTED]
        again = sorted(i for (_, order), raw in zip(calls, replies, strict=True) if raw is REDIRECTED
                       for i in order)  # fmt: skip
        if again:
            calls = build(again, True)
            replies = self._scripts.call_many([c for c, _ in calls], wait, partial=partial)
            for (_, order), raw in zip(calls, replies, strict=True):
                if raw is REDIRECTED:  # pragma: no cover - a one-job call is never REDIRECTED
                    raise StoreError(f"redis at {self._where}: a one-job call was redirected")
                out.append(([again[i] for i in order], raw))
        return out

    def _vote_calls(
        self, requests: Sequence[VoteRequest], *, singles: bool = False
    ) -> list[tuple[Call, list[int]]]:
        """The vote script calls for ``requests`` and each call's request indices, in vote order.

        The fields a node's votes share (node, quorum, skew, deadline,
        overlap, membership epoch and record, start lease, incarnation) go once per call as numbered
        parameter sets. Votes travel in
        segments that share a parameter set and a fire time (at a schedule
        boundary most of a batch does): per segment set, fire_ms, count; per
        vote one key (its job's meta key) and its spec hash. A job's votes
        stay together and in order; jobs are independent, so their groups
        are ordered to make segments long (on a cluster: by node first), and
        within a segment by the voting node's rendezvous rank among the
        record's members (:func:`~quorum_cron.store.rendezvous.rank`): the
        slots this node would execute go first. Why: the executor is picked
        among the voters that reached the quorum, and at a burst the node
        whose calls the server happens to take first was in every quorum and
        ran half the slots of three nodes (docs/benchmarks.md, "Spreading the
        executors"). Voting its own slots first, each node is among the
        first voters of the slots it would win.
        """
        param_index: dict[_ParamKey, int] = {}
        vote_params: list[int] = []
        for r in requests:
            key = (
                r.node,
                r.quorum,
                r.max_skew_ms,
                r.deadline_ms,
                _OVERLAP[r.overlap],
                r.epoch,
                r.membership,
                r.start_lease_ms,
                r.incarnation,
            )
            k = param_index.get(key)
            if k is None:
                k = param_index[key] = len(param_index) + 1
            vote_params.append(k)
        start: list[str | int] = [self._now_arg(), *self._common_tail, len(param_index)]
        for key in param_index:
            start.extend(key)
        groups = list(self._by_job(r.job for r in requests).values())
        ranked = _rank_members(param_index)
        if ranked:
            groups.sort(key=lambda idx: _vote_order(requests[idx[0]], vote_params[idx[0]], ranked))
        elif len(param_index) > 1 or len({r.fire_ms for r in requests}) > 1:
            groups.sort(key=lambda idx: (vote_params[idx[0]], requests[idx[0]].fire_ms))
        single = self._single(singles)

        out: list[tuple[Call, list[int]]] = []
        keys: list[str] = []
        args: list[str | int] = list(start)
        order: list[int] = []
        segment: tuple[int, int] | None = None
        count_at = 0
        at = ""
        for node, idx in self._node_order(groups, lambda i: requests[i].job):
            if order and (single or node != at or len(order) + len(idx) > self._max_batch):
                out.append((Call(VOTE, keys, args), order))
                keys, args, order, segment = [], list(start), [], None
            at = node
            meta_key = self._job_prefix(requests[idx[0]].job) + store_keys.META
            for i in idx:
                r = requests[i]
                seg = (vote_params[i], r.fire_ms)
                if seg != segment:
                    segment = seg
                    args.extend((seg[0], seg[1], 0))
                    count_at = len(args) - 1
                args[count_at] = int(args[count_at]) + 1
                args.append(r.spec_hash)
                keys.append(meta_key)
                order.append(i)
        out.append((Call(VOTE, keys, args), order))
        return out


_ParamKey = tuple[str, int, int, int, str, int, str, int, str]


def _rank_members(param_index: dict[_ParamKey, int]) -> dict[int, tuple[str, ...]]:
    """Per parameter set whose record names the voting node among two or more members: the
    members (what the vote order ranks by; :func:`~quorum_cron.store.rendezvous.ranking_seats`).
    Empty when no set has one."""
    out: dict[int, tuple[str, ...]] = {}
    for key, k in param_index.items():
        seats = ranking_seats(key[6], key[0])
        if seats is not None and len(seats[0]) > 1:
            out[k] = seats[0]
    return out


def _vote_order(r: VoteRequest, param: int, ranked: dict[int, tuple[str, ...]]) -> tuple[int, int, int]:
    members = ranked.get(param)
    return param, r.fire_ms, 0 if members is None else rank(r.job, r.fire_ms, r.node, members)
