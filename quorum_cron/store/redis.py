"""RedisStore: the store contract on one Redis server, through Lua scripts.

Every state change is one script call (:mod:`quorum_cron.store.scripts`), so
it is atomic on the server and reads the server's clock (``TIME``) — never
the caller's. The rules are those of :class:`~quorum_cron.store.memory.MemoryStore`,
the executable model, and the contract suite runs both side by side.

The Python side — key names, argument encoding, reply decoding into
:mod:`quorum_cron.store.base` values, and translating redis-py errors into
the library's family at one boundary — is split by what it serves:
:mod:`.redis_base` (settings, client, the error boundary),
:mod:`.redis_batch` (packing calls per node and batch),
:mod:`.redis_writes` (votes, fenced transitions, deadlines),
:mod:`.redis_reads` (reads, the web face's fan-out reads),
:mod:`.redis_control` (operator control), :mod:`.redis_notices` (the pub/sub
listener) and :mod:`.redis_alerts` (the alerts journal). This module assembles
:class:`RedisStore` and owns what is about the deployment as a whole:
opening a client from a URL, notice channels and the listener, the alerts
journal, membership and store time.
``docs/store.md`` documents the key layout and each script's KEYS/ARGV and
reply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from quorum_cron.errors import StoreUnavailable
from quorum_cron.redact import redact_url
from quorum_cron.store import keys as store_keys
from quorum_cron.store import parse
from quorum_cron.store.connect import connection_failure, open_client
from quorum_cron.store.ports import MAX_JOB_TABLE_CHARS, AlertPage, DeliverNotice, StoredAlert
from quorum_cron.store.redis_alerts import add_alert, read_alerts
from quorum_cron.store.redis_control import RedisControl
from quorum_cron.store.redis_membership import RedisMembership
from quorum_cron.store.redis_notices import NoticeListener
from quorum_cron.store.redis_options import StoreOptions
from quorum_cron.store.redis_reads import RedisReads
from quorum_cron.store.redis_writes import RedisWrites
from quorum_cron.store.urls import RedisTarget, parse_redis_url

__all__ = ["RedisStore", "redact_url"]


class RedisStore(RedisWrites, RedisReads, RedisControl, RedisMembership):
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
    ``start``, ``renew``, ``finish``, ``record_missed``; ``init_membership``,
    ``change_membership``, ``finish_membership``) is followed in the
    same pipeline — one round trip, same connection — by ``WAIT
    wait_replicas wait_timeout_ms``. Fewer acknowledgements raise
    :class:`~quorum_cron.errors.StoreUnavailable` (outcome unknown: the write
    happened on the primary but may be lost by a failover; the caller retries,
    every call is idempotent). Default 0: no ``WAIT``.

    The client may or may not decode responses; replies are decoded here.
    """

    @classmethod
    def from_url(
        cls,
        url: str,
        namespace: str,
        *,
        clock: Callable[[], int] | None = None,
        cluster: bool = False,
        **keywords: Any,
    ) -> RedisStore:
        """A store on a new client for ``url``: any form of :mod:`quorum_cron.store.urls`
        (standalone, ``redis+sentinel://``, ``redis+cluster://``).

        ``keywords`` are the store's settings (the fields of
        :class:`~quorum_cron.store.redis_options.StoreOptions`:
        ``retention_ms``, ``ledger_maxlen``, ``max_batch``, ``wait_replicas``...)
        and, the rest, what goes to every connection (timeouts, retry). A
        cluster URL connects at once (to learn the slot map): an unreachable
        cluster raises :class:`~quorum_cron.errors.StoreUnavailable`.
        """
        options, client_kwargs = StoreOptions.split(namespace, keywords)
        return cls.from_options(url, options, clock=clock, cluster=cluster, **client_kwargs)

    @classmethod
    def from_options(
        cls,
        url: str,
        options: StoreOptions,
        *,
        clock: Callable[[], int] | None = None,
        cluster: bool = False,
        **client_kwargs: Any,
    ) -> RedisStore:
        """:meth:`from_url` with the store's settings as one value.

        How :func:`~quorum_cron.store.options.open_store` opens: the client's
        errors become :class:`~quorum_cron.errors.StoreUnavailable` in one place.
        """
        client = cls._open(parse_redis_url(url), client_kwargs)
        return cls(client, options.namespace, clock=clock, cluster=cluster, **options.settings())

    @staticmethod
    def _open(target: RedisTarget, client_kwargs: dict[str, Any]) -> redis.Redis | RedisCluster:
        try:
            return open_client(target, **client_kwargs)
        except (RedisError, RedisClusterException) as exc:
            failure = f"unavailable: {connection_failure(str(exc))}"
            raise StoreUnavailable(f"redis at {target.shown} unavailable: {exc}", failure) from exc

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

    def listen_notices(
        self,
        node: str,
        jobs: Sequence[str],
        deliver: DeliverNotice,
        on_subscribed: Callable[[], None] | None = None,
    ) -> NoticeListener:
        """A listener thread (not started) on :meth:`notice_channels`, over this store's client."""
        assignments, triggers = self.notice_channels(node, jobs)
        return NoticeListener(self._client, assignments, triggers, deliver, on_subscribed)

    # -- alerts journal ------------------------------------------------------

    def add_alert(self, alert: StoredAlert) -> None:
        add_alert(self, store_keys.alerts_key(self._ns), alert)

    def alerts(self, limit: int) -> AlertPage:
        return read_alerts(self, store_keys.alerts_key(self._ns), limit)

    # -- job tables ----------------------------------------------------------

    def publish_jobs(self, node: str, table: str) -> None:
        with self._boundary("publish_jobs"):
            self._client.hset(store_keys.job_tables_key(self._ns), node, table)

    def published_jobs(self, nodes: Sequence[str]) -> dict[str, str]:
        if not nodes:
            return {}
        with self._boundary("published_jobs"):
            raw = self._client.hmget(store_keys.job_tables_key(self._ns), list(nodes))
        out: dict[str, str] = {}
        for node, value in zip(nodes, raw, strict=True):
            if value is not None:
                try:
                    out[node] = parse.text(value, f"job table of node {node}", MAX_JOB_TABLE_CHARS)
                except parse.BadValue as exc:
                    self._bad(exc.what, exc.problem)
        return out

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
