"""Tests for the planted bugs the rest of the suite let through (tests/mutation/mutants.toml).

Each test here was written after its bug survived a run of
``python -m tests.mutation.run``: the mutant's name is in the test's
docstring, so a reader can plant it again (``--only NAME``) and watch this
test fail. The admin-token ones live in ``test_web_tokens.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from quorum_cron.config.schedule import Schedule
from quorum_cron.core.model import SlotState, SweepParams, VoteRequest
from quorum_cron.redact import redact_text, redact_url
from quorum_cron.store.base import Store
from quorum_cron.store.memory import MemoryStore
from quorum_cron.store.redis import RedisStore
from tests.test_import_crontab import only_job


def test_a_password_holding_at_signs_is_masked_whole() -> None:
    """redact-first-at: the userinfo ends at the *last* ``@``; cut at the first, the rest of the
    password was printed (``redis://user:***@ss@host``), which "the password is not in the output"
    does not notice."""
    assert redact_url("redis://user:p@ss@host:6379/0") == "redis://user:***@host:6379/0"
    assert redact_url("redis://a@b@c@host") == "redis://***@host"
    assert redact_text("to redis://:x@y@z@h:1/0 now") == "to redis://:***@h:1/0 now"


def test_secret_query_parameters_are_found_in_any_case() -> None:
    """redact-query-case: ``?PASSWORD=`` and ``Sentinel_Password=`` are as secret as lower case."""
    assert redact_url("redis://h/0?PASSWORD=hunter2&db=1") == "redis://h/0?PASSWORD=***&db=1"
    assert redact_url("redis://h/0?Sentinel_Password=s3") == "redis://h/0?Sentinel_Password=***"


def test_a_url_ends_at_any_whitespace() -> None:
    """redact-text-tab-ends-nothing: a tab or newline ends a URL as a space does; a URL that ran on
    to the next one swallowed the text between them into its masked userinfo."""
    text = "url=redis://:pw1@h1:1/0\tbackup=redis://:pw2@h2:2/0\nnext=line@example"
    assert redact_text(text) == "url=redis://:***@h1:1/0\tbackup=redis://:***@h2:2/0\nnext=line@example"


def test_cron_sets_logname_and_user_after_the_files_settings() -> None:
    """crontab-logname-from-file: cron sets LOGNAME (like USER) to the owner after reading the
    file's settings, so a ``LOGNAME=`` line there never reaches the job."""
    job = only_job("LOGNAME=mallory\nUSER=mallory\n0 0 * * * /bin/true\n")
    assert (job.env["LOGNAME"], job.env["USER"]) == ("alice", "alice")


def test_random_delay_maps_to_h_only_while_the_range_stays_inside_the_hour() -> None:
    """crontab-random-delay-past-the-hour: minute 50 plus 9 minutes is H(50-59); plus 10 would need
    minute 60, so the job keeps its minute and the comment says the delay was not mapped."""
    assert only_job("RANDOM_DELAY=9\n50 3 * * * a\n").schedule_expr == "H(50-59) 3 * * *"
    job = only_job("RANDOM_DELAY=10\n50 3 * * * a\n")
    assert job.schedule_expr == "50 3 * * *"


def test_a_weekly_schedule_written_with_7_for_sunday_is_seven_days_apart() -> None:
    """cron-sunday-7: ``7`` is Sunday for the schedule's own day test (min_interval_ms, which sizes
    the default starting deadline and the web timeline's window), not only for croniter."""
    for expr in ("0 12 * * 7", "0 12 * * 0", "0 12 * * SUN"):
        assert Schedule.parse(expr, job="j").min_interval_ms == 7 * 86_400_000, expr
    assert Schedule.parse("0 12 * * 5-7", job="j").min_interval_ms == 86_400_000


# ------------------------------------------------------------------------ the fenced paths, Redis and model

F = 1_700_000_000_000
DEADLINE = 5_000
LEASE = 3_000
NODES = ("n1", "n2", "n3")


def _reader(now: list[int]) -> Callable[[], int]:
    """A store clock that reads ``now[0]`` (the test moves it)."""
    return lambda: now[0]


def _on_both_stores(client: redis.Redis, script: Callable[[Store, list[int]], list[Any]]) -> list[Any]:
    """``script(store, now)`` on the Redis scripts and on the model at the same store times.

    The replies must be equal; the model's are returned for the test's own
    assertions (so a bug planted in both at once is caught too). The
    random walk of test_store_contract.py compares the two as well, but
    takes minutes and meets an exact boundary only by chance; these are the
    boundaries, one step each.
    """
    replies = []
    for make in (lambda clock: RedisStore(client, "gaps", clock=clock), MemoryStore):
        now = [F]
        replies.append(script(make(_reader(now)), now))
    assert replies[0] == replies[1], f"redis replied\n  {replies[0]}\nmodel replied\n  {replies[1]}"
    return replies[1]


def _commit(store: Store, fire: int) -> tuple[str, int]:
    store.vote([VoteRequest("j", fire, n, "h", 3, 250, DEADLINE) for n in NODES])
    slot = store.slot("j", fire)
    assert slot.state == SlotState.COMMITTED, slot
    return slot.executor, slot.token


def test_fence_refusals_and_lease_boundaries_on_both_stores(redis_client: redis.Redis) -> None:
    """lua-fence-forgets-token, lua-fence-deadline-inclusive, lua-fence-renew-keeps-lease,
    lua-sweep-lease-inclusive, lua-sweep-at-most-once-reruns, memory-sweep-lease-inclusive: a start
    under another token or by another node is refused; a start in the last millisecond of the
    starting deadline is accepted and one a millisecond later refused; a renew moves the lease
    end; the sweep leaves a run alone in the lease's last millisecond and ends it ``lost`` (not
    re-run: at-most-once) one millisecond later."""

    def script(store: Store, now: list[int]) -> list[Any]:
        ex, tk = _commit(store, F)
        other = next(n for n in NODES if n != ex)
        out: list[Any] = [
            store.start("j", F, ex, tk + 1, LEASE),
            store.start("j", F, ex, tk - 1, LEASE),
            store.start("j", F, other, tk, LEASE),
        ]
        now[0] = F + DEADLINE
        out.append(store.start("j", F, ex, tk, LEASE))
        now[0] = F + DEADLINE + 1_000
        out.append(store.renew("j", F, ex, tk, LEASE))
        out.append(store.finish("j", F, ex, tk - 1, True, "exit 0"))
        now[0] = F + DEADLINE + 1_000 + LEASE
        out.append(store.sweep([SweepParams("j", DEADLINE, 60_000)]).changed)
        now[0] += 1
        out.append(store.sweep([SweepParams("j", DEADLINE, 60_000)]).changed)
        late = F + 60_000
        now[0] = late
        late_ex, late_tk = _commit(store, late)
        now[0] = late + DEADLINE + 1
        out.append(store.start("j", late, late_ex, late_tk, LEASE))
        return out

    higher, lower, not_executor, started, renewed, stale_finish, at_end, after, too_late = _on_both_stores(
        redis_client, script
    )
    assert not higher.ok and "stale token" in higher.reason
    assert not lower.ok and "stale token" in lower.reason
    assert not not_executor.ok and "executor" in not_executor.reason
    assert not too_late.ok and too_late.reason == "starting deadline passed"
    assert started.ok and started.slot.lease_until_ms == F + DEADLINE + LEASE
    assert renewed.ok and renewed.slot.lease_until_ms == F + DEADLINE + 1_000 + LEASE
    assert not stale_finish.ok and "stale token" in stale_finish.reason
    assert at_end == []
    [lost] = after
    assert (lost.fire_ms, lost.state) == (F, SlotState.LOST)


def test_a_retry_waits_out_its_backoff_and_the_last_allowed_failure_ends_the_slot(
    redis_client: redis.Redis,
) -> None:
    """lua-fence-retry-count, lua-sweep-ignores-backoff, memory-retry-backoff-dropped,
    memory-paused-failure-retried: with retries = 1 the first failure is retried after its backoff
    (the sweep's start timeout counts from the end of the backoff, not from the reassignment) and
    the second ends the slot ``failed``; a failure while the job is paused is not retried."""
    backoff, start_timeout = 10_000, 2_000

    def script(store: Store, now: list[int]) -> list[Any]:
        ex, tk = _commit(store, F)
        assert store.start("j", F, ex, tk, LEASE).ok
        now[0] = F + 500
        out: list[Any] = [store.finish("j", F, ex, tk, False, "exit 1", 1, backoff)]
        retry = store.slot("j", F)
        now[0] = F + 500 + start_timeout + 1  # past the start timeout, inside the backoff
        out.append(store.sweep([SweepParams("j", DEADLINE, start_timeout)]).changed)
        now[0] = F + 500 + backoff - 1
        out.append(store.start("j", F, retry.executor, retry.token, LEASE))
        now[0] = F + 500 + backoff
        out.append(store.start("j", F, retry.executor, retry.token, LEASE))
        out.append(store.finish("j", F, retry.executor, retry.token, False, "exit 1", 1, backoff))
        paused = F + 60_000
        now[0] = paused
        pex, ptk = _commit(store, paused)
        assert store.start("j", paused, pex, ptk, LEASE).ok
        store.pause("j", "ops", "deploy")
        out.append(store.finish("j", paused, pex, ptk, False, "exit 1", 1, backoff))
        out.append(store.ledger("j", 10))
        return out

    first, swept, early, due, last, while_paused, ledger = _on_both_stores(redis_client, script)
    assert first.ok and first.slot.state == SlotState.COMMITTED and first.slot.token > 0
    assert first.slot.not_before_ms == F + 500 + backoff
    assert swept == []
    assert not early.ok and due.ok and due.slot.runs == 2
    assert last.ok and last.slot.state == SlotState.FAILED and last.slot.reason == "job failed"
    assert while_paused.slot.state == SlotState.FAILED
    assert while_paused.slot.reason == "job failed; no retry: paused by ops"
    assert [(e.fire_ms, e.state) for e in reversed(ledger)] == [
        (F, SlotState.RETRYING),
        (F, SlotState.FAILED),
        (F + 60_000, SlotState.FAILED),
    ]
    assert ledger[-1].token == first.slot.token - 1 and ledger[-2].token == first.slot.token


def test_an_old_slot_that_ends_late_keeps_the_high_water_mark(redis_client: redis.Redis) -> None:
    """lua-hw-lowered: the mark is the latest decided fire time; an earlier slot that ends after a
    later one was decided (a lone vote swept ``missed``, a run that finishes late) must not lower
    it, or a restarting node would vote again for slots that were decided."""
    later = F + 20_000

    def script(store: Store, now: list[int]) -> list[Any]:
        store.vote([VoteRequest("j", F, "n1", "h", 3, 250, DEADLINE)])  # a lone vote: stays proposed
        now[0] = later
        ex, tk = _commit(store, later)
        marks = [store.high_waters(["j"])]
        now[0] = later + DEADLINE
        assert store.sweep([SweepParams("j", DEADLINE, 60_000)]).changed[0].state == SlotState.MISSED
        marks.append(store.high_waters(["j"]))
        assert store.start("j", later, ex, tk, LEASE).ok
        assert store.finish("j", later, ex, tk, True, "exit 0").ok
        marks.append(store.high_waters(["j"]))
        return marks

    assert _on_both_stores(redis_client, script) == [[later], [later], [later]]
