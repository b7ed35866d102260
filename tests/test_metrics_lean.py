"""The agent's lean per-job families expose what prometheus_client's own metrics would.

quorum_cron/agent/lean_metrics.py keeps the per-job metrics (``slots{job,outcome}``,
``votes``, ``abstentions``, ``fire_delay``, ``last_run``, ``last_success``,
``last_failure``, ``duration``, ``output_dropped``) as plain numbers packed
in one cell per job (issue 27: the library's child per label set was ~5 KB of agent
memory per job). Scrapers, dashboards and alert rules must not see the
difference, so each test here applies the same observations to the lean
families and to the library's Counter/Gauge/Histogram on a reference
registry and compares the whole ``/metrics`` text: names, types, help,
label names and values, sample names (``_total``, ``_created``, ``_bucket``,
``_count``, ``_sum``), bucket bounds, values, and the order of the families.
Within a family the label sets are compared in a fixed order, each one's
own samples in the order given (:func:`in_any_order`): the lean families
list them by label value after the job, then by job, where the library
lists label sets in first-use order, and the text format gives that order
no meaning. The
``_created`` values differ (two objects, two clock reads): they are
compared as "present at the same places" and checked to be the time the
label set was first used.
"""

from __future__ import annotations

import gc
import math
import re
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import prometheus_client.metrics as pm
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import DuplicateTimeseries

from quorum_cron.agent.metrics import (
    _DELAY_BUCKETS,
    _DURATION_BUCKETS,
    LeanCounter,
    LeanGauge,
    LeanHistogram,
    Metrics,
)

# The per-job metrics as the agent exposed them before the lean families (library objects):
# the contract a scraper sees. (attribute, type, name, label names)
PER_JOB = [
    ("slots", "counter", "quorum_cron_slots", ("job", "outcome")),
    ("fire_delay", "histogram", "quorum_cron_fire_delay_seconds", ("job",)),
    ("votes", "counter", "quorum_cron_votes", ("job", "status")),
    ("abstentions", "counter", "quorum_cron_abstentions", ("job", "cause")),
    ("last_run", "gauge", "quorum_cron_job_last_run_timestamp_seconds", ("job",)),
    ("last_success", "gauge", "quorum_cron_job_last_success_timestamp_seconds", ("job",)),
    ("last_failure", "gauge", "quorum_cron_job_last_failure_timestamp_seconds", ("job",)),
    ("duration", "histogram", "quorum_cron_job_duration_seconds", ("job", "result")),
    ("output_dropped", "counter", "quorum_cron_job_output_lines_dropped", ("job",)),
]

_CREATED = re.compile(r"(?m)^(\w+_created(?:\{[^}\n]*\})?) (\S+)$")


def _masked(text: str) -> str:
    """The exposition with every ``_created`` value replaced by a mark (the line stays)."""
    return _CREATED.sub(r"\1 <created>", text)


def _created_values(text: str) -> list[float]:
    return [float(m.group(2)) for m in _CREATED.finditer(text)]


_SAMPLE = re.compile(r"([A-Za-z_:][\w:]*?)(?:_bucket|_count|_sum|_created|_total)?(\{.*\})? ")
_LE = re.compile(r',?le="[^"]*"')


def in_any_order(text: str) -> str:
    """``text`` with each family's label sets in a fixed order, each label set's own samples in
    the order given (a histogram's buckets, count, sum, created; a counter's total, created);
    comment lines, and so the families, stay put."""
    out: list[str] = []
    groups: dict[tuple[str, str], list[str]] = {}

    def flush() -> None:
        for key in sorted(groups):
            out.extend(groups[key])
        groups.clear()

    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if line.startswith("#") or m is None:
            flush()
            out.append(line)
        else:
            groups.setdefault((m[1], _LE.sub("", m[2] or "")), []).append(line)
    flush()
    return "\n".join(out)


def _reference(m: Metrics) -> tuple[CollectorRegistry, dict[str, object]]:
    """A registry of the library's own objects with the same names, help, labels and buckets, in order."""
    ref = CollectorRegistry()
    twins: dict[str, object] = {}
    for attr, metric in vars(m).items():
        if isinstance(metric, LeanCounter | Counter):
            twins[attr] = Counter(metric._name, metric._documentation, metric._labelnames, registry=ref)
        elif isinstance(metric, LeanGauge | Gauge):
            twins[attr] = Gauge(metric._name, metric._documentation, metric._labelnames, registry=ref)
        elif isinstance(metric, LeanHistogram):
            twins[attr] = Histogram(
                metric._name,
                metric._documentation,
                metric._labelnames,
                buckets=metric._upper_bounds,
                registry=ref,
            )
    return ref, twins


def _apply(m: Metrics, twins: dict[str, object], attr: str, key: tuple[str, ...], amount: float) -> None:
    """One observation, the agent's way on the lean family and the library's way on its twin."""
    lean, lib = getattr(m, attr), twins[attr]
    if isinstance(lean, LeanCounter):
        assert isinstance(lib, Counter)
        lean.inc(key, amount)
        lib.labels(*key).inc(amount)
    elif isinstance(lean, LeanGauge):
        assert isinstance(lib, Gauge)
        lean.set(key, amount)
        lib.labels(*key).set(amount)
    else:
        assert isinstance(lib, Histogram)
        lean.observe(key, amount)
        lib.labels(*key).observe(amount)


def _assert_same_exposition(lean: CollectorRegistry, ref: CollectorRegistry, t0: float, t1: float) -> None:
    for render in (generate_latest, generate_openmetrics):
        ours, theirs = render(lean).decode(), render(ref).decode()
        assert in_any_order(_masked(ours)) == in_any_order(_masked(theirs))
        assert all(t0 <= t <= t1 for t in _created_values(ours)), "a _created that is not a first use"


@contextmanager
def _created_series(enabled: bool) -> Iterator[None]:
    """prometheus_client's process-wide ``_created`` switch, restored after."""
    was = pm._use_created
    (pm.enable_created_metrics if enabled else pm.disable_created_metrics)()
    try:
        yield
    finally:
        (pm.enable_created_metrics if was else pm.disable_created_metrics)()


def test_the_per_job_metrics_keep_their_names_types_and_labels() -> None:
    m = Metrics()
    for attr, typ, name, labels in PER_JOB:
        family = getattr(m, attr)
        assert isinstance(family, LeanCounter | LeanGauge | LeanHistogram), attr
        (described,) = family.describe()
        assert (described.type, described.name, family._labelnames) == (typ, name, labels)
    assert m.fire_delay._upper_bounds == [*_DELAY_BUCKETS, math.inf]
    assert m.duration._upper_bounds == [*_DURATION_BUCKETS, math.inf]


def test_an_agent_like_sequence_scrapes_as_the_library_would() -> None:
    m = Metrics()
    ref, twins = _reference(m)
    t0 = time.time()
    for i in range(300):
        job = f"job{i % 37}"
        _apply(m, twins, "votes", (job, ("committed", "taken", "refused")[i % 3]), 1)
        _apply(m, twins, "slots", (job, ("succeeded", "failed", "missed", "lost", "skipped")[i % 5]), 1)
        _apply(m, twins, "abstentions", (job, "clock"), 1)
        _apply(m, twins, "last_run", (job,), 1_700_000_000 + i / 1000)
        _apply(m, twins, "fire_delay", (job,), [0, 0.001, 0.0042, 0.01, 3.3, 10.0, 99.0][i % 7])
        _apply(m, twins, "duration", (job, ("succeeded", "failed")[i % 2]), [0.1, 0.7, 5.0, 1e5][i % 4])
        _apply(m, twins, "last_success" if i % 4 else "last_failure", (job,), 1_700_000_000.5 + i)
        if i % 11 == 0:
            _apply(m, twins, "output_dropped", (job,), 17)
    # A run starts its output_dropped series at 0, as the library's labels() did.
    m.output_dropped.labels("quiet-job")
    assert isinstance(twins["output_dropped"], Counter)
    twins["output_dropped"].labels("quiet-job")
    _assert_same_exposition(m.registry, ref, t0, time.time())
    text = generate_latest(m.registry).decode()
    assert 'quorum_cron_job_output_lines_dropped_total{job="quiet-job"} 0.0' in text
    assert 'quorum_cron_votes_created{job="job0",status="committed"}' in text
    assert 'quorum_cron_fire_delay_seconds_bucket{job="job1",le="0.001"} ' in text
    get = m.registry.get_sample_value
    assert get("quorum_cron_votes_total", {"job": "job0", "status": "committed"}) == 3


def test_without_created_series_neither_has_them() -> None:
    with _created_series(False):
        m = Metrics()
        ref, twins = _reference(m)
        _apply(m, twins, "slots", ("a", "succeeded"), 1)
        _apply(m, twins, "duration", ("a", "failed"), 2.0)
        _assert_same_exposition(m.registry, ref, 0, 0)
        assert "_created" not in generate_latest(m.registry).decode()


# Label values that need escaping, and amounts on, between and beyond the bucket bounds.
_label_values = st.sampled_from(["backup", "a", 'q"uote', "back\\slash", "new\nline", "ünï", ""])
_amounts = st.one_of(
    st.sampled_from([0.0, *_DELAY_BUCKETS, *_DURATION_BUCKETS, math.inf, math.nan]),
    st.floats(min_value=-10.0, max_value=1e6),
    st.integers(min_value=0, max_value=3),
)


@st.composite
def _observations(draw: st.DrawFn) -> tuple[str, tuple[str, ...], float]:
    attr, _typ, _name, labels = draw(st.sampled_from(PER_JOB))
    key = tuple(draw(_label_values) for _ in labels)
    amount = draw(_amounts)
    if attr in {"slots", "votes", "abstentions", "output_dropped"}:  # counters go up only
        amount = abs(amount)
    return attr, key, amount


@given(st.lists(_observations(), max_size=60))
def test_any_sequence_of_observations_scrapes_as_the_library_would(
    sequence: list[tuple[str, tuple[str, ...], float]],
) -> None:
    m = Metrics()
    ref, twins = _reference(m)
    t0 = time.time()
    for attr, key, amount in sequence:
        _apply(m, twins, attr, key, amount)
    _assert_same_exposition(m.registry, ref, t0, time.time())


def test_labels_answers_as_a_library_child_does() -> None:
    m = Metrics()
    m.last_failure.labels("j").set(12.0)
    assert m.last_failure.labels("j")._value.get() == 12.0
    m.output_dropped.labels("j").inc(3)
    assert m.output_dropped.labels("j")._value.get() == 3.0 == m.output_dropped.get(("j",))
    m.duration.labels("j", "failed").observe(0.2)
    get = m.registry.get_sample_value
    assert get("quorum_cron_job_duration_seconds_count", {"job": "j", "result": "failed"}) == 1
    with pytest.raises(ValueError, match="label count"):
        m.votes.labels("j")
    with pytest.raises(ValueError, match="non-negative"):
        m.votes.inc(("j", "committed"), -1)
    with pytest.raises(ValueError, match="Reserved"):
        LeanHistogram("h", "doc", ["le"], buckets=(1.0,), registry=CollectorRegistry())
    with pytest.raises(ValueError, match="sorted"):
        LeanHistogram("h", "doc", ["job"], buckets=(2.0, 1.0), registry=CollectorRegistry())


def test_the_registry_refuses_a_second_metric_of_the_same_name() -> None:
    m = Metrics()
    for clash in ("quorum_cron_votes", "quorum_cron_votes_total", "quorum_cron_votes_created"):
        with pytest.raises(DuplicateTimeseries):
            Gauge(clash, "doc", registry=m.registry)
    with pytest.raises(DuplicateTimeseries):
        Gauge("quorum_cron_job_duration_seconds_bucket", "doc", registry=m.registry)


PER_SCRAPE = 150
"""Label sets the writer adds per completed scrape (see the test below)."""


def test_a_scrape_while_the_tables_grow_never_fails() -> None:
    """The loop thread adds label sets while an HTTP thread scrapes: no lock, no error (GIL, table copies).

    The writer yields often (as the agent's loop does between callbacks), so
    label sets are added in the middle of a scrape's walk over the tables:
    walking a table instead of its copy fails here within a few scrapes.

    The writer adds at most :data:`PER_SCRAPE` label sets per scrape the
    scraper completes: a scrape walks every label set, so a writer free to
    grow the tables as fast as it can made each scrape slower than the last,
    and a slow machine saw 9 scrapes in the 5 s this test once allowed. With
    the budget the 20 scrapes cost the same on any machine; the deadline
    only bounds a scraper that stopped.
    """
    m = Metrics()
    stop = threading.Event()
    scrapes: list[int] = []
    scraped = threading.Semaphore(0)  # one release per completed scrape: the writer's budget
    failures: list[BaseException] = []

    def scrape() -> None:
        while not stop.is_set():
            try:
                generate_latest(m.registry)
            except Exception as exc:  # reported by the assertion below
                failures.append(exc)
                return
            scrapes.append(1)
            scraped.release()

    scraper = threading.Thread(target=scrape)
    scraper.start()
    grow: list[Callable[[str], None]] = [
        lambda j: m.votes.inc((j, "committed")),
        lambda j: m.last_run.set((j,), 1.0),
        lambda j: m.duration.observe((j, "succeeded"), 0.3),
    ]
    deadline = time.monotonic() + 60
    budget = PER_SCRAPE
    try:
        i = 0
        while i < 20 * PER_SCRAPE and not failures and time.monotonic() < deadline:
            if budget == 0:  # wait for the scraper to finish the scrape under way
                if scraped.acquire(timeout=1):
                    budget = PER_SCRAPE
                continue
            grow[i % 3](f"job{i}")
            i += 1
            budget -= 1
            if i % 20 == 0:
                time.sleep(0)  # lets the scraper run mid-growth
    finally:
        stop.set()
        scraper.join()
    assert failures == []
    assert i == 20 * PER_SCRAPE  # every label set was added, while the scraper ran
    assert len(scrapes) >= 19  # each budget but the first was granted by a completed scrape
    assert m.registry.get_sample_value("quorum_cron_votes_total", {"job": "job0", "status": "committed"}) == 1


def test_label_sets_add_nothing_for_the_garbage_collector_to_walk() -> None:
    """Label sets are made after the agent froze its heap, one per job and outcome: were each a
    tracked container (a list), every full collection would walk them (at 100,000 jobs,
    ~600,000 of them, about 0.35 s a collection)."""
    registry = CollectorRegistry()
    counter = LeanCounter("c_total", "h", ["job", "outcome"], registry=registry)
    histogram = LeanHistogram("h_seconds", "h", ["job"], buckets=(1.0, 2.0), registry=registry)
    gc.collect()
    before = len(gc.get_objects())
    for i in range(1_000):
        counter.inc((f"j{i}", "succeeded"))
        counter.labels(f"j{i}", "lost")
        histogram.observe((f"j{i}",), 1.5)
    gc.collect()  # (it stops tracking the tuples of text that key the label sets)
    assert len(gc.get_objects()) - before < 100
    assert counter.get(("j7", "succeeded")) == 1.0


def _bytes_per_job(names: list[str], observe: Callable[[str], None]) -> float:
    """What ``observe`` (two minutes of one job's observations) leaves allocated per job."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(2):
            for j in names:
                observe(j)
        return (tracemalloc.get_traced_memory()[0] - before) / len(names)
    finally:
        tracemalloc.stop()


def test_a_job_costs_one_cell_per_role_not_an_object_per_label_set() -> None:
    """Issue 27 (RSS per job): a job's series live in packed cells, one for the families every
    node adds to as it votes and one for those of the jobs it runs, the common columns first.
    Measured (CPython 3.11) after another job used every label value, so every column is
    claimed: 131 B per job for a job this node only voted on and 436 B for one it also ran (552
    B with the histograms' counts as doubles, not 32-bit). A label set of its own per family (a
    key tuple, dict entries, a float per number) cost 356 B and 1,129 B (measured in review); one
    table whose cells grew to every column claimed, 779 B for both, and 776 B run with two
    tables without the common columns reserved first."""
    m = Metrics()
    for status in ("recorded", "committed", "decided", "early", "missed", "skipped", "refused"):
        m.votes.inc(("every-value", status))
    for outcome in ("succeeded", "failed", "lost", "missed", "skipped", "local"):
        m.slots.inc(("every-value", outcome))
    for cause in ("clock", "store", "membership"):
        m.abstentions.inc(("every-value", cause))
    for result in ("succeeded", "failed"):
        m.duration.observe(("every-value", result), 1.0)
    for gauge in (m.last_run, m.last_success, m.last_failure):
        gauge.set(("every-value",), 1.0)
    m.fire_delay.observe(("every-value",), 0.1)
    m.output_dropped.inc(("every-value",))

    def vote(j: str) -> None:
        m.votes.inc((j, "recorded"))
        m.votes.inc((j, "decided"))

    def vote_and_run(j: str) -> None:
        vote(j)
        m.slots.inc((j, "succeeded"))
        m.last_run.set((j,), time.time())
        m.fire_delay.observe((j,), 0.5)
        m.duration.observe((j, "succeeded"), 0.01)
        m.last_success.set((j,), time.time())

    voted = _bytes_per_job([f"voted-{i:05d}" for i in range(2_000)], vote)
    ran = _bytes_per_job([f"ran-{i:05d}" for i in range(2_000)], vote_and_run)
    assert voted < 250, f"{voted:.0f} B per job voted on"
    assert ran < 500, f"{ran:.0f} B per job run"
    get = m.registry.get_sample_value
    assert get("quorum_cron_votes_total", {"job": "voted-00007", "status": "decided"}) == 2
    assert get("quorum_cron_job_duration_seconds_count", {"job": "ran-00007", "result": "succeeded"}) == 2
    assert get("quorum_cron_slots_total", {"job": "voted-00007", "outcome": "succeeded"}) is None


def test_a_full_bucket_stays_full() -> None:
    """A histogram's bucket counts are 32-bit: at 2**32 - 1 a bucket stops counting (the count
    never goes down, the observation is still in the sum), and nothing fails."""
    m = Metrics()
    m.fire_delay.observe(("j",), 0.002)
    cell = m.run_cells.cells["j"]
    full = (2**32 - 1).to_bytes(4, "little")
    at = cell.index((1).to_bytes(4, "little"))  # the only bucket counted so far
    cell[at : at + 4] = full
    m.fire_delay.observe(("j",), 0.002)
    m.fire_delay.observe(("j",), 20.0)
    get = m.registry.get_sample_value
    assert get("quorum_cron_fire_delay_seconds_bucket", {"job": "j", "le": "0.0025"}) == 2**32 - 1
    assert get("quorum_cron_fire_delay_seconds_count", {"job": "j"}) == 2**32
    assert get("quorum_cron_fire_delay_seconds_sum", {"job": "j"}) == pytest.approx(20.004)
