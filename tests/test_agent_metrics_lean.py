"""The agent's lean histogram (quorum_cron/agent/lean_metrics.py) exposes what the library's would.

The per-job histograms keep packed counts per label set, in the job's cell,
instead of a lock-guarded value per bucket (issue 27: agent memory per
job). Scrapers and alert rules must not see the difference: the same
observations give the same ``/metrics`` samples, bucket boundaries included
(a value equal to a bound counts in that bound's bucket).
"""

from __future__ import annotations

import random
import re

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from quorum_cron.agent.metrics import _DURATION_BUCKETS, LeanHistogram, Metrics
from tests.test_metrics_lean import in_any_order


def _exposition(registry: CollectorRegistry) -> str:
    """The text a scrape gets, without the creation timestamps (two objects, two clocks), each
    family's samples in a fixed order (the lean families list them in an order of their own)."""
    return in_any_order(re.sub(r"(?m)^\w+_created\{[^}]*\} \S+$\n", "", generate_latest(registry).decode()))


def test_the_lean_histogram_exposes_what_the_library_histogram_does() -> None:
    lib_reg, lean_reg = CollectorRegistry(), CollectorRegistry()
    lib = Histogram("h", "doc", ["job", "result"], buckets=_DURATION_BUCKETS, registry=lib_reg)
    lean = LeanHistogram("h", "doc", ["job", "result"], buckets=_DURATION_BUCKETS, registry=lean_reg)
    rnd = random.Random(27)
    values = [*_DURATION_BUCKETS, 0.0, 1e9, 0.05, 86_400.5]  # every bound exactly, and beyond the last
    for i in range(3_000):
        value = rnd.choice(values) if i % 2 else rnd.expovariate(0.01)
        labels = (f"job{rnd.randrange(7)}", rnd.choice(("succeeded", "failed")))
        lib.labels(*labels).observe(value)
        lean.labels(*labels).observe(value)
    text = _exposition(lean_reg)
    assert text == _exposition(lib_reg)
    assert (
        'h_bucket{job="job0",le="+Inf",result="failed"}' in text
        and "h_created" in generate_latest(lean_reg).decode()
    )


def test_the_agent_uses_it_for_the_per_job_histograms() -> None:
    m = Metrics()
    m.fire_delay.labels("backup").observe(0.004)
    m.duration.labels("backup", "succeeded").observe(3.0)
    assert isinstance(m.fire_delay, LeanHistogram) and isinstance(m.duration, LeanHistogram)
    get = m.registry.get_sample_value
    assert get("quorum_cron_fire_delay_seconds_bucket", {"job": "backup", "le": "0.005"}) == 1
    assert get("quorum_cron_fire_delay_seconds_bucket", {"job": "backup", "le": "0.0025"}) == 0
    assert get("quorum_cron_fire_delay_seconds_sum", {"job": "backup"}) == 0.004
    assert get("quorum_cron_job_duration_seconds_count", {"job": "backup", "result": "succeeded"}) == 1
