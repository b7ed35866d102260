"""RedisStore through a real Sentinel set whose sentinels and data servers each require a password.

The Sentinel URL carries two sets of credentials (quorum_cron/store/urls.py):
the userinfo for the master and replicas, ``sentinel_password`` for the
sentinels. These tests prove both are used against real servers that refuse
anything else, and that a wrong sentinel password is one line that names the
problem and shows neither password.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from redis.backoff import NoBackoff
from redis.retry import Retry

from quorum_cron.commands.status import status
from quorum_cron.core.model import VoteRequest, VoteStatus
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.embedded.topology import EmbeddedSentinel
from quorum_cron.store.redis import RedisStore
from tests.agent_cluster import Cluster, job_toml
from tests.topologies import own_sentinel

pytestmark = pytest.mark.slow

DATA_PW = "data-s3cret"
SENTINEL_PW = "sentinel-s3cret"
WRONG_PW = "not-the-s3cret"
NO_RETRY = Retry(NoBackoff(), 0)
"""redis-py retries a refused password as a connection error, with backoff: not what is tested here."""


@pytest.fixture(scope="module")
def sentinels() -> Iterator[EmbeddedSentinel]:
    with own_sentinel(password=DATA_PW, sentinel_password=SENTINEL_PW) as s:
        yield s


def test_the_fixture_servers_refuse_a_client_without_their_password(sentinels: EmbeddedSentinel) -> None:
    """Otherwise the tests below would pass without any credentials being used."""
    for server in (sentinels.sentinels[0], sentinels.master()):
        c = server.client(password=None, retry=NO_RETRY)
        try:
            with pytest.raises(redis.AuthenticationError):
                c.ping()
        finally:
            c.close()
    # The data password is not the sentinels'.
    c = sentinels.sentinels[0].client(password=DATA_PW, retry=NO_RETRY)
    try:
        with pytest.raises(redis.AuthenticationError):
            c.ping()
    finally:
        c.close()


def test_a_sentinel_url_with_separate_sentinel_credentials_votes_and_commits(
    sentinels: EmbeddedSentinel,
) -> None:
    url = sentinels.url
    assert f":{DATA_PW}@" in url and f"sentinel_password={SENTINEL_PW}" in url
    s = RedisStore.from_url(url, "sa", socket_timeout=5.0)
    try:
        assert DATA_PW not in repr(s) and SENTINEL_PW not in repr(s)
        fire = s.time_ms() // 1000 * 1000
        [first] = s.vote([VoteRequest("tick", fire, "n1", "h", 2, 5_000, 60_000)])
        [second] = s.vote([VoteRequest("tick", fire, "n2", "h", 2, 5_000, 60_000)])
        assert (first.status, second.status) == (VoteStatus.RECORDED, VoteStatus.COMMITTED), second
        assert s.server_info()["role"] == "master"
    finally:
        s.close()
    # The commit is on the master the sentinels name, read there with the data password only.
    c = sentinels.master().client(decode_responses=True)
    try:
        assert c.exists("qc:{sa:tick}:meta") == 1
    finally:
        c.close()


@pytest.mark.parametrize("sentinel_password", [WRONG_PW, None], ids=["wrong", "missing"])
def test_a_wrong_sentinel_password_is_one_line_naming_it_without_the_passwords(
    sentinels: EmbeddedSentinel, sentinel_password: str | None
) -> None:
    url = sentinels.url.partition("?")[0]
    if sentinel_password is not None:
        url += f"?sentinel_password={sentinel_password}"
    s = RedisStore.from_url(url, "sa", socket_timeout=5.0)
    try:
        with pytest.raises(StoreError) as info:
            s.vote([VoteRequest("tick", 1_700_000_000_000, "n1", "h", 2, 5_000, 60_000)])
    finally:
        s.close()
    message = str(info.value)
    # Refused, not "unavailable": waiting would not help, the URL must change.
    assert not isinstance(info.value, StoreUnavailable), message
    assert "\n" not in message and len(message) < 1000, message
    assert "sentinel refused the sentinel credentials" in message and "sentinel_password" in message
    for port in (x.port for x in sentinels.sentinels):
        assert f"127.0.0.1:{port}" in message, message
    for secret in (DATA_PW, SENTINEL_PW, WRONG_PW):
        assert secret not in message, message


def test_a_command_with_a_wrong_sentinel_password_prints_one_line_without_it(
    sentinels: EmbeddedSentinel, tmp_path: Path
) -> None:
    c = Cluster(tmp_path, sentinels.url, 3, namespace="cli")
    cfg = str(c.config(job_toml("nightly", "0 3 * * *", c.out)))
    bad = sentinels.url.replace(f"sentinel_password={SENTINEL_PW}", f"sentinel_password={WRONG_PW}")
    try:
        out = CliRunner().invoke(status, ["--config", cfg, "--redis", bad])
        assert out.exit_code == 1, out.output
        lines = [ln for ln in out.output.splitlines() if ln]
        assert len(lines) == 1 and "refused the sentinel credentials" in lines[0], out.output
        for secret in (DATA_PW, SENTINEL_PW, WRONG_PW):
            assert secret not in out.output, out.output
    finally:
        c.close()
