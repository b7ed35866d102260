"""What every part of :class:`~quorum_cron.store.redis.RedisStore` shares: settings, client, boundary.

:class:`RedisBase` holds the validated settings and the client (and says
where it points without a password), translates redis-py errors and
malformed replies into the library's family at this one boundary
(:meth:`RedisBase._boundary`), reports bad values once
(:meth:`RedisBase._bad`), and builds the job key prefix and one-job script
calls every operation needs. The operations themselves live in the modules
that subclass it — :mod:`.redis_batch` and :mod:`.redis_writes` (votes,
fenced transitions, deadlines), :mod:`.redis_reads`, :mod:`.redis_control`
— and :mod:`.redis` puts them together.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
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
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quorum_cron.errors import (
    ConfigError,
    StoreError,
    StoreOutOfMemory,
    StoreRefusing,
    StoreUnavailable,
    StoreUnreplicated,
)
from quorum_cron.redact import redact_text
from quorum_cron.store import keys as store_keys
from quorum_cron.store import parse
from quorum_cron.store.base import JobControl, SlotView
from quorum_cron.store.cluster import ClusterScriptRunner
from quorum_cron.store.connect import ClusterClient, connection_failure
from quorum_cron.store.keys import (
    DEFAULT_AUDIT_MAXLEN,
    DEFAULT_LEDGER_MAXLEN,
    DEFAULT_RETENTION_MS,
    DEFAULT_TRIGGER_MAXLEN,
)
from quorum_cron.store.scripts import Call, ScriptRunner, Wait, WaitShortfall

__all__ = ["DEFAULT_MAX_BATCH", "DEFAULT_WAIT_TIMEOUT_MS", "RedisBase", "as_list", "as_text"]

_log = logging.getLogger("quorum_cron.store")

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
    """The server address of ``client`` as a password-free URL (a cluster opened from a URL: that URL,
    redacted; its client knows every node, and a line naming six addresses named none the operator wrote)."""
    if isinstance(client, ClusterClient) and client.shown_url:
        return client.shown_url
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


_SCRIPT_WHERE = re.compile(r"\s*script: [0-9a-f]{40}, on @user_script:\d+\.?")
"""What Redis 7 appends to an error raised inside a script (its SHA and line): nothing an operator
acts on, and it made each abstain and missed line end in 60 characters of hex."""

_MISCONF_HINT = (
    "its last RDB save failed and stop-writes-on-bgsave-error holds writes back until one succeeds "
    "(see the server's log: a full or read-only disk?)"
)
_NOPERM_HINT = (
    "the ACL user lacks a command or key quorum-cron needs: see docs/operations.md, Least-privilege ACL"
)
_READONLY_HINT = "it is a replica now (a failover, or REPLICAOF): expected the master in the URL"
_SCRIPT_ACL = ("The user executing the script can't", "ACL failure in script")
"""How Redis 7.0 and Valkey 8 word a NOPERM met inside a script (Redis 7.2 and later say NOPERM).
Valkey is the embedded default: its wording alone left a refusal there a slot's bad value."""


def without_script(message: str) -> str:
    """A redis-py error message without the script source some versions append (4 KB of Lua), nor
    the script's SHA and line Redis 7 appends, nor a secret it may quote (:func:`redact_text`:
    the arguments Redis echoes of a command it does not know -- ``AUTH``'s is the password)."""
    cut = message.find("\n")
    message = message if cut < 0 else message[:cut]
    message = redact_text(_SCRIPT_WHERE.sub("", message))
    return message if len(message) <= 500 else message[:500] + "..."


def _credentials(text: str, running: bool = True) -> str:
    """A refused password or user in words that say what to do (Redis's own say neither the URL
    nor the fix, and RESP3's HELLO takes 200 characters to say "authentication required").

    Worded without the codes (NOAUTH, WRONGPASS) that make the CLI add its own hint
    (:func:`quorum_cron.store.server.credentials_hint`), which would then say it twice.
    """
    if "WRONGPASS" in text or "invalid username-password" in text:
        # (A one-off command never authenticated before: the question fits the agent only.)
        why = "wrong or disabled: changed under a running agent?) (" if running else "wrong or disabled; "
        expected = "expected the password, and user, of that server in the URL"
        return f"the password or user was refused ({why}{expected})"
    return "authentication required (the server requires a password: expected it in the URL, redis://:PASSWORD@host)"


def refusal(where: str, op: str, exc: Exception) -> StoreRefusing | None:
    """What a refusal that holds for every call until the server changes is to the caller:
    an outage (:class:`~quorum_cron.errors.StoreRefusing`) whose one line names what Redis said
    and what to do; ``None`` for any other error.

    redis-py strips the code from the errors it has a class for (``NOPERM``,
    ``READONLY``), so the code is put back: it is what an operator searches for.
    """
    text = without_script(str(exc))
    if isinstance(exc, AuthenticationError):
        return StoreRefusing(
            f"redis at {where} refused {op}: {_credentials(text)}", _credentials(text, False)
        )
    if isinstance(exc, ReadOnlyError) or text.startswith("READONLY"):
        # The server we wrote to was demoted (a failover, REPLICAOF): a lost reply, like a dropped
        # connection; the caller retries, and a Sentinel URL finds the new master.
        said = f"READONLY: {_READONLY_HINT}"
        return StoreRefusing(
            f"redis at {where} {StoreRefusing.WRITES}{op}: {said}", f"refuses writes: {said}"
        )
    if isinstance(exc, NoPermissionError) or text.startswith("NOPERM") or any(a in text for a in _SCRIPT_ACL):
        text = text.removeprefix("NOPERM").removeprefix("ERR").strip()
        said = f"NOPERM {text} ({_NOPERM_HINT})"
        return StoreRefusing(f"redis at {where} refused {op}: {said}", redact_text(said))
    if text.startswith("MISCONF"):
        said = f"MISCONF: {_MISCONF_HINT}"
        return StoreRefusing(
            f"redis at {where} {StoreRefusing.WRITES}{op}: {said}", f"refuses writes: {said}"
        )
    return None


def as_text(value: object) -> str:
    """A reply element as text (:func:`quorum_cron.store.parse.text`; a bad one raises ``BadValue``)."""
    return parse.text(value, "reply value")


def as_list(value: object) -> list[Any]:
    """A reply element that must be an array; anything else is a malformed reply (``TypeError``)."""
    if not isinstance(value, list):
        raise TypeError(f"expected an array in the reply, got {type(value).__name__}")
    return value


class RedisBase:
    """The state and plumbing the parts of :class:`~quorum_cron.store.redis.RedisStore` share.

    The constructor's arguments are documented on ``RedisStore``.
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

    @contextmanager
    def _boundary(self, op: str) -> Iterator[None]:
        """Translate redis-py errors and malformed replies into the library's family."""
        try:
            yield
        except AuthenticationError as exc:  # (before ConnectionError: it is one)
            # A password rotated under a running agent: an outage until the URL or server is fixed.
            raise refusal(self._where, op, exc) or StoreError(str(exc)) from exc
        except (RedisConnectionError, RedisTimeoutError, InvalidResponse) as exc:
            # InvalidResponse: whatever answered does not speak RESP — not Redis, or a broken proxy.
            why = without_script(str(exc))
            failure = f"unavailable: {redact_text(connection_failure(why))}"
            raise StoreUnavailable(f"redis at {self._where} unavailable during {op}: {why}", failure) from exc
        except (ClusterDownError, TryAgainError, AskError, ClusterError, RedisClusterException) as exc:
            # A cluster between owners (failover, migration) after bounded re-sends.
            raise StoreUnavailable(
                f"redis at {self._where} unavailable during {op}: {exc}",
                f"unavailable: {redact_text(connection_failure(str(exc)))}",
            ) from exc
        except WaitShortfall as exc:
            raise self._unreplicated(op, exc) from exc
        except RedisError as exc:
            refused = refusal(self._where, op, exc)
            if refused is not None:
                raise refused from exc
            if isinstance(exc, OutOfMemoryError) or "> 'maxmemory'" in str(exc):
                said = without_script(str(exc))
                why = f"redis at {self._where} refused {op}: {said}"
                failure = StoreOutOfMemory.PREFIX + redact_text(said)
                raise StoreOutOfMemory(StoreOutOfMemory.PREFIX + why, failure) from exc
            said = without_script(str(exc))
            failure = f"error reply: {redact_text(said)}"
            raise StoreError(f"redis at {self._where} failed {op}: {said}", failure) from exc
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            said = f"unexpected reply: {redact_text(str(exc))}"  # (it may quote a value read)
            raise StoreError(f"unexpected reply from redis at {self._where} to {op}: {exc}", said) from exc

    def _unreplicated(self, op: str, exc: WaitShortfall) -> StoreUnreplicated:
        """What a write fewer replicas than asked acknowledged is to the caller: a lost reply."""
        said = f"unknown, {StoreUnreplicated.MARKER}{exc}"
        return StoreUnreplicated(f"redis at {self._where}: outcome of {op} {said}", f"outcome {said}")

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
        """The job's key prefix ``qc:{<ns>:<job>}:``: every key of the job is it plus a suffix.

        Built per call, not cached: a cache of every job's prefix held ~130 bytes a job for
        the agent's life to save ~25 ns a call (issue 27)."""
        return store_keys.job_prefix(self._ns, job)

    def _job_call(self, script: Any, job: str, now: str, args: Sequence[str | int]) -> Call:
        """A one-job script call: KEYS[1] the job's meta key, its own arguments from ``ARGV[7]``."""
        return Call(script, (self._job_prefix(job) + store_keys.META,), [now, *self._common_tail, *args])

    def _views(self, job: str, emitted: Sequence[object]) -> list[SlotView]:
        """Decode ``emit(fire, slot)`` elements; a corrupt one is reported and left out."""
        out = []
        for e in emitted:
            try:
                out.append(parse.slot_view(job, as_list(e)))
            except parse.BadValue as exc:
                self._bad(exc.what, exc.problem)
        return out

    @staticmethod
    def _job_control(job: str, paused: object, by: object, at: object, reason: object) -> JobControl:
        return parse.job_control(job, paused, by, at, reason)
