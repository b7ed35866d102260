"""Pub/sub notices on Redis: the listener thread behind ``RedisStore.listen_notices``.

Two kinds of notice reach a node, both on ONE pub/sub connection:

* **assignments** — when a script commits (or re-assigns) a slot to a node,
  it publishes ``job\\nfire_ms\\ntoken`` on that node's channel
  (:func:`quorum_cron.store.keys.assign_channel`). This is the path that keeps the fire delay at a
  few milliseconds;
* **triggers** — ``quorum-cron trigger JOB`` makes the store publish
  ``job\\nfire_ms`` on the cluster's trigger channel (:func:`quorum_cron.store.keys.trigger_channel`);
  every node then votes for that slot like any other.

On a Redis Cluster both kinds are sharded pub/sub, one channel of each per
job (``qc:{ns:job}:assign:<node>``, ``qc:{ns:job}:trigger``, in the job's
hash slot): the scripts ``SPUBLISH``, the listener subscribes with ``SSUBSCRIBE`` (one
connection per master that owns some of the node's jobs, waited on together
with ``select``), and no notice crosses the cluster bus to every node. A
slot that moves (failover, migration) drops its subscriptions
(``sunsubscribe`` from the server, or a closed connection): the listener
subscribes again from a refreshed slot map and catches up as after any loss.

The sharded subscriptions are made here, not with redis-py's
``ClusterPubSub.ssubscribe``: that sends one command per channel and copies
its whole table of channels after each, so its time grows with the square
of the channels — 10,000 channels took 4.5 s of CPU, and the 200,000 of a
node with 100,000 jobs were still not subscribed after minutes, competing
with the node's votes for the whole time (benchmarks/scale.py, issue 27).
One ``SSUBSCRIBE`` per hash slot carries all the node's channels in that
slot (a command may not span slots), on a plain pub/sub connection per
master; its replies are confirmed as before, one per channel.

The listener runs on a dedicated thread (a blocking pub/sub read must not
share the store's worker) and hands each notice to ``deliver`` at once.
A notice is only a hint (:mod:`quorum_cron.store.ports`): the fenced start
decides, and lost notices are covered by the agent's polls and catch-up
reads (``agent/intake.py``).
"""

from __future__ import annotations

import contextlib
import logging
import random
import select
import threading
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisClusterException

from quorum_cron.store.parse import parse_notice, parse_trigger, wire_text
from quorum_cron.store.ports import DeliverNotice, Notice, Trigger

__all__ = ["NoticeListener"]

log = logging.getLogger("quorum_cron.agent")
"""The agent's event logger (``agent.logs.EVENT_LOGGER``): the listener runs inside the agent."""

POLL_S = 0.25
"""How often the listener thread checks whether it should stop."""

MAX_BACKOFF_S = 2.0


class NoticeListener:
    """Subscribes to the node's assignment channel and the trigger channel on a daemon thread.

    ``deliver`` gets every well-formed notice (called on the listener
    thread: hand it to the loop). ``on_subscribed`` is called (on the
    listener thread) each time the subscription is (re-)established, so the
    caller can catch up with what was published while it was down.
    Re-subscribes with jittered backoff.
    """

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        assignments: str | Sequence[str],
        triggers: str | Sequence[str] | None,
        deliver: DeliverNotice,
        on_subscribed: Callable[[], None] | None = None,
    ) -> None:
        self._client = client
        self._sharded = isinstance(client, RedisCluster)
        self.assignments = [assignments] if isinstance(assignments, str) else list(assignments)
        self.triggers = [triggers] if isinstance(triggers, str) else list(triggers or ())
        self._trigger_set = set(self.triggers)
        self._deliver = deliver
        self._on_subscribed = on_subscribed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="qc-notices", daemon=True)
        self.subscribed = threading.Event()
        """Set while the subscription is live (tests wait on it)."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _parse(self, channel: bytes | str, data: bytes | str) -> Notice | Trigger | None:
        if wire_text(channel) in self._trigger_set:
            return parse_trigger(data)
        return parse_notice(data)

    def _messages(self, pubsub: Any) -> Any:
        """The next messages: one at most (classic), or every one buffered on any node (sharded)."""
        if not self._sharded:
            msg = pubsub.get_message(timeout=POLL_S)
            return [] if msg is None else [msg]
        out = _drain(pubsub)
        if out:
            return out
        socks = [
            ps.connection._sock
            for ps in pubsub
            if ps.connection is not None and ps.connection._sock is not None
        ]
        if len(socks) < len(pubsub):
            raise redis.ConnectionError("a sharded subscription connection is closed")
        ready, _, _ = select.select(socks, [], [], POLL_S)
        return _drain(pubsub) if ready else []

    def _run(self) -> None:
        backoff = 0.05
        channels = self.assignments + self.triggers
        sub, msg_type, unsub = ("ssubscribe", "smessage", "sunsubscribe") if self._sharded else (
            "subscribe", "message", "unsubscribe")  # fmt: skip
        if not channels:  # a node without jobs on a cluster: nothing to hear
            self._live()
            self._stop.wait()
            return
        while not self._stop.is_set():
            pubsub: Any = [] if self._sharded else self._client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]
            try:
                if self._sharded:
                    _ssubscribe(self._client, channels, pubsub)  # type: ignore[arg-type]
                else:
                    pubsub.subscribe(*channels)
                confirmed = 0
                again = False  # (confirmations after the first whole round, not told yet)
                while not self._stop.is_set():
                    msgs = self._messages(pubsub)
                    for msg in msgs:
                        if msg.get("type") == sub:
                            # Live only once the server confirmed every channel: a
                            # catch-up read before that could miss a trigger.
                            confirmed += 1
                            if confirmed == len(channels):
                                backoff = 0.05
                                self._live()
                            again = confirmed > len(channels)
                            continue
                        if again:
                            again = False
                            self._live()
                        self._handle(msg, msg_type, unsub)
                    if not msgs and again:
                        # redis-py reconnected a dropped connection by itself and subscribed
                        # again (all channels, or one master's): what was published in
                        # between is lost just the same, so the caller catches up.
                        again = False
                        self._live()
            except (redis.RedisError, RedisClusterException, OSError, ValueError) as exc:
                # ValueError: the client was closed under us at shutdown. RedisClusterException:
                # a slot no master covers (SlotNotCoveredError), until the slot map is whole again.
                if self._stop.is_set():
                    return
                if self.subscribed.is_set():
                    log.warning(
                        f"notice channels lost ({len(channels)} channels: assignments and triggers): "
                        f"{exc}; subscribing again, then reading what was missed (awaited slots, triggers)",
                        extra={"qc_event": "notices", "qc_fields": {"channels": len(channels)}},
                    )
                self.subscribed.clear()
                if isinstance(self._client, RedisCluster):
                    # A moved slot or a dead master: learn the current owners.
                    with contextlib.suppress(redis.RedisError, OSError):
                        self._client.nodes_manager.initialize()
                self._stop.wait(backoff * (0.5 + random.random()))
                backoff = min(MAX_BACKOFF_S, backoff * 2)
            finally:
                self.subscribed.clear()
                for each in pubsub if self._sharded else [pubsub]:
                    with contextlib.suppress(redis.RedisError, OSError, ValueError):
                        each.close()

    def _live(self) -> None:
        """The subscription is (again) whole: say so, and let the caller catch up."""
        self.subscribed.set()
        if self._on_subscribed is not None:
            self._on_subscribed()

    def _handle(self, msg: dict[str, Any], msg_type: str, unsub: str) -> None:
        kind = msg.get("type")
        if kind == msg_type:
            item = self._parse(msg["channel"], msg["data"])
            if item is not None:
                self._deliver(item)
        elif kind == unsub:
            # The server dropped a channel (its slot moved): subscribe again.
            raise redis.ConnectionError(f"channel {wire_text(msg['channel'])!r} unsubscribed by the server")


def _ssubscribe(client: RedisCluster, channels: Sequence[str], opened: list[Any]) -> None:
    """Subscribe to sharded ``channels``: one ``SSUBSCRIBE`` per hash slot, on a plain pub/sub
    connection per owning master (appended to ``opened``, which the caller closes); see the
    module docstring for why not ``ClusterPubSub``."""
    by_slot: dict[int, list[str]] = {}
    for channel in channels:
        by_slot.setdefault(key_slot(channel.encode()), []).append(channel)
    per_node: dict[str, Any] = {}
    for slot, group in by_slot.items():
        node = client.nodes_manager.get_node_from_slot(slot)
        ps = per_node.get(node.name)
        if ps is None:
            ps = client.get_redis_connection(node).pubsub()
            per_node[node.name] = ps
            opened.append(ps)
        ps.ssubscribe(*group)


def _drain(pubsubs: Sequence[Any]) -> list[dict[str, Any]]:
    """Every message already readable on the per-master connections, without waiting."""
    out = []
    for ps in pubsubs:
        while (msg := ps.get_message(timeout=0.0)) is not None:
            out.append(msg)
    return out
