"""Job output in the agent's log: each stdout/stderr line as an ``output`` event, bounded.

The ledger keeps only the end of a run's output (``cluster.output_tail``);
this module copies the lines themselves to the agent's log, where a log
shipper (journald, a container runtime) keeps them — what Kubernetes' pod
logs and cron's mail give their users. Each line is one structured event
with the job, slot, token and stream, so it can be found by run.

Bounded twice, because a job controls how much it writes and the agent's
log must stay readable (and its loop responsive) whatever the job does:

* per run: at most ``output_log_lines`` lines (:class:`RunOutput`);
* per node: at most ``output_log_rate`` lines per second over all runs
  (:class:`OutputRate`, a token bucket);

lines beyond either bound are counted (``quorum_cron_job_output_lines_dropped_total``)
and said once at the run's end. A line is cut at :data:`MAX_LINE_CHARS`.
Secrets are masked like every other log line: the log handler's filter and
formatters pass every message and field through :func:`~quorum_cron.redact.redact_text`,
and the line is masked here as well, so a handler without that filter
still never shows a URL password a job printed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.redact import redact_text

__all__ = ["MAX_LINE_CHARS", "OutputRate", "RunOutput"]

log = logging.getLogger(EVENT_LOGGER)

MAX_LINE_CHARS: Final = 2000
"""A logged output line is cut to this many characters."""
MAX_PENDING_BYTES: Final = 64 * 1024
"""An unterminated line longer than this is logged (cut) rather than buffered further."""


class OutputRate:
    """A node-wide token bucket: ``rate`` lines per second, bursts up to ``rate``."""

    def __init__(self, rate: int, monotonic: Callable[[], float]) -> None:
        if rate <= 0:
            raise ValueError(f"invalid output_log_rate {rate}: expected > 0")
        self.rate = rate
        self._now = monotonic
        self._tokens = float(rate)
        self._last = monotonic()

    def take(self) -> bool:
        """True when one more line may be logged now."""
        now = self._now()
        self._tokens = min(float(self.rate), self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class RunOutput:
    """Splits one run's output into lines and logs them as ``output`` events within the bounds."""

    def __init__(
        self,
        *,
        job: str,
        fire_ms: int,
        token: int,
        max_lines: int,
        rate: OutputRate,
        on_dropped: Callable[[int], None] | None = None,
    ) -> None:
        self.job = job
        self.fire_ms = fire_ms
        self.token = token
        self.max_lines = max_lines
        self.rate = rate
        self._on_dropped = on_dropped
        self._pending: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.logged = 0
        self.dropped = 0

    def feed(self, stream: str, data: bytes) -> None:
        """Data read from ``stream`` (``stdout`` or ``stderr``): log every complete line."""
        if self.max_lines <= 0:
            return
        buf = self._pending.setdefault(stream, bytearray())
        buf += data
        while True:
            end = buf.find(b"\n")
            if end < 0:
                break
            line = bytes(buf[:end])
            del buf[: end + 1]
            self._line(stream, line)
        if len(buf) > MAX_PENDING_BYTES:
            self._line(stream, bytes(buf))
            buf.clear()

    def close(self) -> None:
        """The run ended: log unterminated last lines, then say how many lines were left out."""
        for stream, buf in self._pending.items():
            if buf:
                self._line(stream, bytes(buf))
                buf.clear()
        if self.dropped:
            if self._on_dropped is not None:
                self._on_dropped(self.dropped)
            event(
                log,
                logging.WARNING,
                "output_dropped",
                f"{self.job}@{self.fire_ms} token {self.token}: {self.dropped} output line(s) not logged "
                f"(bounds: {self.max_lines} per run, {self.rate.rate} per second; the ledger keeps the end)",
                job=self.job,
                slot=self.fire_ms,
                token=self.token,
                dropped=self.dropped,
            )

    def _line(self, stream: str, raw: bytes) -> None:
        if self.logged >= self.max_lines or not self.rate.take():
            self.dropped += 1
            return
        self.logged += 1
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if len(text) > MAX_LINE_CHARS:
            text = text[: MAX_LINE_CHARS - 1] + "…"
        event(
            log,
            logging.INFO,
            "output",
            redact_text(text),
            job=self.job,
            slot=self.fire_ms,
            token=self.token,
            stream=stream,
        )
