"""What an agent tells people, from real agent processes: alerts, metrics, clock abstention.

* the alert hook delivers to a command (a script appending its arguments,
  ``QUORUM_CRON_ALERT`` and the JSON document from stdin to a file) and to
  a URL (an ``http.server`` on a free loopback port, in this process);
* ``--metrics-port`` serves Prometheus text with slot outcomes and the
  fire-delay histogram;
* an agent whose clock runs 5 s ahead (libfaketime) abstains, logs the
  measured offset, and ``status`` shows its clock as not trusted, and why.

Every wait is bounded; nothing sleeps and hopes.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.commands.status import status
from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, free_port, job_toml, now_ms
from tests.tools import faketime_env

pytestmark = pytest.mark.slow

FAKETIME_ENV = {
    # Only the wall clock is off: leases, timeouts and asyncio keep the real monotonic clock.
    "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    # libfaketime's "monotonic fix" mangles pthread_cond_timedwait on CPython's GIL
    # (a monotonic condvar): thread hand-offs then stall for up to ~1 s, the
    # heartbeat misses its TTL and the node drops out of the member list.
    # (time.sleep fails with EINVAL under the wrapper either way; neither the
    # agent nor redis-py — without a retry backoff — calls it.)
    "FAKETIME_FORCE_MONOTONIC_FIX": "0",
}

OFFSET_5S = r"offset -(4[5-9]|5[0-4])\d\d ms"
"""How a verdict's reason states a measured offset of about -5 s (reference - local)."""

ALERT_SCRIPT = """#!/bin/sh
# Appends one line per alert: kind, arguments, document (tab-separated).
out="$1"
doc=$(cat)
printf '%s\\t%s\\t%s\\n' "$QUORUM_CRON_ALERT" "$*" "$doc" >> "$out"
"""


class AlertSink:
    """A loopback HTTP server that keeps every POSTed alert document."""

    def __init__(self) -> None:
        self.docs: list[dict[str, object]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                sink.docs.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def kinds(self, node: str) -> list[str]:
        return [str(d["kind"]) for d in list(self.docs) if d["node"] == node]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink() -> Iterator[AlertSink]:
    s = AlertSink()
    yield s
    s.close()


def command_alerts(path: Path, node: str) -> list[tuple[str, str, dict[str, object]]]:
    """(kind, arguments, document) per alert the command received from ``node``."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        kind, args, doc = line.split("\t", 2)
        parsed = json.loads(doc)
        if parsed["node"] == node:
            out.append((kind, args, parsed))
    return out


def _slot(doc: dict[str, object]) -> int:
    """The ``slot`` field of a ``slot_missed`` alert document (its job checked: ``tick``)."""
    fields = doc["fields"]
    assert isinstance(fields, dict) and fields["job"] == "tick", doc
    return int(fields["slot"])


def scrape(port: int) -> dict[str, float]:
    """The metrics page as ``{'name{labels}': value}``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def test_alerts_reach_the_command_and_the_url_and_metrics_are_served(
    tmp_path: Path, redis_server: EmbeddedRedis, sink: AlertSink
) -> None:
    script = tmp_path / "alert.sh"
    script.write_text(ALERT_SCRIPT)
    script.chmod(0o755)
    alerts_file = tmp_path / "alerts.log"
    c = Cluster(tmp_path, redis_server.url, 3, namespace="alerts", cluster_opts='start_timeout = "1s"')
    try:
        cfg = c.config(
            job_toml("tick", "@every 1s", c.out, starting_deadline='"1s"'),
            extra=f'alert_command = ["{script}", "{alerts_file}"]\nalert_url = "{sink.url}"\n',
        )
        port = free_port()
        c.start("n1", cfg, "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")
        c.start("n2", cfg)
        c.wait_joined(["n1", "n2"])

        def ran_on_n1() -> dict[str, float] | None:
            m = scrape(port)
            ran = m.get('quorum_cron_slots_total{job="tick",outcome="succeeded"}', 0) > 0
            timed = m.get('quorum_cron_fire_delay_seconds_count{job="tick"}', 0) > 0
            return m if ran and timed and m.get("quorum_cron_members_alive") == 2 else None

        m = c.wait("n1 to run a slot, count it and see n2", ran_on_n1, 20, poll=0.3)
        assert m['quorum_cron_fire_delay_seconds_bucket{job="tick",le="+Inf"}'] >= 1
        assert m["quorum_cron_clock_trusted"] == 1 and m["quorum_cron_store_up"] == 1

        # One of three left: the quorum is lost and due slots are missed.
        c.signal("n2", signal.SIGKILL)
        c.nodes["n2"].proc.wait(10)
        for kind in ("quorum_lost", "slot_missed"):
            c.wait(f"{kind} at the URL", lambda k=kind: k in sink.kinds("n1") or None, 15)  # type: ignore[misc]
            c.wait(
                f"{kind} at the command",
                lambda k=kind: [a for a in command_alerts(alerts_file, "n1") if a[0] == k],  # type: ignore[misc]
                15,
            )
        lost = next(a for a in command_alerts(alerts_file, "n1") if a[0] == "quorum_lost")
        assert lost[1] == str(alerts_file)  # the command got its arguments
        assert lost[2]["message"] == "quorum lost: 1 of 3 alive, need 2" and lost[2]["fields"] == {
            "alive": "1"
        }

        # Every slot_missed alert is about a slot the ledger holds missed. Which slot is the first
        # one is not the test's to pick: n2 may have voted for a slot just before the SIGKILL and
        # n1 too late for it (voters ('n2',)), or n1 may have voted alone. A slot missed for want
        # of n2 (the ledger shows n1's vote only) must come, and be alerted at both ends.
        def alerted_alone() -> int | None:
            ledger = c.ledger("tick")
            at_url = {_slot(d) for d in list(sink.docs) if d["kind"] == "slot_missed" and d["node"] == "n1"}
            for slot in sorted(at_url):
                entry = ledger.get(slot)
                assert entry is not None and entry.state == SlotState.MISSED, (slot, entry)
                if entry.voters == ("n1",):
                    return slot
            return None

        slot = c.wait("a slot missed with n1's vote alone, alerted at the URL", alerted_alone, 15)
        c.wait(
            f"slot {slot} missed, at the command",
            lambda: [
                a for a in command_alerts(alerts_file, "n1") if a[0] == "slot_missed" and _slot(a[2]) == slot
            ],
            15,
        )

        c.start("n2", cfg)
        c.wait("quorum_restored at the URL", lambda: "quorum_restored" in sink.kinds("n1") or None, 15)
        c.wait(
            "quorum_restored at the command",
            lambda: [a for a in command_alerts(alerts_file, "n1") if a[0] == "quorum_restored"],
            15,
        )
        assert scrape(port)['quorum_cron_slots_total{job="tick",outcome="missed"}'] >= 1
        assert all(code == 0 for code in c.stop().values()), c.describe()
    finally:
        c.close()


def test_an_agent_with_a_clock_5s_ahead_abstains_and_status_says_why(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    fake = faketime_env("+5s")
    c = Cluster(tmp_path, redis_server.url, 3, namespace="skewed")
    try:
        cfg = c.config(job_toml("tick", "@every 1s", c.out, starting_deadline='"1s"'))
        c.start("n1", cfg)
        c.start("n2", cfg)
        c.start("fast", cfg, env={**FAKETIME_ENV, **fake})
        c.wait_joined(["n1", "n2", "fast"])
        # The store (Redis TIME) is the reference: the node measures about -5 s and does not vote.
        trust = c.wait("the fast node's trust verdict", lambda: c.nodes["fast"].logged("trust"), 10)[0]
        assert trust["trusted"] is False, trust
        offset = trust["offset_ms"]
        assert isinstance(offset, float) and -5500 < offset < -4500, trust
        assert re.search(rf"not voting: clock not trusted: store TIME .*{OFFSET_5S}", str(trust["msg"]))
        abstain = c.wait("an abstention", lambda: c.nodes["fast"].logged("abstain", cause="clock"), 10)[0]
        assert "clock not trusted" in str(abstain["reason"]), abstain
        # The two others still form a quorum; the fast node votes for nothing.
        t0 = now_ms()
        c.wait("runs without the fast node", lambda: len([t for t in c.succeeded("tick") if t > t0]) >= 2, 15)
        assert all(x.node in ("n1", "n2") for x in c.lines("start"))
        assert all("fast" not in e.voters for e in c.ledger("tick").values())

        res = CliRunner().invoke(status, ["--config", str(cfg), "--json"])
        assert res.exit_code == 0, res.output
        members = {m["node"]: m for m in json.loads(res.output)["members"]}
        fast = members["fast"]
        assert (fast["clock"], fast["voting"]) == ("not trusted", "no"), fast
        assert -5500 < float(fast["clock_offset_ms"]) < -4500, fast
        assert re.search(rf"store TIME .*{OFFSET_5S}", fast["clock_reason"]), fast
        assert members["n1"]["clock"] == "trusted"
        res = CliRunner().invoke(status, ["--config", str(cfg)], env={"COLUMNS": "250"})
        assert re.search(r"fast .* not trusted", res.output), res.output
        assert "3 of 3 alive, need 2 (2 voting)" in res.output, res.output
        assert all(code == 0 for code in c.stop().values()), c.describe()
    finally:
        c.close()
