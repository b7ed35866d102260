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
* otherwise (some unreachable, some without a healthy master ``name``) →
  ``MasterNotFoundError`` with one short clause per sentinel: the store
  reports it unavailable and the caller retries, as during a failover.
"""

from __future__ import annotations

from typing import Any

from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

__all__ = ["SentinelCredentialsRefused", "Sentinels"]


class SentinelCredentialsRefused(RedisError):
    """Every sentinel refused the URL's sentinel credentials.

    Not an :class:`~redis.exceptions.AuthenticationError`: that is a
    ``ConnectionError`` to redis-py, which retries it with backoff (about
    10 s per command) for an answer that cannot change.
    """


def _address(sentinel: Any) -> str:
    return "{host}:{port}".format_map(sentinel.connection_pool.connection_kwargs)


def _reason(exc: RedisError) -> str:
    """The server's or socket's own words, one line, bounded."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:120] + "..."


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
            state = masters.get(service_name)
            if state and self.check_master_state(state, service_name):  # type: ignore[no-untyped-call]
                self.sentinels[0], self.sentinels[i] = sentinel, self.sentinels[0]
                forced = getattr(self, "_force_master_ip", None)
                return (forced if forced is not None else state["ip"]), int(state["port"])
            other.append(f"{where} knows no healthy master {service_name!r}")
        if refused and not other:
            # The hint first: the boundary bounds a message's length, the reasons may be long.
            reasons = "; ".join(dict.fromkeys(r for _, r in refused))
            raise SentinelCredentialsRefused(
                "every sentinel refused the sentinel credentials (check sentinel_username / "
                f"sentinel_password in the URL): {', '.join(w for w, _ in refused)}: {reasons}"
            )
        parts = [f"{w} refused the sentinel credentials" for w, _ in refused] + other
        raise MasterNotFoundError(f"no master {service_name!r} found: {'; '.join(parts)}")
