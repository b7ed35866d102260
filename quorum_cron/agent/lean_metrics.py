"""The lean per-job metric families of an agent (:class:`~quorum_cron.agent.metrics.Metrics`).

The per-job metrics are lean families (:class:`LeanCounter`,
:class:`LeanGauge`, :class:`LeanHistogram`): plain numbers, packed per job
(below), each family one collector on the registry. Why:
prometheus_client makes every label set a metric object of its own, with a
lock and a lock-guarded value object per number (per bucket, for a
histogram); at a burst of 10,000 jobs those children were about 5 KB of an
agent's memory per job and ~10 % of its CPU (``labels()``, the child's
``__init__``) as each node first voted on or ran each job (issue 27). A scrape
shows the same names, types, help, labels, samples (``_total``,
``_created``, buckets) and values as the library's objects would (a
family's samples in an order of their own, which the text format leaves
free).

All of a job's numbers, every lean family's, are one ``bytearray`` of
packed numbers (:class:`JobCells`: one dict from the job's name to its
cell, shared by the families of one :class:`~quorum_cron.agent.metrics.Metrics`). Each family claims
a column of the cell (an offset) per label value after ``job`` as it first
sees one: a counter's column is the doubles ``[value, created]``, a gauge's
``[value, set]``, a histogram's ``[count per bucket..., sum, created]``
(the counts 32-bit, see :class:`LeanHistogram`). Why one cell
per job: a label set of its own — a key tuple, a dict entry per family
and, for a counter, two dicts of floats, each float a new object at every
``inc`` — made the metrics about 1.1 KB per job on a node that had voted
on and run it and 0.36 KB for one it had only voted on, against 0.44 and
0.13 KB now (``tests/test_metrics_lean.py``; issue 27: RSS per job;
docs/benchmarks.md, "The per-job metrics in one cell per job"). And none of
it is a container the garbage collector tracks: the label sets are made as
each job first runs, after the agent froze its heap (:mod:`.heap`), and at
100,000 jobs ~600,000 tracked lists (an earlier layout) were most of what
every full collection walked, about 0.35 s each (``benchmarks/scale.py``,
``gc_gen2_at_end``; docs/benchmarks.md, "A bound that dropped results").
The labelled metrics with a few fixed label sets (``store_errors{op}``...)
and the unlabelled gauges stay library objects.

Two tables, not one (:class:`~quorum_cron.agent.metrics.Metrics`): every node
votes on every job, but runs about one in N of them, and the columns are
laid out in the order they were first claimed, so in one table a job this
node only voted on carried the histograms' columns it never used (a review
counted 779 B per job once every label value had been seen somewhere,
against 356 B before the cells).

Threads, and why no lock: the agent observes on its event-loop thread only;
a scrape collects on the HTTP server's thread. Under the GIL a dict
insert, a cell's ``extend`` and a ``pack_into`` are atomic; the scrape copies
the tables (``copy()``, one C call: no other thread runs during it) before
it walks them, so a table growing meanwhile is never iterated, and a cell
only grows, so a column the scrape found inside it stays there. A scrape may
read a label set between two stores of one observation (a histogram's
bucket counted, its sum not yet): one observation behind, as with the
library, whose locks guard each number, not a label set. This relies on the
GIL, as the agent does elsewhere: on a free-threaded build (3.13t) a cell's
``extend`` could meet a scrape's read of it (``BufferError``).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Sequence
from struct import Struct
from typing import ClassVar, Generic, TypeVar

import prometheus_client.metrics as _pm
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import INF, floatToGoString
from prometheus_client.validation import _validate_labelnames

__all__ = ["JobCells", "Key", "LeanCounter", "LeanGauge", "LeanHistogram"]

_DOUBLE = Struct("<d")
"""One packed number of a label set."""
_COUNT = Struct("<I")
"""A histogram bucket's count."""
_COUNT_MAX = 2**32 - 1
_PAIR = Struct("<2d")
"""Two packed numbers: a value and its ``created`` time (or set flag); a histogram's sum and created."""

Key = tuple[str, ...]
"""The label values of one label set, as text, in the family's label-name order."""


class JobCells:
    """Every lean family's numbers of one job, in one ``bytearray`` per job (see the module docstring).

    A family claims a *column* (a run of packed numbers at a fixed offset,
    the same in every job's cell) for each distinct value of its labels after
    ``job`` as it first sees it. A job's cell reaches as far as the last
    column the job has used, and grows (in place) when it uses a later one.
    The last double of a column is nonzero once the column is in use for
    that job (a counter's or histogram's ``created`` time, a gauge's set
    flag): zeros mean "no such label set".
    """

    __slots__ = ("cells", "width")

    def __init__(self) -> None:
        self.cells: dict[str, bytearray] = {}
        self.width = 0

    def claim(self, size: int) -> int:
        """A new column of ``size`` bytes: its offset in every cell."""
        offset, self.width = self.width, self.width + size
        return offset

    def cell(self, job: str, end: int) -> bytearray:
        """The job's cell, made or grown to hold ``end`` bytes: as far as the columns it uses, no
        further (a column another job claimed later, for a rare label value, is not carried by all)."""
        cell = self.cells.get(job)
        if cell is None:
            cell = self.cells[job] = bytearray(end)
        elif len(cell) < end:
            cell.extend(bytes(end - len(cell)))  # (never shrinks: a scrape's bounds stay true)
        return cell


class _LeanFamily:
    """What the lean families share: name, help, label names, columns, and the collector protocol.

    A family registers itself on ``registry`` as one collector: ``describe``
    names it (the registry refuses a duplicate name, as for a library
    metric), ``collect`` builds the :class:`~prometheus_client.metrics_core.Metric`
    the library's own object would, with the same samples; in its own
    order: by the family's label values after ``job`` in the order their
    columns were claimed, then by job (the text format does not order a
    family's samples). The first label is the job's name: it keys the cell
    of ``table``, shared with the agent's other families of the same role
    (one of its own when none is given).
    """

    _type: ClassVar[str]
    _reserved_labelnames: ClassVar[tuple[str, ...]] = ()
    _suffix: ClassVar[str] = ""
    """Taken off the name given (a counter's ``_total``)."""
    _layout: str
    """A column's packed numbers (:mod:`struct` format, little-endian): the last one, a double, is
    nonzero once the label set is in use."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        registry: CollectorRegistry,
        table: JobCells | None = None,
    ) -> None:
        self._name = name.removesuffix(self._suffix) if self._suffix else name
        self._documentation = documentation
        self._labelnames: tuple[str, ...] = _validate_labelnames(type(self), labelnames)  # type: ignore[no-untyped-call]
        if not self._labelnames:
            raise ValueError("A lean family needs a first label (the job)")
        self._table = table if table is not None else JobCells()
        self._cells = self._table.cells  # (the same dict: one attribute lookup less per observation)
        self._columns: dict[str | Key, int] = {}
        """The label values after the job (one text for two labels, a tuple otherwise) → offset."""
        self._column = Struct(self._layout)
        self._size = self._column.size
        self._last = self._size - 8
        self.describe()  # validates the name
        registry.register(self)

    def describe(self) -> list[Metric]:
        """The family without samples: its names, for the registry's duplicate check."""
        return [Metric(self._name, self._documentation, self._type)]

    def collect(self) -> list[Metric]:
        """The family and its samples, read from the HTTP thread (see the module docstring)."""
        metric = Metric(self._name, self._documentation, self._type)
        self._add_samples(metric)
        return [metric]

    def _add_samples(self, metric: Metric) -> None:
        raise NotImplementedError

    def _at(self, key: Key) -> tuple[bytearray, int]:
        """The cell holding ``key``'s label set and the column's offset in it, claimed on first use."""
        col = key[1] if len(key) == 2 else key[1:]
        offset = self._columns.get(col)
        if offset is None:
            if len(key) != len(self._labelnames):
                raise ValueError("Incorrect label count")
            offset = self._claim(col)
        cell = self._cells.get(key[0])
        if cell is None or len(cell) < offset + self._size:
            cell = self._table.cell(key[0], offset + self._size)
        return cell, offset

    def reserve(self, *rest: str) -> None:
        """Claim the column of the label values after ``job`` now, in this order, before any job
        uses it (no label set is made): a cell reaches as far as the last column its job uses, so
        the columns most jobs use go first, side by side (:class:`~quorum_cron.agent.metrics.Metrics`)."""
        if len(rest) != len(self._labelnames) - 1:
            raise ValueError("Incorrect label count")
        col = rest[0] if len(rest) == 1 else rest
        if col not in self._columns:
            self._claim(col)

    def _claim(self, col: str | Key) -> int:
        """A new column for the label values ``col`` (see ``_columns``): its offset."""
        offset = self._columns[col] = self._table.claim(self._size)
        return offset

    def _find(self, key: Key) -> tuple[bytearray, int] | None:
        """Where ``key``'s label set is, if it is in use (no claim, no cell made)."""
        offset = self._columns.get(key[1] if len(key) == 2 else key[1:])
        cell = self._cells.get(key[0])
        if offset is None or cell is None or len(cell) < offset + self._size:
            return None
        return (cell, offset) if _DOUBLE.unpack_from(cell, offset + self._last)[0] else None

    def _in_use(self) -> Iterator[tuple[dict[str, str], tuple[float, ...]]]:
        """Each label set in use and its column's numbers, read at one instant each (one C call)."""
        names, size, last = self._labelnames, self._size, self._last
        unpack = self._column.unpack_from
        cells = self._table.cells.copy()  # (one C call: see the module docstring)
        for col, offset in self._columns.copy().items():
            rest = (col,) if isinstance(col, str) else col
            end = offset + size
            for job, cell in cells.items():
                if len(cell) < end or not _DOUBLE.unpack_from(cell, offset + last)[0]:
                    continue
                yield dict(zip(names, (job, *rest), strict=True)), unpack(cell, offset)

    def _key(self, values: tuple[object, ...]) -> Key:
        """``labels()``'s values as a key: converted to text and counted, as the library does."""
        if len(values) != len(self._labelnames):
            raise ValueError("Incorrect label count")
        return tuple(str(v) for v in values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name})"


class LeanCounter(_LeanFamily):
    """A labelled counter: per label set a value and its ``created`` time, two packed doubles.

    ``_created`` (the time the label set was first used) is kept because the
    library exposes it per label set, and a scraper may rely on it to see a
    counter reset.
    """

    _type = "counter"
    _layout = "<2d"
    _suffix = "_total"  # (the library names a counter without it: OpenMetrics)

    def inc(self, key: Key, amount: float = 1.0) -> None:
        """Add ``amount`` (>= 0) to the label set ``key``, starting it at 0 on its first use."""
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        cell, at = self._at(key)
        value, created = _PAIR.unpack_from(cell, at)
        # (created before the value: a scraped value has one)
        _PAIR.pack_into(cell, at, value + amount, created or time.time())

    def get(self, key: Key) -> float:
        """The label set's value; 0 if never used."""
        found = self._find(key)
        return 0.0 if found is None else float(_DOUBLE.unpack_from(*found)[0])

    def labels(self, *values: object) -> _CounterChild:
        """The label set of ``values``, created at 0 now if new (a series of 0, as the library's).

        For code that starts a series before it counts (an ``inc`` to call
        later) and code written against the library's children.
        """
        key = self._key(values)
        self.inc(key, 0.0)
        return _CounterChild(self, key)

    def _add_samples(self, metric: Metric) -> None:
        total, created = self._name + "_total", self._name + "_created"
        use_created = _pm._use_created
        for labels, (value, since) in self._in_use():
            metric.add_sample(total, labels, value)
            if use_created:
                metric.add_sample(created, labels, since)


class LeanGauge(_LeanFamily):
    """A labelled gauge: per label set a packed double and a set flag. Only set, as the agent uses it."""

    _type = "gauge"
    _layout = "<2d"

    def set(self, key: Key, value: float) -> None:
        """Set the label set ``key`` to ``value``."""
        cell, at = self._at(key)
        _PAIR.pack_into(cell, at, float(value), 1.0)

    def get(self, key: Key) -> float:
        """The label set's value; 0 if never set."""
        found = self._find(key)
        return 0.0 if found is None else float(_DOUBLE.unpack_from(*found)[0])

    def labels(self, *values: object) -> _GaugeChild:
        """The label set of ``values``, created at 0 now if new (as the library's)."""
        key = self._key(values)
        if self._find(key) is None:
            self.set(key, 0.0)
        return _GaugeChild(self, key)

    def _add_samples(self, metric: Metric) -> None:
        name = self._name
        for labels, (value, _set) in self._in_use():
            metric.add_sample(name, labels, value)


class LeanHistogram(_LeanFamily):
    """A labelled histogram: per label set a packed count per bucket (unsigned 32-bit) and two
    doubles, ``sum`` and ``created``.

    Why 32-bit counts: a job's histograms are most of the cell of a job this
    node runs, and 4-byte counts take 116 bytes off each such job (two
    histograms, 29 buckets), about 0.08 KB per job of an agent's RSS at
    10,000 jobs (issue 27). A bucket's count stops at 4,294,967,295 (136
    years of a run every second, on one node without a restart) rather than
    wrap: it stays a count that never goes down.

    A bucket counts the observations that fell in it alone (the first
    bucket whose upper bound is >= the value, ``+Inf`` last, as the library
    does); a scrape accumulates them into the cumulative ``_bucket`` samples.
    A NaN is added to the sum and counted in no bucket, as by the library.
    No exemplars (the agent attaches none).
    """

    _type = "histogram"
    _reserved_labelnames = ("le",)

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
        table: JobCells | None = None,
    ) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError("Buckets not in sorted order")
        if bounds and bounds[-1] != INF:
            bounds.append(INF)
        if len(bounds) < 2:
            raise ValueError("Must have at least two buckets")
        self._upper_bounds = bounds
        self._le = [floatToGoString(b) for b in bounds]  # type: ignore[no-untyped-call]
        self._layout = f"<{len(bounds)}I2d"
        self._sum_at = 4 * len(bounds)
        super().__init__(name, documentation, labelnames, registry=registry, table=table)

    def observe(self, key: Key, amount: float) -> None:
        """Count ``amount`` in the label set ``key``, starting the set on its first use."""
        cell, base = self._at(key)
        at = base + self._sum_at
        total, created = _PAIR.unpack_from(cell, at)
        if amount == amount:  # not NaN (which no bucket bound is >=)
            b = base + 4 * bisect.bisect_left(self._upper_bounds, amount)
            n = _COUNT.unpack_from(cell, b)[0]
            if n < _COUNT_MAX:
                _COUNT.pack_into(cell, b, n + 1)
        _PAIR.pack_into(cell, at, total + amount, created or time.time())

    def labels(self, *values: object) -> _HistogramChild:
        """The label set of ``values``, created empty now if new (as the library's)."""
        key = self._key(values)
        if self._find(key) is None:
            cell, base = self._at(key)
            _DOUBLE.pack_into(cell, base + self._last, time.time())
        return _HistogramChild(self, key)

    def _add_samples(self, metric: Metric) -> None:
        name = self._name
        bucket, count, total, created = name + "_bucket", name + "_count", name + "_sum", name + "_created"
        les, with_sum, use_created = self._le, self._upper_bounds[0] >= 0, _pm._use_created
        for labels, cell in self._in_use():
            acc = 0.0
            for le, n in zip(les, cell, strict=False):
                acc += n
                metric.add_sample(bucket, {**labels, "le": le}, acc)
            metric.add_sample(count, labels, acc)  # (samples share a label dict: nothing changes one)
            if with_sum:
                metric.add_sample(total, labels, cell[-2])
            if use_created:
                metric.add_sample(created, labels, cell[-1])


_F = TypeVar("_F", bound=_LeanFamily)
_V = TypeVar("_V", LeanCounter, LeanGauge)


class _Child(Generic[_F]):
    """One label set of a lean family, as ``labels()`` returns it (no state of its own)."""

    __slots__ = ("_family", "_key")

    def __init__(self, family: _F, key: Key) -> None:
        self._family, self._key = family, key


class _ValueChild(_Child[_V]):
    """A counter's or gauge's label set: its number can be read."""

    __slots__ = ()

    def get(self) -> float:
        """This label set's value."""
        return self._family.get(self._key)

    @property
    def _value(self) -> _ValueChild[_V]:
        """``child._value.get()`` reads a library child's number: the same read works here."""
        return self


class _CounterChild(_ValueChild[LeanCounter]):
    __slots__ = ()

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` to this label set."""
        self._family.inc(self._key, amount)


class _GaugeChild(_ValueChild[LeanGauge]):
    __slots__ = ()

    def set(self, value: float) -> None:
        """Set this label set to ``value``."""
        self._family.set(self._key, value)


class _HistogramChild(_Child[LeanHistogram]):
    __slots__ = ()

    def observe(self, amount: float) -> None:
        """Count ``amount`` in this label set."""
        self._family.observe(self._key, amount)
