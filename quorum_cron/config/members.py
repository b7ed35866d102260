"""The ``[cluster] members`` rules: which lists of node ids a config may propose, as one-line problems.

Shared by :class:`~quorum_cron.config.settings.ClusterConfig` (code) and the file
reader (:mod:`quorum_cron.config.file`), so both refuse the same values with
the same line. A node id has the rules of a namespace or job name (the
store's record checks them again: ``quorum_cron.core.model.Configuration``).
"""

from __future__ import annotations

from quorum_cron.config.values import _MAX_SIZE, _name_problem, _type_name

__all__ = ["members_problem", "size_vs_members"]


def members_problem(members: object) -> str | None:
    """Why ``members`` is not a list of 1-100 distinct node ids, or None (one line, naming the value)."""
    if not isinstance(members, (list, tuple)):
        return f"{members!r} is {_type_name(members)} (expected an array of node ids such as ['a', 'b', 'c'])"
    if not members or len(members) > _MAX_SIZE:
        return f"has {len(members)} node ids (expected 1-{_MAX_SIZE}, such as ['a', 'b', 'c'])"
    seen: set[str] = set()
    for item in members:
        problem = _name_problem(item, "node id")
        if problem is not None:
            return problem
        if item in seen:
            return f"{item!r} is listed twice (expected distinct node ids)"
        seen.add(item)
    return None


def size_vs_members(size: int, count: int) -> str:
    """The one line for a ``size`` that contradicts the number of ``members``."""
    return (
        f"{size!r} disagrees with the {count} members listed "
        f"(expected {count}, or leave size out: it is then the number of members)"
    )
