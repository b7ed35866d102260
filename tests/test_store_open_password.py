"""A password in the store URL that the server does not check is said, once, and changes nothing else.

A URL with a password at a server without one (no ``requirepass``: its
``default`` user has ``nopass``) connected silently: redis-py 8 authenticates
with ``HELLO 3 AUTH default <password>``, which a ``nopass`` user accepts with
any password. The operator believed the store protected while anyone could
write to it. The agent (and the API's ``App``) now logs a ``store_password``
warning event at start, and every command that opens the store prints one
``warning: ...`` line on stderr; exit status and output stay as they were.
Real servers (the suite's binary, a Redis Cluster, a Sentinel set) on free
ports; passwords never appear in what is printed or logged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result

from quorum_cron.agent.logs import EVENT_LOGGER
from quorum_cron.app import App
from quorum_cron.cli import main
from quorum_cron.redact import redact_url
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.embedded.topology import EmbeddedCluster
from quorum_cron.store.options import StoreOptions, open_store
from tests.topologies import own_cluster, own_sentinel

SECRET = "s3cret-n0t-checked"
UNCHECKED = "accepts connections without a password"
ALSO_OPEN = "but also accepts connections without a password"


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedRedis]:
    """A server these tests reconfigure (requirepass, users); each test puts it back."""
    with EmbeddedRedis() as srv:
        yield srv


@pytest.fixture
def admin(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    """An admin client of ``server``; after the test: no requirepass, only the default user, no ACL LOG."""
    client = server.client()
    client.execute_command("ACL", "LOG", "RESET")
    try:
        yield client
    finally:
        client.config_set("requirepass", "")
        for user in client.acl_users():
            name = user.decode() if isinstance(user, bytes) else str(user)
            if name != "default":
                client.acl_deluser(name)
        client.close()


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """The agent configures the ``quorum_cron`` logger: put it back for the next test."""
    root = logging.getLogger("quorum_cron")
    saved = (list(root.handlers), root.level, root.propagate)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    root.propagate = saved[2]


def with_userinfo(url: str, userinfo: str) -> str:
    return url.replace("://", f"://{userinfo}@", 1) if userinfo else url


def said(url: str) -> str | None:
    """What the check says for ``url`` (on the store the agent and the commands open)."""
    from quorum_cron.store.passwords import password_not_required  # (new module: the old code lacks it)

    store = open_store(url, StoreOptions("pw"))
    try:
        return password_not_required(store, redact_url(url))
    finally:
        store.close()


def refused_in_acl_log(admin: redis.Redis) -> list[object]:
    return list(admin.acl_log())


def test_a_password_given_to_an_open_server_is_named_as_unchecked(
    server: EmbeddedRedis, admin: redis.Redis
) -> None:
    for userinfo in (f":{SECRET}", f"default:{SECRET}"):
        url = with_userinfo(server.url, userinfo)
        line = said(url)
        assert line is not None, userinfo
        assert line.startswith(f"redis at {redact_url(url)} {UNCHECKED}"), line
        assert "the password in the URL is not checked" in line and "requirepass" in line, line
        assert SECRET not in line and "***" in line, line
    assert refused_in_acl_log(admin) == []


def test_nothing_is_said_without_a_password_or_with_one_the_server_checks(
    server: EmbeddedRedis, admin: redis.Redis
) -> None:
    assert said(server.url) is None  # no password given: nothing to check
    admin.config_set("requirepass", SECRET)
    assert said(with_userinfo(server.url, f":{SECRET}")) is None
    assert said(with_userinfo(server.url, f"default:{SECRET}")) is None
    admin.execute_command("ACL", "SETUSER", "qc", "on", ">qc-pass", "~qc:*", "+@all")
    assert said(with_userinfo(server.url, "qc:qc-pass")) is None
    assert said(with_userinfo(server.url, f":wrong-{SECRET}")) is None  # refused: the preflight's to say
    assert refused_in_acl_log(admin) == []  # NOAUTH of the probe's HELLO is not logged


def test_a_user_of_its_own_is_told_the_default_user_still_lets_anyone_in(
    server: EmbeddedRedis, admin: redis.Redis
) -> None:
    """The documented least-privilege user (no ACL commands): its password is checked, the default
    user's is not; the check sends nothing that user's ACL refuses (ACL LOG stays empty)."""
    admin.execute_command(
        "ACL", "SETUSER", "quorum-cron", "on", ">qc-pass", "resetkeys", "~qc:*", "resetchannels", "&qc:*",
        "-@all", "+ping", "+info", "+time", "+type", "+evalsha", "+get", "+hget", "+hgetall",
    )  # fmt: skip
    line = said(with_userinfo(server.url, "quorum-cron:qc-pass"))
    assert line is not None
    assert f"checks the password of user 'quorum-cron' {ALSO_OPEN}" in line, line
    assert "ACL SETUSER default off" in line and "qc-pass" not in line, line
    assert refused_in_acl_log(admin) == []
    admin.execute_command("ACL", "SETUSER", "default", "off")
    try:
        assert said(with_userinfo(server.url, "quorum-cron:qc-pass")) is None
    finally:
        admin.execute_command("ACL", "SETUSER", "default", "on")


def test_an_unreachable_server_is_no_verdict() -> None:
    with EmbeddedRedis() as gone:
        url = with_userinfo(gone.url, f":{SECRET}")
    assert said(url) is None  # stopped: the check is skipped, nothing raised


def config(tmp_path: Path, url: str, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[cluster]\nname = "{name}"\nsize = 1\nredis_url = "{url}"\nntp_unreachable = "store-time"\n'
        'heartbeat = "500ms"\n\n[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), prog_name="quorum-cron")


def untimed(text: str) -> str:
    """``text`` without the times a command prints (each run is its own moment)."""
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z", "<time>", text)
    return re.sub(r"\d+(\.\d+)? (s|min|h)\b", "<duration>", text)


def warnings(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning: ")]


def test_the_commands_that_open_the_store_warn_once_and_otherwise_behave_the_same(
    tmp_path: Path, server: EmbeddedRedis, admin: redis.Redis
) -> None:
    """The same commands, in the same order, on the same (emptied) store, with and without the
    password: the same exit status and output (but for the URL they name); stderr has the one
    warning line more."""
    commands = [("status",), ("history", "a"), ("pause", "a", "--reason", "test"), ("resume", "a")]
    url = with_userinfo(server.url, f":{SECRET}")
    runs = {}
    for given in (server.url, url):
        admin.flushall()
        path = str(config(tmp_path, given, "pw-cli"))
        runs[given] = [cli(*args, "--config", path) for args in commands]
    for args, before, after in zip(commands, runs[server.url], runs[url], strict=True):
        assert after.exit_code == before.exit_code, (args, before.output, after.output)
        assert untimed(after.stdout.replace(redact_url(url), server.url)) == untimed(before.stdout), args
        assert warnings(before) == [], before.stderr
        lines = warnings(after)
        assert len(lines) == 1, (args, after.stderr)
        assert lines[0].startswith(f"warning: redis at {redact_url(url)} {UNCHECKED}"), lines[0]
        assert SECRET not in after.stderr + after.stdout
        rest = [
            ln.replace(redact_url(url), server.url) for ln in after.stderr.splitlines() if ln not in lines
        ]
        assert rest == before.stderr.splitlines(), args
    admin.config_set("requirepass", SECRET)
    checked = cli("status", "--config", str(config(tmp_path, url, "pw-cli")))  # now the server's password
    assert checked.exit_code == runs[url][0].exit_code, checked.output  # (1: no agent, no quorum)
    assert warnings(checked) == [], checked.stderr


class Kept(logging.Handler):
    """Keeps every record it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def app_events(url: str, namespace: str) -> list[logging.LogRecord]:
    """The ``store_password`` events of an ``App`` node started on ``url`` and stopped."""
    handler = Kept()
    events = logging.getLogger(EVENT_LOGGER)
    events.addHandler(handler)
    app = App(namespace=namespace, size=1, redis_url=url, node_id="n1")

    async def run() -> None:
        node = asyncio.create_task(app.serve())
        await asyncio.wait_for(app.ready(), 30)
        app.stop()
        await asyncio.wait_for(node, 30)

    try:
        asyncio.run(run())
    finally:
        events.removeHandler(handler)
    return [r for r in handler.records if getattr(r, "qc_event", None) == "store_password"]


def test_the_node_logs_one_store_password_warning_at_start(server: EmbeddedRedis, admin: redis.Redis) -> None:
    url = with_userinfo(server.url, f":{SECRET}")
    found = app_events(url, "pw-app")
    assert len(found) == 1 and found[0].levelno == logging.WARNING, found
    assert found[0].getMessage().startswith(f"redis at {redact_url(url)} {UNCHECKED}")
    assert SECRET not in found[0].getMessage()
    assert app_events(server.url, "pw-app") == []
    admin.config_set("requirepass", SECRET)
    assert app_events(url, "pw-app") == []


def test_the_agent_command_logs_it_once_and_runs(
    tmp_path: Path, server: EmbeddedRedis, admin: redis.Redis
) -> None:
    """``quorum-cron agent`` itself (in-process): one warning line on stderr, then it runs and stops."""
    path = tmp_path / "term.toml"
    path.write_text(
        '[cluster]\nname = "pw-agent"\nsize = 1\n'
        f'redis_url = "{with_userinfo(server.url, f":{SECRET}")}"\nntp_unreachable = "store-time"\n'
        'heartbeat = "500ms"\n\n[[jobs]]\nname = "stopper"\nschedule = "@every 1s"\n'
        f'command = ["sh", "-c", "kill -TERM {os.getpid()}; sleep 0.2"]\n'
    )
    result = cli("agent", "--config", str(path), "--node-id", "n1", "--grace", "20s")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if UNCHECKED in line]
    assert len(lines) == 1, result.stderr
    assert "SIGTERM received" in result.stderr and SECRET not in result.stderr


def test_a_cluster_and_a_sentinel_are_checked_on_their_data_servers(redis_cluster: EmbeddedCluster) -> None:
    """A Redis Cluster on its primaries, a Sentinel set on its master (the sentinels' password aside)."""
    cluster_url = with_userinfo(redis_cluster.url, f":{SECRET}")
    line = said(cluster_url)
    assert line is not None and line.startswith(f"redis at {redact_url(cluster_url)} {UNCHECKED}"), line
    assert said(redis_cluster.url) is None
    with own_sentinel() as open_set:
        url = with_userinfo(open_set.url, f":{SECRET}")
        line = said(url)
        assert line is not None and line.startswith(f"redis at {redact_url(url)} {UNCHECKED}"), line
        assert said(open_set.url) is None


def test_a_cluster_where_one_primary_lost_its_password_names_that_node() -> None:
    """A password set with CONFIG SET on every node and lost on one by a restart: the others refuse
    the probe (NOAUTH, which redis-py raises as a ConnectionError), and that must not hide the open
    one. The check said nothing at all: the first refusal ended it with no verdict. A cluster of
    its own, without replicas: the session's must not have a primary's password changed under its
    replication links."""
    with own_cluster(masters=3, replicas=0) as cluster:
        admins = [redis.Redis(host="127.0.0.1", port=p) for p in cluster.ports]
        try:
            for admin in admins[1:]:
                admin.config_set("requirepass", SECRET)
            line = said(with_userinfo(cluster.url, f":{SECRET}"))
            assert line is not None and f"(node 127.0.0.1:{cluster.ports[0]}) {UNCHECKED}" in line, line
        finally:
            for admin in admins:
                admin.close()
