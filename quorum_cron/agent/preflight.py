"""The agent's decision before it starts: refuse a server it cannot safely run on.

The questions are asked by :func:`quorum_cron.store.server.preflight` (the
store owns every redis-py call); this module turns its answer into the
agent's decision. Each refusal is one line naming the server
(password-free), what was found and what is expected, so ``quorum-cron
agent`` can exit with it instead of a traceback:

- a URL whose scheme does not match the server it reaches: a ``redis://``
  URL at a Redis Cluster node or a Sentinel, a ``redis+sentinel://`` URL
  whose addresses are no sentinels (or refuse its sentinel credentials),
  named with the URL to use (:func:`quorum_cron.store.connect.kind_problem`;
  it used to start and fail every vote with Redis's ``MOVED`` or ``unknown
  command 'SCRIPT'``, or to be called "not Redis");
- wrong credentials, or a server that does not speak Redis;
- a ``maxmemory-policy`` other than ``noeviction`` (an allowlist of one,
  :data:`SAFE_POLICY`). Under any other policy Redis deletes keys when
  memory runs out: a pause flag (the job resumes), a token counter (tokens
  are reused), a committed slot (it never starts). The agent refuses such
  a server unless the operator passes ``--allow-evicting-redis``, and then
  says so loudly in its log (:func:`eviction_problem` words it; the caller
  decides);
- a members key of the wrong type (no node could ever heartbeat);
- a server outside the support matrix (Redis < 7.0, Valkey < 7.2: see
  :mod:`quorum_cron.store.server`), named with its version and what it
  lacks, before any script could fail on it opaquely.

A server that cannot be reached at all is not an error here: nodes may start
before Redis, and the agent waits for it (see ``health.first_contact``). A
memory store has no server: nothing is refused and the policy is unknown.
"""

from __future__ import annotations

from quorum_cron.errors import StoreError, StoreRefusing
from quorum_cron.store.base import Store
from quorum_cron.store.connect import kind_problem
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.server import SAFE_POLICY, RedisClient, eviction_problem, preflight

__all__ = ["SAFE_POLICY", "PreflightError", "check_scripts", "check_server", "eviction_problem"]


class PreflightError(StoreError):
    """The Redis server is not one an agent can safely run on."""


def check_server(server: Store | RedisClient, shown_url: str, members_key: str | None = None) -> str | None:
    """Ping, check the version, read ``maxmemory_policy``, check the members key type; returns the policy.

    ``server``: the store (a ``RedisStore``; its own members key is checked
    when ``members_key`` is None) or, as before, its redis-py client with
    the members key. Raises :class:`PreflightError` (one line) when the
    URL's scheme does not match the server's kind, or the server refuses
    the credentials, is not Redis, is outside the support matrix, or holds
    a members key of another type. The returned policy is None when unknown.
    Returns None without raising when the server cannot be reached, and for
    a store without a server (the memory model).
    """
    client = server.client if isinstance(server, RedisStore) else server
    if not isinstance(client, Store):  # (a memory store has no server)
        wrong = kind_problem(client)
        if wrong is not None:
            raise PreflightError(f"redis at {shown_url}: {wrong}")
    found = preflight(server, shown_url, members_key)
    if found.refusal is not None:
        raise PreflightError(found.refusal)
    return found.policy


def check_scripts(store: RedisStore) -> None:
    """Read the membership record (one script call) and raise :class:`PreflightError` when the
    server refuses it for this client: an ACL without ``EVALSHA`` or the namespace's keys.

    Why: such a refusal is an outage once the node runs (the ACL may change
    back), but at start it is a configuration to fix, and the node would
    otherwise wait for it forever, its first write refused by the same ACL.
    A refusal of writes only (``MISCONF``, ``READONLY``) lets the read pass
    (the node waits for writes as in any outage); an unreachable server or
    a corrupt record is the running node's to report.
    """
    try:
        store.membership()
    except StoreRefusing as exc:
        if StoreRefusing.WRITES not in str(exc):
            raise PreflightError(str(exc)) from exc
    except StoreError:
        return
