"""``[cluster] members = [...]`` and ``size = N``: what a config may propose as the membership.

The store's record is what votes are checked against; the config only
proposes the first one (and says, at start, whether it agrees). Each
refusal is one line naming the field, the value and what was expected.
"""

from __future__ import annotations

import pytest

from quorum_cron.config.file import parse_config
from quorum_cron.config.settings import AUTO, ClusterConfig, InvalidConfig
from quorum_cron.errors import ConfigError


def cluster(**fields: object) -> ClusterConfig:
    return parse_config({"cluster": {"name": "ns", **fields}}, "c.toml").cluster


def errors(**fields: object) -> tuple[str, ...]:
    with pytest.raises(InvalidConfig) as info:
        parse_config({"cluster": {"name": "ns", **fields}}, "c.toml")
    return info.value.errors


def test_members_give_the_size_and_the_majority_quorum_and_are_kept_sorted() -> None:
    c = cluster(members=["node-c", "node-a", "node-b"])
    assert (c.members, c.size, c.quorum) == (("node-a", "node-b", "node-c"), 3, 2)
    c = cluster(members=["a", "b", "c", "d", "e"], size=5, quorum=4)
    assert (c.size, c.quorum) == (5, 4)


def test_size_alone_keeps_working_and_has_no_members() -> None:
    c = cluster(size=3)
    assert (c.members, c.size, c.quorum) == ((), 3, 2)


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        (
            {"members": ["a", "b"], "size": 3},
            "c.toml: cluster: field 'size': 3 disagrees with the 2 members listed "
            "(expected 2, or leave size out: it is then the number of members)",
        ),
        (
            {"members": ["a", "b", "a"]},
            "c.toml: cluster: field 'members': 'a' is listed twice (expected distinct node ids)",
        ),
        (
            {"members": "a,b,c"},
            "c.toml: cluster: field 'members': 'a,b,c' is a string "
            "(expected an array of node ids such as ['a', 'b', 'c'])",
        ),
        (
            {"members": []},
            "c.toml: cluster: field 'members': has 0 node ids (expected 1-100, such as ['a', 'b', 'c'])",
        ),
        (
            {"members": ["a", "b c"]},
            "c.toml: cluster: field 'members': 'b c' is not a valid node id "
            "(expected 1-100 characters from A-Z a-z 0-9 _ . -)",
        ),
        (
            {"members": ["a", 7]},
            "c.toml: cluster: field 'members': 7 is an integer (expected a string)",
        ),
        (
            {"members": ["a", "b", "c"], "quorum": 1},
            "c.toml: cluster: field 'quorum': 1 is not a majority of size 3 (expected 2 to 3)",
        ),
        (
            {},
            "c.toml: cluster: field 'size': missing "
            "(expected size = N (1-100), or members = ['a', 'b', 'c'])",
        ),
    ],
)
def test_a_bad_membership_is_one_line_naming_the_value(fields: dict[str, object], line: str) -> None:
    assert errors(**fields) == (line,)


def test_too_many_members_is_refused() -> None:
    (line,) = errors(members=[f"n{i}" for i in range(101)])
    assert line == (
        "c.toml: cluster: field 'members': has 101 node ids (expected 1-100, such as ['a', 'b', 'c'])"
    )


def test_the_constructor_applies_the_same_rules_for_code() -> None:
    assert ClusterConfig("ns", AUTO, members=("b", "a")).size == 2
    with pytest.raises(ConfigError, match=r"field 'size': 3 disagrees with the 2 members"):
        ClusterConfig("ns", 3, members=("a", "b"))
    with pytest.raises(ConfigError, match=r"field 'members': 'a' is listed twice"):
        ClusterConfig("ns", AUTO, members=("a", "a"))
    with pytest.raises(ConfigError, match=r"field 'size': missing"):
        ClusterConfig("ns", AUTO)
