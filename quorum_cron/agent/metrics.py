"""Prometheus metrics of one agent, on a private registry.

Each node counts what *it* observed or did: the executor counts the
outcomes of the runs it finished, the node whose sweep ended a slot counts
that missed/lost slot. Summed over the cluster, every slot is counted once.
A private registry (not the process-global default) lets several agents —
the tests, an application embedding :class:`~quorum_cron.app.App` — live in
one process without clashing.

The per-job histograms keep plain numbers (:class:`LeanHistogram`): the
library's histogram gives every bucket of every label set its own
lock-guarded value object, 2 x 15 of them per job here, about 7 KB of the
agent's memory per job (issue 27 measured 22 KB per job in all). Same names,
labels, buckets and samples on ``/metrics``.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable
from typing import TypeVar

import prometheus_client.metrics as _pm
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

__all__ = ["LeanHistogram", "Metrics", "child"]

_DURATION_BUCKETS = (
    0.1,
    0.5,
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
    4 * 3600.0,
    24 * 3600.0,
)
_DELAY_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LeanHistogram(Histogram):
    """A :class:`~prometheus_client.Histogram` whose label sets hold a list of counts and a sum.

    Observed on the agent's loop thread only (a scrape reads from the HTTP
    thread: a count read mid-observation is at most one observation behind
    another, as with the library's per-bucket locks). No exemplars.
    """

    def _metric_init(self) -> None:
        self._counts = [0] * len(self._upper_bounds)
        self._total = 0.0
        self._created = time.time()

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        """Count ``amount`` in the first bucket whose upper bound is >= it (as the library does)."""
        self._raise_if_not_observable()  # type: ignore[no-untyped-call]
        self._total += amount
        self._counts[bisect.bisect_left(self._upper_bounds, amount)] += 1

    def _child_samples(self) -> Iterable[Sample]:
        samples = []
        acc = 0.0
        for bound, count in zip(self._upper_bounds, list(self._counts), strict=True):
            acc += count
            le = floatToGoString(bound)  # type: ignore[no-untyped-call]
            samples.append(Sample("_bucket", {"le": le}, acc, None, None))
        samples.append(Sample("_count", {}, acc, None, None))
        if self._upper_bounds[0] >= 0:
            samples.append(Sample("_sum", {}, self._total, None, None))
        if _pm._use_created:
            samples.append(Sample("_created", {}, self._created, None, None))
        return tuple(samples)


_M = TypeVar("_M", bound=_pm.MetricWrapperBase)


def child(metric: _M, *values: str) -> _M:
    """``metric.labels(*values)``, looked up in the metric's own table first.

    Why: ``labels`` converts every value, takes a lock and validates on each
    call, and the agent calls it several times per slot (every vote, run and
    finish): a few percent of an agent's CPU at a burst of 10,000 slots. The
    table (``_metrics``, keyed by the tuple of label values as text) is where
    ``labels`` keeps the children it made; a miss falls back to it.
    """
    found = metric._metrics.get(values)
    return found if found is not None else metric.labels(*values)  # type: ignore[return-value]


class Metrics:
    """The agent's metrics; :meth:`serve` exposes them over HTTP."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.slots = Counter(
            "quorum_cron_slots", "Slots this node saw end, by outcome.", ["job", "outcome"], registry=r
        )
        self.fire_delay = LeanHistogram(
            "quorum_cron_fire_delay_seconds",
            "From a slot's nominal fire time to its job process start, on the executor.",
            ["job"],
            buckets=_DELAY_BUCKETS,
            registry=r,
        )
        self.votes = Counter(
            "quorum_cron_votes", "Votes cast, by the store's answer.", ["job", "status"], registry=r
        )
        self.abstentions = Counter(
            "quorum_cron_abstentions", "Due slots this node did not vote for.", ["job", "cause"], registry=r
        )
        self.clock_offset = Gauge(
            "quorum_cron_clock_offset_seconds", "Estimated reference minus local clock.", registry=r
        )
        self.clock_trusted = Gauge("quorum_cron_clock_trusted", "1 while this node may vote.", registry=r)
        self.store_errors = Counter(
            "quorum_cron_store_errors", "Store calls that failed, by operation.", ["op"], registry=r
        )
        self.store_up = Gauge("quorum_cron_store_up", "1 while the store answers.", registry=r)
        self.members_alive = Gauge("quorum_cron_members_alive", "Live members seen by this node.", registry=r)
        self.bad_values = Counter(
            "quorum_cron_bad_values",
            "Values read from Redis that were corrupt and ignored, by kind (slot, member, ledger...).",
            ["kind"],
            registry=r,
        )
        self.store_oom = Gauge(
            "quorum_cron_store_oom", "1 while Redis refuses writes for lack of memory (OOM).", registry=r
        )
        self.membership_epoch = Gauge(
            "quorum_cron_membership_epoch", "Epoch of the membership record this node holds.", registry=r
        )
        self.member = Gauge(
            "quorum_cron_member",
            "1 while this node is a member of the record it holds (and its config agrees).",
            registry=r,
        )
        self.membership_refusals = Counter(
            "quorum_cron_membership_refusals",
            "Times this node found itself refused: not a member of an epoch, or a vote refused as stale.",
            ["kind"],
            registry=r,
        )
        self.last_run = Gauge(
            "quorum_cron_job_last_run_timestamp_seconds",
            "Unix time this node last started a run of the job (max over the nodes: the cluster's).",
            ["job"],
            registry=r,
        )
        self.last_success = Gauge(
            "quorum_cron_job_last_success_timestamp_seconds",
            "Unix time (store clock) a run of the job executed here last recorded succeeded.",
            ["job"],
            registry=r,
        )
        self.last_failure = Gauge(
            "quorum_cron_job_last_failure_timestamp_seconds",
            "Unix time (store clock) a slot of the job executed here last recorded failed.",
            ["job"],
            registry=r,
        )
        self.duration = LeanHistogram(
            "quorum_cron_job_duration_seconds",
            "How long the job's runs on this node took, start to end, by result (succeeded or failed).",
            ["job", "result"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.output_dropped = Counter(
            "quorum_cron_job_output_lines_dropped",
            "Job output lines not copied to the agent's log (per-run or per-second bound).",
            ["job"],
            registry=r,
        )
        self.running = Gauge("quorum_cron_running_jobs", "Job processes running on this node.", registry=r)

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve ``/metrics`` on ``addr:port`` from a daemon thread."""
        start_http_server(port, addr=addr, registry=self.registry)
