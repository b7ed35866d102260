"""Finding the master through the sentinels, and saying in one line why it could not be found.

redis-py's :class:`~redis.sentinel.Sentinel` asks each sentinel in turn and,
when none names a usable master, raises ``MasterNotFoundError`` with every
sentinel client's ``repr`` joined in: several hundred characters per
sentinel, cut off (by the store's error boundary) before the reason. A wrong
``sentinel_password`` then reads as "no master found", the one thing it is
not, and the agent waits for a master that would be found at once with the
right credentials. :class:`Sentinels` asks the same way and tells the cases
apart:

* every sentinel refused the credentials → :class:`SentinelCredentialsRefused`
  naming the sentinels and the URL's ``sentinel_username`` /
  ``sentinel_password`` (never their values): a store error, not
  "unavailable" — the URL has to change, waiting will not help;
* every address answered but none is a sentinel (a data server's port in
  the list: ``6379`` for ``26379``) → :class:`NotSentinels`, also a store
  error: a data server will not become a sentinel by waiting. Each is
  named with what it is (``INFO server``) and the URL for it: a standalone
  server's ``redis://HOST:PORT``, a cluster node's ``redis+cluster://``. One such
  address among sentinels is skipped (it used to end the lookup with
  Redis's raw "unknown command 'SENTINEL'" before the next address, a
  sentinel, was asked);
* otherwise (some unreachable, some without a healthy master ``name``) →
  ``MasterNotFoundError`` with one short clause per sentinel: the store
  reports it unavailable and the caller retries, as during a failover. A
  sentinel that does not monitor ``name`` at all says so and names the
  masters it does monitor (a typo in the URL's master name reads as one).

:class:`MasterPool` follows a failover on connections already open: see there.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Final

from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool

from quorum_cron.store.urls import host_port

__all__ = ["RECHECK_S", "MasterPool", "NotSentinels", "SentinelCredentialsRefused", "Sentinels"]

RECHECK_S: Final = 1.0
"""How often (at most) a master client asks the sentinels again whether its master is still the
master, while it is in use: the longest a node writes to a replaced master (see :class:`MasterPool`)."""


class SentinelCredentialsRefused(RedisError):
    """Every sentinel refused the URL's sentinel credentials.

    Not an :class:`~redis.exceptions.AuthenticationError`: that is a
    ``ConnectionError`` to redis-py, which retries it with backoff (about
    10 s per command) for an answer that cannot change.
    """


class NotSentinels(RedisError):
    """Every address of the URL answered, and none is a sentinel (each refused ``SENTINEL``).

    Like :class:`SentinelCredentialsRefused`, not a connection error: the URL
    has to change.
    """


def _address(sentinel: Any) -> str:
    kw = sentinel.connection_pool.connection_kwargs
    return host_port(str(kw.get("host")), int(kw.get("port", 26379)))


def _reason(exc: RedisError) -> str:
    """The server's or socket's own words, one line, bounded."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:120] + "..."


def _not_a_sentinel(client: Any, where: str, exc: ResponseError) -> str:
    """What ``where``, which refused ``SENTINEL MASTERS``, is (asked with ``INFO server``) and the URL
    for it: a cluster node's is ``redis+cluster://``, a standalone server's ``redis://``."""
    said = f"{where} is not a sentinel (it refused SENTINEL MASTERS: {_reason(exc)})"
    try:
        info = client.info("server")
    except (RedisError, OSError):
        return said
    if not isinstance(info, dict):
        return said
    mode = str(info.get("redis_mode") or info.get("server_mode") or "standalone")
    if mode == "cluster":
        return f"{where} is a Redis Cluster node, not a sentinel: use redis+cluster://{where}"
    if mode == "standalone":
        return f"{where} is a standalone Redis server, not a sentinel: use redis://{where} for it"
    return said


class Sentinels(Sentinel):
    """:class:`redis.sentinel.Sentinel` whose master lookup fails with one line naming the cause.

    The sentinel clients make one attempt per lookup unless ``sentinel_kwargs``
    says otherwise: asking the sentinels in turn is the retry, and redis-py's
    default (3 retries with backoff) would spend seconds on each dead or
    refusing sentinel before the next is asked — during a failover, too.
    """

    def __init__(self, sentinels: Any, sentinel_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        sentinel_kwargs = {"retry": Retry(NoBackoff(), 0), **(sentinel_kwargs or {})}
        super().__init__(sentinels, sentinel_kwargs=sentinel_kwargs, **kwargs)  # type: ignore[no-untyped-call, unused-ignore]

    def discover_master(self, service_name: str) -> tuple[str, int]:
        """The master's (host, port) from the first sentinel that names a healthy one.

        Same order and rules as redis-py's (the answering sentinel moves to
        the front; ``check_master_state`` decides "healthy"); only the
        failure differs, see the module docstring.
        """
        refused: list[tuple[str, str]] = []  # (sentinel, reason)
        data: list[tuple[str, str]] = []  # (address, reason): answered, but not as a sentinel
        other: list[str] = []
        for i, sentinel in enumerate(self.sentinels):
            where = _address(sentinel)
            try:
                masters: Any = sentinel.sentinel_masters()
            except AuthenticationError as exc:  # before ConnectionError: it is one
                refused.append((where, _reason(exc)))
                continue
            except (RedisConnectionError, RedisTimeoutError) as exc:
                other.append(f"{where} unreachable ({_reason(exc)})")
                continue
            except ResponseError as exc:  # "unknown command 'SENTINEL'": a data server, not a sentinel
                data.append((where, _not_a_sentinel(sentinel, where, exc)))
                continue
            state = masters.get(service_name)
            if state and self.check_master_state(state, service_name):  # type: ignore[no-untyped-call]
                self.sentinels[0], self.sentinels[i] = sentinel, self.sentinels[0]
                forced = getattr(self, "_force_master_ip", None)
                return (forced if forced is not None else state["ip"]), int(state["port"])
            if state is None:
                known = ", ".join(repr(str(m)) for m in sorted(masters)) or "none"
                other.append(f"{where} monitors no master {service_name!r} (it monitors: {known})")
            else:
                other.append(f"{where} knows no healthy master {service_name!r}")
        if refused and not other and not data:
            # The hint first: the boundary bounds a message's length, the reasons may be long.
            reasons = "; ".join(dict.fromkeys(r for _, r in refused))
            raise SentinelCredentialsRefused(
                "every sentinel refused the sentinel credentials (check sentinel_username / "
                f"sentinel_password in the URL): {', '.join(w for w, _ in refused)}: {reasons}"
            )
        not_sentinel = [r for _, r in data]
        if data and not other:
            creds = [f"{w} refused the sentinel credentials" for w, _ in refused]
            raise NotSentinels(
                "no address of the URL is a usable sentinel (expected the sentinels' HOST:PORT; a "
                f"sentinel listens on 26379 by default): {'; '.join(not_sentinel + creds)}"
            )
        parts = [f"{w} refused the sentinel credentials" for w, _ in refused] + not_sentinel + other
        raise MasterNotFoundError(f"no master {service_name!r} found: {'; '.join(parts)}")


class MasterPool(SentinelConnectionPool):
    """The master client's pool: asks the sentinels again, while in use, whether its master still is.

    redis-py's pool asks the sentinels only when it opens a connection; open
    ones stay on their server until it fails them. After ``SENTINEL FAILOVER``
    (or a master that was paused, or cut off, and comes back) the old master
    stays up, still a master, and takes writes until the sentinels demote it —
    about 10 s after the promotion. A node's pooled connections wrote there
    all that time: to a server no replica follows and that throws the writes
    away when it is demoted, while a node that happened to open a connection
    wrote to the new master — two masters at once.

    So, when a connection is taken and the last lookup is :data:`RECHECK_S`
    old, a background thread asks the sentinels (the caller does not wait:
    a slow or dead sentinel must not delay a vote); when they name another
    master, redis-py's ``get_master_address`` closes the idle connections and
    the ones in use are closed when they are released, so the next command
    connects to the new master. A failed lookup changes nothing (the
    connections' own errors tell of an outage). The lookup is
    :meth:`Sentinels.discover_master`: one question to one sentinel, usually.
    """

    def __init__(self, service_name: str, sentinel_manager: Any, **kwargs: Any) -> None:
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call, unused-ignore]
        self._recheck_lock = threading.Lock()
        self._rechecking = False
        self._checked = time.monotonic()

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        self._maybe_recheck()
        return super().get_connection(*args, **kwargs)

    def _maybe_recheck(self) -> None:
        if self.master_address is None:  # nothing connected yet: the first connection asks
            return
        now = time.monotonic()
        with self._recheck_lock:
            if self._rechecking or now - self._checked < RECHECK_S:
                return
            self._rechecking = True
        threading.Thread(target=self._recheck, name="qc-sentinel-recheck", daemon=True).start()

    def _recheck(self) -> None:
        try:
            self.get_master_address()  # type: ignore[no-untyped-call]  # (closes idle connections when the master moved)
        except (RedisError, OSError, ValueError):  # (ValueError: the pool was closed meanwhile)
            pass
        finally:
            with self._recheck_lock:
                self._rechecking = False
                self._checked = time.monotonic()
