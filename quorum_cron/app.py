"""The Python API: declare jobs with a decorator, run the node inside your program.

::

    from quorum_cron.app import App, JobContext

    app = App(namespace="shop", members=["web-1", "web-2", "web-3"], redis_url="redis://redis:6379/0")

    @app.cron("*/5 * * * *", name="sync-prices", timeout="2m")
    def sync_prices(ctx: JobContext) -> None:
        prices.sync(fencing_token=ctx.token)

    app.run()            # blocks; SIGTERM/SIGINT (and SIGHUP) stop it gracefully
    # or, inside an asyncio program:  await app.serve()

Every server runs the same program; each runs a node. Job definitions come
from code only — Redis holds votes and the ledger, never what to run. A job's
definition hash (``JobSpec.spec_hash``) covers its name, schedule and
options, so a rolling deploy that changes a job cannot fire it with a mix of
old and new definitions: a quorum must agree on one.

A plain function runs in a worker thread; a coroutine function runs on the
loop. The context names the slot (nominal time), the fencing token (hand it
to whatever the job writes to, so a stale run can be refused) and the node.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from quorum_cron.agent.build import agent_job
from quorum_cron.agent.jobprocess import CallableTarget, JobContext
from quorum_cron.agent.logs import configure_logging
from quorum_cron.agent.membership import node_id_problem
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.redisclient import default_node_id
from quorum_cron.agent.runtime import Agent
from quorum_cron.agent.startup import (
    new_agent,
    open_node_store,
    preflight,
    report_preflight,
    run_node,
    tune_allocator_for,
)
from quorum_cron.clock.policy import default_unreachable_policy
from quorum_cron.config.durations import parse_duration
from quorum_cron.config.job_options import in_process_job
from quorum_cron.config.settings import (
    AUTO,
    ClusterConfig,
    Config,
    JobSpec,
    NtpUnreachable,
    _deadline_vs_skew,
)
from quorum_cron.errors import ConfigError, QuorumCronError
from quorum_cron.store.base import Store
from quorum_cron.store.redis import RedisStore

__all__ = ["App", "AppStateError", "JobContext"]

F = TypeVar("F", bound=Callable[..., object])
_SOURCE = "App"  # where a declaration's refusal says it came from, as Config(source=...) does

_DURATIONS = (
    "max_skew",
    "lease",
    "start_timeout",
    "heartbeat",
    "retention",
    "clock_check_interval",
    "wait_timeout",
)


_Phase = Literal["idle", "starting", "running", "ended"]


class AppStateError(QuorumCronError, RuntimeError):
    """An :class:`App` was used out of order (a second ``serve()``, a job declared after it)."""


def _shown(value: object) -> str:
    shown = repr(value)
    return f"{type(value).__name__} {shown[:60]}" + ("..." if len(shown) > 60 else "")


def _as_app_line(line: str) -> str:
    """``cluster: field 'lease': ...`` (a ClusterConfig refusal) read as ``App lease: ...``."""
    head, sep, problem = line.partition("': ")
    key = head.removeprefix("cluster: field '")
    return f"App {key}: {problem}" if sep and key != head and "'" not in key else f"App {line}"


def _check_job_function(job: str, func: object) -> None:
    """Refuse what cannot be a job: not callable, a generator function, or not callable with
    the one :class:`JobContext` argument."""
    if not callable(func):
        raise ConfigError(f"job {job!r}: {_shown(func)} is not callable: expected a function taking ctx")
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise ConfigError(
            f"job {job!r}: {getattr(func, '__name__', '')}() is a generator function "
            "(its body would never run): expected a plain or async def"
        )
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # a builtin without a signature: found out when it runs
        return
    try:
        signature.bind(None)
    except TypeError:
        shown = f"{getattr(func, '__name__', type(func).__name__)}({', '.join(signature.parameters)})"
        raise ConfigError(
            f"job {job!r}: {shown} cannot take the one argument a job gets: expected e.g. def job(ctx)"
        ) from None


class App:
    """A node of a quorum-cron cluster, with jobs declared in code.

    Cluster settings are given as keywords (durations as ``"15s"`` strings
    or integer seconds) or taken from a loaded config
    (``App(config=load_config(path))`` uses its ``cluster`` table only; jobs
    still come from the decorators). Values are validated by
    :class:`~quorum_cron.config.settings.ClusterConfig` and
    :class:`~quorum_cron.config.settings.JobSpec`, the same rules as the config file.
    """

    def __init__(
        self,
        *,
        namespace: str | None = None,
        size: int | None = None,
        members: tuple[str, ...] | list[str] = (),
        redis_url: str | None = None,
        node_id: str | None = None,
        quorum: int | None = None,
        grace: str | int = "30s",
        ntp_servers: tuple[str, ...] = (),
        ntp_unreachable: NtpUnreachable | None = None,
        wait_replicas: int = 0,
        allow_evicting_redis: bool = False,
        tune_allocator: bool = True,
        config: Config | None = None,
        store: Store | None = None,
        **durations: str | int,
    ) -> None:
        """``durations``: ``max_skew``, ``lease``, ``start_timeout``, ``heartbeat``, ``retention``,
        ``clock_check_interval``, ``wait_timeout``. ``wait_replicas``: see docs/configuration.md
        (set it when Redis has a replica it may fail over to). ``allow_evicting_redis``: run on a
        Redis whose ``maxmemory-policy`` can evict keys (unsafe, as the agent's
        ``--allow-evicting-redis``; docs/operations.md). ``tune_allocator``: from 1,000 jobs,
        set glibc's allocator for a scheduler (one arena, fixed thresholds, the heap trimmed
        whenever the node is idle) before the node's threads start; process-wide and lasting, so
        ``False`` for a program that must keep its own (docs/operations.md, "Leave the C
        allocator to the agent"). ``store`` replaces the Redis connection (e.g. a MemoryStore in
        a test of your jobs). Without NTP servers the Redis
        TIME check alone decides clock trust (``ntp_unreachable="store-time"``); pass servers
        for the full check. ``ntp_unreachable`` defaults as in the config file: ``"abstain"``
        once servers are listed (a node that lists NTP servers does not vote on Redis TIME
        alone while they are silent, as an agent with the same settings would not).
        ``members``: the node ids of the cluster (``size`` is then their number); without it,
        ``size`` ids fill the seats as they register (docs/operations.md, "Membership").
        """
        if isinstance(members, str) or isinstance(ntp_servers, str):
            key, value = ("members", members) if isinstance(members, str) else ("ntp_servers", ntp_servers)
            raise ConfigError(f"App {key}={value!r} is a string: expected a list of them, e.g. [{value!r}]")
        for key, number in (("size", size), ("quorum", quorum)):
            if isinstance(number, int) and not isinstance(number, bool) and number < 1:
                raise ConfigError(f"App {key}={number!r} is out of range: expected a positive integer")
        if config is not None and not isinstance(config, Config):  # (it raised AttributeError)
            raise ConfigError(f"App config={_shown(config)}: expected a loaded Config (load_config(path))")
        if config is not None:
            given = {
                "namespace": namespace is not None,
                "size": size is not None,
                "members": bool(members),
                "quorum": quorum is not None,
                "ntp_servers": bool(ntp_servers),
                "ntp_unreachable": ntp_unreachable is not None,
                "wait_replicas": wait_replicas != 0,
                **dict.fromkeys(durations, True),
            }
            clash = [k for k, v in given.items() if v]
            if clash:
                raise ConfigError(
                    f"App got config=... and cluster settings {clash}: expected one or the other "
                    "(set them in the config's [cluster] table)"
                )
            self.cluster = config.cluster
        else:
            if namespace is None or (size is None and not members):
                raise ConfigError("App needs namespace=... and members=... or size=... (or config=...)")
            unknown = sorted(set(durations) - set(_DURATIONS))
            if unknown:
                raise ConfigError(
                    f"App got unknown settings {unknown}: expected any of {', '.join(_DURATIONS)}"
                )
            timings: dict[str, Any] = {
                f"{k}_ms": parse_duration(v, what=f"App {k}") for k, v in durations.items()
            }
            try:
                self.cluster = ClusterConfig(
                    namespace=namespace,
                    size=size if size is not None else AUTO,
                    members=tuple(members),
                    quorum=quorum if quorum is not None else AUTO,
                    redis_url=redis_url,
                    ntp_servers=tuple(ntp_servers),
                    ntp_unreachable=(
                        ntp_unreachable
                        if ntp_unreachable is not None
                        else default_unreachable_policy(tuple(ntp_servers)).value
                    ),
                    wait_replicas=wait_replicas,
                    **timings,
                )
            except ConfigError as exc:
                raise type(exc)(_as_app_line(str(exc))) from None
        self.redis_url = redis_url or self.cluster.redis_url
        if store is None and not self.redis_url:
            raise ConfigError("App needs redis_url=... (or config=... with cluster.redis_url, or store=...)")
        self.namespace = self.cluster.namespace
        self.node_id = node_id if node_id is not None else default_node_id()
        problem = node_id_problem(self.node_id) if isinstance(self.node_id, str) else None
        if not isinstance(self.node_id, str):
            problem = f"node id {self.node_id!r} is not a string: expected e.g. 'web-1'"
        if problem is not None:
            raise ConfigError(
                f"App {problem}" + ("" if node_id is not None else " (the host name; pass node_id=...)")
            )
        self._grace_ms = parse_duration(grace, what="App grace")
        self._store = store
        self._allow_evicting_redis = allow_evicting_redis
        self._tune_allocator = tune_allocator
        self._specs: dict[str, JobSpec] = {}
        self._funcs: dict[str, Callable[[JobContext], object]] = {}
        self._agent: Agent | None = None
        self._phase: _Phase = "idle"
        self._stop_asked = ""
        """Why :meth:`stop` was called before the node started (the next start returns at once)."""
        self._end_error: BaseException | None = None
        """What the last :meth:`serve` raised (for :meth:`ready`)."""
        self._changed: asyncio.Event | None = None
        """Set (and dropped) when the phase changes: made on the loop that waits (one per serve)."""
        self._changed_loop: asyncio.AbstractEventLoop | None = None
        self.metrics = Metrics()

    def __repr__(self) -> str:
        return f"App(namespace={self.namespace!r}, node={self.node_id!r}, jobs={sorted(self._specs)!r})"

    # -- declaring jobs ------------------------------------------------------

    def cron(
        self,
        schedule: str,
        *,
        name: str | None = None,
        timezone: str | None = None,
        dst: str | None = None,
        timeout: str | int | None = None,
        starting_deadline: str | int | None = None,
        overlap: str | None = None,
        delivery: str | None = None,
        misfire: str | None = None,
        retries: int | None = None,
        retry_backoff: str | int | None = None,
        retry_backoff_max: str | int | None = None,
        retry_jitter: float | None = None,
        on_store_unavailable: str | None = None,
        alert_on: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """Run the decorated function on ``schedule`` once per slot, cluster-wide.

        The options are a ``[[jobs]]`` table's (docs/configuration.md), read,
        defaulted and checked by the same code
        (:mod:`quorum_cron.config.job_options`); ``None`` is the table's
        default. ``schedule`` is a cron expression, an alias (``@hourly``) or
        ``@every <duration>``; ``timezone`` defaults to UTC, ``timeout`` to 1 h,
        ``starting_deadline`` to half the shortest interval (at most 60 s). A
        run that raises is retried ``retries`` times (default 0), each under a
        new fencing token and not before ``retry_backoff`` (10 s; doubling up
        to ``retry_backoff_max`` when given, shortened by up to
        ``retry_jitter`` of itself). ``alert_on`` names which outcomes raise
        an alert through the cluster's hook (``failed``, ``recovered``,
        ``missed``, ``lost``; all by default). A bad value raises
        :class:`~quorum_cron.errors.ConfigError` (a bad schedule or zone, a
        :class:`~quorum_cron.errors.ScheduleError`): one line naming it.
        """
        if not isinstance(schedule, str):
            raise ConfigError(
                f"App.cron() got {_shown(schedule)} for the schedule: expected a cron expression string, "
                "as in @app.cron('*/5 * * * *') (the decorator needs its parentheses)"
            )
        self._refuse_late("cron")
        given = {
            "schedule": schedule,
            "timezone": timezone,
            "dst": dst,
            "timeout": timeout,
            "starting_deadline": starting_deadline,
            "overlap": overlap,
            "delivery": delivery,
            "misfire": misfire,
            "retries": retries,
            "retry_backoff": retry_backoff,
            "retry_backoff_max": retry_backoff_max,
            "retry_jitter": retry_jitter,
            "on_store_unavailable": on_store_unavailable,
            # Any sequence, as typed (a str stays one, for the one-line error it earns).
            "alert_on": alert_on if alert_on is None or isinstance(alert_on, str) else tuple(alert_on),
        }

        def register(func: F) -> F:
            job: str = name if name is not None else str(getattr(func, "__name__", ""))
            self._refuse_late("cron")
            _check_job_function(job, func)
            if job in self._specs:
                raise ConfigError(f"job {job!r} is declared twice: expected unique job names")
            spec = in_process_job(job, {k: v for k, v in given.items() if v is not None})
            # The whole-config rules, for the new job alone (the name is unique, checked above):
            # re-checking every declared job made declaring n jobs cost O(n^2).
            if spec.starting_deadline_ms <= self.cluster.max_skew_ms:
                defaulted = starting_deadline is None  # (max_skew: the default when it equals it)
                raise ConfigError(_deadline_vs_skew(_SOURCE, spec, self.cluster, deadline_default=defaulted))
            self._specs[job] = spec
            self._funcs[job] = func
            return func

        return register

    @property
    def jobs(self) -> dict[str, JobSpec]:
        """The declared jobs, by name."""
        return dict(self._specs)

    # -- running -------------------------------------------------------------

    async def serve(self) -> None:
        """Run this node until :meth:`stop` (or cancellation); returns after a graceful stop.

        Installs no signal handlers: the program around it owns them (:meth:`run` installs them).
        One at a time: a second ``serve()`` while one runs raises :class:`AppStateError`.
        """
        await self._serve(signals=False)

    async def _serve(self, *, signals: bool) -> None:
        """The start-up of ``quorum-cron agent`` (:mod:`quorum_cron.agent.startup`), with this node's jobs.

        Before the node votes, a Redis store gets the agent's server checks:
        a refusal raises :class:`~quorum_cron.agent.preflight.PreflightError`
        with the agent's one line (an evicting server is refused unless
        ``allow_evicting_redis=True``). An injected store has no server to check.
        """
        if self._phase != "idle" and self._phase != "ended":
            raise AppStateError(f"App {self.node_id!r} is already serving: expected one serve() at a time")
        self._set_phase("starting")
        self._end_error = None
        owned: RedisStore | None = None
        try:
            agent, owned = await self._start()
            if self._stop_asked:  # stop() came while it started: no vote, no run
                return
            self._agent = agent
            self._set_phase("running")
            await run_node(agent, signals=signals)
        except BaseException as exc:
            self._end_error = exc  # for ready(): a failed serve must not leave it waiting
            raise
        finally:
            self._agent = None
            self._stop_asked = ""
            self._set_phase("ended")
            if owned is not None:
                owned.close()

    def _set_phase(self, phase: _Phase) -> None:
        self._phase = phase
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _refuse_late(self, what: str) -> None:
        if self._phase != "idle" and self._phase != "ended":
            raise AppStateError(
                f"App.{what}() after serve() started: the node runs the jobs declared before it "
                "(declare every job before serve()/run())"
            )

    async def _start(self) -> tuple[Agent, RedisStore | None]:
        """The checked store (owned when opened here) and the node's agent on it."""
        owned: RedisStore | None = None
        store: Store
        if self._tune_allocator:
            tune_allocator_for(len(self._specs))  # before the checks' worker thread starts
        if self._store is not None:
            store = self._store
        else:
            assert self.redis_url is not None
            owned, shown = open_node_store(self.redis_url, self.cluster)
            store = owned
            try:  # on a worker thread: the checks wait on the network, the caller's loop must not
                found = await asyncio.to_thread(
                    preflight,
                    owned,
                    shown,
                    self.cluster.wait_replicas,
                    allow_evicting=self._allow_evicting_redis,
                    override="allow_evicting_redis=True",
                )
            except BaseException:
                owned.close()
                raise
            report_preflight(found)
        # The whole configuration, checked once (each declaration already checked its own job).
        Config(self.cluster, tuple(self._specs.values()), source=_SOURCE)
        jobs = [agent_job(spec, CallableTarget(self._funcs[name])) for name, spec in self._specs.items()]
        agent = new_agent(
            self.cluster, self.node_id, jobs, store, grace_ms=self._grace_ms, metrics=self.metrics
        )
        return agent, owned

    def stop(self) -> None:
        """Ask a serving node to stop gracefully (call it from the loop's thread).

        Before the node has started (a ``serve()`` still starting, or about to be called), the
        start is called off: that ``serve()`` returns without joining or running any job.
        """
        if self._agent is not None:
            self._agent.request_stop("App.stop()")
        else:
            self._stop_asked = "App.stop()"

    async def ready(self) -> None:
        """Wait until the node has joined the cluster (for tests and start-up ordering).

        Raises what :meth:`serve` raised when it failed (e.g. a
        :class:`~quorum_cron.agent.preflight.PreflightError`, a
        :class:`~quorum_cron.agent.membership.NodeIdTaken`) instead of waiting for ever, and
        :class:`AppStateError` when the node stopped (:meth:`stop`) without being ready.
        Called before :meth:`serve`, it waits for the serve to come.
        """
        looked_again = False
        while True:
            agent = self._agent
            if agent is not None and agent.ready.is_set():
                return
            if self._phase == "ended":
                if not looked_again:  # a serve() task created just before this call starts first
                    looked_again = True
                    await asyncio.sleep(0)
                    continue
                if isinstance(self._end_error, asyncio.CancelledError):
                    raise AppStateError(f"App {self.node_id!r} is not serving: its serve() was cancelled")
                if self._end_error is not None:
                    raise self._end_error
                raise AppStateError(f"App {self.node_id!r} is not serving: it stopped (App.stop())")
            looked_again = True
            changed = self._changed_event()
            if agent is None:
                await changed.wait()
                continue
            waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(agent.ready.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    def _changed_event(self) -> asyncio.Event:
        """The event the next phase change sets, on the running loop (a new one for a new loop)."""
        loop = asyncio.get_running_loop()
        if self._changed is None or self._changed_loop is not loop:
            self._changed = asyncio.Event()
            self._changed_loop = loop
        return self._changed

    def run(self, *, log_json: bool = False, log_level: str = "INFO") -> None:
        """Run this node until a stop signal (blocking); configures logging to stderr.

        The signals of ``quorum-cron agent``: SIGTERM or SIGINT stops
        gracefully, a second one ends the grace period; SIGHUP stops
        gracefully too (there is no file to reload: jobs come from code, and a
        restart applies a change).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise AppStateError(
                "App.run() was called inside a running event loop: use await app.serve() there"
            )
        configure_logging(self.node_id, json_lines=log_json, level=log_level)
        asyncio.run(self._serve(signals=True))
