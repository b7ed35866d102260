"""Agent processes against signals, escaped job children and their own environment (issue 11)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, due, free_port, job_toml, never_during_the_test

pytestmark = pytest.mark.slow


@pytest.fixture
def made(tmp_path: Path, redis_server: EmbeddedRedis) -> Iterator[list[Cluster]]:
    out: list[Cluster] = []
    yield out
    for c in out:
        c.close()


def _kill_marked(marker: str) -> None:
    """SIGKILL the leftover processes whose command line holds ``marker`` (made unique per test)."""
    ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    for line in ps.splitlines():
        pid, _, args = line.strip().partition(" ")
        if marker in args.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def test_sighup_stops_gracefully_and_records_the_running_job(
    tmp_path: Path, redis_server: EmbeddedRedis, made: list[Cluster]
) -> None:
    c = Cluster(tmp_path, redis_server.url, 1, namespace="hup", cluster_opts='lease = "2s"')
    made.append(c)
    cfg = c.config(job_toml("slow", "@every 1s", c.out, secs=2, overlap='"allow"'))
    c.start("n1", cfg)
    c.wait("the job to start", lambda: c.lines("start", "slow"), 30)
    # SIGHUP reloads (agent/reload.py): a changed [cluster] setting (the lease) is applied by this
    # graceful stop (a changed job would be swapped live: tests/test_agent_reload.py).
    c.cluster_opts = 'lease = "3s"'
    c.config(job_toml("slow", "@every 1s", c.out, secs=2, overlap='"allow"'))
    c.signal("n1", signal.SIGHUP)
    assert c.nodes["n1"].proc.wait(timeout=20) == 0, c.describe()
    assert c.nodes["n1"].logged("left"), c.describe()
    started = {x.slot: x.token for x in c.lines("start", "slow")}
    assert {x.slot for x in c.lines("end", "slow")} == set(started)
    ledger = c.ledger("slow")
    for slot, token in started.items():
        assert ledger[slot].state == SlotState.SUCCEEDED and ledger[slot].token == token, ledger.get(slot)
    assert [m.node for m in c.store.members()] == []


def test_job_environment_has_no_agent_secrets(
    tmp_path: Path, redis_server: EmbeddedRedis, made: list[Cluster]
) -> None:
    c = Cluster(tmp_path, redis_server.url, 1, namespace="envs")
    made.append(c)
    dump = tmp_path / "env.txt"
    jobs = '[[jobs]]\nname = "dump"\nschedule = "@every 1s"\nenv = { MINE = "kept" }\n'
    jobs += f"shell = 'env > {dump}.tmp; mv {dump}.tmp {dump}'\n"
    cfg = c.config(jobs)
    secret_url = redis_server.url.replace("redis://", "redis://default:not-the-password@")
    c.start(
        "n1",
        cfg,
        env={
            "QUORUM_CRON_REDIS_URL": redis_server.url,
            "AGENT_ONLY_SECRET": "canary-71",
            "X_URL": secret_url,
        },
    )
    c.wait("the job's environment dump", lambda: dump.exists() or None, 30)
    text = dump.read_text()
    assert "QUORUM_CRON_REDIS_URL" not in text and "canary-71" not in text and "not-the-password" not in text
    assert "MINE=kept" in text and "QUORUM_CRON_TOKEN=" in text and "PATH=" in text
    assert c.stop()["n1"] == 0


def test_escaped_child_holds_neither_the_run_nor_the_shutdown(
    tmp_path: Path, redis_server: EmbeddedRedis, made: list[Cluster]
) -> None:
    marker = f"{100 + (os.getpid() % 1000) / 1000:.3f}"  # a sleep duration no other process uses
    c = Cluster(tmp_path, redis_server.url, 1, namespace="escape")
    made.append(c)
    ran = tmp_path / "ran"
    jobs = (
        '[[jobs]]\nname = "bg"\nschedule = "@every 2s"\ntimeout = "60s"\n'
        f"shell = 'setsid sleep {marker} & echo started; echo x >> {ran}'\n"
    )
    cfg = c.config(jobs)
    try:
        c.start("n1", cfg)
        c.wait("a finished run", lambda: [e for e in c.nodes["n1"].events if e.get("event") == "finish"], 30)
        done = [e for e in c.ledger("bg").values() if e.state == SlotState.SUCCEEDED]
        assert done and "exit 0" in done[0].detail, c.ledger("bg")
        assert done[0].finished_ms - done[0].started_ms < 10_000
        t0 = time.monotonic()
        assert c.stop(timeout=20)["n1"] == 0, c.describe()
        assert time.monotonic() - t0 < 15
    finally:
        _kill_marked(marker)


def test_demo_cleans_up_on_sigterm(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "quorum_cron", "demo", "--nodes", "2", "--duration", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        seen = b""
        while b"nodes joined" not in seen:
            assert time.monotonic() < deadline, seen
            line = proc.stdout.readline()
            assert line, seen
            seen += line
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=40)
        assert proc.returncode != 0
        assert b"Traceback" not in rest, rest
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert list(tmp_path.iterdir()) == []  # the temp dir with its config is gone
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert [line for line in ps.splitlines() if str(tmp_path) in line] == []


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one Prometheus sample (``name{labels}``), 0 when absent."""
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.split(" ", 1)[0] == want)


def test_garbage_in_redis_is_reported_and_harms_only_its_own_job(
    tmp_path: Path, redis_server: EmbeddedRedis, made: list[Cluster]
) -> None:
    c = Cluster(tmp_path, redis_server.url, 1, namespace="junk")
    made.append(c)
    allow = '"allow"'
    cfg = c.config("".join(job_toml(j, "@every 1s", c.out, overlap=allow) for j in ("a", "b")))
    port = free_port()
    node = c.start("n1", cfg, "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")
    c.wait("b to run", lambda: c.lines("start", "b"), 30)
    client = redis_server.client(retry=None, socket_timeout=5.0)
    try:
        # A member entry nested 100k deep with a 60k-character tail, and a's token counter corrupt.
        client.hset("qc:{junk}:members", "evil", "[" * 100_000 + "x" * 60_000)
        client.hset("qc:{junk:a}:meta", "tk", "abc")
        injected = max(x.slot for x in c.lines("start"))
        seen_before = {m.node: m.seen_ms for m in c.store.members()}["n1"]
        c.wait(
            "three more runs of b",
            lambda: len([x for x in c.lines("end", "b") if x.slot > injected + 1000]) >= 3 or None,
            30,
        )
        alerts = node.logged("alert", kind="bad_value")
        # Read on every heartbeat (several since), alerted once.
        evil = [e for e in alerts if "member 'evil'" in str(e.get("msg"))]
        assert len(evil) == 1, c.describe()
        assert any("token counter" in str(e.get("msg")) for e in alerts), c.describe()
        text = _metrics(port)
        # The member once (however many heartbeats read it); the token counter with a's slots.
        assert _sample(text, "quorum_cron_bad_values_total", kind="member") == 1, text
        assert _sample(text, "quorum_cron_bad_values_total", kind="slot") >= 1, text
        # Heartbeats go on (the node is still a live member, seen again since).
        assert {m.node: m.seen_ms for m in c.store.members()}["n1"] > seen_before
        # b missed no slot after the garbage: every slot due up to its last run ran and is recorded.
        last = max(x.slot for x in c.lines("end", "b"))
        expected = due(1000, injected + 1000, last)
        c.wait(
            "b's ledger to cover every slot due since the garbage",
            lambda: set(expected) <= set(c.ledger("b")) or None,
            10,
        )
        ledger = c.ledger("b")
        assert {t: ledger[t].state for t in expected} == dict.fromkeys(expected, SlotState.SUCCEEDED), ledger
        # Job a never ran on a guessed token after its counter went bad.
        late_a = [x for x in c.lines("start", "a") if x.slot > injected + 1000]
        assert late_a == [], late_a
        assert node.proc.poll() is None
    finally:
        client.close()
    assert c.stop()["n1"] == 0, c.describe()


def _trigger(cfg: Path) -> None:
    """``quorum-cron trigger t``: stored, audited, published."""
    res = subprocess.run(
        [sys.executable, "-m", "quorum_cron", "trigger", "t", "--config", str(cfg), "--by", "tester"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr


def test_raw_trigger_notice_without_stored_audited_trigger_is_ignored(
    tmp_path: Path, redis_server: EmbeddedRedis, made: list[Cluster]
) -> None:
    c = Cluster(tmp_path, redis_server.url, 1, namespace="rawtrig")
    made.append(c)
    cfg = c.config(job_toml("t", never_during_the_test(), c.out))
    client = redis_server.client(retry=None, socket_timeout=5.0)
    trigger_set, channel = "qc:{rawtrig:t}:triggers", "qc:{rawtrig}:trigger"

    def real_triggers() -> list[int]:
        return sorted(int(e.detail) for e in c.store.audit("t", 50) if e.action.value == "trigger")

    try:
        # Catch-up path: before the node starts, a trigger ZADDed to the set
        # with no audit entry, then a real one; the node reads both at start.
        forged_set = c.store.time_ms() - 2_000
        client.zadd(trigger_set, {str(forged_set): forged_set})
        _trigger(cfg)
        [real_1] = real_triggers()
        node = c.start("n1", cfg)
        caught = c.wait("the catch-up read", lambda: node.logged("trigger", job="t", slot=real_1), 30)
        assert str(caught[0].get("how", "")).startswith("catch-up"), caught
        subscribed = lambda: dict(client.pubsub_numsub(channel)).get(channel.encode())  # noqa: E731
        c.wait("the agent's subscription", subscribed, 20)
        # Live path: a bare PUBLISH, and a trigger ZADDed to the set with no audit entry, then published.
        forged_notice = c.store.time_ms()
        client.publish(channel, f"t\n{forged_notice}")
        forged_live = forged_notice + 1
        client.zadd(trigger_set, {str(forged_live): forged_live})
        client.publish(channel, f"t\n{forged_live}")
        for fire in (forged_notice, forged_live):
            c.wait(
                f"the notice {fire} to be refused", lambda f=fire: node.logged("trigger", job="t", slot=f), 20
            )
            assert "ignored" in str(node.logged("trigger", job="t", slot=fire)[0]["msg"])
        # A real trigger (stored, audited, then published) runs.
        _trigger(cfg)
        real = real_triggers()
        assert len(real) == 2 and real[0] == real_1, real
        c.wait("both real runs to end", lambda: len(c.lines("end", "t")) >= 2 or None, 20)
        c.wait("their ledger entries", lambda: set(real) <= set(c.ledger("t")) or None, 10)
    finally:
        client.close()
    assert c.stop()["n1"] == 0
    # Exactly the real triggers ran, once each; no forged slot started or was voted for.
    forged = {forged_set, forged_notice, forged_live}
    started = [x.slot for x in c.lines("start", "t")]
    assert sorted(started) == real, (started, real)
    assert not forged & set(started), (forged, started)
    assert sorted(c.ledger("t")) == real
    voted = [e for e in node.events if e.get("event") == "trigger" and "voting" in str(e.get("msg"))]
    assert sorted(int(str(e["slot"])) for e in voted) == real, voted


def test_out_of_memory_is_its_own_state_reported_once(tmp_path: Path, made: list[Cluster]) -> None:
    import urllib.request

    from tests.agent_cluster import free_port

    with EmbeddedRedis() as server:
        c = Cluster(tmp_path, server.url, 1, namespace="oom")
        made.append(c)
        cfg = c.config(job_toml("tick", "@every 1s", c.out, overlap='"allow"'))
        port = free_port()
        node = c.start("n1", cfg, "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")
        c.wait("a run", lambda: c.lines("start", "tick"), 30)
        admin = server.client()

        def scrape() -> list[str]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                return resp.read().decode().splitlines()

        def metric(name: str) -> float:
            return float(next(line.split()[-1] for line in scrape() if line.startswith(name + " ")))

        def store_errors() -> float:
            return sum(
                float(line.split()[-1])
                for line in scrape()
                if line.startswith("quorum_cron_store_errors_total{")
            )

        try:
            admin.set("ballast", "x" * 2_000_000)
            admin.config_set("maxmemory", "1mb")  # below what is used: every write is refused now
            with pytest.raises(redis.exceptions.OutOfMemoryError):
                admin.set("probe", "1")
            c.wait("the store_oom alert", lambda: node.logged("alert", kind="store_oom"), 20)
            assert metric("quorum_cron_store_oom") == 1 and metric("quorum_cron_store_up") == 0
            # Quiet while refused: over the next 8 refused store calls (each retry of the node's
            # writes, at its backoff), a handful of lines, not one or more per refusal.
            before, errors = len(node.events) + len(node.text), store_errors()
            c.wait("8 more refused store calls", lambda: store_errors() >= errors + 8 or None, 30)
            assert len(node.events) + len(node.text) - before < 25, json.dumps(node.events[-40:])[:6000]
            assert len(node.logged("alert", kind="store_oom")) == 1
        finally:
            admin.config_set("maxmemory", "0")
            admin.delete("ballast")
            admin.close()
        c.wait("the store back", lambda: node.logged("store", msg="store reachable again"), 20)
        assert metric("quorum_cron_store_oom") == 0 and metric("quorum_cron_store_up") == 1
        assert c.stop()["n1"] == 0
