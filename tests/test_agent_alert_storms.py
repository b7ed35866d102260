"""Alert storms: beyond MAX_PER_KIND alerts of one kind a minute, one ``alerts_suppressed`` alert.

A whole minute missed at 100,000 jobs (a restart across a minute boundary,
an overloaded machine) raised 100,000 ``slot_missed`` alerts on every node:
a log line, a store write and a hook call each. These tests drive
:class:`~quorum_cron.agent.alerts.AlertHook` on a manual clock and check
what goes out one by one, what is only counted, and that the count is
always told: when the window ends, at the next alert of the kind, with the
agent's summary line, and at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from quorum_cron.agent.alerts import KIND_WINDOW_S, MAX_PER_KIND, AlertHook, AlertJournal, AlertKind, _post
from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.observe import Observer
from quorum_cron.core.model import SlotState
from quorum_cron.store.memory import MemoryStore
from tests.agent_inproc import T0, agent_job, alerts_of, events


class Clock:
    def __init__(self) -> None:
        self.s = 1_000.0

    def __call__(self) -> float:
        return self.s


def storm(hook: AlertHook, n: int, first: int = 0) -> None:
    for i in range(first, first + n):
        hook.raise_(AlertKind.SLOT_MISSED, f"j{i}@{T0} missed: nobody voted", job=f"j{i}", slot=T0)


def test_beyond_the_bound_alerts_are_counted_not_sent_and_other_kinds_still_go(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=EVENT_LOGGER)
    hook = AlertHook("n1", clock=Clock())
    storm(hook, MAX_PER_KIND + 70)
    hook.raise_(AlertKind.QUORUM_LOST, "quorum lost")
    sent = alerts_of(hook, AlertKind.SLOT_MISSED)
    assert [a.fields["job"] for a in sent] == [f"j{i}" for i in range(MAX_PER_KIND)]
    assert len(alerts_of(hook, AlertKind.QUORUM_LOST)) == 1  # another kind has its own bound
    assert len(events(caplog.records, "alert")) == MAX_PER_KIND + 1  # the counted ones log nothing
    hook.flush_suppressed()  # the window is still open: nothing to tell yet
    assert alerts_of(hook, AlertKind.ALERTS_SUPPRESSED) == []


def test_the_count_goes_out_once_when_the_window_ends_and_a_new_window_sends_again() -> None:
    clock = Clock()
    hook = AlertHook("n1", clock=clock)
    storm(hook, MAX_PER_KIND + 70)
    clock.s += KIND_WINDOW_S
    hook.flush_suppressed()
    hook.flush_suppressed()  # (told once)
    [told] = alerts_of(hook, AlertKind.ALERTS_SUPPRESSED)
    assert told.fields == {"of_kind": AlertKind.SLOT_MISSED, "suppressed": "70", "window_s": "60"}
    assert "70 more slot_missed alerts" in told.message
    storm(hook, 1, first=500)
    assert alerts_of(hook, AlertKind.SLOT_MISSED)[-1].fields["job"] == "j500"


def test_the_next_alert_of_the_kind_after_the_window_tells_the_count_first() -> None:
    clock = Clock()
    hook = AlertHook("n1", clock=clock)
    storm(hook, MAX_PER_KIND + 3)
    clock.s += KIND_WINDOW_S + 5
    storm(hook, 1, first=900)
    assert [a.kind for a in hook.sent[-2:]] == [AlertKind.ALERTS_SUPPRESSED, AlertKind.SLOT_MISSED]
    assert hook.sent[-2].fields["suppressed"] == "3"


def test_the_summary_line_tells_ended_windows_and_shutdown_tells_open_ones() -> None:
    """The agent's once-a-minute summary flushes ended windows; a node that stops keeps and
    sends the count of a window still open, to the hook's queue and the store's journal."""
    clock = Clock()
    store = MemoryStore(lambda: T0)
    hook = AlertHook("n1", clock=clock, journal=AlertJournal(store))
    observer = Observer("n1", {"job": agent_job("job")}, Metrics(), hook)

    async def scenario() -> None:
        storm(hook, MAX_PER_KIND + 4)
        clock.s += KIND_WINDOW_S
        observer.summary()
        assert [a.fields.get("suppressed") for a in alerts_of(hook, AlertKind.ALERTS_SUPPRESSED)] == ["4"]
        # The journal's queue (bounded: MAX_QUEUED) drains before the next storm; a drain that
        # never comes is this failure, not a dropped storm's later.
        drained = time.monotonic() + 30
        while len(store.alerts(limit=500).alerts) <= MAX_PER_KIND:
            assert time.monotonic() < drained, "the alert journal did not drain within 30 s"
            await asyncio.sleep(0.01)
        storm(hook, MAX_PER_KIND + 2, first=1_000)  # a new window, still open at shutdown
        await hook.aclose(5.0)

    asyncio.run(scenario())
    told = alerts_of(hook, AlertKind.ALERTS_SUPPRESSED)
    assert [a.fields["suppressed"] for a in told] == ["4", "2"]
    kept = [a for a in store.alerts(limit=500).alerts if a.kind == AlertKind.ALERTS_SUPPRESSED]
    assert sorted(a.fields["suppressed"] for a in kept) == ["2", "4"]


def test_an_observer_missing_a_whole_minute_alerts_the_bound_and_counts_every_slot() -> None:
    """The metrics and the node's counts still see every missed slot; only the alerts are bounded."""
    hook = AlertHook("n1", clock=Clock())
    jobs = {f"j{i}": agent_job(f"j{i}") for i in range(MAX_PER_KIND * 3)}
    observer = Observer("n1", jobs, Metrics(), hook)
    store = MemoryStore(lambda: T0 + 120_000)
    for job in jobs:
        view = store.record_missed(job, T0, 30_000, "nobody voted")
        assert view.state == SlotState.MISSED
        observer.missed(view, "recorded by this node")
    assert observer.counts["missed"] == len(jobs)
    assert len(alerts_of(hook, AlertKind.SLOT_MISSED)) == MAX_PER_KIND


class _Answer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(503)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_failed_post_names_the_url_without_its_secret_path_and_says_why() -> None:
    """A webhook's secret is its path: a failure says which hook failed (its host) and why."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        with pytest.raises(RuntimeError) as refused:
            _post(f"http://127.0.0.1:{port}/services/T0/SECRET", b"{}")
        assert str(refused.value) == "alert URL http://127.0.0.1/*** answered HTTP 503"
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as bound, pytest.raises(RuntimeError) as closed:
        bound.bind(("127.0.0.1", 0))  # (bound, not listening: connections are refused)
        _post(f"http://127.0.0.1:{bound.getsockname()[1]}/services/T0/SECRET", b"{}")
    assert str(closed.value).startswith("alert URL http://127.0.0.1/***: ")
    assert "SECRET" not in str(closed.value)
