"""Checks of the Redis server before an agent starts: it answers, as Redis, and cannot evict our keys.

Each failure is one line naming the server (password-free), what was found
and what is expected, so ``quorum-cron agent`` can exit with it instead of
a traceback:

- wrong credentials, or a server that does not speak Redis;
- a ``maxmemory-policy`` other than ``noeviction`` (an allowlist of one,
  :data:`SAFE_POLICY`). Under any other policy Redis deletes keys when
  memory runs out: a pause flag (the job resumes), a token counter (tokens
  are reused), a committed slot (it never starts). The agent refuses such
  a server unless the operator passes ``--allow-evicting-redis``, and then
  says so loudly in its log;
- a members key of the wrong type (no node could ever heartbeat);
- a server outside the support matrix (Redis < 7.0, Valkey < 7.2: see
  :mod:`quorum_cron.store.server`), named with its version and what it
  lacks, before any script could fail on it opaquely.

A server that cannot be reached at all is not an error here: nodes may start
before Redis, and the agent waits for it (see ``health.first_contact``).
"""

from __future__ import annotations

from typing import Final

import redis
from redis.cluster import RedisCluster
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quorum_cron.errors import StoreError
from quorum_cron.store.server import server_problem

__all__ = ["SAFE_POLICY", "PreflightError", "check_server", "eviction_problem"]

SAFE_POLICY: Final = "noeviction"
"""The one ``maxmemory-policy`` an agent runs on. An allowlist, not a denylist of
the evicting ones: ``volatile-*`` evicts keys with a TTL (every slot key has
one), ``allkeys-*`` any key, and a policy a later Redis adds is refused until
someone checks what it evicts."""


class PreflightError(StoreError):
    """The Redis server is not one an agent can safely run on."""


def eviction_problem(policy: str | None, shown_url: str) -> str | None:
    """A one-line explanation when ``policy`` is not ``noeviction``, else None.

    ``None`` or ``""``: the policy could not be read (no ``INFO`` in the
    user's ACL, Redis not up yet): no verdict, the agent starts without it.
    """
    if not policy or policy == SAFE_POLICY:
        return None
    return (
        f"redis at {shown_url} has maxmemory-policy {policy[:100]}, which can evict quorum-cron's keys "
        f"(pause flags, token counters, committed slots) when memory runs out: expected noeviction "
        f"(CONFIG SET maxmemory-policy noeviction; see docs/operations.md)"
    )


def check_server(client: redis.Redis | RedisCluster, shown_url: str, members_key: str) -> str | None:
    """Ping, check the version, read ``maxmemory_policy``, check the members key type; returns the policy.

    Raises :class:`PreflightError` (one line) when the server refuses the
    credentials, is not Redis, is outside the support matrix, or holds a
    members key of another type. The returned policy is None when unknown.
    Returns None without raising when the server cannot be reached.
    """
    try:
        client.ping()
    except AuthenticationError as exc:
        raise PreflightError(
            f"redis at {shown_url} refused the credentials ({_first_line(exc)}): "
            f"expected the password (and user) of that server in the URL"
        ) from None
    except (RedisConnectionError, RedisTimeoutError) as exc:
        text = str(exc)
        if shown_url.startswith("rediss://") and ("ssl" in text.lower() or "certificate" in text):
            # TLS set up wrongly is a configuration error, not an outage to wait out.
            raise PreflightError(
                f"TLS with {shown_url} failed ({_first_line(exc)}): expected rediss:// with "
                f"?ssl_ca_certs=<CA file> (and ssl_certfile/ssl_keyfile when the server wants a client "
                f"certificate); see docs/operations.md"
            ) from None
        if "protocol" in text.lower():
            raise PreflightError(_not_redis(shown_url, exc)) from None
        return None
    except ResponseError as exc:
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            raise PreflightError(
                f"redis at {shown_url} requires a password ({_first_line(exc)}): "
                f"expected it in the URL (redis://:PASSWORD@host)"
            ) from None
        raise PreflightError(f"redis at {shown_url} refused PING: {_first_line(exc)}") from None
    except redis.RedisError as exc:
        raise PreflightError(_not_redis(shown_url, exc)) from None
    problem = server_problem(client, shown_url)  # None without INFO in the ACL: the version stays unchecked
    if problem is not None:
        raise PreflightError(problem)
    try:
        kind = client.type(members_key)
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
    except redis.RedisError:
        kind = "none"
    if kind not in ("hash", "none"):
        raise PreflightError(
            f"redis at {shown_url}: key {members_key!r} is a {kind}, expected a hash of members "
            f"(it was not written by quorum-cron: delete it)"
        )
    try:
        info = client.info("memory")
    except redis.RedisError:
        return None  # e.g. an ACL user without INFO: the policy stays unknown
    policy = info.get("maxmemory_policy")
    if policy is None and info and all(isinstance(v, dict) for v in info.values()):
        # A cluster client answers per node: any node with an evicting policy is the one to report.
        found = sorted({str(v["maxmemory_policy"]) for v in info.values() if "maxmemory_policy" in v})
        evicting = [p for p in found if p != SAFE_POLICY]
        chosen = evicting or found
        return chosen[0] if chosen else None
    return str(policy) if policy is not None else None


def _not_redis(shown_url: str, exc: BaseException) -> str:
    why = _first_line(exc)
    return f"the server at {shown_url} does not answer like Redis ({why}): expected a Redis server"


def _first_line(exc: BaseException) -> str:
    text = str(exc).split("\n", 1)[0]
    return text if len(text) <= 200 else text[:200] + "..."
