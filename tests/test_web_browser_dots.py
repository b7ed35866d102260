"""In a real Chromium: jobs named ``.`` and ``..`` are reachable, a login goes back, a refused stream is said.

Before: the links ``/jobs/.`` and ``/jobs/..`` were resolved by the browser
to ``/jobs/`` and ``/`` (``%2E%2E`` too: the URL standard reads it as a
dot segment), so those jobs' pages could not be reached; logging in always
landed on the jobs page; and nothing capped the live-update streams. Now the
dots are linked as ``%252E`` (the server decodes it once more), the login
carries the page back, the confirmation is said from the session, and a page
whose stream the server refuses (over its cap: a 503) says it is not live.

The web face is served by uvicorn on a thread, on loopback, over the
suite's redis-server; the browser is the one of ``test_web_browser.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import uvicorn
from selenium import webdriver
from selenium.webdriver.common.by import By

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.server import listen
from quorum_cron.web.tokens import AdminTokens
from tests.test_web_browser import _text, _wait, browser  # noqa: F401 (browser: a fixture)
from tests.test_web_operator_audit import _until

pytestmark = pytest.mark.slow

TOKEN = "alice:correct-horse-battery-staple"


def _serve(ctx: WebContext) -> tuple[str, uvicorn.Server, threading.Thread]:
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(create_app(ctx), log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    _until("the web server to start", lambda: server.started)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


@pytest.fixture
def served(redis_client: redis.Redis, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two servers over one store: one with an admin token, one whose cap on live streams is 0."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    jobs = tuple(JobSpec.create(n, "@every 1h", command=("true",)) for n in ("tick", ".", ".."))
    config = Config(ClusterConfig(namespace="dots", size=3), jobs)
    store = RedisStore(redis_client, "dots")
    running = [
        _serve(WebContext(config, store, "redis://x/0", AdminTokens(file=tokens))),
        _serve(WebContext(config, store, "redis://x/0", AdminTokens(), max_event_streams=0)),
    ]
    try:
        yield running[0][0], running[1][0]
    finally:
        for _, server, thread in running:
            server.should_exit = True
            thread.join(10)


def _live(driver: webdriver.Chrome) -> tuple[str, str, str]:
    """The header's live status, <body data-live>, and the banner's text ("" while hidden)."""
    status, live, banner = driver.execute_script(
        "var b = document.getElementById('stale');"
        "return [document.getElementById('live-status').textContent,"
        " document.body.getAttribute('data-live') || '', b.hidden ? '' : b.textContent];"
    )
    return str(status), str(live), str(banner)


def test_dot_named_jobs_login_and_a_refused_live_stream_in_a_real_browser(
    served: tuple[str, str],
    browser: webdriver.Chrome,  # noqa: F811 (the fixture imported above)
) -> None:
    base, capped = served
    for name in (".", ".."):
        browser.get(base + "/")
        # (The page replaces its content once its stream connects: find and click in one step.)
        browser.execute_script(
            "document.querySelector(arguments[0]).click();", f'tr.job[data-job="{name}"] td a'
        )
        _wait(browser, f"the page of job {name!r}", lambda d, n=name: _text(d, "h1") == n)
        assert browser.current_url == base + "/jobs/" + "%252E" * len(name)
        _wait(browser, "its stream to connect", lambda d: _live(d)[0] == "● live")

    # On the page of "..": log in from its link, land back on it, trigger; the page says so.
    browser.find_element(By.ID, "login-link").click()
    _wait(browser, "the login page", lambda d: d.find_elements(By.ID, "token"))
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "login").click()
    _wait(browser, "the job page again", lambda d: d.current_url == base + "/jobs/%252E%252E")
    assert _text(browser, "#user") == "admin: alice"
    browser.find_element(By.ID, "trigger").click()
    _wait(browser, "the trigger to be said", lambda d: d.find_elements(By.ID, "done"))
    assert _text(browser, "#done").startswith("triggered by alice: slot ")
    assert browser.current_url == base + "/jobs/%252E%252E"

    # A server at its cap of live streams: the page still loads, and says it is not live.
    browser.get(capped + "/jobs/tick")
    status, _, banner = _wait(
        browser, "the page to say it is not live", lambda d: (s := _live(d))[1] == "refused" and s
    )
    assert status == "○ not live", status
    assert "refused this page live updates" in banner and "Reload to see changes" in banner, banner
    assert _text(browser, "h1") == "tick"
