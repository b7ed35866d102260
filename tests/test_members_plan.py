"""``quorum-cron members`` changes computed from the operator's words: the new set, or one clear line."""

from __future__ import annotations

import pytest

from quorum_cron.commands.members_plan import PlanError, no_tolerance, parse_id_list, plan, target
from quorum_cron.core.model import Configuration

ABC = ("a", "b", "c")


@pytest.mark.parametrize(
    ("op", "args", "new"),
    [
        ("add", ("e", "d"), ("a", "b", "c", "d", "e")),
        ("remove", ("b",), ("a", "c")),
        ("replace", ("b", "b2"), ("a", "b2", "c")),
        ("set", ("c, d,e",), ("c", "d", "e")),
    ],
)
def test_each_change_gives_the_sorted_new_set(op: str, args: tuple[str, ...], new: tuple[str, ...]) -> None:
    assert plan(ABC, op, args) == new


@pytest.mark.parametrize(
    ("op", "args", "line"),
    [
        ("add", ("b",), "node 'b' is already a member (members: a, b, c)"),
        ("add", ("d", "d"), "node id 'd' is given twice (expected distinct node ids)"),
        (
            "add",
            ("d e",),
            "node id 'd e' is not valid: expected 1-100 characters from A-Z a-z 0-9 _ . -",
        ),
        ("remove", ("x",), "node 'x' is not a member (members: a, b, c)"),
        ("remove", ABC, "that would leave no member (members: a, b, c; expected at least one)"),
        ("replace", ("x", "y"), "node 'x' is not a member: nothing to replace (members: a, b, c)"),
        ("replace", ("a", "b"), "node 'b' is already a member (members: a, b, c)"),
        ("set", ("a,,b",), "'a,,b' is not a list of node ids (expected e.g. 'node-a,node-b,node-c')"),
        ("set", ("",), "'' is not a list of node ids (expected e.g. 'node-a,node-b,node-c')"),
        ("set", ("c,b,a",), "the members are already a, b, c: nothing to change"),
    ],
)
def test_a_change_that_cannot_be_made_is_one_line(op: str, args: tuple[str, ...], line: str) -> None:
    with pytest.raises(PlanError) as info:
        plan(ABC, op, args)
    assert str(info.value) == line


def test_size_mode_members_may_be_fewer_than_seats_and_a_change_names_them_all() -> None:
    assert plan(("a",), "add", ("b",)) == ("a", "b")
    assert plan((), "set", ("a,b,c",)) == ABC


def test_too_many_members_are_refused() -> None:
    with pytest.raises(PlanError, match=r"that would make 101 members \(expected at most 100\)"):
        plan([f"n{i}" for i in range(100)], "add", ("extra",))
    assert parse_id_list("x") == ("x",)


def test_the_target_keeps_a_quorum_above_a_majority_only_when_said() -> None:
    strict = Configuration.of(ABC, quorum=3)
    with pytest.raises(PlanError) as info:
        target(strict, "replace", ("c", "d"))
    assert str(info.value) == (
        "the store enforces a quorum of 3 of 3, above a majority: expected --quorum Q (2-3 for a, b, d), "
        "so that the change does not lower it unasked"
    )
    assert target(strict, "replace", ("c", "d"), quorum=3) == Configuration.of("abd", quorum=3)
    assert target(strict, "add", ("d",), quorum=3) == Configuration.of("abcd", quorum=3)
    with pytest.raises(PlanError) as info:
        target(strict, "add", ("d",), quorum=2)
    assert str(info.value) == (
        "--quorum 2 is not possible with 4 member(s): expected 3-4 "
        "(a majority of a, b, c, d up to all of them)"
    )
    # The same members with another quorum is a change; the same configuration is not.
    assert target(strict, "set", ("a,b,c",), quorum=2) == Configuration.of(ABC)
    with pytest.raises(PlanError, match=r"^the members are already a, b, c \(quorum 3 of 3\): nothing"):
        target(strict, "set", ("a,b,c",), quorum=3)
    # A majority record: a majority again, unless --quorum says otherwise.
    assert target(Configuration.of(ABC), "add", ("d",)) == Configuration.of("abcd")


def test_the_target_closes_open_seats_with_the_same_members() -> None:
    # size = 3 mode, two seats filled, the third host never came: `set a,b` is a change (3 seats -> 2).
    seated = Configuration.of("ab", size=3)
    assert target(seated, "set", ("a,b",)) == Configuration.of("ab")
    with pytest.raises(PlanError, match="nothing to change"):
        target(Configuration.of("ab"), "set", ("b,a",))


def test_only_members_whose_quorum_is_all_of_them_tolerate_no_failure() -> None:
    assert no_tolerance(Configuration.of("abc")) is None
    assert no_tolerance(Configuration.of("ab")) == (
        "warning: the new configuration a, b (quorum 2 of 2) tolerates no node failure: "
        "with any member down, no slot commits"
    )
    assert no_tolerance(Configuration.of("c")) is not None
    assert no_tolerance(Configuration.of("abc", quorum=3)) is not None
    assert no_tolerance(Configuration.of("ab", size=3)) is None  # (2 of 3: one seat may be down)
