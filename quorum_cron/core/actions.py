"""What goes in and out of the node core: its job and settings, clock readings, and actions.

:class:`~quorum_cron.core.node.NodeCore` takes :class:`Now` readings, store replies
and failures (:class:`Failure`) in, and returns actions: store actions
(carried out by :func:`quorum_cron.core.perform.perform`, answered with
``on_reply`` / ``on_failure``) and local ones (``Run``, ``RunLocal``,
``Kill``, ``Abstain``, ``Refused``). Plain frozen values; no logic.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, get_args

from quorum_cron.core.fastinit import fast_frozen_init
from quorum_cron.core.model import Delivery, Overlap, SweepParams, VoteRequest

__all__ = [
    "NOT_SENT",
    "STORE_ACTIONS",
    "Abstain",
    "Action",
    "CoreJob",
    "Failure",
    "Finish",
    "Kill",
    "NodeSettings",
    "Now",
    "ReadHighWater",
    "ReadSlots",
    "RecordMissed",
    "Refused",
    "Renew",
    "Run",
    "RunLocal",
    "ScheduleLike",
    "Start",
    "StoreAction",
    "Sweep",
    "Vote",
    "handler_name",
    "handlers",
]


class ScheduleLike(Protocol):
    """What the core needs of a schedule: fire times as UTC epoch ms."""

    def next_after(self, ms: int) -> int:
        """The first fire time strictly after ``ms``."""
        ...

    def fire_times(self, start_ms: int, end_ms: int) -> Iterator[int]:
        """Fire times ``t`` with ``start_ms < t <= end_ms``, ascending."""
        ...


@dataclass(frozen=True, slots=True)
class CoreJob:
    """The part of a job definition the protocol needs."""

    name: str
    schedule: ScheduleLike
    spec_hash: str
    deadline_ms: int
    timeout_ms: int
    overlap: Overlap = Overlap.FORBID
    delivery: Delivery = Delivery.AT_MOST_ONCE
    misfire: str = "skip"
    retries: int = 0
    """Failed runs retried this many times, each under a new token (the store decides)."""
    retry_backoff_ms: int = 0
    """The wait before the first retry (:func:`~quorum_cron.core.backoff.retry_delay_ms`)."""
    retry_backoff_max_ms: int = 0
    """Each further retry waits twice as long, up to this; at or below ``retry_backoff_ms``
    (the default) the backoff is fixed."""
    retry_jitter: float = 0.0
    """0-1: each wait is shortened by up to this fraction, the same on every node."""
    run_local: bool = False
    """``on_store_unavailable = "run-local"``: while the store is unreachable, run due slots here alone."""


class Failure(enum.StrEnum):
    """Why a store call failed, as the runtime reports it to :meth:`NodeCore.on_failure`."""

    UNREACHABLE = "unreachable"
    """No answer: connection refused or lost, timeout (the call may or may not have run)."""
    REFUSED = "refused"
    """The store answered with an error: out of memory, read-only replica, script error."""


NOT_SENT = "not sent: "
"""How a failure's reason begins when the runtime held the call back and the store never saw it
(a Redis Cluster master whose writes fall short: ``agent/shortmasters.py``). A missed slot then
says ``vote not sent: ...``; it said "store refused the vote (not sent: ...)", which no store did."""


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """Cluster-wide protocol settings, as this node is configured."""

    node_id: str
    quorum: int
    max_skew_ms: int = 250
    lease_ms: int = 15_000
    start_timeout_ms: int = 5_000
    retry_ms: int = 500
    sweep_ms: int = 1_000
    assign_poll_ms: int = 1_000
    vote_lead_ms: int = 50
    """Vote this long before a slot is due, so the commit is known when it is.

    The store accepts votes from ``t - max_skew`` by its own clock, so this
    must stay below ``max_skew_ms``; the job itself still starts only when
    this node's clock says ``t`` has come (the start is deferred until then),
    unless a commit at or after ``t`` by the store's clock started it (a start
    folded into the commit: the node's clock is within ``max_skew`` of that).
    """
    incarnation: str = ""
    """This process's incarnation (random per start). Set, the node's votes ask the store to
    start a slot they commit to this node in the same step, tagged with it (docs/protocol.md,
    "A start folded into the commit"); empty, every start is a call of its own."""

    def __post_init__(self) -> None:
        if not 0 <= self.vote_lead_ms < max(1, self.max_skew_ms):
            raise ValueError(
                f"vote_lead_ms {self.vote_lead_ms} is outside the store's early window: "
                f"expected 0 <= vote_lead_ms < max_skew_ms ({self.max_skew_ms})"
            )


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Now:
    """One reading of the node's clocks: wall (epoch ms) and monotonic (ms)."""

    wall_ms: int
    mono_ms: int


# -- actions -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Vote:
    """Call ``store.vote(requests)``; reply with the list of results."""

    requests: tuple[VoteRequest, ...]


@dataclass(frozen=True, slots=True)
class Start:
    """Call ``store.start(job, fire_ms, node, token, lease_ms)``."""

    job: str
    fire_ms: int
    token: int
    lease_ms: int


@dataclass(frozen=True, slots=True)
class Renew:
    """Call ``store.renew(job, fire_ms, node, token, lease_ms)``."""

    job: str
    fire_ms: int
    token: int
    lease_ms: int


@dataclass(frozen=True, slots=True)
class Finish:
    """Call ``store.finish(job, fire_ms, node, token, succeeded, detail, retries, retry_backoff_ms)``."""

    job: str
    fire_ms: int
    token: int
    succeeded: bool
    detail: str
    retries: int = 0
    retry_backoff_ms: int = 0


@dataclass(frozen=True, slots=True)
class Sweep:
    """Call ``store.sweep(params)``; reply with its :class:`~quorum_cron.core.model.SweepResult`."""

    params: tuple[SweepParams, ...]


@dataclass(frozen=True, slots=True)
class ReadSlots:
    """Call ``store.read_slots(slots)``; reply with the views, in order.

    The polls of every slot a tick finds due go in one call (one pipeline on
    Redis, one message in the simulator): when no quorum forms, a node with
    100 jobs awaiting would otherwise read each slot on its own every poll.
    """

    slots: tuple[tuple[str, int], ...]
    """(job, fire_ms) of each slot to read."""


@dataclass(frozen=True, slots=True)
class ReadHighWater:
    """Call ``store.high_waters(jobs)``; reply with the list of ints, in the order of ``jobs``.

    One call for every job a node has: a node boots by reading each job's
    high-water mark (its catch-up starts there), and with hundreds of jobs a
    call per job was hundreds of round trips before its first vote.
    """

    jobs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RecordMissed:
    """Call ``store.record_missed(job, fire_ms, deadline_ms, reason)``; reply with the view."""

    job: str
    fire_ms: int
    deadline_ms: int
    reason: str
    ran_locally: bool = False
    """The slot ran here alone (``RunLocal``) while the store was unreachable: this record is
    that run's entry in the ledger (what the agent counts as a local run, without reading
    ``reason``)."""


@dataclass(frozen=True, slots=True)
class Run:
    """Start the job process now (no store call); report its end with ``on_run_finished``."""

    job: str
    fire_ms: int
    token: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class RunLocal:
    """Start the job process now, on this node alone, with no token: the store is unreachable.

    Emitted only for a ``run_local`` job, while the store is unreachable, once
    the slot is due by this node's clock, at most once per slot per node.
    Report its end with ``on_run_finished(..., token=0, ...)``.
    """

    job: str
    fire_ms: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Kill:
    """Stop the job process of this slot: the store no longer lets this node run it."""

    job: str
    fire_ms: int
    token: int
    reason: str


@dataclass(frozen=True, slots=True)
class Abstain:
    """Not voting for a due slot, and why (no store call; for logs and metrics)."""

    job: str
    fire_ms: int
    reason: str


@dataclass(frozen=True, slots=True)
class Refused:
    """The store refused a vote by membership (no store call; for one log line, a metric, an alert).

    Emitted at most once per membership epoch this node holds: a node that is
    not a member would otherwise report every slot of every job. ``epoch`` is
    the node's, ``store_epoch`` the one the job enforces, ``reason`` the
    store's one line (it names the node and both epochs, or the members).
    ``member``: the node is a member of the job's record (current or, while
    joint, old): a change it had not heard of yet, routine on every change
    (another member brought it to the job first); it votes again under it.
    """

    job: str
    fire_ms: int
    epoch: int
    store_epoch: int
    reason: str
    member: bool = False


StoreAction = Vote | Start | Renew | Finish | Sweep | ReadSlots | ReadHighWater | RecordMissed
"""Actions the runtime carries out as a store call, answering with ``on_reply``/``on_failure``."""
Action = StoreAction | Run | RunLocal | Kill | Abstain | Refused

STORE_ACTIONS: tuple[type[StoreAction], ...] = get_args(StoreAction)
"""Every store action type: :func:`quorum_cron.core.perform.perform` has a store call for each,
and every consumer of store replies (the core, the agent's observer, the simulator) a handler."""


def handler_name(kind: type) -> str:
    """The name a store action type's handlers carry: ``ReadHighWater`` → ``read_high_water``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind.__name__).lower()


def handlers(
    cls: type, prefix: str, fallback: Callable[..., Any] | None = None
) -> dict[type, Callable[..., Any]]:
    """The one dispatch on store action types: ``cls``'s function ``prefix + handler_name(type)``
    for each type of :data:`STORE_ACTIONS` (called with the instance first).

    Each consumer builds its table once and looks a reply's handler up by ``type(action)``,
    instead of switching on the types in a chain of its own; a new action type is then a
    class here, its store call in ``perform`` and one handler per consumer. A consumer with
    no handler for a type gets ``fallback``; with none, that is an error at construction
    (``TypeError`` naming the missing method), not a reply silently dropped.
    """
    table: dict[type, Callable[..., Any]] = {}
    for kind in STORE_ACTIONS:
        name = prefix + handler_name(kind)
        found = getattr(cls, name, fallback)
        if found is None:
            raise TypeError(f"{cls.__name__} has no {name}: expected a handler for every store action type")
        table[kind] = found
    return table
