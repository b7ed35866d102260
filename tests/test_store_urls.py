"""Redis URL forms: standalone, Sentinel and Cluster parse; a bad one is one line naming the bad part."""

from __future__ import annotations

import pytest

from quorum_cron.commands.common import redis_url_problem as common_url_problem
from quorum_cron.errors import ConfigError
from quorum_cron.store.connect import open_client, options_problem
from quorum_cron.store.urls import parse_redis_url, redis_url_problem


@pytest.mark.parametrize(
    ("url", "part"),
    [
        ("redis://:hunter2@r:6379/0?socket_timout=2", "has parameter 'socket_timout'"),
        ("unix://:hunter2@/run/redis.sock?db=0&foo=bar", "has parameter 'foo'"),
        ("rediss://:hunter2@r:6379/0?socket_timeout=abc", "has a parameter redis-py refuses"),
    ],
)
def test_a_query_parameter_redis_py_has_no_option_for_is_refused_before_a_connection(
    url: str, part: str
) -> None:
    """redis-py hands each query parameter to its connection class: a typo passed the parse and
    failed the first connection with a traceback. ``validate`` and every command say it in one
    line (the configuration itself parses URLs without a client)."""
    assert redis_url_problem(url) is None  # (the parse alone: no client loaded)
    problem = options_problem(parse_redis_url(url))
    assert problem is not None and part in problem and "hunter2" not in problem and "\n" not in problem
    assert common_url_problem(url) == problem
    with pytest.raises(ConfigError, match=part):
        open_client(parse_redis_url(url))


def test_connection_options_redis_py_knows_are_accepted() -> None:
    for url in ("redis://r/0?socket_timeout=2&health_check_interval=5", "unix:///run/r.sock?db=1&protocol=3"):
        assert options_problem(parse_redis_url(url)) is None, url


def test_standalone_forms_parse() -> None:
    for url in ("redis://r:6379/0", "rediss://u:pw@r/2", "unix:///run/redis.sock?db=1"):
        assert parse_redis_url(url).mode == "standalone"


def test_a_standalone_url_names_its_user_and_takes_an_at_sign_in_the_password() -> None:
    """The user is what check-store names when the server will not say who it is (no
    +acl|whoami); an ``@`` in the password is read as redis-py reads it, the host after the last."""
    assert parse_redis_url("redis://quorum-cron:p@ss@r:6379/0").username == "quorum-cron"
    assert parse_redis_url("rediss://a%40b:pw@r/2").username == "a@b"
    assert parse_redis_url("redis://:pw@r/0").username is None
    assert parse_redis_url("redis://r/0").username is None


def test_sentinel_url_names_sentinels_master_db_and_both_credentials() -> None:
    t = parse_redis_url(
        "redis+sentinel://app:s3cret@s1:26380,s2,[::1]:26381/mymaster/3"
        "?sentinel_username=sen&sentinel_password=pw%21"
    )
    assert t.mode == "sentinel"
    assert t.hosts == (("s1", 26380), ("s2", 26379), ("::1", 26381))
    assert (t.master, t.db, t.username, t.password) == ("mymaster", 3, "app", "s3cret")
    assert (t.sentinel_username, t.sentinel_password) == ("sen", "pw!")
    assert "s3cret" not in repr(t) and "s3cret" not in t.shown


def test_cluster_url_names_seed_nodes() -> None:
    t = parse_redis_url("redis+cluster://:pw@n1:7000,n2:7001,n3")
    assert t.mode == "cluster" and t.hosts == (("n1", 7000), ("n2", 7001), ("n3", 6379))
    assert t.password == "pw" and not t.tls
    assert parse_redis_url("rediss+cluster://n1:7000/0").tls


@pytest.mark.parametrize(
    ("url", "part"),
    [
        ("http://:hunter2@r:6379", "has scheme 'http'"),
        ("redis://r:1,r2:2/0", "names several hosts"),
        ("redis+sentinel://s1:26379", "has no master name"),
        ("redis+sentinel://s1:26379/m/x", "has path '/m/x'"),
        ("redis+sentinel://s1:26379/m?password=hunter2", "has parameter 'password'"),
        ("redis+sentinel://s1:99999/m", "has port '99999' for 's1'"),
        ("redis+sentinel://s1,,s2/m", "has an empty host"),
        ("redis+cluster://n1:7000/2", "names database '2'"),
        ("redis+cluster://n1:7000?db=1", "has parameter 'db'"),
        ("redis+cluster://:hunter2@", "has no hosts"),
        ("redis+cluster://n1:x", "has port 'x' for 'n1'"),
        ("redis://:hunter2@r:0/0", "has port 0 (expected 1-65535"),
    ],
)
def test_a_bad_url_is_one_line_naming_the_bad_part_without_the_password(url: str, part: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_redis_url(url)
    message = str(info.value)
    assert part in message and "\n" not in message and "hunter2" not in message, message
    assert redis_url_problem(url) is not None
