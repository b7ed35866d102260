"""Script calls on a Redis Cluster: one pipeline per node, on that node's own connection.

redis-py's cluster pipeline refuses ``EVALSHA``, and a script call routed
one by one costs a round trip per job. :class:`ClusterScriptRunner` has the
interface of :class:`~quorum_cron.store.scripts.ScriptRunner`: it groups the
calls by the master that owns their hash slot (redis-py's slot map), sends
each group as one non-transactional pipeline on that master's connection —
followed, when asked, by ``WAIT`` on the same connection, so it covers
exactly those writes — and handles what a cluster answers:

* ``NOSCRIPT`` — the node never saw the script (new node, promoted
  replica): load it there and re-send; the script did not run;
* ``MOVED`` — the slot map is stale (failover, finished migration):
  refresh it and re-send to the new owner;
* ``ASK`` — the slot is being migrated and the call's key already left:
  re-send to the importing node preceded by ``ASKING``;
* ``TRYAGAIN`` / ``CLUSTERDOWN`` / a script that met a key of a slot in
  migration ("non local key") — transient: back off and re-send, bounded.

Every redirect or transient reply means the script did not run — except a
script that failed mid-way on a migrating key (Redis does not roll back);
the scripts are idempotent per slot and the start is fenced, so the re-send
is safe (docs/operations.md, "Cluster"). After the bounded rounds the last
error is raised and the caller reports the store unavailable.

A call may name several jobs (keys of several hash slots) only when every
slot lives on one node: calls use the scripts' cluster variant, whose
shebang sets ``allow-cross-slot-keys`` and which declares only the call's
first key (Redis still demands that declared keys share a slot; the others
travel in ARGV, see ``_PRELUDE``). A multi-slot call that is redirected
comes back as :data:`REDIRECTED` so the store can re-send its items one job
per call.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    NoScriptError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.scripts import Call, Script, Wait, WaitShortfall, execute_waited, fewer, pipeline_parts

__all__ = ["REDIRECTED", "ClusterScriptRunner", "cluster_variant"]

MAX_ROUNDS = 5
"""Rounds of re-sends after redirects and transient replies before giving up. Backoff (only
after a transient reply) doubles from FIRST_BACKOFF_S: at most ~150 ms in all, because the
node's store calls queue behind this one — a job whose slot is mid-migration must not make
the other jobs late; it is retried by the core like any unavailable call."""
FIRST_BACKOFF_S = 0.01

_SHEBANG = "#!lua flags=allow-cross-slot-keys\n"
# Redis checks that the DECLARED keys of a call share a slot, even with
# allow-cross-slot-keys; the flag only lets the script touch keys of other
# slots (of the same node). So a cluster call declares its first key only and
# passes all of them in ARGV: n, key_1..key_n, then the script's own ARGV.
# This prelude rebuilds KEYS and ARGV as locals that shadow the globals.
_PRELUDE = """local KEYS, ARGV = (function(a)
  local n, keys, args = tonumber(a[1]), {}, {}
  for i = 1, n do keys[i] = a[1 + i] end
  for i = n + 2, #a do args[#args + 1] = a[i] end
  return keys, args
end)(ARGV)
"""
_variants: dict[str, Script] = {}


def cluster_variant(script: Script) -> Script:
    """``script`` with the shebang that lets one call touch several slots of one node (Redis >= 7)."""
    v = _variants.get(script.sha)
    if v is None:
        import hashlib

        source = _SHEBANG + _PRELUDE + script.source
        v = Script(script.name, source, hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest())
        _variants[script.sha] = v
    return v


class _Redirected:
    def __repr__(self) -> str:
        return "REDIRECTED"


REDIRECTED: Any = _Redirected()
"""The reply of a multi-slot call that a node redirected: re-send its items one job per call."""


def _transient(reply: object) -> bool:
    if isinstance(reply, TryAgainError | ClusterDownError):
        return True
    return isinstance(reply, ResponseError) and "non local key" in str(reply)


class ClusterScriptRunner:
    """Runs scripts on a :class:`RedisCluster`, pipelined per node (see the module docstring)."""

    def __init__(self, client: RedisCluster) -> None:
        self._client = client
        self._loaded: dict[str, set[str]] = defaultdict(set)
        self._refresh = False

    # -- topology ------------------------------------------------------------

    def slot(self, key: str) -> int:
        return int(self._client.keyslot(key))  # type: ignore[no-untyped-call]

    def owner(self, key: str) -> ClusterNode:
        """The master the slot map names for ``key`` (refreshed first when a reply said it is stale)."""
        self._maybe_refresh()
        return self._client.nodes_manager.get_node_from_slot(self.slot(key))

    def _maybe_refresh(self) -> None:
        if self._refresh:
            self._refresh = False
            self._client.nodes_manager.initialize()

    def forget(self) -> None:
        """Forget which scripts each node has (the next call loads them again) and refresh the slot map."""
        self._loaded.clear()
        self._refresh = True

    # -- calls ---------------------------------------------------------------

    def call(self, call: Call, wait: Wait | None = None) -> Any:
        return self.call_many([call], wait)[0]

    def call_many(
        self, calls: Sequence[Call], wait: Wait | None = None, *, errors: bool = False, partial: bool = False
    ) -> list[Any]:
        """Run the calls (independent of each other), one pipeline per owning node; replies in call order.

        ``errors``: a script's error reply is returned in its place (see ``ScriptRunner.call_many``).

        ``wait``: every node pipeline that ran writes ends with ``WAIT``; a
        master that got fewer acknowledgements than asked makes the batch
        raise :class:`WaitShortfall` naming it — or, with ``partial``, only
        the replies of that master's calls are a ``WaitShortfall`` (each
        master's ``WAIT`` covers exactly its own calls' writes, so the
        others are replicated and may be acted on). Without ``partial`` one
        master short of a replica (a promoted replica whose old master is
        gone) failed every call of the batch: the finishes of jobs on
        healthy masters too, which ended their runs ``lost`` and the next
        slots ``skipped``.
        """
        replies: list[Any] = [None] * len(calls)
        multi = [len({self.slot(k) for k in c.keys}) > 1 for c in calls]
        pending = list(range(len(calls)))
        ask: dict[int, ClusterNode] = {}
        node_acked: dict[str, int] = {}  # the fewest acknowledgements of each master's WAITs
        answered_by: dict[int, str] = {}  # call index -> the master whose reply it has
        backoff = FIRST_BACKOFF_S
        last: Exception | None = None
        for _ in range(MAX_ROUNDS):
            if not pending:
                break
            try:
                groups: dict[str, tuple[ClusterNode, list[int]]] = {}
                for i in pending:
                    node = ask.get(i) or self.owner(calls[i].keys[0])
                    groups.setdefault(node.name, (node, []))[1].append(i)
            except Exception as exc:  # SlotNotCoveredError, or a refresh that found no node
                self._refresh = True
                last = exc
                time.sleep(backoff)
                backoff *= 2
                continue
            retry: list[int] = []
            transient = False
            for node, idx in groups.values():
                try:
                    got, got_acked = self._pipeline(node, [(calls[i], i in ask) for i in idx], calls, wait)
                except (RedisConnectionError, RedisTimeoutError):
                    # The node is gone (failover under way) or slow: outcome unknown.
                    self._refresh = True
                    raise
                if got_acked is not None:
                    node_acked[node.name] = min(node_acked.get(node.name, got_acked), got_acked)
                for i, reply in zip(idx, got, strict=True):
                    ask.pop(i, None)
                    if isinstance(reply, NoScriptError):
                        self._loaded[node.name].discard(self._script(calls[i]).sha)
                        retry.append(i)
                    elif isinstance(reply, MovedError):
                        self._refresh = True
                        last = reply
                        if multi[i]:
                            replies[i] = REDIRECTED
                        else:
                            retry.append(i)
                    elif isinstance(reply, AskError):
                        last = reply
                        target = self._client.nodes_manager.get_node(host=reply.host, port=reply.port)
                        if multi[i]:
                            replies[i] = REDIRECTED
                        elif target is None:
                            self._refresh = True
                            retry.append(i)
                        else:
                            ask[i] = target
                            retry.append(i)
                    elif _transient(reply):
                        last = reply
                        transient = True
                        if multi[i]:
                            replies[i] = REDIRECTED
                        else:
                            retry.append(i)
                    else:
                        replies[i] = reply
                        answered_by[i] = node.name
            pending = retry
            if transient and pending:
                time.sleep(backoff)
                backoff *= 2
        if pending:
            if last is not None and not isinstance(last, RedisError):
                raise StoreUnavailable(f"cluster slot map unusable: {last}") from last
            native = isinstance(last, TryAgainError | ClusterDownError)
            if last is not None and _transient(last) and not native:
                # A script met a key of a slot in migration: unavailable for now.
                raise TryAgainError(str(last))
            if last is not None:
                raise last
            raise StoreError(f"cluster calls still redirected after {MAX_ROUNDS} rounds")
        for i, (call, reply) in enumerate(zip(calls, replies, strict=True)):
            if isinstance(reply, ResponseError):
                if errors:
                    continue
                by = answered_by.get(i)
                if by is not None and by not in str(reply):
                    # The store's line names the cluster URL: this names the node that refused.
                    raise type(reply)(f"node {by}: {reply}") from reply
                raise reply
            if isinstance(reply, Exception):  # pragma: no cover - redis-py only returns ResponseErrors
                raise StoreError(f"script {call.script.name!r} failed: {reply}") from reply
        short = {n: a for n, a in node_acked.items() if wait is not None and a < wait.replicas}
        if wait is not None and short:
            if not partial:
                raise WaitShortfall(min(short.values()), wait, sorted(short))
            for i, name in answered_by.items():
                if name in short and not isinstance(replies[i], Exception):
                    replies[i] = WaitShortfall(short[name], wait, [name])
        return replies

    def _script(self, call: Call) -> Script:
        return cluster_variant(call.script)

    def _pipeline(
        self, node: ClusterNode, items: list[tuple[Call, bool]], all_calls: Sequence[Call], wait: Wait | None
    ) -> tuple[list[Any], int | None]:
        """One node's pipeline: each call (``ASKING`` first when redirected by ASK), then ``WAIT``."""
        conn = self._client.get_redis_connection(node)
        loaded = self._loaded[node.name]
        for call, _ in items:
            script = self._script(call)
            if script.sha not in loaded:
                sha = conn.script_load(script.source)
                if (sha.decode() if isinstance(sha, bytes) else sha) != script.sha:
                    raise StoreError(f"SCRIPT LOAD of {script.name!r} on {node.name} returned another sha")
                loaded.add(script.sha)
        out: list[Any] = []
        acked: int | None = None
        for part in pipeline_parts([call for call, _ in items]):  # (bounded pipelines: see there)
            pipe = conn.pipeline(transaction=False)
            for i in part:
                call, asking = items[i]
                if asking:
                    pipe.execute_command("ASKING")  # type: ignore[no-untyped-call]
                # One declared key (routing, ASK), every key in ARGV (see _PRELUDE).
                pipe.evalsha(self._script(call).sha, 1, call.keys[0], len(call.keys), *call.keys, *call.args)
            raw, part_acked = execute_waited(pipe, wait)
            acked = fewer(acked, part_acked)
            it = iter(raw)
            for i in part:
                if items[i][1]:
                    next(it)  # ASKING's OK
                out.append(next(it))
        return out, acked
