"""The agent's batched log handler (quorum_cron/agent/logwriter.py): lines written together,
never lost, never reordered, never held back when something went wrong."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from quorum_cron.agent import logwriter
from quorum_cron.agent.logs import configure_logging, event
from quorum_cron.agent.logwriter import BatchedLineHandler


class CountingStream(io.StringIO):
    """A text stream that counts the writes it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)


Held = tuple[logging.Logger, BatchedLineHandler, CountingStream]


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    """A logger whose handler holds INFO lines for a minute unless something writes them."""
    monkeypatch.setattr(logwriter, "FLUSH_S", 60.0)
    stream = CountingStream()
    handler = BatchedLineHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger(f"qc-test-logwriter-{id(stream)}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    yield log, handler, stream
    log.removeHandler(handler)
    handler.close()


def test_info_lines_wait_and_go_out_in_one_write(
    held: Held,
) -> None:
    log, handler, stream = held
    for i in range(100):
        log.info("line %d", i)
    assert stream.getvalue() == "" and stream.writes == 0
    handler.flush()
    assert stream.getvalue().splitlines() == [f"INFO line {i}" for i in range(100)]
    assert stream.writes == 1


def test_a_warning_writes_at_once_after_the_lines_before_it(
    held: Held,
) -> None:
    log, _, stream = held
    log.info("a")
    log.debug("b")
    log.warning("went wrong")
    assert stream.getvalue().splitlines() == ["INFO a", "DEBUG b", "WARNING went wrong"]
    log.error("worse")
    assert stream.getvalue().splitlines()[-1] == "ERROR worse"


def test_pending_text_is_bounded(held: Held, monkeypatch: pytest.MonkeyPatch) -> None:
    log, _, stream = held
    monkeypatch.setattr(logwriter, "MAX_PENDING_CHARS", 1000)
    for i in range(9):
        log.info("%s", f"{i}" * 99)  # 100 characters a line with its newline, 105 with "INFO "
    assert stream.getvalue() == ""
    log.info("%s", "9" * 99)
    assert len(stream.getvalue().splitlines()) == 10


def test_closing_or_replacing_the_handler_writes_what_waits(
    held: Held,
) -> None:
    log, handler, stream = held
    log.info("before close")
    handler.close()
    assert stream.getvalue() == "INFO before close\n"
    log.info("after close")  # (a closed handler writes each line at once)
    assert stream.getvalue().splitlines()[-1] == "INFO after close"

    first, second = CountingStream(), CountingStream()
    configure_logging("n1", json_lines=False, stream=first)
    event(logging.getLogger("quorum_cron.agent.test"), logging.INFO, "probe", "held line")
    configure_logging("n1", json_lines=False, stream=second)  # (the agent's handler replaced)
    assert "held line" in first.getvalue()


def test_a_line_is_written_by_itself_soon_after_it_was_logged() -> None:
    stream = CountingStream()
    handler = BatchedLineHandler(stream)
    log = logging.getLogger("qc-test-logwriter-timer")
    log.propagate = False
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        log.info("nobody flushes this")
        deadline = time.monotonic() + 10  # (FLUSH_S is 0.05 s; a loaded machine gets room)
        while "nobody flushes this" not in stream.getvalue():
            assert time.monotonic() < deadline, "the writer thread never wrote the line"
            time.sleep(0.01)
    finally:
        log.removeHandler(handler)
        handler.close()


def test_lines_from_many_threads_stay_whole_and_in_each_threads_order(
    held: Held,
) -> None:
    log, handler, stream = held

    def write(t: int) -> None:
        for i in range(500):
            log.info("t%d %d", t, i)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    handler.flush()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2000
    for t in range(4):
        mine = [line for line in lines if line.startswith(f"INFO t{t} ")]
        assert mine == [f"INFO t{t} {i}" for i in range(500)]


def test_an_exiting_process_writes_its_last_lines() -> None:
    code = (
        "import logging\n"
        "from quorum_cron.agent.logs import configure_logging, event\n"
        "configure_logging('n1', json_lines=True)\n"
        "log = logging.getLogger('quorum_cron.agent.test')\n"
        "for i in range(3):\n"
        "    event(log, logging.INFO, 'probe', f'last line {i}')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert [line.count("last line") for line in out.stderr.splitlines()] == [1, 1, 1]
