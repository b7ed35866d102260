"""The core's retry queue after the store answered with an error (quorum_cron/core/retries.py).

A missed record the store refused backs off to 16x ``retry_ms``; once the
store answers a call of the same job without an error, the refusal has
ended and the record goes at once. Backed off instead, it waited while the
job's later slots raised the high-water mark past it, and a whole-cluster
restart in that wait left its slot with no ledger entry (explorer seed
104798, ``tests/test_sim_bugs.py``).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.core.actions import ReadHighWater, RecordMissed, Start, Sweep, Vote
from quorum_cron.core.model import VoteRequest
from quorum_cron.core.retries import MAX_RETRY_DOUBLINGS, RetryQueue, jobs_of

T0 = 1_700_000_000_000


def _backed_off(q: RetryQueue, action: RecordMissed, failures: int) -> int:
    """Fail ``action`` ``failures`` times in a row (store answering with an error); the last time."""
    at = 0
    for _ in range(failures):
        q.failed(action, at, reachable=True)
        at = q.next_at(reachable=True)
        assert q.due(at, reachable=True) == [action]
    q.failed(action, at, reachable=True)
    return at


def test_a_reply_of_the_same_job_sends_its_refused_record_at_once() -> None:
    q = RetryQueue(retry_ms=500)
    record = RecordMissed("a", T0, 500, "no quorum before the deadline")
    at = _backed_off(q, record, 6)
    assert q.next_at(reachable=True) == at + (500 << MAX_RETRY_DOUBLINGS)  # 8 s away
    q.release_jobs(["a"])
    assert q.next_at(reachable=True) == 0 and q.due(at + 1, reachable=True) == [record]
    q.failed(record, at + 1, reachable=True)  # refused again: its backoff starts over
    assert q.next_at(reachable=True) == at + 1 + 500


def test_another_jobs_reply_leaves_a_refused_record_backing_off() -> None:
    """A refusal of one job's keys (a corrupt value) is not ended by other jobs' replies: its
    record keeps its backoff instead of going out at every reply of the cluster."""
    q = RetryQueue(retry_ms=500)
    record = RecordMissed("a", T0, 500, "why")
    at = _backed_off(q, record, 6)
    q.release_jobs(["b", "c"])
    assert q.next_at(reachable=True) == at + (500 << MAX_RETRY_DOUBLINGS)
    assert q.refused == {"a"}


def test_a_too_early_answer_is_no_refusal_a_reply_ends() -> None:
    """'Too early' (a node whose clock runs ahead) keeps backing off whatever the job's replies:
    released by them, a node ten minutes ahead asked again at each (tests/test_core_clock_ahead.py)."""
    q = RetryQueue(retry_ms=500)
    record = RecordMissed("a", T0, 500, "why")
    q.not_yet(record, 0)
    assert q.refused == set()
    q.release_jobs(["a"])
    assert q.next_at(reachable=True) == 500


def test_a_high_water_read_is_released_by_a_reply_of_any_of_its_jobs() -> None:
    q = RetryQueue(retry_ms=500)
    read = ReadHighWater(("a", "b"))
    q.failed(read, 0, reachable=True)
    q.release_jobs(["b"])
    assert q.next_at(reachable=True) == 0


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=6), st.sets(st.sampled_from("abcd")))
def test_release_moves_exactly_the_replied_jobs_and_keeps_the_order_they_failed(
    failing: list[str], replied: set[str]
) -> None:
    q = RetryQueue(retry_ms=500)
    records = [RecordMissed(job, T0 + i, 500, "why") for i, job in enumerate(failing)]
    for i, r in enumerate(records):
        q.failed(r, i, reachable=True)
    q.release_jobs(replied)
    now = {r for at, r in q.pending() if at == 0}
    assert now == {r for r in records if r.job in replied}
    assert q.due(10**9, reachable=True) == records  # (all due later: still in the order they failed)


def test_the_jobs_a_store_call_is_about() -> None:
    vote = Vote((VoteRequest("a", T0, "n1", "h", 2, 250, 500), VoteRequest("b", T0, "n1", "h", 2, 250, 500)))
    assert list(jobs_of(vote)) == ["a", "b"]
    assert list(jobs_of(Start("c", T0, 1, 1_000))) == ["c"]
    assert list(jobs_of(ReadHighWater(("a", "d")))) == ["a", "d"]
    assert list(jobs_of(Sweep(()))) == []
