"""A one-off command whose store call fails says once which store (its URL, password masked) and
what failed, in one line.

The line repeated the URL ("cannot read the store at redis://:***@h:p/0: redis at
redis://h:p/0 unavailable during time: Error 111 connecting to h:p. Connection refused."): the
second time without its user, and with the store layer's internal operation ("during time",
"during ledgers") that the operator never asked for. Real servers: a port where nothing
listens (a bound socket that never listens: refused, and no one else can take the port), a
server that accepts and at once closes every connection (one that vanishes), and a
redis-server with a password.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from redis import exceptions as redis_errors

from quorum_cron.cli import main
from quorum_cron.errors import StoreError
from quorum_cron.store.connect import store_failure
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.options import StoreOptions, open_store
from tests.store_lines import PASSWORD, locked_server, unlistened_port

COMMANDS = (
    (["status"], "cannot read the store at"),
    (["history"], "cannot read the store at"),
    (["pause", "a", "--reason", "disk"], "cannot pause 'a' through the store at"),
    (["resume", "a"], "cannot resume 'a' through the store at"),
    (["trigger", "a"], "cannot trigger 'a' through the store at"),
    (["members", "show"], "cannot read the membership from the store at"),
)


def config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nname = "lines"\nmembers = ["n1"]\nredis_url = "{url}"\n'
        '\n[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


def error_line(args: list[str], path: Path) -> str:
    result = CliRunner().invoke(main, [*args, "--config", str(path)])
    assert result.exit_code == 1, (args, result.output)
    assert result.stdout == "" and isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)
    return lines[0]


@pytest.fixture
def refused_port() -> Iterator[int]:
    with unlistened_port() as port:
        yield port


@pytest.fixture
def closing_port() -> Iterator[int]:
    """A listener that accepts every connection and closes it at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)  # (wakes the accept: close alone does not)
        listener.close()
        thread.join(5)


@pytest.mark.parametrize(("args", "says"), COMMANDS)
def test_nothing_listening(tmp_path: Path, refused_port: int, args: list[str], says: str) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{refused_port}/0"
    line = error_line(args, config(tmp_path, url))
    assert line == f"error: {says} redis://:***@127.0.0.1:{refused_port}/0: unavailable: Connection refused"


@pytest.mark.parametrize(("args", "says"), COMMANDS)
def test_a_server_that_closes_every_connection(
    tmp_path: Path, closing_port: int, args: list[str], says: str
) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{closing_port}/0"
    line = error_line(args, config(tmp_path, url))
    shown = f"redis://:***@127.0.0.1:{closing_port}/0"
    assert line.startswith(f"error: {says} {shown}: unavailable: "), line
    assert line.count(f"127.0.0.1:{closing_port}") == 1 and "during" not in line and PASSWORD not in line


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[EmbeddedRedis]:
    with locked_server() as server:
        yield server


@pytest.mark.parametrize(("args", "says"), COMMANDS)
def test_a_refused_password_names_the_store_once(
    tmp_path: Path, locked_redis: EmbeddedRedis, args: list[str], says: str
) -> None:
    line = error_line(args, config(tmp_path, f"redis://:wrong-{PASSWORD}@127.0.0.1:{locked_redis.port}/0"))
    shown = f"redis://:***@127.0.0.1:{locked_redis.port}/0"
    assert line.startswith(f"error: {says} {shown}: {REFUSED}"), line
    assert line.count(f"127.0.0.1:{locked_redis.port}") == 1 and PASSWORD not in line


@pytest.mark.parametrize(
    ("raised", "line_says"),
    [
        (
            redis_errors.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
            "out of memory: command not allowed when used memory > 'maxmemory'.",
        ),
        (
            redis_errors.ReadOnlyError("You can't write against a read only replica."),
            "refuses writes: READONLY: ",
        ),
        (redis_errors.NoPermissionError("this user has no permissions to run the 'eval' command"), "NOPERM "),
        (redis_errors.ResponseError("ERR unknown command"), "error reply: ERR unknown command"),
        (TypeError("bad"), "unexpected reply: bad"),
        # (A reply may quote a value read from Redis, such as a job's output: masked like any other line.)
        (
            ValueError("bad value 'redis://:hunter2@db:6379/0'"),
            "unexpected reply: bad value 'redis://:***@db:6379/0'",
        ),
        (
            redis_errors.ResponseError("ERR bad redis://:hunter2@db/0"),
            "error reply: ERR bad redis://:***@db/0",
        ),
        (
            redis_errors.ConnectionError("Error while reading from h:1 : (104, 'Connection reset by peer')"),
            "unavailable: while reading: Connection reset by peer",
        ),
        (
            redis_errors.ConnectionError("Error 111 connecting to h:1. Connection refused."),
            "unavailable: Connection refused",
        ),
        (
            redis_errors.TimeoutError("Timeout reading from h:1"),
            "unavailable: no reply within the socket timeout",
        ),
    ],
)
def test_each_store_failure_is_said_without_the_store_line_around_it(
    redis_server: EmbeddedRedis, raised: Exception, line_says: str
) -> None:
    """The store's boundary turns each redis-py error into its line (the address, the operation:
    the agent's log) and, apart, what failed (a command's line, which names the store itself)."""
    store = open_store(redis_server.url, StoreOptions("lines"))
    try:
        with pytest.raises(StoreError) as info, store._boundary("vote"):  # (where errors are translated)
            raise raised
    finally:
        store.close()
    assert str(info.value).startswith(
        ("redis at ", "out of memory: redis at ", "unexpected reply from redis at ")
    )
    assert " vote" in str(info.value)
    said = store_failure(info.value)
    assert said.startswith(line_says) and "vote" not in said and "redis at" not in said, said


@pytest.mark.parametrize(
    ("raised", "line_says"),
    [
        (StoreError("cluster slot map unusable: x"), "cluster slot map unusable: x"),
        (RuntimeError("no master at redis://:pw@h:1/0"), "no master at redis://:***@h:1/0"),
    ],
)
def test_any_other_error_is_its_first_line_redacted(raised: Exception, line_says: str) -> None:
    assert store_failure(raised) == line_says


REFUSED = "the password or user was refused"
"""How the store says a refused password (its line asks the agent "changed under a running agent?")."""


def test_the_running_agent_hint_is_the_agents_alone(tmp_path: Path, locked_redis: EmbeddedRedis) -> None:
    """A one-off command never authenticated before: "changed under a running agent?" is not its case.

    The store's own line, which the agent logs, keeps it.
    """
    url = f"redis://:wrong-{PASSWORD}@127.0.0.1:{locked_redis.port}/0"
    store = open_store(url, StoreOptions("lines"))
    try:
        with pytest.raises(StoreError) as info:
            store.time_ms()
    finally:
        store.close()
    assert "changed under a running agent?" in str(info.value)
    path = config(tmp_path, url)
    shown = f"redis://:***@127.0.0.1:{locked_redis.port}/0"
    why = f"{REFUSED} (wrong or disabled; expected the password, and user, of that server in the URL)"
    for args, says in (
        *COMMANDS,
        (["members", "add", "n2", "--reason", "grow"], "cannot change the membership through the store at"),
    ):
        assert error_line(args, path) == f"error: {says} {shown}: {why}", args
