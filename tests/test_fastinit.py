"""quorum_cron.core.fastinit: the faster __init__ builds exactly what the dataclass's own would."""

from __future__ import annotations

import dataclasses

import pytest

from quorum_cron.core.actions import Now
from quorum_cron.core.fastinit import fast_frozen_init
from quorum_cron.core.model import SlotState, SlotView, TransitionResult, VoteRequest, VoteResult, VoteStatus


@dataclasses.dataclass(frozen=True, slots=True)
class _Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


_Fast = fast_frozen_init(
    dataclasses.make_dataclass(
        "_Fast", [("a", int), ("b", str, "b"), ("c", tuple, ())], frozen=True, slots=True
    )
)


def test_the_fast_init_equals_the_dataclass_init_positional_keyword_and_defaults() -> None:
    for args, kwargs in (
        ((1,), {}),
        ((1, "x"), {}),
        ((1,), {"c": (2,)}),
        ((), {"a": 3, "b": "y", "c": (4,)}),
    ):
        plain, fast = _Plain(*args, **kwargs), _Fast(*args, **kwargs)
        assert dataclasses.astuple(plain) == dataclasses.astuple(fast)
    with pytest.raises(TypeError):
        _Fast()  # a field without default is still required
    with pytest.raises(TypeError):
        _Fast(1, d=2)  # and unknown ones still refused


def test_the_value_classes_stay_frozen_and_compare_as_before() -> None:
    view = SlotView("j", 1, SlotState.RUNNING, votes=(("n1", "h"),), token=3, runs=1)
    assert view == SlotView(
        job="j", fire_ms=1, state=SlotState.RUNNING, votes=(("n1", "h"),), token=3, runs=1
    )
    assert view.executor == "" and view.lease_until_ms == 0  # defaults
    assert dataclasses.replace(view, token=4).token == 4
    assert hash(Now(1, 2)) == hash(Now(wall_ms=1, mono_ms=2))
    for value in (view, Now(1, 2), VoteResult(VoteStatus.RECORDED, view, 5), TransitionResult(True, view, 5)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, None)
    req = VoteRequest("j", 1, "n1", "h", 2, 250, 5000)
    assert req == VoteRequest(
        job="j", fire_ms=1, node="n1", spec_hash="h", quorum=2, max_skew_ms=250, deadline_ms=5000
    )


def test_classes_it_cannot_speed_up_are_refused_at_decoration() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, Factory, Post):
        with pytest.raises(TypeError, match="fast_frozen_init"):
            fast_frozen_init(cls)
