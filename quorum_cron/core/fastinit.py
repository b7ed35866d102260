"""A faster ``__init__`` for the frozen, slotted value classes built on every store reply.

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__``, which goes through the generic attribute machinery
once per field: a 17-field :class:`~quorum_cron.core.model.SlotView` costs about
2.6 µs to build, and the simulator builds one for every vote, start,
renew and finish. :func:`fast_frozen_init` replaces that ``__init__`` with
one that writes each slot through its member descriptor: the same
signature, defaults and result (``tests/test_fastinit.py`` checks it), about
40% less time. The class stays frozen: assigning an attribute afterwards
still raises ``FrozenInstanceError``.

Only for frozen dataclasses with ``slots=True``, plain defaults (no
``default_factory``) and no ``__post_init__``; anything else is refused at
import time. Pure: imports only the standard library.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_frozen_init"]

T = TypeVar("T")


def fast_frozen_init(cls: type[T]) -> type[T]:
    """Give the frozen slotted dataclass ``cls`` a faster ``__init__`` (a class decorator)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"fast_frozen_init: {cls.__name__} is not a frozen dataclass with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_frozen_init: {cls.__name__} has a __post_init__, which would be skipped")
    namespace: dict[str, Any] = {}
    args: list[str] = []
    body: list[str] = []
    target: Any = cls  # (a dataclass, checked above)
    for f in dataclasses.fields(target):
        if f.default_factory is not dataclasses.MISSING or not f.init or f.kw_only:
            raise TypeError(f"fast_frozen_init: {cls.__name__}.{f.name} is not a plain positional field")
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            args.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)  # noqa: B010 - replacing a method on purpose
    return cls
