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


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("redis+sentinel://admin:Xk9q/Zz@sent1/mymaster", "Xk9q"),
        ("redis+cluster://:Xk9q#Zz@node1", "Xk9q"),
        ("redis+sentinel://admin:4242/mymaster@127.0.0.1", "4242"),
        ("redis+sentinel://admin:Xk9q?Zz@s1/m", "Xk9q"),
        ("rediss+cluster://u:a/b#c?d@n1:7000,n2", "a/b"),
        ("redis://:Xk9q/Zz@r/0", "Xk9q"),
    ],
)
def test_a_raw_delimiter_in_the_password_is_refused_in_every_form_without_the_password(
    url: str, secret: str
) -> None:
    """Sentinel and Cluster URLs cut the userinfo at the first ``/`` or ``#``, while the redaction
    masks up to the last ``@``: the password was printed as a "path" or a "host", or accepted as
    the host name ``admin:4242`` and printed by every later store error. Every form now reads the
    userinfo up to the last ``@`` and refuses a raw ``/ ? #`` there, as the standalone form did."""
    with pytest.raises(ConfigError) as info:
        parse_redis_url(url)
    message = str(info.value)
    assert "percent-encoded: %2F %3F %23" in message and "\n" not in message, message
    assert secret not in message and "Zz" not in message, message


def test_sentinel_and_cluster_passwords_read_up_to_the_last_at_and_percent_decoded() -> None:
    t = parse_redis_url("redis+sentinel://admin:Xk9q%2FZz%23q%3F@s1,s2/mymaster/2")
    assert (t.username, t.password, t.master, t.db) == ("admin", "Xk9q/Zz#q?", "mymaster", 2)
    assert t.hosts == (("s1", 26379), ("s2", 26379)) and "Xk9q" not in t.shown + repr(t)
    t = parse_redis_url("redis+cluster://:p@ss@n1:7000")
    assert (t.password, t.hosts) == ("p@ss", (("n1", 7000),)) and "p@ss" not in t.shown
    # A ',' in a standalone password is no host list: the hosts are read after the last '@'.
    assert parse_redis_url("redis://:a,b@r/0").shown == "redis://:***@r/0"


@pytest.mark.parametrize(
    ("url", "part"),
    [
        ("redis://r/²", "database '²' is not a number"),
        ("redis://r/0?db=²", "database '²' is not a number"),
        ("redis://r/0?d%62=x", "database 'x' is not a number"),
        ("redis://r/٣", "database '٣' is not a number"),
        ("redis+sentinel://s1:²/m", "has port '²' for 's1'"),
        ("redis+sentinel://s1/m/²", "has path '/m/²'"),
        ("redis+sentinel://s1/m/٣", "has path '/m/٣'"),
        ("redis+cluster://n1:7000,n2:¹²", "has port '¹²' for 'n2'"),
    ],
)
def test_a_port_or_db_of_non_ascii_digits_is_one_line(url: str, part: str) -> None:
    """``'²'.isdigit()`` is true and ``int('²')`` raises: a traceback from ``validate`` and
    ``status``, or a URL that passed validation and failed when the client was built. Ports and
    DB numbers are ASCII decimals (and ``'٣'``, which ``int`` reads as 3, is not one either)."""
    with pytest.raises(ConfigError) as info:
        parse_redis_url(url)
    assert part in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert redis_url_problem(url) is not None


def test_a_value_smuggled_into_a_parameter_name_is_refused_without_being_shown() -> None:
    """``sentinel_pass%77ord%3DTop=1`` decodes to the name ``sentinel_password=Top``: the unknown
    parameter message would have printed that name, value and all."""
    with pytest.raises(ConfigError) as info:
        parse_redis_url("redis+sentinel://s1/m?sentinel_pass%77ord%3DTopSecret=1")
    assert "encoded '='" in str(info.value) and "TopSecret" not in str(info.value)
