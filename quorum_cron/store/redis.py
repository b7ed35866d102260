"""RedisStore: the store contract on one Redis server, through Lua scripts.

Every state change is one script call (:mod:`quorum_cron.store.scripts`), so
it is atomic on the server and reads the server's clock (``TIME``) — never
the caller's. The rules are those of :class:`~quorum_cron.store.memory.MemoryStore`,
the executable model, and the contract suite runs both side by side.

This module owns the Python side: key names, argument encoding, reply
decoding into :mod:`quorum_cron.store.base` values, and translating redis-py
errors into the library's family at this one boundary. ``docs/store.md``
documents the key layout and each script's KEYS/ARGV and reply.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import (
    AskError,
    AuthenticationError,
    ClusterDownError,
    ClusterError,
    InvalidResponse,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quorum_cron.errors import ConfigError, StoreError, StoreOutOfMemory, StoreUnavailable
from quorum_cron.redact import redact_url
from quorum_cron.store import keys as store_keys
from quorum_cron.store import parse
from quorum_cron.store.base import (
    AuditEntry,
    Delivery,
    HeartbeatResult,
    JobControl,
    LedgerEntry,
    Member,
    Overlap,
    SlotState,
    SlotView,
    SweepParams,
    TransitionResult,
    VoteRequest,
    VoteResult,
    VoteStatus,
)
from quorum_cron.store.cluster import REDIRECTED, ClusterScriptRunner
from quorum_cron.store.keys import (
    DEFAULT_AUDIT_MAXLEN,
    DEFAULT_LEDGER_MAXLEN,
    DEFAULT_RETENTION_MS,
    DEFAULT_TRIGGER_MAXLEN,
)
from quorum_cron.store.scripts import (
    CONTROL,
    FENCE,
    MEMBERS,
    MISSED,
    READ,
    SWEEP,
    VOTE,
    Call,
    ScriptRunner,
    Wait,
    WaitShortfall,
)
from quorum_cron.store.urls import RedisTarget, open_client, parse_redis_url

__all__ = ["RedisStore", "redact_url"]

_log = logging.getLogger("quorum_cron.store")

_OVERLAP = {Overlap.ALLOW: "a", Overlap.FORBID: "f", Overlap.REPLACE: "r"}
_DELIVERY = {Delivery.AT_MOST_ONCE: "m", Delivery.AT_LEAST_ONCE: "l"}
_STATUS = {
    "R": VoteStatus.RECORDED,
    "C": VoteStatus.COMMITTED,
    "D": VoteStatus.DECIDED,
    "E": VoteStatus.EARLY,
    "M": VoteStatus.MISSED,
    "S": VoteStatus.SKIPPED,
}
DEFAULT_MAX_BATCH = 200
"""Votes (or sweep parameter sets) per script call on a standalone server:
large enough to amortise the call, small enough that one call blocks the
server for about a millisecond at most."""
DEFAULT_WAIT_TIMEOUT_MS = 100
"""How long ``WAIT`` waits for replica acknowledgements when ``wait_replicas`` > 0."""

# With an injected clock, store time and real time are unrelated, so the
# physical key TTL (garbage collection only) must not fire before the logical
# expiry that the scripts check against the injected time.
_KEY_TTL_FLOOR_WITH_CLOCK_MS = 24 * 3600 * 1000


def _where(client: redis.Redis | RedisCluster) -> str:
    """The server address of ``client`` as a password-free URL."""
    if isinstance(client, RedisCluster):
        seeds = ",".join(f"{n.host}:{n.port}" for n in client.nodes_manager.startup_nodes.values())
        return f"redis+cluster://{seeds}"
    pool: Any = client.connection_pool
    kw = pool.connection_kwargs
    service = getattr(pool, "service_name", None)
    if service is not None:  # a Sentinel-managed pool
        sentinels = ",".join(
            "{host}:{port}".format(**s.connection_pool.connection_kwargs)
            for s in pool.sentinel_manager.sentinels
        )
        return f"redis+sentinel://{sentinels}/{service}/{kw.get('db', 0)}"
    db = kw.get("db", 0)
    if kw.get("path"):
        return f"unix://{kw['path']}?db={db}"
    return f"redis://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{db}"


def _no_script(message: str) -> str:
    """A redis-py error message without the script source some versions append (4 KB of Lua)."""
    cut = message.find("\n")
    message = message if cut < 0 else message[:cut]
    return message if len(message) <= 500 else message[:500] + "..."


def _text(value: object) -> str:
    return parse.text(value, "reply value")


def _slot_view(job: str, fire_ms: int, emitted: Sequence[object]) -> SlotView:
    """Decode an ``emit(code, slot)`` reply: ``{code, slot value}``."""
    return parse.slot_view(job, emitted, fire_ms)


def _slot_value(job: str, fire_ms: int, record: object) -> SlotView:
    return parse.slot_value(job, fire_ms, record)


def _stream_replies(reply: object) -> list[Any]:
    """``XREAD``'s reply as ``[(key, entries), ...]`` (RESP2 gives a list, RESP3 a map)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return list(reply.items())
    return _seq(reply)


def _seq(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected an array in the reply, got {type(value).__name__}")
    return value


class RedisStore:
    """The store contract on Redis (see :class:`quorum_cron.store.base.Store`).

    ``clock`` is for tests and simulator parity only: when given, every
    script uses ``clock()`` as the store's time instead of the server's
    ``TIME``. Production leaves it ``None`` so no node's clock can ever
    decide a slot. ``retention_ms`` bounds how long a slot is remembered after
    its last change; ``ledger_maxlen`` bounds each job's ledger stream,
    ``audit_maxlen`` its audit stream and ``trigger_maxlen`` its kept triggers.

    ``cluster``: set by itself when ``client`` is a
    :class:`~redis.cluster.RedisCluster`. Every key and channel a script
    touches is then in the job's hash slot (notices go by sharded pub/sub,
    ``SPUBLISH``); ``vote`` and ``sweep`` group the jobs by the master that
    owns their slot and send, per master, calls of up to ``max_batch`` items
    in one pipeline on that master's connection
    (:mod:`quorum_cron.store.cluster`). ``cluster=True`` with a plain client
    sends one call per job (what a cluster without cross-slot scripts would
    need). On a standalone server (the default) calls of up to ``max_batch``
    items cover many jobs, which amortises the per-call cost; a job's items
    are never split across calls.

    ``wait_replicas``: when > 0, every state change a node acts on (``vote``,
    ``start``, ``renew``, ``finish``, ``record_missed``) is followed in the
    same pipeline — one round trip, same connection — by ``WAIT
    wait_replicas wait_timeout_ms``. Fewer acknowledgements raise
    :class:`~quorum_cron.errors.StoreUnavailable` (outcome unknown: the write
    happened on the primary but may be lost by a failover; the caller retries,
    every call is idempotent). Default 0: no ``WAIT``.

    The client may or may not decode responses; replies are decoded here.
    """

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        namespace: str,
        *,
        clock: Callable[[], int] | None = None,
        retention_ms: int = DEFAULT_RETENTION_MS,
        ledger_maxlen: int = DEFAULT_LEDGER_MAXLEN,
        cluster: bool = False,
        max_batch: int = DEFAULT_MAX_BATCH,
        audit_maxlen: int = DEFAULT_AUDIT_MAXLEN,
        trigger_maxlen: int = DEFAULT_TRIGGER_MAXLEN,
        wait_replicas: int = 0,
        wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
    ) -> None:
        if not namespace or any(c in namespace for c in store_keys.FORBIDDEN_NAMESPACE_CHARS):
            raise ConfigError(
                f"invalid store namespace {namespace!r}: expected a non-empty name without '{{', '}}' or ':'"
            )
        for name, value in (
            ("retention_ms", retention_ms),
            ("ledger_maxlen", ledger_maxlen),
            ("max_batch", max_batch),
            ("audit_maxlen", audit_maxlen),
            ("trigger_maxlen", trigger_maxlen),
        ):
            if value <= 0:
                raise ConfigError(f"invalid {name} {value}: expected > 0")
        if wait_replicas < 0:
            raise ConfigError(f"invalid wait_replicas {wait_replicas}: expected >= 0")
        if wait_replicas and wait_timeout_ms <= 0:
            # WAIT n 0 would block forever.
            raise ConfigError(f"invalid wait_timeout_ms {wait_timeout_ms}: expected > 0")
        self._wait = Wait(wait_replicas, wait_timeout_ms) if wait_replicas else None
        self._client = client
        self._ns = namespace
        self._clock = clock
        self._retention_ms = retention_ms
        self._ledger_maxlen = ledger_maxlen
        self._audit_maxlen = audit_maxlen
        self._trigger_maxlen = trigger_maxlen
        self._sharded = isinstance(client, RedisCluster)
        self._cluster = cluster or self._sharded
        self._max_batch = max_batch
        self._key_ttl_ms = retention_ms if clock is None else max(retention_ms, _KEY_TTL_FLOOR_WITH_CLOCK_MS)
        self._where = _where(client)
        self._cluster_runner = ClusterScriptRunner(client) if isinstance(client, RedisCluster) else None
        self._scripts: ScriptRunner | ClusterScriptRunner = (
            self._cluster_runner if self._cluster_runner is not None else ScriptRunner(client)  # type: ignore[arg-type]
        )
        self._prefixes: dict[str, str] = {}
        self._members_key = store_keys.members_key(namespace)
        self._assign_prefix = store_keys.assign_prefix(namespace)
        self._trigger_channel = store_keys.trigger_channel(namespace)
        # ARGV[2..6] of every per-job script (see _job.lua); ARGV[1] is now.
        self._common_tail: tuple[str | int, ...] = (
            retention_ms,
            self._key_ttl_ms,
            ledger_maxlen,
            "" if self._cluster else self._assign_prefix,
            store_keys.job_name_offset(namespace),
        )
        self.on_bad_value: Callable[[str, str], None] | None = None
        """Called once per distinct bad value read (what, problem); see :meth:`_bad`."""
        self._bad_seen: set[str] = set()
        self.bad_values = 0
        """How many bad values were read (each distinct one counted once)."""

    @classmethod
    def from_url(
        cls,
        url: str,
        namespace: str,
        *,
        clock: Callable[[], int] | None = None,
        retention_ms: int = DEFAULT_RETENTION_MS,
        ledger_maxlen: int = DEFAULT_LEDGER_MAXLEN,
        cluster: bool = False,
        max_batch: int = DEFAULT_MAX_BATCH,
        audit_maxlen: int = DEFAULT_AUDIT_MAXLEN,
        trigger_maxlen: int = DEFAULT_TRIGGER_MAXLEN,
        wait_replicas: int = 0,
        wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        **client_kwargs: Any,
    ) -> RedisStore:
        """A store on a new client for ``url``: any form of :mod:`quorum_cron.store.urls`
        (standalone, ``redis+sentinel://``, ``redis+cluster://``).

        ``client_kwargs`` go to every connection (timeouts, retry). A cluster
        URL connects at once (to learn the slot map): an unreachable cluster
        raises :class:`~quorum_cron.errors.StoreUnavailable`.
        """
        target = parse_redis_url(url)
        client = cls._open(target, client_kwargs)
        return cls(
            client,
            namespace,
            clock=clock,
            retention_ms=retention_ms,
            ledger_maxlen=ledger_maxlen,
            cluster=cluster,
            max_batch=max_batch,
            audit_maxlen=audit_maxlen,
            trigger_maxlen=trigger_maxlen,
            wait_replicas=wait_replicas,
            wait_timeout_ms=wait_timeout_ms,
        )

    @staticmethod
    def _open(target: RedisTarget, client_kwargs: dict[str, Any]) -> redis.Redis | RedisCluster:
        try:
            return open_client(target, **client_kwargs)
        except (RedisError, RedisClusterException) as exc:
            raise StoreUnavailable(f"redis at {target.shown} unavailable: {exc}") from exc

    def __repr__(self) -> str:
        mode = "injected clock" if self._clock is not None else "server clock"
        return f"RedisStore({self._where}, namespace={self._ns!r}, {mode})"

    @property
    def members_key(self) -> str:
        """The members hash ``qc:{<ns>}:members`` (checked by the agent before it starts)."""
        return self._members_key

    @property
    def client(self) -> redis.Redis | RedisCluster:
        """The underlying redis-py client (for tests and diagnostics)."""
        return self._client

    @property
    def sharded(self) -> bool:
        """True on a Redis Cluster: notices are sharded, one channel per job (see :meth:`notice_channels`)."""
        return self._sharded

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()

    # -- notices -------------------------------------------------------------

    def assign_channel(self, node: str) -> str:
        """The pub/sub channel of ``node``'s assignment notices: ``qc:{<ns>}:assign:<node>``.

        Every script that assigns a slot to ``node`` (a vote's commit, a
        sweep's takeover, a retried failure) publishes ``<job>\\n<fire_ms>\\n<token>``
        on it in the same atomic step. A notice is a hint: the fenced start decides.
        """
        return self._assign_prefix + node

    def trigger_channel(self) -> str:
        """The pub/sub channel of manual triggers: ``qc:{<ns>}:trigger``, payload ``<job>\\n<fire_ms>``."""
        return self._trigger_channel

    def notice_channels(self, node: str, jobs: Sequence[str]) -> tuple[list[str], list[str]]:
        """The channels ``node`` listens on for ``jobs``: (assignment channels, trigger channels).

        Standalone: the node's one assignment channel and the namespace's
        trigger channel (classic pub/sub). Cluster (:attr:`sharded`): one
        of each per job, ``qc:{<ns>:<job>}:assign:<node>`` and
        ``qc:{<ns>:<job>}:trigger``, in the job's hash slot — the scripts
        ``SPUBLISH`` there, the node subscribes with ``SSUBSCRIBE``, and no notice is
        broadcast over the cluster bus.
        """
        if not self._cluster:
            return [self.assign_channel(node)], [self._trigger_channel]
        ns = self._ns
        return (
            [store_keys.job_assign_channel(ns, j, node) for j in jobs],
            [store_keys.job_trigger_channel(ns, j) for j in jobs],
        )

    # -- plumbing ------------------------------------------------------------

    @contextmanager
    def _boundary(self, op: str) -> Iterator[None]:
        """Translate redis-py errors and malformed replies into the library's family."""
        try:
            yield
        except AuthenticationError as exc:
            raise StoreError(f"redis at {self._where} refused {op}: {exc}") from exc
        except (RedisConnectionError, RedisTimeoutError, ReadOnlyError, InvalidResponse) as exc:
            # READONLY: the server we wrote to was demoted (Sentinel failover):
            # a lost reply, like a dropped connection; the caller retries.
            # InvalidResponse: whatever answered does not speak RESP — not Redis, or a broken proxy.
            why = _no_script(str(exc))
            raise StoreUnavailable(f"redis at {self._where} unavailable during {op}: {why}") from exc
        except (ClusterDownError, TryAgainError, AskError, ClusterError, RedisClusterException) as exc:
            # A cluster between owners (failover, migration) after bounded re-sends.
            raise StoreUnavailable(f"redis at {self._where} unavailable during {op}: {exc}") from exc
        except WaitShortfall as exc:
            raise StoreUnavailable(
                f"redis at {self._where}: outcome of {op} unknown, not replicated as required: {exc}"
            ) from exc
        except RedisError as exc:
            if isinstance(exc, OutOfMemoryError) or "> 'maxmemory'" in str(exc):
                why = f"redis at {self._where} refused {op}: {_no_script(str(exc))}"
                raise StoreOutOfMemory(StoreOutOfMemory.PREFIX + why) from exc
            raise StoreError(f"redis at {self._where} failed {op}: {_no_script(str(exc))}") from exc
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            raise StoreError(f"unexpected reply from redis at {self._where} to {op}: {exc}") from exc

    def _bad(self, what: str, problem: str) -> None:
        """A value read from Redis was not what the scripts write: skip it, say so once.

        Only the entry it belongs to (a slot, a member, a ledger entry) is
        dropped from the reply; the caller goes on with the rest. Reported
        once per distinct (what, problem) — a corrupt member is read on every
        heartbeat — to the log and to :attr:`on_bad_value` (the agent turns
        it into a metric and an alert).
        """
        key = f"{what}\n{problem}"
        if key in self._bad_seen:
            return
        if len(self._bad_seen) < 10_000:
            self._bad_seen.add(key)
        self.bad_values += 1
        _log.warning("bad value in redis at %s: %s: %s", self._where, what, problem)
        hook = self.on_bad_value
        if hook is not None:
            hook(what, problem)

    def _now_arg(self) -> str:
        return "" if self._clock is None else str(self._clock())

    def _job_prefix(self, job: str) -> str:
        """The job's key prefix ``qc:{<ns>:<job>}:``: every key of the job is it plus a suffix."""
        prefix = self._prefixes.get(job)
        if prefix is None:
            prefix = store_keys.job_prefix(self._ns, job)
            if len(self._prefixes) < 10_000:
                self._prefixes[job] = prefix
        return prefix

    def _job_call(self, script: Any, job: str, now: str, args: Sequence[str | int]) -> Call:
        """A one-job script call: KEYS[1] the job's meta key, its own arguments from ``ARGV[7]``."""
        return Call(script, (self._job_prefix(job) + store_keys.META,), [now, *self._common_tail, *args])

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
    ) -> list[tuple[list[int], Any]]:
        """Run the calls ``build(items, singles)`` makes for items 0..n-1: (item indices, raw reply) per call.

        A cluster call that covers several jobs and was redirected (a slot
        moving between nodes) is re-sent one job per call, which the runner
        follows through MOVED / ASK.
        """
        calls = build(range(n), False)
        replies = self._scripts.call_many([c for c, _ in calls], wait)
        out = [(order, raw) for (_, order), raw in zip(calls, replies, strict=True) if raw is not REDIRECTED]
        again = sorted(i for (_, order), raw in zip(calls, replies, strict=True) if raw is REDIRECTED
                       for i in order)  # fmt: skip
        if again:
            calls = build(again, True)
            replies = self._scripts.call_many([c for c, _ in calls], wait)
            for (_, order), raw in zip(calls, replies, strict=True):
                if raw is REDIRECTED:  # pragma: no cover - a one-job call is never REDIRECTED
                    raise StoreError(f"redis at {self._where}: a one-job call was redirected")
                out.append(([again[i] for i in order], raw))
        return out

    # -- votes ---------------------------------------------------------------

    def vote(self, requests: Sequence[VoteRequest]) -> list[VoteResult]:
        if not requests:
            return []

        def build(items: Sequence[int], singles: bool) -> list[tuple[Call, list[int]]]:
            return self._vote_calls([requests[i] for i in items], singles=singles)

        results: list[VoteResult | None] = [None] * len(requests)
        with self._boundary("vote"):
            for order, raw in self._run_grouped(build, len(requests), self._wait):
                reply = _seq(raw)
                codes = _text(reply[1]) if len(reply) > 1 else ""
                if len(reply) != len(order) + 2 or len(codes) != len(order):
                    raise ValueError(
                        f"vote reply has {len(reply) - 2} values, {len(codes)} codes for {len(order)} votes"
                    )
                now_ms = int(reply[0])
                for i, code, record in zip(order, codes, reply[2:], strict=True):
                    results[i] = self._vote_result(requests[i], code, record, now_ms)
        return [r for r in results if r is not None]

    def _vote_result(self, req: VoteRequest, code: str, record: object, now_ms: int) -> VoteResult:
        """One vote's result; a corrupt slot or job state fails this vote only.

        Such a vote is reported (:meth:`_bad`) and answered as decided with
        an absent slot: the node stops voting for the slot and runs nothing
        (it has no committed slot with a token of its own).
        """
        problem = ""
        status = _STATUS.get(code)
        if status is None:
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

    def _vote_calls(
        self, requests: Sequence[VoteRequest], *, singles: bool = False
    ) -> list[tuple[Call, list[int]]]:
        """The vote script calls for ``requests`` and each call's request indices, in vote order.

        The fields a node's votes share (node, quorum, skew, deadline,
        overlap) go once per call as numbered parameter sets. Votes travel in
        segments that share a parameter set and a fire time (at a schedule
        boundary most of a batch does): per segment set, fire_ms, count; per
        vote one key (its job's meta key) and its spec hash. A job's votes
        stay together and in order; jobs are independent, so their groups
        are ordered to make segments long (on a cluster: by node first).
        """
        param_index: dict[tuple[str, int, int, int, str], int] = {}
        vote_params: list[int] = []
        for r in requests:
            key = (r.node, r.quorum, r.max_skew_ms, r.deadline_ms, _OVERLAP[r.overlap])
            k = param_index.get(key)
            if k is None:
                k = param_index[key] = len(param_index) + 1
            vote_params.append(k)
        start: list[str | int] = [self._now_arg(), *self._common_tail, len(param_index)]
        for key in param_index:
            start.extend(key)
        groups = list(self._by_job(r.job for r in requests).values())
        if len(param_index) > 1 or len({r.fire_ms for r in requests}) > 1:
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

    # -- fenced transitions --------------------------------------------------

    def _fenced(
        self, op: str, job: str, fire_ms: int, node: str, token: int, *extra: str | int
    ) -> TransitionResult:
        name = {"s": "start", "r": "renew", "f": "finish"}[op]
        with self._boundary(name):
            reply = _seq(
                self._scripts.call(
                    self._job_call(FENCE, job, self._now_arg(), [op, fire_ms, node, token, *extra]),
                    self._wait,
                )
            )
            if len(reply) != 3:
                raise ValueError(f"{name} reply has {len(reply)} elements, expected 3")
            now_ms, why = int(reply[0]), _text(reply[1])
            slot = _slot_view(job, fire_ms, _seq(reply[2]))
        if not why:
            return TransitionResult(True, slot, now_ms)
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

    def sweep(self, params: Sequence[SweepParams]) -> list[SlotView]:
        if not params:
            return []

        def item(i: int) -> tuple[int, int, str]:
            p = params[i]
            return (p.deadline_ms, p.start_timeout_ms, _DELIVERY[p.delivery])

        now = self._now_arg()

        def build(items: Sequence[int], singles: bool) -> list[tuple[Call, list[int]]]:
            return self._grouped_calls(
                SWEEP, now, [params[i].job for i in items], lambda k: item(items[k]), singles=singles
            )

        per_param: list[list[SlotView]] = [[] for _ in params]
        with self._boundary("sweep"):
            for order, raw in self._run_grouped(build, len(params), None):
                reply = _seq(raw)
                if len(reply) != len(order) + 1:
                    raise ValueError(f"sweep reply has {len(reply) - 1} sets for {len(order)} parameter sets")
                for i, changed in zip(order, reply[1:], strict=True):
                    per_param[i] = self._views(params[i].job, _seq(changed))
        return [view for views in per_param for view in views]

    def record_missed(self, job: str, fire_ms: int, deadline_ms: int, reason: str) -> SlotView:
        with self._boundary("record_missed"):
            reply = _seq(
                self._scripts.call(
                    self._job_call(MISSED, job, self._now_arg(), [fire_ms, deadline_ms, reason]),
                    self._wait,
                )
            )
            if len(reply) != 2:
                raise ValueError(f"record_missed reply has {len(reply)} elements, expected 2")
            return _slot_view(job, fire_ms, _seq(reply[1]))

    # -- reads ---------------------------------------------------------------

    def high_water(self, job: str) -> int:
        with self._boundary("high_water"):
            value = self._client.hget(self._job_prefix(job) + store_keys.META, "hw")
            return 0 if value is None else parse.bounded_int(value, f"high-water mark of {job}", 0)

    def slot(self, job: str, fire_ms: int) -> SlotView:
        views = self._read(job, fire_ms, fire_ms)
        if len(views) > 1:
            raise StoreError(f"redis at {self._where} returned {len(views)} slots for {job!r} at {fire_ms}")
        return views[0] if views else SlotView(job=job, fire_ms=fire_ms, state=SlotState.ABSENT)

    def slots(self, job: str, from_ms: int, to_ms: int) -> list[SlotView]:
        return self._read(job, from_ms, to_ms)

    def _read(self, job: str, from_ms: int, to_ms: int) -> list[SlotView]:
        with self._boundary("read"):
            reply = _seq(self._scripts.call(self._job_call(READ, job, self._now_arg(), [from_ms, to_ms])))
            return self._views(job, reply[1:])

    def _views(self, job: str, emitted: Sequence[object]) -> list[SlotView]:
        """Decode ``emit(fire, slot)`` elements; a corrupt one is reported and left out."""
        out = []
        for e in emitted:
            try:
                out.append(parse.slot_view(job, _seq(e)))
            except parse.BadValue as exc:
                self._bad(exc.what, exc.problem)
        return out

    def ledger(self, job: str, limit: int) -> list[LedgerEntry]:
        if limit <= 0:
            return []
        with self._boundary("ledger"):
            entries = self._client.xrevrange(self._job_prefix(job) + store_keys.LEDGER, count=limit) or []
            return self._entries(job, "ledger", entries)

    # -- operator control ----------------------------------------------------

    def _control_call(self, op: str, job: str, by: str | int, reason: str = "") -> list[Any]:
        base = self._job_prefix(job)
        names = (base + store_keys.META, base + store_keys.TRIGGERS, base + store_keys.AUDIT)
        args: list[str | int] = [
            self._now_arg(),
            op,
            job,
            by,
            reason,
            self._retention_ms,
            self._key_ttl_ms,
            self._trigger_maxlen,
            self._audit_maxlen,
            "" if self._cluster else self._trigger_channel,
        ]
        return _seq(self._scripts.call(Call(CONTROL, names, args)))

    @staticmethod
    def _job_control(job: str, paused: object, by: object, at: object, reason: object) -> JobControl:
        return parse.job_control(job, paused, by, at, reason)

    def pause(self, job: str, by: str, reason: str) -> JobControl:
        with self._boundary("pause"):
            reply = self._control_call("p", job, by, reason)
            if len(reply) != 5:
                raise ValueError(f"pause reply has {len(reply)} elements, expected 5")
            return self._job_control(job, *reply[1:])

    def resume(self, job: str, by: str) -> JobControl:
        with self._boundary("resume"):
            reply = self._control_call("r", job, by)
            if len(reply) != 5:
                raise ValueError(f"resume reply has {len(reply)} elements, expected 5")
            return self._job_control(job, *reply[1:])

    def control(self, job: str) -> JobControl:
        with self._boundary("control"):
            fields = ["p", "pb", "pa", "pr"]
            paused, by, at, reason = self._client.hmget(self._job_prefix(job) + store_keys.META, fields)
            return self._job_control(job, paused, by, at, reason)

    def trigger(self, job: str, by: str) -> int:
        with self._boundary("trigger"):
            reply = self._control_call("t", job, by)
            if len(reply) != 2:
                raise ValueError(f"trigger reply has {len(reply)} elements, expected 2")
            return int(_text(reply[1]))

    def triggers(self, job: str, since_ms: int) -> list[int]:
        with self._boundary("triggers"):
            reply = self._control_call("l", job, since_ms)
            out = []
            for f in reply[1:]:
                try:
                    out.append(parse.bounded_int(f, f"trigger of {job}", 0))
                except parse.BadValue as exc:
                    self._bad(exc.what, exc.problem)
            return out

    def audit(self, job: str, limit: int) -> list[AuditEntry]:
        if limit <= 0:
            return []
        with self._boundary("audit"):
            entries = self._client.xrevrange(self._job_prefix(job) + store_keys.AUDIT, count=limit) or []
            return self._entries(job, "audit", entries)

    def _entries(self, job: str, kind: str, entries: Sequence[Any]) -> list[Any]:
        """Decode ledger (``kind`` "ledger") or audit stream entries; a corrupt one is reported, left out."""
        decode = parse.ledger_entry if kind == "ledger" else parse.audit_entry
        out = []
        for _, fields in entries:
            try:
                out.append(decode(job, fields or {}))
            except parse.BadValue as exc:
                self._bad(exc.what, exc.problem)
        return out

    # -- observation (read-only, for the web face) -----------------------------

    def follow_cursor(self) -> str:
        """A starting point for :meth:`follow`: entries written from now on (store time) are new."""
        # Stream ids are "<server ms>-<seq>" from the server's own clock (an
        # injected clock does not reach XADD): everything up to the previous
        # millisecond is old. An entry written in this very millisecond may be
        # reported twice (once by a page load, once by follow): harmless.
        with self._boundary("time"):
            sec, usec = self._client.time()
        return f"{int(sec) * 1000 + int(usec) // 1000 - 1}-18446744073709551615"

    def follow(
        self, jobs: Sequence[str], cursor: dict[str, str], start: str, block_ms: int
    ) -> list[LedgerEntry | AuditEntry]:
        """Wait up to ``block_ms`` for ledger or audit entries of ``jobs`` newer than ``cursor``.

        One blocking ``XREAD`` over every job's ledger and audit streams (a
        standalone server), so a watcher learns of new entries at once
        without polling each job. ``cursor`` maps ``ledger:<job>`` /
        ``audit:<job>`` to the last stream id seen (``start``, from
        :meth:`follow_cursor`, for streams not in it) and is advanced in
        place. Returns the new entries in stream order per stream. With
        ``cluster=True`` the streams live in different cluster slots: each is
        read without blocking, and the call sleeps ``block_ms`` when none had
        anything (a bounded poll, once per call for all jobs).
        """
        streams: dict[str, tuple[str, str]] = {}
        for job in jobs:
            prefix = self._job_prefix(job)
            streams[prefix + store_keys.LEDGER] = ("ledger", job)
            streams[prefix + store_keys.AUDIT] = ("audit", job)
        if not streams:
            return []
        ids = {key: cursor.get(f"{kind}:{job}", start) for key, (kind, job) in streams.items()}
        with self._boundary("follow"):
            streams_arg: dict[Any, Any] = dict(ids)
            replies: list[Any] = []
            if self._cluster:
                pipe = self._client.pipeline(transaction=False)
                for key, last in ids.items():
                    pipe.xread({key: last}, count=1000)
                for rep in pipe.execute():
                    replies.extend(_stream_replies(rep))
                if not replies:
                    time.sleep(block_ms / 1000)
            else:
                replies = _stream_replies(self._client.xread(streams_arg, count=1000, block=max(1, block_ms)))
            out: list[LedgerEntry | AuditEntry] = []
            for key, entries in replies:
                kind, job = streams[_text(key)]
                if entries:
                    cursor[f"{kind}:{job}"] = _text(entries[-1][0])
                out.extend(self._entries(job, kind, entries))
            return out

    def ledger_tails(
        self, jobs: Sequence[str], limit: int, after: Mapping[str, str]
    ) -> list[tuple[str, list[LedgerEntry], JobControl]]:
        """Per job, in job order: newest ledger stream id, entries newer than ``after[job]``, control.

        ``after`` maps a job to a stream id this method returned before; the
        job's entries newer than it are returned (at most ``limit``, newest
        first), so a caller that keeps what it read earlier only parses what
        is new. A job not in ``after`` gets its newest ``limit`` entries. The
        id is ``""`` for a job without entries (or ``after``'s when nothing
        is new). Read in pipelined batches, one round trip per 500 jobs, for
        pages that list hundreds of jobs.
        """
        out: list[tuple[str, list[LedgerEntry], JobControl]] = []
        count = max(1, limit)
        with self._boundary("ledger_tails"):
            for i in range(0, len(jobs), 500):
                batch = jobs[i : i + 500]
                pipe = self._client.pipeline(transaction=False)
                for job in batch:
                    prefix = self._job_prefix(job)
                    last = after.get(job)
                    pipe.xrevrange(prefix + store_keys.LEDGER, "+", f"({last}" if last else "-", count=count)
                    pipe.hmget(prefix + "meta", ["p", "pb", "pa", "pr"])
                replies = pipe.execute()
                for k, job in enumerate(batch):
                    raw = (replies[2 * k] or []) if limit > 0 else []
                    entries = self._entries(job, "ledger", raw)
                    newest = _text(raw[0][0]) if raw else after.get(job, "")
                    try:
                        control = self._job_control(job, *replies[2 * k + 1])
                    except parse.BadValue as exc:
                        self._bad(exc.what, exc.problem)
                        control = JobControl(False, "", 0, "")
                    out.append((newest, entries, control))
        return out

    def server_info(self) -> dict[str, str]:
        """What an operator wants to know about the server: version, role, replicas, memory policy."""
        with self._boundary("info"):
            info: dict[str, Any] = {}
            for section in ("server", "replication", "memory"):
                info.update(self._client.info(section))
        keys = ("redis_version", "role", "connected_slaves", "maxmemory_policy", "used_memory_human")
        return {k: str(info[k]) for k in keys if k in info}

    # -- membership ----------------------------------------------------------

    def _members_call(self, op: str, *args: str | int) -> list[Any]:
        return _seq(self._scripts.call(Call(MEMBERS, (self._members_key,), [self._now_arg(), op, *args])))

    def heartbeat(self, node: str, incarnation: str, ttl_ms: int, info: dict[str, str]) -> HeartbeatResult:
        info_json = json.dumps(info, sort_keys=True, separators=(",", ":"))
        with self._boundary("heartbeat"):
            reply = self._members_call("h", node, incarnation, ttl_ms, info_json)
            if len(reply) != 3:
                raise ValueError(f"heartbeat reply has {len(reply)} elements, expected 3")
            return HeartbeatResult(ok=int(reply[1]) == 1, now_ms=int(reply[0]), holder=_text(reply[2]))

    def leave(self, node: str, incarnation: str) -> None:
        with self._boundary("leave"):
            self._members_call("l", node, incarnation)

    def members(self) -> list[Member]:
        with self._boundary("members"):
            reply = self._members_call("m")
            _, pairs = int(reply[0]), reply[1:]
            if len(pairs) % 2:
                raise ValueError("odd number of elements in the members reply")
            out = []
            for i in range(0, min(len(pairs), 2 * parse.MAX_MEMBERS), 2):
                try:
                    out.append(parse.member_entry(pairs[i], pairs[i + 1]))
                except parse.BadValue as exc:
                    self._bad(exc.what, exc.problem)
            return sorted(out, key=lambda m: m.node)

    def time_ms(self) -> int:
        """Store time: the server's ``TIME``, or the injected clock when one was given.

        On a cluster: the ``TIME`` of the master that holds the members hash
        (``qc:{<ns>}:members``), the node every heartbeat's ``now`` comes
        from too; a vote window is still judged by the script on the job's
        own master (docs/protocol.md, "Time on a cluster").
        """
        if self._clock is not None:
            return self._clock()
        with self._boundary("time"):
            if isinstance(self._client, RedisCluster) and self._cluster_runner is not None:
                node = self._cluster_runner.owner(self._members_key)
                sec, usec = self._client.get_redis_connection(node).time()
            else:
                sec, usec = self._client.time()
            return int(sec) * 1000 + int(usec) // 1000

    def replicas_connected(self) -> int:
        """Replicas connected to the master (on a cluster: the fewest over all masters)."""
        with self._boundary("info"):
            if isinstance(self._client, RedisCluster):
                counts = []
                for node in self._client.get_primaries():  # type: ignore[no-untyped-call]
                    info = self._client.get_redis_connection(node).info("replication")
                    counts.append(int(info.get("connected_slaves", 0)))
                return min(counts, default=0)
            return int(self._client.info("replication").get("connected_slaves", 0))
