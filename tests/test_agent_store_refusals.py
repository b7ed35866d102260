"""A running agent meets a Redis that refuses it: ``NOPERM`` after an ACL change, then ``MISCONF``.

What the operator must see (docs/operations.md, "What Redis said → what the
agent does"): one ``store_unavailable`` alert naming what Redis said and
what to do, ``quorum_cron_store_up`` 0, no ERROR line per refused call, no
traceback, no ``bad_value`` (a refused write is not a corrupt slot); and,
once the server is fixed, the store back without a restart, no slot run
twice and every run in the ledger. Before, NOPERM gave an ERROR line per
vote, sweep and heartbeat and no alert, and MISCONF gave a ``bad_value``
alert per slot (the node dropped its vote for that slot for good).
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, free_port, job_toml
from tests.test_store_refusals import _misconf, _writes

pytestmark = pytest.mark.slow


def test_refusals_are_outages_said_once_and_ended_by_themselves(tmp_path: Path) -> None:
    with EmbeddedRedis(extra_args=("--enable-protected-configs", "yes")) as server:
        c = Cluster(tmp_path, server.url, 1, namespace="refuse")
        try:
            _run(c, server)
        finally:
            c.close()


def _run(c: Cluster, server: EmbeddedRedis) -> None:
    """The test's body (its caller closes the cluster, then stops the server)."""
    admin = server.client()
    try:
        cfg = c.config(job_toml("tick", "@every 1s", c.out, overlap='"allow"'))
        port = free_port()
        node = c.start("n1", cfg, "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")
        c.wait("a run", lambda: c.lines("start", "tick"), 30)

        def store_up() -> float:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                lines = resp.read().decode().splitlines()
            return float(next(x.split()[-1] for x in lines if x.startswith("quorum_cron_store_up ")))

        def alerts(kind: str) -> list[str]:
            return [str(e["msg"]) for e in node.logged("alert", kind=kind)]

        def abstained(word: str) -> int:
            return sum(word in str(e.get("msg")) for e in node.logged("abstain"))

        # NOPERM: the ACL loses the command every script call needs.
        admin.execute_command("ACL", "SETUSER", "default", "-evalsha")
        [said] = c.wait("the NOPERM alert", lambda: alerts("store_unavailable"), 20)
        assert "NOPERM" in said and "evalsha" in said and "Least-privilege ACL" in said, said
        c.wait("3 slots abstained for NOPERM", lambda: abstained("NOPERM") >= 3 or None, 20)
        assert store_up() == 0
        assert len(alerts("store_unavailable")) == 1, alerts("store_unavailable")
        admin.execute_command("ACL", "SETUSER", "default", "+evalsha")
        c.wait("the store back", lambda: node.logged("store", msg="store reachable again"), 20)
        back = int(time.time() * 1000)
        c.wait("a run after NOPERM", lambda: [x for x in c.lines("start", "tick") if x.slot > back], 20)
        assert store_up() == 1

        # MISCONF: the server's RDB save failed; it holds every write back.
        old_dir = _misconf(admin)
        c.wait(
            "the MISCONF alert",
            lambda: [a for a in alerts("store_unavailable") if "MISCONF" in a and "RDB" in a],
            20,
        )
        c.wait("3 slots abstained for MISCONF", lambda: abstained("MISCONF") >= 3 or None, 20)
        admin.config_set("dir", old_dir)
        admin.bgsave()
        c.wait("writes accepted again", lambda: _writes(admin) or None, 20)
        fixed = int(time.time() * 1000)
        c.wait("a run after MISCONF", lambda: [x for x in c.lines("start", "tick") if x.slot > fixed], 20)
    finally:
        admin.close()
        c.stop()
    assert c.nodes["n1"].proc.returncode == 0
    # Said as outages: no bad value, no ERROR line per refused call, no traceback.
    assert not node.logged("alert", kind="bad_value"), node.logged("alert", kind="bad_value")[:3]
    errors = [e for e in node.events if e.get("level") == "error"]
    assert not errors, errors[:5]
    assert not [t for t in node.text if "Traceback" in t], node.text[-20:]
    # No slot ran twice, and every run is in the ledger.
    started = [x.slot for x in c.lines("start", "tick")]
    assert len(started) == len(set(started)), started
    ledger = c.wait(
        "every run in the ledger",
        lambda: c.ledger("tick") if set(started) <= set(c.ledger("tick")) else None,
        20,
    )
    assert {ledger[s].state.value for s in started} == {"succeeded"}


def test_an_acl_refusing_the_scripts_at_start_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """At start the same NOPERM is a configuration to fix, not an outage to wait out forever."""
    with EmbeddedRedis() as server:
        admin = server.client()
        admin.execute_command("ACL", "SETUSER", "default", "-evalsha")
        c = Cluster(tmp_path, server.url, 1, namespace="acl-start")
        try:
            node = c.start("n1", c.config(job_toml("tick", "@every 1s", c.out)))
            assert node.proc.wait(timeout=30) == 1, c.describe()
            [line] = c.wait("its error line", lambda: [t for t in node.text if t.startswith("error: ")], 5)
            assert "NOPERM" in line and "Least-privilege ACL" in line, line
            assert not [t for t in node.text if "Traceback" in t], node.text
            assert not node.logged("alert"), node.events
        finally:
            c.close()
            admin.close()
