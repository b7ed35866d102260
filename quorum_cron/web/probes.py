"""The probes a supervisor asks: ``/healthz`` (is the process up) and ``/readyz`` (does the store answer).

Two questions, kept apart on purpose. Liveness does not touch the store: a
probe that failed while Redis is down would make Kubernetes restart every
dashboard pod during a Redis outage, which cures nothing (the pods come back
to the same outage) and loses their sessions. Readiness asks the store for
its time and says in one line whether it answered: a load balancer stops
sending pages that could only be 503s.

The readiness question is bounded by :data:`READY_TIMEOUT_S`, not by the
client's socket timeout (a hung server would otherwise hold the probe for
that long, past the probe's own timeout, and the supervisor would see no
reason at all). At most one question is in flight: probes that arrive while
one waits share its answer, so a hung store costs one worker thread, not one
per probe.
"""

from __future__ import annotations

import asyncio

from quorum_cron.errors import StoreError
from quorum_cron.store.base import ObservedStore
from quorum_cron.store.connect import store_failure

__all__ = ["READY_TIMEOUT_S", "Readiness"]

READY_TIMEOUT_S = 0.5
"""How long ``/readyz`` waits for the store's answer. Below the 1 s a Kubernetes probe waits by
default (``timeoutSeconds``), so the probe gets the reason line rather than its own timeout."""


class Readiness:
    """Whether the store answers now: ``None`` when it does, else the one-line reason (no password)."""

    def __init__(
        self,
        store: ObservedStore,
        shown_url: str,
        *,
        timeout_s: float = READY_TIMEOUT_S,
    ) -> None:
        self._store = store
        self._shown = shown_url
        self._timeout_s = timeout_s
        self._asking: asyncio.Future[str | None] | None = None

    def _ask(self) -> str | None:
        try:
            self._store.time_ms()
        except StoreError as exc:
            return f"cannot read the store at {self._shown}: {store_failure(exc) or type(exc).__name__}"
        return None

    async def check(self) -> str | None:
        if self._asking is None or self._asking.done():
            self._asking = asyncio.ensure_future(asyncio.to_thread(self._ask))
        try:
            # shield: a probe that gives up leaves the question running for the next probe to share.
            return await asyncio.wait_for(asyncio.shield(self._asking), self._timeout_s)
        except TimeoutError:
            return f"the store at {self._shown} did not answer within {self._timeout_s:g} s"

    async def answer(self) -> tuple[int, str]:
        """(HTTP status, one line): 200 ``ready: ...``, or 503 ``not ready: <reason>``."""
        problem = await self.check()
        if problem is not None:
            return 503, f"not ready: {problem}"
        return 200, f"ready: the store at {self._shown} answers"
