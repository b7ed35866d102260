"""The Lua scripts of the Redis store and how they are called.

Each script is a file in this package (``store/*.lua``) whose header names its
``KEYS[i]`` and ``ARGV[i]``; shared helpers live in ``_clock.lua`` (the time
source) and ``_job.lua`` (slot records, ledger, rendezvous hashing) and are
prepended when the script is assembled here, so every EVALSHA body is one
self-contained chunk. ``docs/store.md`` describes the key layout and replies.

:class:`ScriptRunner` loads each script once per client (``SCRIPT LOAD``,
SHA cached), calls it with ``EVALSHA`` — alone or several in one pipelined
round trip — and on ``NOSCRIPT`` (server restarted, ``SCRIPT FLUSH``, failover
to a replica that never saw the load) reloads and retries exactly once. A
``NOSCRIPT`` reply means the script did not run, so the retry cannot apply a
call twice. Error translation into the library's family is the caller's job
(:mod:`quorum_cron.store.redis`), which wraps these calls.

Optionally a call is followed, in the same pipeline (one round trip, same
connection), by ``WAIT replicas timeout_ms``; fewer acknowledgements than
asked raise :class:`WaitShortfall` after the replies were read.

A long run of calls goes in several pipelines of at most
:data:`MAX_PIPELINE_ARGS` keys and arguments, one after the other, each with
its own ``WAIT`` (:func:`pipeline_parts` says why).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import redis
from redis.exceptions import NoScriptError, ResponseError

from quorum_cron.errors import StoreError

__all__ = [
    "CONTROL",
    "FENCE",
    "MAX_PIPELINE_ARGS",
    "MEMBERS",
    "MISSED",
    "READ",
    "SWEEP",
    "VOTE",
    "Call",
    "Script",
    "ScriptRunner",
    "Wait",
    "WaitShortfall",
    "execute_waited",
    "fewer",
    "pipeline_parts",
]

Arg = str | int

MAX_PIPELINE_ARGS = 4_096
"""The most keys and arguments one pipeline carries (about 2,000 votes, or 800 jobs of a sweep):
see :func:`pipeline_parts`."""


@dataclass(frozen=True, slots=True)
class Script:
    """One assembled script: its name (for messages), Lua source and SHA-1."""

    name: str
    source: str
    sha: str


def _read(filename: str) -> str:
    return resources.files("quorum_cron.store").joinpath(filename).read_text(encoding="utf-8")


def _assemble(name: str, *parts: str) -> Script:
    source = "\n".join(_read(p) for p in parts)
    return Script(
        name=name, source=source, sha=hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
    )


# _membership.lua comes before _job.lua: the executor pick (_job.lua's choose)
# is limited to members of the job's record, in every script that assigns.
_JOB = ("_clock.lua", "_membership.lua", "_job.lua")

VOTE = _assemble("vote", *_JOB, "vote.lua")
SWEEP = _assemble("sweep", *_JOB, "sweep.lua")
FENCE = _assemble("fence", *_JOB, "fence.lua")
MISSED = _assemble("missed", *_JOB, "missed.lua")
READ = _assemble("read", *_JOB, "read.lua")
MEMBERS = _assemble("members", "_clock.lua", "_membership.lua", "members.lua")
CONTROL = _assemble("control", "_clock.lua", "control.lua")


@dataclass(frozen=True, slots=True)
class Wait:
    """``WAIT replicas timeout_ms`` after the calls: how many replicas must acknowledge, how fast."""

    replicas: int
    timeout_ms: int


class WaitShortfall(Exception):
    """The script calls ran, but fewer replicas than asked acknowledged them in time.

    Not part of the library's error family: :mod:`quorum_cron.store.redis`
    turns it into ``StoreUnavailable`` (the outcome is unknown to a caller
    that fails over to a replica).
    """

    def __init__(self, acknowledged: int, wait: Wait, masters: Sequence[str] = ()) -> None:
        # ``masters``: on a Redis Cluster, the masters whose WAIT fell short (host:port), named so
        # the operator knows which shard lacks a replica; absent for the one server of standalone.
        where = f" on master{'s' if len(masters) > 1 else ''} {', '.join(masters)}" if masters else ""
        within = f"within {wait.timeout_ms} ms{where}"
        super().__init__(f"WAIT: {acknowledged} of {wait.replicas} replicas acknowledged {within}")
        self.acknowledged = acknowledged
        self.wait = wait
        self.masters = tuple(masters)


@dataclass(frozen=True, slots=True)
class Call:
    """One script invocation: the script, its KEYS and its ARGV."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Arg]


def pipeline_parts(calls: Sequence[Call]) -> list[range]:
    """The calls, in order, cut into runs of at most :data:`MAX_PIPELINE_ARGS` keys and arguments
    (a call longer than that alone); one empty run for no calls (a lone ``WAIT``).

    Why: redis-py writes a pipeline with one ``sendall``, which the socket
    timeout (2 s, :mod:`quorum_cron.store.connect`) bounds as a whole, and a
    server reads a client's pipeline only as fast as it runs the calls in it.
    A burst's 100,000 votes in one pipeline (~6 MB, seconds of server time
    while the other agents send theirs) failed every minute with "Timeout
    writing to socket" on a 3-master cluster, so no slot ran
    (benchmarks/scale.py, issue 27). A run of about 2,000 votes takes the
    server a fraction of that timeout even when three agents' runs
    interleave, and a run's round trip costs ~0.1 ms.
    """
    parts: list[range] = []
    start = size = 0
    for i, call in enumerate(calls):
        n = len(call.keys) + len(call.args)
        if i > start and size + n > MAX_PIPELINE_ARGS:
            parts.append(range(start, i))
            start, size = i, 0
        size += n
    parts.append(range(start, len(calls)))
    return parts


def execute_waited(pipe: Any, wait: Wait | None) -> tuple[list[Any], int | None]:
    """Run ``pipe`` (errors as values), ending it with ``WAIT`` when ``wait`` asks: its replies
    without WAIT's, and the replicas WAIT counted (None without ``wait``)."""
    if wait is not None:
        pipe.wait(wait.replicas, wait.timeout_ms)
    got = list(pipe.execute(raise_on_error=False))
    if wait is None:
        return got, None
    acked = got.pop()
    if isinstance(acked, Exception):
        raise acked
    return got, int(acked)


def fewer(a: int | None, b: int | None) -> int | None:
    """The fewer of two WAIT counts, either of which may be absent (None)."""
    return b if a is None else a if b is None else min(a, b)


class ScriptRunner:
    """Runs scripts on one client by SHA, loading them once and after NOSCRIPT.

    Not thread-safe in its bookkeeping, which is harmless: the worst a race
    does is load a script twice.
    """

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._loaded: set[str] = set()

    def _load(self, script: Script) -> None:
        sha = self._client.script_load(script.source)
        if isinstance(sha, bytes):
            sha = sha.decode()
        if sha != script.sha:
            raise StoreError(f"SCRIPT LOAD of {script.name!r} returned sha {sha!r}, expected {script.sha!r}")
        self._loaded.add(script.sha)

    def _ensure(self, scripts: Sequence[Script]) -> None:
        for script in scripts:
            if script.sha not in self._loaded:
                self._load(script)

    def call(self, call: Call, wait: Wait | None = None) -> Any:
        """Run one script and return its raw reply (``wait``: then ``WAIT``, see :meth:`call_many`)."""
        if wait is not None:
            return self.call_many([call], wait)[0]
        self._ensure([call.script])
        try:
            return self._client.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
        except NoScriptError:
            self._load(call.script)
            try:
                return self._client.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
            except NoScriptError as exc:
                raise StoreError(f"script {call.script.name!r} missing right after SCRIPT LOAD") from exc

    def call_many(
        self, calls: Sequence[Call], wait: Wait | None = None, *, errors: bool = False, partial: bool = False
    ) -> list[Any]:
        """Run several scripts in one non-transactional pipeline; replies in call order.

        ``partial`` is for the cluster runner (a shortfall of some masters); here one ``WAIT``
        covers every call, so a shortfall is raised whatever it says.

        ``errors``: a script's error reply is returned in its place instead of
        raised (a batch of independent jobs' calls, where one job's corrupt key
        must not fail the others).

        Calls of different jobs are independent; calls of one job (a fenced
        batch's renew then finish of a slot) keep their order, since the few
        that hit NOSCRIPT are re-run in call order after the others — and a
        missing script fails every call of it, so none of a job's later calls
        ran before an earlier one.

        ``wait``: the pipeline ends with ``WAIT replicas timeout_ms`` (it
        covers every write the connection made before it); when fewer
        replicas acknowledged, :class:`WaitShortfall` is raised once the
        replies were checked (a script error is raised first).
        """
        if len(calls) == 1 and wait is None and not errors:
            return [self.call(calls[0])]
        self._ensure([c.script for c in calls])
        replies, acked = self._pipeline(calls, wait)
        missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
        if missing:
            for script in {calls[i].script.sha: calls[i].script for i in missing}.values():
                self._load(script)
            again, acked_again = self._pipeline([calls[i] for i in missing], wait)
            acked = min(acked, acked_again)
            for i, reply in zip(missing, again, strict=True):
                if isinstance(reply, NoScriptError):
                    raise StoreError(f"script {calls[i].script.name!r} missing right after SCRIPT LOAD")
                replies[i] = reply
        for call, reply in zip(calls, replies, strict=True):
            if isinstance(reply, ResponseError):
                if errors:
                    continue
                raise reply
            if isinstance(reply, Exception):  # pragma: no cover - redis-py only returns ResponseErrors
                raise StoreError(f"script {call.script.name!r} failed: {reply}") from reply
        if wait is not None and acked < wait.replicas:
            raise WaitShortfall(acked, wait)
        return replies

    def _pipeline(self, calls: Sequence[Call], wait: Wait | None = None) -> tuple[list[Any], int]:
        """The calls' replies (errors as values) and, with ``wait``, the fewest replicas a WAIT
        counted (one pipeline per :func:`pipeline_parts` run, each with its own WAIT)."""
        replies: list[Any] = []
        fewest: int | None = None
        for part in pipeline_parts(calls):
            pipe = self._client.pipeline(transaction=False)
            for i in part:
                c = calls[i]
                pipe.evalsha(c.script.sha, len(c.keys), *c.keys, *c.args)
            got, acked = execute_waited(pipe, wait)
            fewest = fewer(fewest, acked)
            replies.extend(got)
        return replies, fewest or 0
