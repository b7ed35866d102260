"""The web dashboard in a real headless Chromium, against 3 real agents on a real redis-server.

What a person sees: the jobs page lists the jobs with their outcomes; a
slot page names its voters and token; job output with markup shows as
text; trigger is refused without an admin token and works with one (the
run appears live on the job page, and the audit entry on the audit page
kept open in a second window, neither reloaded); with two of three
nodes killed the quorum is lost and the job's timeline shows the missed
slot. Screenshots of each page go to the test's temp directory
(``<tmp>/screens``).

The browser is Debian's ``chromium`` driven by its ``chromedriver``
through selenium, with networking features off and a fresh profile, so
nothing is downloaded. Each wait is bounded and waits for what the page
shows, not for time to pass.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, free_port, job_toml, now_ms
from tests.tools import require_tool

pytestmark = pytest.mark.slow

TOKEN = "alice:correct-horse-battery-staple"
XSS = '<script>document.title="pwned"</script><img src=x onerror="document.title=1">'
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str) -> tuple[int, bytes]:
    try:
        with _NO_PROXY.open(url, timeout=5) as resp:
            return resp.status, resp.read()
    except OSError:
        return 0, b""


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[webdriver.Chrome]:
    chromium = require_tool("chromium")
    driver_path = require_tool("chromedriver")
    monkeypatch.setenv("SE_OFFLINE", "true")  # selenium must not look for drivers on the network
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def cluster(tmp_path: Path, redis_server: EmbeddedRedis) -> Iterator[Cluster]:
    c = Cluster(tmp_path, redis_server.url, 3, namespace="webui", cluster_opts='start_timeout = "1s"')
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def web(tmp_path: Path, cluster: Cluster) -> Iterator[tuple[str, Path]]:
    """``quorum-cron web`` with an admin token file; yields its base URL and the config."""
    script = tmp_path / "xss.sh"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' '{XSS}'\nexit 3\n")
    script.chmod(0o755)
    jobs = job_toml("tick", "@every 1s", cluster.out, overlap='"allow"')
    jobs += job_toml("manual", "0 0 1 1 *", cluster.out, secs=2)
    jobs += f'[[jobs]]\nname = "xss"\nschedule = "@every 3s"\ncommand = ["{script}"]\n'
    config = cluster.config(jobs)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    tokens.chmod(0o600)
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quorum_cron",
            "web",
            "--config",
            str(config),
            "--bind",
            f"127.0.0.1:{port}",
            "--admin-token-file",
            str(tokens),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, NO_PROXY="127.0.0.1,localhost"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        cluster.wait(
            "the web server to answer",
            lambda: _get(base + "/healthz")[0] == 200 or proc.poll() is not None,
            30,
        )
        assert proc.poll() is None, proc.communicate()[1].decode()
        yield base, config
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait(driver: webdriver.Chrome, what: str, check: Any, timeout: float = 20) -> Any:
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: check(d))
    except WebDriverException as exc:
        raise AssertionError(f"timed out waiting for {what} on {driver.current_url}") from exc


def _css(driver: webdriver.Chrome, selector: str) -> list[Any]:
    return list(driver.find_elements(By.CSS_SELECTOR, selector))


# The pages replace their content when the store changes (that is the point), so an
# element found a moment ago may be gone: read texts and attributes in one script.
_READ = (
    "return Array.from(document.querySelectorAll(arguments[0]))"
    ".map(e => arguments[1] ? e.getAttribute(arguments[1]) : e.innerText.trim());"
)


def _texts(driver: webdriver.Chrome, selector: str) -> list[str]:
    return list(driver.execute_script(_READ, selector, None))


def _text(driver: webdriver.Chrome, selector: str) -> str:
    texts = _texts(driver, selector)
    assert len(texts) == 1, (selector, texts)
    return texts[0]


def _attrs(driver: webdriver.Chrome, selector: str, attr: str) -> list[str]:
    return [a or "" for a in driver.execute_script(_READ, selector, attr)]


def _refreshed_by(driver: webdriver.Chrome) -> str:
    """What brought the page's content last (live.js: ``open`` on connecting, else the event's name)."""
    return str(driver.execute_script("return document.body.getAttribute('data-refreshed-by') || '';"))


def test_dashboard_in_a_real_browser(
    tmp_path: Path, cluster: Cluster, web: tuple[str, Path], browser: webdriver.Chrome
) -> None:
    base, config = web
    shots = tmp_path / "screens"
    shots.mkdir()
    agent_web = free_port()
    cluster.start("n1", config, "--web-port", str(agent_web))
    cluster.start("n2", config)
    cluster.start("n3", config)
    cluster.wait_joined(["n1", "n2", "n3"])
    store = cluster.store

    def ledger_has(job: str, state: SlotState) -> bool:
        return any(e.state == state for e in store.ledger(job, 20))

    cluster.wait(
        "tick to succeed and xss to fail",
        lambda: ledger_has("tick", SlotState.SUCCEEDED) and ledger_has("xss", SlotState.FAILED),
        30,
    )

    # The agent's --web-port serves the same API.
    status, body = _get(f"http://127.0.0.1:{agent_web}/api/cluster")
    assert status == 200 and json.loads(body)["alive"] == 3

    # Jobs: every job with its last outcome.
    browser.get(base + "/")
    rows = dict(
        zip(_attrs(browser, "tr.job", "data-job"), _attrs(browser, "tr.job", "data-state"), strict=True)
    )
    assert rows == {"tick": "succeeded", "manual": "", "xss": "failed"}, rows
    _wait(
        browser,
        "the live stream to connect",
        lambda d: (
            "live" in d.find_element(By.ID, "live-status").text
            and d.find_element(By.ID, "live-status").get_attribute("class") == "live-on"
        ),
    )
    browser.save_screenshot(str(shots / "jobs.png"))

    # Cluster: three members, quorum fine.
    browser.get(base + "/cluster")
    assert len(_texts(browser, "tr.member")) == 3
    assert "3 of 3 alive, need 2" in _text(browser, "#health")
    browser.save_screenshot(str(shots / "cluster.png"))

    # Slot: its voters and its token.
    entry = next(e for e in store.ledger("tick", 20) if e.state == SlotState.SUCCEEDED)
    browser.get(f"{base}/jobs/tick/slots/{entry.fire_ms}")
    assert set(_attrs(browser, "tr.vote", "data-node")) == set(entry.voters)
    assert len(entry.voters) >= 2
    assert _text(browser, "#token") == str(entry.token)
    assert _text(browser, "#executor").startswith(entry.executor)
    browser.save_screenshot(str(shots / "slot.png"))

    # Job output with markup is text, on the job page and on the slot page.
    browser.get(base + "/jobs/xss")
    details = _texts(browser, "tr.entry[data-state=failed] td.detail code")
    assert details and all(XSS in d for d in details), details
    assert not _css(browser, "main script, main img")
    assert browser.title.startswith("xss ·"), browser.title
    failed = next(e for e in store.ledger("xss", 5) if e.state == SlotState.FAILED)
    browser.get(f"{base}/jobs/xss/slots/{failed.fire_ms}")
    assert XSS in _text(browser, "#detail")
    assert not _css(browser, "main script, main img") and "pwned" not in browser.title

    # Trigger without a token: refused, nothing reaches the store.
    browser.get(base + "/jobs/manual")
    browser.find_element(By.ID, "trigger").click()
    message = _wait(browser, "the refusal", lambda d: d.find_elements(By.ID, "message"))[0].text
    assert "refused" in message and "log in" in message, message
    assert store.audit("manual", 10) == [] and store.triggers("manual", 0) == []

    # Log in with the token; keep the audit page open in a second window, never reloaded.
    browser.get(base + "/login")
    browser.save_screenshot(str(shots / "login.png"))
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "login").click()
    _wait(browser, "the login", lambda d: d.find_elements(By.ID, "user"))
    browser.get(base + "/jobs/manual")
    job_window = browser.current_window_handle
    browser.switch_to.new_window("window")
    browser.get(base + "/audit")
    audit_window = browser.current_window_handle
    # (The membership record's own entries — created from the config, seats filled — are there from
    # the start; no operator action is.)
    assert [t for t in _texts(browser, "#audit tr.audit") if "\tmembership\t" not in t] == []
    # Connected, and its refresh on connecting done: the next refresh is an event's.
    _wait(browser, "the audit page's stream to connect", lambda d: _refreshed_by(d) == "open")
    browser.execute_script("window.__sameDocument = true;")

    # Trigger in the first window: the audit entry is there, the run appears live.
    browser.switch_to.window(job_window)
    browser.find_element(By.ID, "trigger").click()
    _wait(browser, "the trigger to be done", lambda d: d.find_elements(By.ID, "done"))
    browser.execute_script("window.__sameDocument = true;")
    by = _texts(browser, "#job-audit tr.audit[data-action=trigger] td.by")
    assert by == ["alice"], by
    [audit] = store.audit("manual", 10)
    assert audit.by == "alice" and audit.action == "trigger"
    assert not _css(browser, "tr.entry"), "the run finished before the page loaded: cannot see it appear live"
    _wait(browser, "the triggered run to appear", lambda d: d.find_elements(By.CSS_SELECTOR, "tr.entry"), 30)
    assert _attrs(browser, "tr.entry", "data-state") == ["succeeded"]
    assert _attrs(browser, "tr.entry", "data-slot") == [audit.detail]  # the trigger's fire time
    assert browser.execute_script("return window.__sameDocument === true;"), "the page was reloaded"
    refreshed_by = _refreshed_by(browser)
    assert refreshed_by == "ledger", refreshed_by  # the ledger entry's event brought it, not a reload
    browser.save_screenshot(str(shots / "job-triggered.png"))
    # The audit page, open since before the trigger, shows the action without a reload.
    browser.switch_to.window(audit_window)
    by = _wait(
        browser,
        "the audit entry to appear live",
        lambda d: _texts(d, "#audit tr.audit[data-action=trigger] td.by"),
    )
    assert by == ["alice"], by
    assert browser.execute_script("return window.__sameDocument === true;"), "the audit page was reloaded"
    refreshed_by = _refreshed_by(browser)
    assert refreshed_by == "audit", refreshed_by  # the audit entry's event brought it
    browser.save_screenshot(str(shots / "audit.png"))
    browser.close()
    browser.switch_to.window(job_window)

    # Kill two of three: quorum lost; the open timeline shows the missed slot when it is decided.
    browser.get(base + "/jobs/tick")
    browser.execute_script("window.__sameDocument = true;")
    killed_at = now_ms()
    for name in ("n2", "n3"):
        cluster.signal(name, signal.SIGKILL)
    slot = _wait(
        browser,
        "a missed slot in the timeline",
        lambda d: [
            t for t in _attrs(d, "#timeline a.cell[data-status=missed]", "data-slot") if int(t) > killed_at
        ],
        30,
    )[0]
    assert browser.execute_script("return window.__sameDocument === true;")
    entry_missed = cluster.ledger("tick")[int(slot)]
    assert entry_missed.state == SlotState.MISSED
    reason = _texts(browser, f"#slots tr.slot[data-slot='{slot}'] td.reason")
    assert entry_missed.reason and reason == [entry_missed.reason], reason
    browser.save_screenshot(str(shots / "job-missed.png"))
    cluster.wait("n2 and n3 to drop out of the members", lambda: len(store.members()) == 1, 30)
    browser.get(base + "/cluster")
    assert "QUORUM LOST" in _text(browser, "#health")
    browser.save_screenshot(str(shots / "cluster-quorum-lost.png"))
    # The agent serving --web-port still stops cleanly.
    assert cluster.stop(["n1"]) == {"n1": 0}, cluster.describe()
    assert sorted(p.name for p in shots.iterdir()) == [
        "audit.png",
        "cluster-quorum-lost.png",
        "cluster.png",
        "job-missed.png",
        "job-triggered.png",
        "jobs.png",
        "login.png",
        "slot.png",
    ]
