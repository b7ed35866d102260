"""Bad values read from Redis, made visible: one log event, a metric, one alert per value.

The store (:class:`~quorum_cron.store.redis.RedisStore`) drops a value it
cannot decode — a corrupt slot, member entry, ledger entry, a token counter
that is not a count — and reports it once through ``on_bad_value``. That
call comes from the store worker thread; this module moves it onto the
agent's loop and turns it into what an operator sees: a ``bad_value`` log
event, ``quorum_cron_bad_values_total{kind}``, and a ``bad_value`` alert.
Alerts are bounded (:data:`MAX_ALERTS` distinct values per agent) so that a
flood of garbage cannot turn into a flood of pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.metrics import Metrics
from quorum_cron.store.redis import RedisStore

__all__ = ["MAX_ALERTS", "BadValueReporter"]

log = logging.getLogger(EVENT_LOGGER)

MAX_ALERTS: Final = 20


class BadValueReporter:
    """Receives ``(what, problem)`` from any thread; reports on the loop."""

    def __init__(self, metrics: Metrics, alerts: AlertHook) -> None:
        self._metrics = metrics
        self._alerts = alerts
        self._alerted = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self, store: RedisStore, loop: asyncio.AbstractEventLoop) -> None:
        """Have ``store`` report to this reporter, on ``loop``."""
        self._loop = loop
        store.on_bad_value = self.report_threadsafe

    def report_threadsafe(self, what: str, problem: str) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            self.report(what, problem)
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self.report, what, problem)

    def report(self, what: str, problem: str) -> None:
        kind = what.split(" ", 1)[0] or "value"
        self._metrics.bad_values.labels(kind).inc()
        message = f"bad value in the store, ignored: {what}: {problem}"
        if self._alerted < MAX_ALERTS:
            self._alerted += 1
            self._alerts.raise_(AlertKind.BAD_VALUE, message, what=what)
        else:
            event(log, logging.WARNING, "bad_value", message, what=what)
