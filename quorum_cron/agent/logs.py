"""Agent logging: one line per event on stderr, as text or JSON, never a password.

Every record the agent emits carries an ``event`` name (``vote``, ``run``,
``finish``, ``abstain``...) and flat fields, so that a person can read the
text form and a program (the demo, the tests, a log shipper) can parse the
JSON form without regular expressions. A filter scrubs anything that looks
like a URL password from every message, whatever code produced it: the Redis
URL is the one secret the agent holds, and a traceback may quote it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import IO, Any, Final

from quorum_cron.agent.logwriter import BatchedLineHandler
from quorum_cron.printable import printable
from quorum_cron.redact import redact_text

__all__ = ["EVENT_LOGGER", "JsonFormatter", "TextFormatter", "configure_logging", "event", "scrub"]

EVENT_LOGGER: Final = "quorum_cron.agent"


def scrub(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***`` (linear time)."""
    return redact_text(text)


def event(logger: logging.Logger, level: int, name: str, msg: str, **fields: object) -> None:
    """Log ``msg`` as event ``name`` with ``fields`` (kept apart for the JSON form).

    The record is made and handed to the logger's handlers directly, as
    ``Logger.log`` would, but without its search of the call stack for the
    calling function's file and line, which no formatter of ours shows (a
    handler an application adds sees ``pathname`` "(event)", line 0): an
    executor logs three events per slot, and that search was a sixth of
    logging's cost at a burst of 10,000 slots (docs/benchmarks.md, "Scale").
    """
    if logger.isEnabledFor(level):
        record = logger.makeRecord(
            logger.name, level, "(event)", 0, msg, (), None, extra={"qc_event": name, "qc_fields": fields}
        )
        logger.handle(record)


def _fields(record: logging.LogRecord) -> Mapping[str, object]:
    fields = getattr(record, "qc_fields", None)
    return fields if isinstance(fields, Mapping) else {}


class _ScrubFilter(logging.Filter):
    """Removes URL passwords from the formatted message and any exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        record.exc_info = None
        return True


class TextFormatter(logging.Formatter):
    """``2024-05-01T12:00:00.123Z INFO  [n1] run: started backup@... token=7``."""

    def __init__(self, node: str) -> None:
        super().__init__()
        self._node = node

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        ms = int(record.msecs)
        name = getattr(record, "qc_event", "") or record.name
        # One line per event: control characters (a value read from Redis may
        # hold any) are escaped, never written to the terminal or the log file.
        extra = " ".join(f"{k}={printable(str(v))}" for k, v in _fields(record).items())
        msg = printable(record.getMessage())
        line = f"{ts}.{ms:03d}Z {record.levelname:<5} [{self._node}] {name}: {msg}"
        if extra:
            line = f"{line} ({extra})"
        if record.exc_text:
            line = f"{line}\n{record.exc_text}"
        return scrub(line)


_JSON: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""One encoder for every line: ``json.dumps`` with arguments builds a new encoder per call."""
_PLAIN: Final = (int, float, bool, type(None))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (epoch ms), ``level``, ``node``, ``event``, ``msg``, fields."""

    def __init__(self, node: str) -> None:
        super().__init__()
        self._node = node

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": int(record.created * 1000),
            "level": record.levelname.lower(),
            "node": self._node,
            "event": getattr(record, "qc_event", "") or record.name,
            "msg": scrub(record.getMessage()),
        }
        for key, value in _fields(record).items():
            if key in doc:
                continue
            if type(value) is str:  # (most fields: scrub(str(s)) is scrub(s))
                doc[key] = scrub(value)
            else:
                doc[key] = value if isinstance(value, _PLAIN) else scrub(str(value))
        if record.exc_text:
            doc["exc"] = scrub(record.exc_text)
        # Each string is scrubbed before encoding: JSON has no whitespace to end
        # a URL at, so scrubbing the encoded line could swallow its structure.
        return _JSON.encode(doc)


def configure_logging(
    node: str, *, json_lines: bool = False, level: str = "INFO", stream: IO[str] | None = None
) -> None:
    """Send quorum-cron's logs to ``stream`` (stderr) in the chosen form; idempotent.

    Lines are written in batches, WARNING and above at once (:mod:`.logwriter`)."""
    root = logging.getLogger("quorum_cron")
    for old in list(root.handlers):
        if getattr(old, "_quorum_cron", False):
            root.removeHandler(old)
            old.close()  # (writes the lines it holds)
    handler = BatchedLineHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter(node) if json_lines else TextFormatter(node))
    handler.addFilter(_ScrubFilter())
    handler._quorum_cron = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
