"""Exponential retry backoff: the delay function, the core's Finish, the store's "not before", the config.

A failed run's retry waits ``min(retry_backoff * 2**(n-1), retry_backoff_max)``
after attempt ``n``, shortened by up to ``retry_jitter`` of itself by an
amount every node derives alike from ``(job, fire_ms, n)``. The core computes
it and hands it to the store's ``finish`` as the retry's backoff; the store
(unchanged) then refuses the retry's start before it is due.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.config.file import parse_config
from quorum_cron.config.settings import InvalidConfig, JobSpec
from quorum_cron.core.actions import Action, CoreJob, Finish
from quorum_cron.core.backoff import retry_delay_ms
from quorum_cron.core.model import SlotState
from quorum_cron.errors import ConfigError
from tests.core_driver import Driver, Every

T0 = 1_699_999_980_000
DAY = 86_400_000

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=20)
fires = st.integers(min_value=0, max_value=2**45)
bases = st.integers(min_value=0, max_value=DAY)
jitters = st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=1.0, allow_nan=False))


def unjittered(base: int, cap: int, n: int) -> int:
    return min(base * int(2 ** (max(n, 1) - 1)), max(base, cap))


@given(job=names, fire=fires, base=bases, cap=bases, n=st.integers(min_value=1, max_value=101))
def test_without_jitter_the_delay_doubles_per_attempt_up_to_the_cap(
    job: str, fire: int, base: int, cap: int, n: int
) -> None:
    got = retry_delay_ms(job, fire, n, base, cap, 0.0)
    assert got == unjittered(base, cap, n)
    assert got <= retry_delay_ms(job, fire, n + 1, base, cap, 0.0) <= max(base, cap)  # monotone in n


attempts = st.integers(min_value=0, max_value=101)


@given(job=names, fire=fires, base=bases, cap=bases, n=attempts, jitter=jitters)
def test_a_jittered_delay_is_within_its_bounds_and_the_same_on_every_call(
    job: str, fire: int, base: int, cap: int, n: int, jitter: float
) -> None:
    full = unjittered(base, cap, n)
    got = retry_delay_ms(job, fire, n, base, cap, jitter)
    # Shortened by at most the jitter's share (applied in millionths), never lengthened: the cap holds.
    assert full * (1 - jitter) - full / 1_000_000 - 1 <= got <= full
    assert got == retry_delay_ms(job, fire, n, base, cap, jitter)


def test_the_jitter_spreads_slots_and_does_not_depend_on_the_process() -> None:
    """Different slots get different waits; the same slot the same wait in another interpreter
    (Python salts ``hash()`` per process: a node must not)."""
    waits = {retry_delay_ms("backup", T0 + i * 60_000, 2, 10_000, 60_000, 0.5) for i in range(20)}
    assert len(waits) > 10 and all(10_000 <= w <= 20_000 for w in waits)
    mine = [retry_delay_ms("backup", T0, n, 10_000, 60_000, 0.5) for n in range(1, 6)]
    code = (
        "from quorum_cron.core.backoff import retry_delay_ms;"
        f"print([retry_delay_ms('backup', {T0}, n, 10_000, 60_000, 0.5) for n in range(1, 6)])"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        )
        assert out.stdout.strip() == str(mine)


class FinishRecorder(Driver):
    """The core driver, keeping every Finish a node sends."""

    def __init__(self, jobs: list[CoreJob], **kw: object) -> None:
        super().__init__(jobs, **kw)  # type: ignore[arg-type]
        self.finishes: list[Finish] = []

    def _apply(self, name: str, actions: list[Action]) -> None:
        self.finishes.extend(a for a in actions if isinstance(a, Finish))
        super()._apply(name, actions)


def failing_job(retries: int, backoff_ms: int, max_ms: int, jitter: float = 0.0) -> CoreJob:
    return CoreJob(
        name="a",
        schedule=Every(60_000),  # T0 is a slot; retries are over before the next one
        spec_hash="h",
        deadline_ms=10_000,
        timeout_ms=60_000,
        retries=retries,
        retry_backoff_ms=backoff_ms,
        retry_backoff_max_ms=max_ms,
        retry_jitter=jitter,
    )


def test_each_failure_finishes_with_the_doubled_delay_and_the_store_waits_it_out() -> None:
    d = FinishRecorder([failing_job(retries=4, backoff_ms=1_000, max_ms=5_000)], n=3, run_ms=100)
    d.succeeds = lambda run: False
    d.run_until(T0 + 30_000)
    failed = [f for f in d.finishes if f.fire_ms == T0 and not f.succeeded]
    # After the 1st, 2nd, 3rd, 4th failure: 1 s, then doubled (2 s, 4 s), then capped (5 s);
    # the 5th failure is the last (its value is not used).
    assert [f.retry_backoff_ms for f in failed[:4]] == [1_000, 2_000, 4_000, 5_000]
    assert [f.token for f in failed] == sorted({f.token for f in failed})  # one Finish per attempt
    # The store's side (memory model; the contract suite holds Redis to it): each retry
    # started no earlier than its failure plus that delay, and the ledger says so.
    entries = list(reversed(d.store.ledger("a", 10)))
    assert [e.state for e in entries] == [SlotState.RETRYING] * 4 + [SlotState.FAILED]
    for entry, after, delay in zip(entries, entries[1:], (1_000, 2_000, 4_000, 5_000), strict=False):
        assert entry.reason.endswith(f"retry after {delay} ms")
        assert after.started_ms >= entry.finished_ms + delay
    assert d.store.slot("a", T0).runs == 5


def test_a_retry_is_refused_before_the_delay_the_core_asked_for() -> None:
    """The store holds the retry to the core's (doubled) delay, not to the job's first backoff."""
    d = FinishRecorder([failing_job(retries=2, backoff_ms=1_000, max_ms=60_000)], n=1, run_ms=100)
    d.succeeds = lambda run: run.token >= 3  # two attempts fail: the second retry is due 2 s later
    d.run_until(T0 + 1_500)  # the first failure's retry ran (1 s), the second attempt failed
    second = [f for f in d.finishes if f.fire_ms == T0 and not f.succeeded][1]
    assert second.retry_backoff_ms == 2_000
    view = d.store.slot("a", T0)
    assert view.state == SlotState.COMMITTED and view.not_before_ms >= d.now_ms + 1_000
    early = d.store.start("a", T0, view.executor, view.token, 15_000)
    assert not early.ok and early.reason == f"retry not due before {view.not_before_ms}"
    d.run_until(T0 + 10_000)
    assert d.store.slot("a", T0).state == SlotState.SUCCEEDED


def test_every_node_finishing_the_same_attempt_asks_for_the_same_jittered_delay() -> None:
    job = failing_job(retries=3, backoff_ms=2_000, max_ms=16_000, jitter=0.5)
    d = FinishRecorder([job], n=3, run_ms=100)
    d.succeeds = lambda run: False
    d.run_until(T0 + 30_000)
    failed = [f for f in d.finishes if f.fire_ms == T0 and not f.succeeded][:3]
    want = [retry_delay_ms("a", T0, n, 2_000, 16_000, 0.5) for n in (1, 2, 3)]
    assert want != [2_000, 4_000, 8_000]  # the jitter took something off
    assert [f.retry_backoff_ms for f in failed] == want
    assert len({d.store.slot("a", T0).executor, *(e.executor for e in d.store.ledger("a", 10))}) > 1


# -- configuration ---------------------------------------------------------------------------------


def config(**job: object) -> str:
    lines = [f"{k} = {v}" for k, v in job.items()]
    return "\n".join(
        [
            "[cluster]",
            'name = "prod"',
            "size = 3",
            "[[jobs]]",
            'name = "backup"',
            'schedule = "0 * * * *"',
            'command = ["/bin/true"]',
            *lines,
        ]
    )


def parse(**job: object) -> JobSpec:
    import tomllib

    return parse_config(tomllib.loads(config(**job)), "qc.toml").jobs[0]


def problems(**job: object) -> str:
    """Every problem of the file, one per line (all found in one run)."""
    import tomllib

    with pytest.raises(InvalidConfig) as err:
        parse_config(tomllib.loads(config(**job)), "qc.toml")
    return "\n".join(err.value.errors)


def test_the_defaults_keep_the_fixed_backoff_and_the_definition_hash() -> None:
    plain = parse(retries=3)
    assert (plain.retry_backoff_ms, plain.retry_backoff_max_ms, plain.retry_jitter) == (10_000, 10_000, 0.0)
    same = parse(retries=3, retry_backoff_max='"10s"', retry_jitter=0)
    assert same.spec_hash == plain.spec_hash
    assert "retry_backoff_max_ms" not in plain.canonical() and "retry_jitter" not in plain.canonical()
    grows = parse(retries=3, retry_backoff_max='"5m"', retry_jitter=0.25)
    assert (grows.retry_backoff_max_ms, grows.retry_jitter) == (300_000, 0.25)
    assert len({plain.spec_hash, grows.spec_hash, parse(retries=3, retry_jitter=0.25).spec_hash}) == 3
    # An int jitter and the same float are one definition (the hash sees 1.0 either way).
    assert parse(retry_jitter=1).spec_hash == parse(retry_jitter=1.0).spec_hash


def test_bad_retry_values_get_one_line_each_naming_the_value() -> None:
    text = problems(retry_backoff='"1m"', retry_backoff_max='"30s"', retry_jitter=1.5)
    lines = text.splitlines()
    assert len(lines) == 2
    assert any(
        "field 'retry_backoff_max': '30s' is shorter than retry_backoff '1m' (expected at least retry_backoff"
        in line
        for line in lines
    )
    assert any("field 'retry_jitter': 1.5 is outside 0-1 (expected a fraction" in line for line in lines)
    assert "field 'retry_jitter': '20%' is a string (expected a fraction" in problems(retry_jitter='"20%"')
    assert "field 'retry_jitter': True is a boolean" in problems(retry_jitter="true")
    assert "field 'retry_backoff_max': '2d' is out of range" in problems(retry_backoff_max='"2d"')
    assert "'1m' cannot be reached from retry_backoff '0s'" in problems(
        retry_backoff='"0s"', retry_backoff_max='"1m"'
    )


def test_the_python_constructor_checks_the_same_rules() -> None:
    shorter = r"field 'retry_backoff_max': '1s' is shorter than retry_backoff '10s'"
    with pytest.raises(ConfigError, match=shorter):
        JobSpec.create("j", "@hourly", command=("true",), retry_backoff_max_ms=1_000)
    with pytest.raises(ConfigError, match=r"field 'retry_jitter': -0.1 is outside 0-1"):
        JobSpec.create("j", "@hourly", command=("true",), retry_jitter=-0.1)
    spec = JobSpec.create("j", "@hourly", command=("true",), retry_backoff_max_ms=60_000, retry_jitter=0.1)
    assert (spec.retry_backoff_max_ms, spec.retry_jitter) == (60_000, 0.1)
