"""A page open in a real browser while its Redis dies and comes back: it must not look current.

Before: the header kept saying "● live" in green and the page kept its old
content for as long as the store was down — the server announced the outage
(event ``store``) and the page's re-fetch got a 503, and both were ignored.
Now the banner ``#stale`` says the store cannot be read, the header says
"not current", and both clear when the store is back and the page re-fetched.

The redis-server is the test's own (:class:`OwnedRedis`), killed and
restarted on its port; ``quorum-cron web`` runs as a process; the browser is
the one of ``test_web_browser.py`` (Debian's chromium through chromedriver).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from selenium import webdriver

from quorum_cron.store.redis import RedisStore
from tests.agent_cluster import OwnedRedis, free_port
from tests.test_web_browser import _get, _text, _wait, browser  # noqa: F401 (browser: a fixture)
from tests.test_web_operator_audit import _until

pytestmark = pytest.mark.slow


@pytest.fixture
def owned(tmp_path: Path) -> Iterator[OwnedRedis]:
    server = OwnedRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def web(tmp_path: Path, owned: OwnedRedis) -> Iterator[str]:
    config = tmp_path / "cluster.toml"
    config.write_text(
        f'[cluster]\nname = "outage"\nsize = 3\nredis_url = "{owned.url}"\nheartbeat = "500ms"\n\n'
        '[[jobs]]\nname = "nightly"\nschedule = "0 3 * * *"\ncommand = ["true"]\n'
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "quorum_cron", "web", "--config", str(config), "--bind", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, NO_PROXY="127.0.0.1,localhost"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _until(
            "the web server to answer",
            lambda: _get(base + "/healthz")[0] == 200 or proc.poll() is not None,
            30,
        )
        assert proc.poll() is None, proc.communicate()[1].decode()
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _state(driver: webdriver.Chrome) -> tuple[str, str, bool, str]:
    """The header's live status (text, class), whether the banner shows, and its text."""
    status, cls, hidden, banner = driver.execute_script(
        "var s = document.getElementById('live-status'), b = document.getElementById('stale');"
        "return [s.textContent, s.className, b ? b.hidden : true, b ? b.textContent : ''];"
    )
    return str(status), str(cls), not hidden, str(banner)


def test_a_page_says_it_is_not_current_while_the_store_is_down(
    owned: OwnedRedis,
    web: str,
    browser: webdriver.Chrome,  # noqa: F811 (the fixture imported above)
) -> None:
    browser.get(web + "/jobs/nightly")
    _wait(browser, "the stream to connect and the page to refresh once", lambda d: _state(d)[1] == "live-on")
    assert _state(browser)[2] is False  # no banner while everything answers

    owned.kill()
    # The server notices within its blocking read (1 s) and its reconnect; the page re-fetches and fails.
    state = _wait(
        browser,
        "the page to say it is not current",
        lambda d: (s := _state(d))[2] and s,
        30,
    )
    status, cls, _, banner = state
    assert cls == "live-stale" and "not current" in status, state
    assert "cannot read the store: unavailable" in banner or "could not be updated" in banner, banner
    assert "live" not in status
    assert browser.execute_script("return document.body.getAttribute('data-stale');") == "yes"

    owned.start()
    # What happened while it was down reaches the page once it is back (a fresh store: pause it).
    client = redis.Redis(port=owned.port)
    try:
        RedisStore(client, "outage").pause("nightly", "bob", "disk swap")
    finally:
        client.close()
    _wait(
        browser,
        "the page to be current again",
        lambda d: _state(d)[1] == "live-on" and not _state(d)[2],
        30,
    )
    _wait(browser, "the pause to show", lambda d: "paused by bob" in _text(d, "#control"), 30)
    assert browser.execute_script("return document.body.getAttribute('data-stale');") == ""
