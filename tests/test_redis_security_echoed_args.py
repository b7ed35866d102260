"""A server that does not know ``AUTH`` echoes the password: no line quotes it.

A Redis with ``AUTH`` renamed away (or a proxy that never offered it, nor RESP3's ``HELLO``)
answers the client's ``AUTH <password>`` with ``unknown command 'AUTH',
with args beginning with: '<password>'``. Every face quoted that reply:
``status``, ``check-store``, the agent's start-up check, the dashboard's
API. The echoed arguments are masked where a reply's text enters the
library (``redact_text``, used by the store's error boundary and the
server probe).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.commands.check_store import check_store
from quorum_cron.commands.status import status
from quorum_cron.errors import StoreError
from quorum_cron.redact import redact_text
from quorum_cron.store.connect import fail_fast
from quorum_cron.store.embedded.single import EmbeddedRedis
from quorum_cron.store.redis import RedisStore
from quorum_cron.store.server import preflight

SECRET = "Pa55-echoed"


def test_the_arguments_redis_echoes_are_masked_to_the_end_of_their_line() -> None:
    said = "unknown command 'AUTH', with args beginning with: 'hunter2' "
    assert redact_text(said) == "unknown command 'AUTH', with args beginning with: ***"
    two = f"a: {said}\nb: ERR unknown command `AUTH`, with args beginning with: `x`, `y`, \nc"
    assert redact_text(two) == (
        "a: unknown command 'AUTH', with args beginning with: ***\n"
        "b: ERR unknown command `AUTH`, with args beginning with: ***\nc"
    )
    assert redact_text("redis://:pw@h/0 with args beginning with: 'pw'") == (
        "redis://:***@h/0 with args beginning with: ***"
    )


@pytest.fixture(scope="module")
def no_auth() -> Iterator[EmbeddedRedis]:
    # (HELLO too: RESP3's HELLO carries the credentials itself; without it redis-py sends AUTH.)
    with EmbeddedRedis(
        extra_args=("--rename-command", "AUTH", "", "--rename-command", "HELLO", "")
    ) as server:
        yield server


def _url(server: EmbeddedRedis) -> str:
    return f"redis://:{SECRET}@127.0.0.1:{server.port}/0"


def test_the_store_boundary_and_the_probe_never_quote_the_password(no_auth: EmbeddedRedis) -> None:
    store = RedisStore.from_url(_url(no_auth), "echo", **fail_fast())
    try:
        with pytest.raises(StoreError) as caught:
            store.members()
        said = f"{caught.value} {caught.value.failure}"
        assert "with args beginning with: ***" in said and SECRET not in said, said
        check = preflight(store, "shown")
        assert check.refusal is not None and SECRET not in check.refusal, check
    finally:
        store.close()


def test_status_and_check_store_never_print_the_password(no_auth: EmbeddedRedis, tmp_path: Path) -> None:
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'[cluster]\nname = "echo"\nmembers = ["n1"]\nredis_url = "{_url(no_auth)}"\n')
    runner = CliRunner()
    for command, args in ((status, ["--config", str(cfg)]), (check_store, [_url(no_auth)])):
        res = runner.invoke(command, args, env={"COLUMNS": "250"})
        assert res.exit_code == 1, res.output
        assert "with args beginning with: ***" in res.output, res.output
        assert SECRET not in res.output, res.output
