"""Declaring many jobs through the Python API stays linear and shares what jobs have in common.

An agent of 50k-100k jobs (benchmarks/scale.py) declares them all through
``@app.cron`` before it votes: a declaration must not re-check the jobs
declared before it (that made 10k declarations take 19-44 s), and jobs with
the same expression must share one parsed plan (``* * * * *``'s field sets
were ~6 KB per job). Counted, not timed: the checks run per job, the plans are
the same objects, and sharing never changes a schedule's values.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum_cron.app import App, JobContext
from quorum_cron.config import cron, schedule
from quorum_cron.config.schedule import Schedule
from quorum_cron.config.settings import Config
from quorum_cron.errors import ConfigError


def _app(**durations: str) -> App:
    # Nothing connects before serve(): the URL is never dialled here.
    return App(namespace="decl", size=3, redis_url="redis://127.0.0.1:1/0", **durations)


def _noop(ctx: JobContext) -> None:
    del ctx


@pytest.fixture
def jobs_checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many jobs each ``Config`` built checked (the whole-config rules are per job)."""
    counts: list[int] = []
    original = Config.__post_init__

    def counting(self: Config) -> None:
        counts.append(len(tuple(self.jobs)))
        original(self)

    monkeypatch.setattr(Config, "__post_init__", counting)
    yield counts


def test_declaring_n_jobs_checks_each_job_a_bounded_number_of_times(jobs_checked: list[int]) -> None:
    app = _app()
    n = 200
    for i in range(n):
        app.cron("* * * * *", name=f"job-{i}")(_noop)
    # Re-checking the whole configuration at each declaration checks n(n+1)/2 = 20,100 jobs.
    assert sum(jobs_checked) <= n, f"{sum(jobs_checked)} job checks for {n} declarations"
    assert len(app.jobs) == n


def test_declaration_still_refuses_duplicates_and_a_deadline_within_max_skew() -> None:
    app = _app(max_skew="2s")
    app.cron("* * * * *", name="a")(_noop)
    with pytest.raises(ConfigError, match=r"^job 'a' is declared twice: expected unique job names$"):
        app.cron("*/5 * * * *", name="a")(_noop)
    with pytest.raises(ConfigError) as refused:
        app.cron("* * * * *", name="b", starting_deadline="1s")(_noop)
    assert str(refused.value) == (
        "App: job 'b': field 'starting_deadline': '1s' must be longer than cluster max_skew '2s' "
        "(a node whose clock lags by max_skew could never vote)"
    )
    # A refused declaration leaves nothing behind; the whole config is still valid.
    assert sorted(app.jobs) == ["a"]
    Config(app.cluster, tuple(app.jobs.values()), source="App")


def test_jobs_with_one_expression_share_its_plan() -> None:
    app = _app()
    for name in ("a", "b"):
        app.cron("*/5 * * * *", name=name, timezone="Europe/Berlin")(_noop)
    app.cron("0 * * * *", name="c")(_noop)
    a, b, c = (app.jobs[n].schedule for n in ("a", "b", "c"))
    assert a._plan is not None and b._plan is not None and c._plan is not None
    assert a._plan is b._plan
    assert a._plan.minutes is b._plan.minutes
    # Another expression: its own minutes, the same hours (equal field sets are one set).
    assert c._plan.minutes is not a._plan.minutes
    assert c._plan.hours is a._plan.hours
    assert a.min_interval_ms == b.min_interval_ms == 5 * 60_000


def test_h_jobs_share_a_plan_only_when_their_h_values_agree() -> None:
    by_resolved: dict[str, list[Schedule]] = {}
    for i in range(200):  # 200 names over 60 minutes: some agree (SHA-256 of the name decides)
        s = Schedule.parse("H * * * *", job=f"job-{i}")
        by_resolved.setdefault(s.resolved_expr, []).append(s)
    shared = [group for group in by_resolved.values() if len(group) > 1]
    assert shared, "no two of 200 names drew the same minute"
    for group in by_resolved.values():
        assert all(s._plan is group[0]._plan for s in group)
    first, second = (group[0] for group in itertools.islice(by_resolved.values(), 2))
    assert first._plan is not second._plan
    assert first._plan is not None and second._plan is not None
    assert first._plan.hours is second._plan.hours


_ITEMS = {
    "second": ["0", "*", "*/15", "H", "H/20", "5-10", "30"],
    "minute": ["*", "*/5", "0", "H", "H/15", "H(0-29)", "H(10-40)/10", "0,30", "15-45/5"],
    "hour": ["*", "H", "H/6", "9-17", "0", "*/2"],
    "dom": ["*", "1", "H", "H(1-15)", "1-7", "*/10"],
    "month": ["*", "jan", "H", "1-6", "*/3"],
    "dow": ["*", "mon-fri", "H", "0", "7", "sun,wed"],
}


@st.composite
def _expression(draw: st.DrawFn) -> str:
    fields = ["minute", "hour", "dom", "month", "dow"]
    if draw(st.booleans()):
        fields.insert(0, "second")
    return " ".join(
        ",".join(draw(st.lists(st.sampled_from(_ITEMS[f]), min_size=1, max_size=2, unique=True)))
        for f in fields
    )


@settings(max_examples=300, deadline=None)
@given(
    expr=st.one_of(_expression(), st.sampled_from(sorted(cron.ALIASES))),
    jobs=st.lists(st.text("abcxyz-0123456789", min_size=1, max_size=8), min_size=2, max_size=4),
)
def test_a_shared_plan_is_the_plan_compiled_afresh_for_each_job(expr: str, jobs: list[str]) -> None:
    """Whatever was compiled before (for other jobs), a job gets its own H values, as uncached."""
    for job in jobs:
        try:
            fresh = cron._compile(cron.ALIASES.get(expr.lower(), expr), job)
        except cron.InvalidCron as exc:
            with pytest.raises(cron.InvalidCron, match=f"^{re.escape(str(exc))}$"):
                cron.compile_cron(expr, job)
            continue
        assert cron.compile_cron(expr, job) == fresh
        parsed = Schedule.parse(expr, job=job)
        assert parsed._plan == fresh
        assert parsed.min_interval_ms == schedule._cron_min_interval_ms.__wrapped__(fresh)
