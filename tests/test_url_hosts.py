"""Redis URL hosts: a host no resolver can look up is one line at ``validate``, not an endless outage.

``redis://my host:6379/0`` passed ``validate`` and the agent, which then
retried it as an unreachable server for ever. Every form (standalone,
Sentinel, Cluster) now checks its hosts as the client will resolve them,
while the forms the docs list (unix sockets, IPv6 in brackets, ``rediss``,
host lists, internationalised names) stay accepted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.cli import main
from quorum_cron.errors import ConfigError
from quorum_cron.store.urls import parse_redis_url, redis_url_problem

_LABEL_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_é")
LABELS = st.text(_LABEL_CHARS, min_size=1, max_size=63)
HOSTS = st.lists(LABELS, min_size=1, max_size=4).map(".".join)
"""Names a resolver can look up: letters (an accented one too), digits, '-', '_'; labels 1-63 long."""

BAD_CHARS = st.one_of(
    st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp", "Co"]),
    st.sampled_from(' "<>\\^`{|}'),
)
"""No host holds these: whitespace, controls, invisible format characters, what RFC 3986 never
allows in a URL. (``/ ? # @ , [ ]`` are URL syntax: they end or split the host, tested apart.)"""


def _forms(userinfo: str, host: str) -> list[str]:
    return [
        f"redis://{userinfo}{host}:6379/0",
        f"rediss://{userinfo}{host}/2",
        f"redis+sentinel://{userinfo}s1:26379,{host}:26380/mymaster/0",
        f"redis+cluster://{userinfo}n1:7000,{host}:7001",
        f"rediss+cluster://{userinfo}{host}",
    ]


@given(HOSTS)
def test_every_host_name_a_resolver_can_look_up_is_accepted_in_every_form(host: str) -> None:
    for url in _forms(":hunter2@", host):
        assert redis_url_problem(url) is None, url
    assert (host, 7001) in parse_redis_url(f"redis+cluster://n1:7000,{host}:7001").hosts


@given(HOSTS.filter(lambda h: len(h) >= 2), BAD_CHARS, st.data())
def test_a_host_holding_a_space_or_control_character_is_one_line_naming_it(
    host: str, bad: str, data: st.DataObject
) -> None:
    at = data.draw(st.integers(1, len(host) - 1), label="at")  # inside: a host list strips its ends
    host = host[:at] + bad + host[at:]
    for url in _forms(":hunter2@", host):
        with pytest.raises(ConfigError) as info:
            parse_redis_url(url)
        message = str(info.value)
        assert f"which holds {bad!r}" in message, (url, message)
        assert "expected a host name, an IPv4 address or an IPv6 address in brackets" in message
        assert "\n" not in message and "hunter2" not in message, message
        assert message.isprintable(), message


@pytest.mark.parametrize(
    ("url", "part"),
    [
        ("redis://:hunter2@my host:6379/0", "has host 'my host', which holds ' '"),
        ("redis://my\thost/0", "has host 'my\\thost', which holds '\\t'"),
        ("redis://h%20x/0", "has host 'h x', which holds ' '"),  # redis-py decodes the host
        ("redis://h:6379:7/0", "has host 'h:6379', which holds ':'"),
        ("redis+cluster://n1,h%2Dx", "has host 'h%2Dx', which holds '%'"),  # the cluster client does not
        ("redis://a..b:6379/0", "has host 'a..b' with an empty label"),
        ("redis+sentinel://.s1/m", "has host '.s1' with an empty label"),
        (f"redis://{'x' * 64}/0", "with an empty label or one over 63 characters"),
        ("redis://[zz]:6379/0", "has host '[zz]', not an IPv6 address in brackets"),
        ("redis://[::1]x:6379/0", "has host '[::1]x:6379', not [IPV6]:PORT"),
        ("redis+cluster://[::1 ]:7000", "has host '[::1 ]', not an IPv6 address in brackets"),
        ("redis://:hunter2@:6379/0", "has no host"),
        ("redis://:hunter2@[]:6379/0", "has no host"),
        ("redis+cluster://:hunter2@:7000", "has host ':7000' without a name"),
    ],
)
def test_a_host_that_cannot_be_valid_is_refused_with_one_line(url: str, part: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_redis_url(url)
    message = str(info.value)
    assert part in message and "\n" not in message and "hunter2" not in message, message


@pytest.mark.parametrize(
    "url",
    [
        "unix:///run/redis.sock",
        "unix:///run/my redis/redis.sock?db=1",  # a socket path may hold a space
        "unix://:pw@/run/redis.sock?db=2",
        "redis://[::1]:6379/0",
        "redis://[fe80::1%25eth0]:6379/0",
        "rediss://u:pw@redis.internal.:6380/0",  # a fully qualified name's trailing dot
        "redis://10.0.0.7:6379/0",
        "redis://redis_1/0",
        "redis://xn--h-bga/0",
        "redis://hé/0",
        "redis://h%2Dx/0",
        "redis+sentinel://s1:26379, s2:26379,[::1]:26381/mymaster/3",
        "redis+cluster://:pw@n1:7000, n2:7001,[2001:db8::1]:7002",
    ],
)
def test_the_documented_forms_stay_accepted(url: str) -> None:
    assert redis_url_problem(url) is None, redis_url_problem(url)


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "hosts.toml"
    path.write_text(
        f'[cluster]\nname = "hosts"\nsize = 1\nredis_url = "{url}"\n\n'
        '[[jobs]]\nname = "a"\nschedule = "@hourly"\ncommand = ["true"]\n'
    )
    return path


def test_validate_refuses_a_host_with_a_space_in_one_line_without_the_password(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(_config(tmp_path, "redis://:hunter2@my host:6379/0"))])
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.splitlines()
    assert "redis_url" in line and "'redis://:***@my host:6379/0' has host 'my host', which holds ' '" in line
    assert "hunter2" not in result.output


def test_the_agent_refuses_a_host_with_a_space_from_the_environment(tmp_path: Path) -> None:
    """Before, the agent took the URL and waited the "outage" out for ever (a timeout here)."""
    config = _config(tmp_path, "redis://127.0.0.1:1/0")
    env = {
        **os.environ,
        "QUORUM_CRON_REDIS_URL": "redis://:hunter2@my host:6379/0",
        "QUORUM_CRON_NODE_ID": "n1",
    }
    res = subprocess.run(
        [sys.executable, "-m", "quorum_cron", "agent", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 1, res
    (line,) = res.stderr.splitlines()
    assert line.startswith("error: ") and "has host 'my host', which holds ' '" in line, line
    assert "hunter2" not in res.stdout + res.stderr


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("redis+sentinel://[fe80::1%25eth0]:26379/mymaster", "fe80::1%eth0"),
        ("redis+cluster://n1:7000,[fe80::2%25en0]:7001", "fe80::2%en0"),
        ("redis+cluster://[2001:db8::1]:7002", "2001:db8::1"),
    ],
)
def test_a_zone_id_in_a_sentinel_or_cluster_host_reaches_the_client_decoded(url: str, host: str) -> None:
    """RFC 6874 writes a zone id as ``%25``: the client must get ``fe80::1%eth0``, as redis-py's
    own parser gives it for a ``redis://`` URL, not a zone named ``25eth0``."""
    assert parse_redis_url(url).hosts[-1][0] == host
