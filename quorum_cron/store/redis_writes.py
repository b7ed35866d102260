"""The state changes a node acts on: votes, fenced start / renew / finish, sweeps, missed records.

Each is one script call (or a batch of them, packed by :mod:`.redis_batch`)
whose reply is decoded here into :class:`~quorum_cron.store.base.VoteResult`,
:class:`~quorum_cron.store.base.TransitionResult` and
:class:`~quorum_cron.store.base.SlotView` values; these are the calls that
``wait_replicas`` follows with ``WAIT``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quorum_cron.core.model import MAX_ENCODED, refusal_reason
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.redact import redact_text
from quorum_cron.store import keys as store_keys
from quorum_cron.store import parse
from quorum_cron.store.base import (
    Delivery,
    FencedRequest,
    MissedRequest,
    SlotState,
    SlotView,
    SweepParams,
    SweepResult,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
)
from quorum_cron.store.redis_base import as_list, as_text, without_script
from quorum_cron.store.redis_batch import RedisBatching
from quorum_cron.store.scripts import FENCE, MISSED, SWEEP, Call, Script, WaitShortfall, execute_waited

__all__ = ["RedisWrites"]

T = TypeVar("T")

_DELIVERY = {Delivery.AT_MOST_ONCE: "m", Delivery.AT_LEAST_ONCE: "l"}
_STATUS = {
    "R": VoteStatus.RECORDED,
    "C": VoteStatus.COMMITTED,
    "D": VoteStatus.DECIDED,
    "E": VoteStatus.EARLY,
    "M": VoteStatus.MISSED,
    "S": VoteStatus.SKIPPED,
}

_FENCED_OPS = {"s": "start", "r": "renew", "f": "finish"}
_FENCED_CODES = {name: code for code, name in _FENCED_OPS.items()}
_FENCED_WIDTH = 3
"""Values per request in fence.lua's flat reply: refusal code, slot value, failure streak."""
_MISSED_WIDTH = 2
"""Values per request in missed.lua's flat reply: ``""`` or ``"!"``, then the slot value or error."""
_PROBE_TRIES = 1 << 18
"""Probe keys tried at most to find one of a slot the master owns (its slots are read from the
slot map). A key's slot is uniform over 16384: a master of a single slot misses it in that many
tries with a chance of e**-16, a master of a third of the slots hits one of three keys."""
_PROBE_TTL_MS = 10_000
"""How long a probe key lives: it says nothing once written, and nothing reads it."""


def _slot_value(job: str, fire_ms: int, record: object) -> SlotView:
    return parse.slot_value(job, fire_ms, record)


def _fenced_args(
    op: str, fire_ms: int, node: str, token: int, extra: Sequence[str | int]
) -> tuple[str | int, ...]:
    """One request's 8 arguments to fence.lua: op, fire, node, token, then lease or result,
    detail, retries, backoff (``""`` where the op has none)."""
    return (op, fire_ms, node, token, *extra, *("",) * (4 - len(extra)))


class RedisWrites(RedisBatching):
    """Votes, fenced transitions and deadlines on Redis (see :class:`quorum_cron.store.base.Store`)."""

    def vote(self, requests: Sequence[VoteRequest]) -> list[VoteResult]:
        if not requests:
            return []

        def build(items: Sequence[int], singles: bool) -> list[tuple[Call, list[int]]]:
            return self._vote_calls([requests[i] for i in items], singles=singles)

        results: list[VoteResult | None] = [None] * len(requests)
        with self._boundary("vote"):
            for order, raw in self._run_grouped(build, len(requests), self._wait):
                reply = as_list(raw)
                codes = as_text(reply[1]) if len(reply) > 1 else ""
                if len(reply) != len(order) + 2 or len(codes) != len(order):
                    raise ValueError(
                        f"vote reply has {len(reply) - 2} values, {len(codes)} codes for {len(order)} votes"
                    )
                now_ms = int(reply[0])
                for i, code, record in zip(order, codes, reply[2:], strict=True):
                    results[i] = self._vote_result(requests[i], code, record, now_ms)
        return [r for r in results if r is not None]

    def master_of(self, job: str) -> str:
        """The cluster master (``host:port``) that owns ``job``'s hash slot; "" off a cluster,
        whose one server (or Sentinel's master) holds every job."""
        runner = self._cluster_runner
        if runner is None:
            return ""
        with self._boundary("slot map"):  # (a stale map is read again: that may fail as an outage)
            return str(runner.owner(self._job_prefix(job) + store_keys.META).name)

    def probe_master(self, master: str) -> bool:
        """One write on cluster ``master`` (a short-lived key ``qc:probe:{<ns>:<i>}`` of a slot it
        owns), then ``WAIT``: True when enough replicas acknowledged it; raises
        :class:`~quorum_cron.errors.StoreUnreplicated` naming the master when not. False when
        ``master`` owns no slot now (a failover moved its jobs: their writes go elsewhere).

        Why a write of its own: the agent stops voting for the jobs of a master whose writes
        fall short, so no vote reaches it; only a write to *that* master says it is replicated
        again (a write to another master is, all along)."""
        runner = self._cluster_runner
        if runner is None or self._wait is None:
            return True
        with self._boundary("replication probe"):
            # Whether it owns a slot is read from the slot map, not from whether one of a few
            # thousand keys lands on it: those cover a fifth of the slots, and a master owning
            # only others (a small one, one being drained) was taken for one owning none.
            runner.owner(f"qc:probe:{{{self._ns}:0}}")  # (a map a reply said is stale: read again)
            slots = self._client.nodes_manager.slots_cache  # type: ignore[union-attr]
            owned = {s for s, nodes in slots.items() if nodes and nodes[0].name == master}
            if not owned:
                return False
            keys = (f"qc:probe:{{{self._ns}:{i}}}" for i in range(_PROBE_TRIES))
            key = next((k for k in keys if runner.slot(k) in owned), None)
            if key is None:  # (a chance of e**-16 or less: the state stays, probed again)
                raise StoreUnavailable(f"redis at {self._where}: no probe key found for master {master}")
            node = slots[runner.slot(key)][0]  # (the map read above, not one refreshed since)
            pipe = self._client.get_redis_connection(node).pipeline(transaction=False)  # type: ignore[union-attr]
            pipe.set(key, "1", px=_PROBE_TTL_MS)
            try:
                [wrote], acked = execute_waited(pipe, self._wait)
            except (RedisConnectionError, RedisTimeoutError):
                runner.forget()  # (the master may be gone: read the slot map again)
                raise
            if isinstance(wrote, Exception):  # (refused: OOM, READONLY... WAIT proves nothing then)
                raise wrote
            if acked is not None and acked < self._wait.replicas:
                raise WaitShortfall(acked, self._wait, [master])
        return True

    def _vote_result(self, req: VoteRequest, code: str, record: object, now_ms: int) -> VoteResult:
        """One vote's result; a corrupt slot or job state fails this vote only.

        Such a vote is reported (:meth:`_bad`) and answered as decided with
        an absent slot: the node stops voting for the slot and runs nothing
        (it has no committed slot with a token of its own).
        """
        problem = ""
        status = _STATUS.get(code)
        if code == "F":
            try:
                return self._refused(req, record, now_ms)
            except parse.BadValue as exc:
                problem = exc.problem
        elif status is None:
            try:
                problem = parse.text(record, "vote error", 300) if code == "X" else f"vote code {code!r}"
            except parse.BadValue as exc:
                problem = str(exc)
        else:
            try:
                slot = _slot_value(req.job, req.fire_ms, record)
                return VoteResult(status=status, slot=slot, now_ms=now_ms)
            except parse.BadValue as exc:
                problem = exc.problem
        self._bad(f"slot {req.job}@{req.fire_ms}", problem)
        absent = SlotView(job=req.job, fire_ms=req.fire_ms, state=SlotState.ABSENT)
        return VoteResult(status=VoteStatus.DECIDED, slot=absent, now_ms=now_ms)

    def _refused(self, req: VoteRequest, record: object, now_ms: int) -> VoteResult:
        """A vote the job's membership record refused: ``<record text>\n<slot value>``."""
        raw = parse.text(record, "refused vote", parse.MAX_SLOT_BYTES + MAX_ENCODED + 1)
        head, _, value = raw.partition("\n")
        rec = parse.membership_record(head, f"membership record of job {req.job}")
        slot = _slot_value(req.job, req.fire_ms, value)
        why = refusal_reason(req.node, req.epoch, rec)
        return VoteResult(VoteStatus.REFUSED, slot, now_ms, rec.epoch, rec, why)

    def _fenced(
        self, op: str, job: str, fire_ms: int, node: str, token: int, *extra: str | int
    ) -> TransitionResult:
        name = _FENCED_OPS[op]
        with self._boundary(name):
            args = _fenced_args(op, fire_ms, node, token, extra)
            raw = self._scripts.call(self._job_call(FENCE, job, self._now_arg(), [1, *args]), self._wait)
            reply = as_list(raw)
            if len(reply) != 1 + _FENCED_WIDTH:
                raise ValueError(
                    f"{name} reply has {len(reply) - 1} values for 1 request, expected {_FENCED_WIDTH}"
                )
            return self._fenced_reply(name, op, job, fire_ms, node, token, reply[0], reply[1:])

    def _fenced_reply(
        self, name: str, op: str, job: str, fire_ms: int, node: str, token: int, now: object, item: list[Any]
    ) -> TransitionResult:
        """Decode one request's three values of fence.lua's reply (inside the caller's
        ``_boundary``): refusal code, slot value, failure streak; or ``"!"``, error, ``""`` for a
        corrupt key of the job, raised as a ``StoreError``; ``now`` is the call's store time."""
        if len(item) != _FENCED_WIDTH:
            raise ValueError(f"{name} reply item has {len(item)} values, expected {_FENCED_WIDTH}")
        if item[0] in (b"!", "!"):
            said = without_script(as_text(item[1]))
            raise StoreError(
                f"redis at {self._where} failed {name}: {said}", f"error reply: {redact_text(said)}"
            )
        now_ms, why = int(as_text(now)), as_text(item[0])
        slot = _slot_value(job, fire_ms, item[1])
        if not why:
            return TransitionResult(True, slot, now_ms, "", self._streak(job, item[2]))
        want = SlotState.COMMITTED if op == "s" else SlotState.RUNNING
        reasons = {
            "U": "unknown slot",
            "S": f"slot is {slot.state}, not {want}",
            "T": f"stale token {token}, current is {slot.token}",
            "X": f"executor is {slot.executor!r}, not {node!r}",
            "D": "starting deadline passed",
            "N": f"retry not due before {slot.not_before_ms}",
        }
        if why not in reasons:
            raise StoreError(f"unexpected refusal code {why!r} from redis at {self._where} to {name}")
        return TransitionResult(False, slot, now_ms, reasons[why])

    def _streak(self, job: str, raw: object) -> int:
        """A finish reply's failure streak (``""``: none); a bad value is reported and read as 0
        (only this job's recovery alert is lost)."""
        try:
            text = parse.text(raw, "failure streak", 20)
            return parse.bounded_int(text, f"failure streak of job {job}", 0) if text else 0
        except parse.BadValue as exc:
            self._bad(exc.what, exc.problem)
            return 0

    def fenced(self, requests: Sequence[FencedRequest]) -> list[TransitionResult | StoreError]:
        """``fence.lua`` calls covering many jobs each (one per master on a cluster, packed like a
        sweep's), in one pipeline, then ``WAIT`` if set."""
        if not requests:
            return []
        codes: list[str] = []
        for r in requests:
            op = _FENCED_CODES.get(r.op)
            if op is None:
                raise ValueError(f"fenced request op {r.op!r}: expected 'start', 'renew' or 'finish'")
            codes.append(op)

        def item(i: int) -> Sequence[str | int]:
            r = requests[i]
            extra = (
                ("1" if r.succeeded else "0", r.detail, r.retries, r.retry_backoff_ms)
                if codes[i] == "f"
                else (r.lease_ms,)
            )
            return _fenced_args(codes[i], r.fire_ms, r.node, r.token, extra)

        out: list[TransitionResult | StoreError | None] = [None] * len(requests)
        with self._boundary("fenced"):
            jobs = [r.job for r in requests]
            for i, now, got in self._per_request("fenced", FENCE, jobs, item, _FENCED_WIDTH):
                r = requests[i]
                if isinstance(got, WaitShortfall):  # its master lacks a replica: this request only
                    out[i] = self._unreplicated(r.op, got)
                    continue
                out[i] = self._alone(
                    r.op, self._fenced_reply, r.op, codes[i], r.job, r.fire_ms, r.node, r.token, now, got
                )
        return [r for r in out if r is not None]

    def _per_request(
        self,
        name: str,
        script: Script,
        jobs: Sequence[str],
        args: Callable[[int], Sequence[str | int]],
        width: int,
    ) -> Iterator[tuple[int, object, list[Any] | WaitShortfall]]:
        """Send requests (request i of job ``jobs[i]``, arguments ``args(i)``) as calls of the grouped
        ``script`` (packed by :meth:`_grouped_calls`, re-sent one job per call if redirected) and
        yield each request's index, its call's store time and its ``width`` values of the flat reply
        — or, for a call on a cluster master whose ``WAIT`` fell short, ``None`` and the
        :class:`~quorum_cron.store.scripts.WaitShortfall` (the caller fails those requests alone:
        the other masters' writes are replicated)."""
        now = self._now_arg()

        def build(items: Sequence[int], singles: bool) -> list[tuple[Call, list[int]]]:
            return self._grouped_calls(
                script, now, [jobs[i] for i in items], lambda k: args(items[k]), singles=singles
            )

        for order, raw in self._run_grouped(build, len(jobs), self._wait, partial=True):
            if isinstance(raw, WaitShortfall):
                for i in order:
                    yield i, None, raw
                continue
            reply = as_list(raw)
            if len(reply) != 1 + width * len(order):
                raise ValueError(
                    f"{name} reply has {len(reply) - 1} values for {len(order)} requests "
                    f"(expected {width} each)"
                )
            for k, i in enumerate(order):
                yield i, reply[0], reply[1 + width * k : 1 + width * (k + 1)]

    def _alone(self, name: str, decode: Callable[..., T], *args: Any) -> T | StoreError:
        """``decode(*args)``, one request's result; a ``StoreError`` (a corrupt key of its job)
        fails only that request."""
        try:
            with self._boundary(name):
                return decode(*args)
        except StoreUnavailable:
            raise
        except StoreError as exc:
            return exc

    def start(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        return self._fenced("s", job, fire_ms, node, token, lease_ms)

    def renew(self, job: str, fire_ms: int, node: str, token: int, lease_ms: int) -> TransitionResult:
        return self._fenced("r", job, fire_ms, node, token, lease_ms)

    def finish(
        self,
        job: str,
        fire_ms: int,
        node: str,
        token: int,
        succeeded: bool,
        detail: str,
        retries: int = 0,
        retry_backoff_ms: int = 0,
    ) -> TransitionResult:
        return self._fenced(
            "f", job, fire_ms, node, token, "1" if succeeded else "0", detail, retries, retry_backoff_ms
        )

    # -- deadlines -----------------------------------------------------------

    def sweep(self, params: Sequence[SweepParams]) -> SweepResult:
        if not params:
            return SweepResult([])

        def item(i: int) -> tuple[int, int, str]:
            p = params[i]
            return (p.deadline_ms, p.start_timeout_ms, _DELIVERY[p.delivery])

        now = self._now_arg()

        def build(items: Sequence[int], singles: bool) -> list[tuple[Call, list[int]]]:
            return self._grouped_calls(
                SWEEP, now, [params[i].job for i in items], lambda k: item(items[k]), singles=singles
            )

        per_param: list[list[SlotView]] = [[] for _ in params]
        still_open: dict[str, int] = {}
        with self._boundary("sweep"):
            for order, raw in self._run_grouped(build, len(params), None):
                reply = as_list(raw)
                at = 1  # (the reply is flat: per set its due time, n, then n pairs fire, slot)
                for i in order:
                    if at + 2 > len(reply):
                        raise ValueError(f"sweep reply of {len(reply)} values ends before set {i}")
                    job_due, n = reply[at], reply[at + 1]
                    if not isinstance(n, int) or n < 0 or at + 2 + 2 * n > len(reply):
                        raise ValueError(f"sweep reply: set {i} names {n!r} changed slots")
                    pairs = reply[at + 2 : at + 2 + 2 * n]
                    at += 2 + 2 * n
                    per_param[i] = self._views(params[i].job, [pairs[k : k + 2] for k in range(0, 2 * n, 2)])
                    # (Each call's own store time: on a cluster, each master's clock.)
                    if job_due != 0:  # (a bad value is swept again soon: the safe reading)
                        left = self._due_in(reply[0], job_due) or 1
                        job = params[i].job
                        still_open[job] = min(still_open.get(job, left), left)
                if at != len(reply):
                    raise ValueError(f"sweep reply has {len(reply) - at} values after its {len(order)} sets")
        return SweepResult([view for views in per_param for view in views], still_open)

    def _due_in(self, now: object, due: object) -> int:
        """A job's due time in a sweep reply (store time, 0: none) as milliseconds after the
        call's ``now``; a bad value is reported and taken as "sweep again at the usual interval" (1)."""
        try:
            at = parse.bounded_int(due, "sweep due time", 0)
            if not at:
                return 0
            return max(1, at - parse.bounded_int(now, "sweep store time", 0))
        except parse.BadValue as exc:
            self._bad(exc.what, exc.problem)
            return 1

    def record_missed(self, job: str, fire_ms: int, deadline_ms: int, reason: str) -> SlotView:
        [got] = self.record_missed_many([MissedRequest(job, fire_ms, deadline_ms, reason)])
        if isinstance(got, StoreError):
            raise got
        return got

    def _missed_reply(self, job: str, fire_ms: int, item: list[Any]) -> SlotView:
        """One request's two values of missed.lua's reply (inside the caller's ``_boundary``): ``""``
        and the slot value, or ``"!"`` and the error of a corrupt key of the job (a ``StoreError``)."""
        if item[0] in (b"!", "!"):
            raise StoreError(
                f"redis at {self._where} failed record_missed: {without_script(as_text(item[1]))}"
            )
        return _slot_value(job, fire_ms, item[1])

    def record_missed_many(self, requests: Sequence[MissedRequest]) -> list[SlotView | StoreError]:
        """``missed.lua`` calls covering many jobs each (one per master on a cluster), in one
        pipeline, then ``WAIT`` if set."""
        if not requests:
            return []

        def args(i: int) -> Sequence[str | int]:
            return (requests[i].fire_ms, requests[i].deadline_ms, requests[i].reason)

        out: list[SlotView | StoreError | None] = [None] * len(requests)
        with self._boundary("record_missed"):
            jobs = [r.job for r in requests]
            for i, _, got in self._per_request("record_missed", MISSED, jobs, args, _MISSED_WIDTH):
                r = requests[i]
                if isinstance(got, WaitShortfall):  # its master lacks a replica: this request only
                    out[i] = self._unreplicated("record_missed", got)
                    continue
                out[i] = self._alone("record_missed", self._missed_reply, r.job, r.fire_ms, got)
        return [r for r in out if r is not None]
