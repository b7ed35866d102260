"""Notices and triggers from pub/sub are read with the store's bounds (a hint anyone may publish).

An assignment notice ``job\\nfire_ms\\ntoken`` and a trigger ``job\\nfire_ms`` come from a channel
that anyone who may publish in the namespace can write to: numbers that are not plain decimals,
fire times no date holds (a job's environment names the fire time as one) and tokens below 1 (the
store's start at 1) are dropped, as malformed text is.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quorum_cron.store.parse import MAX_FIRE_MS, MAX_INT, parse_notice, parse_trigger
from quorum_cron.store.ports import Notice, Trigger

jobs = st.text(
    st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), min_size=1, max_size=40
)
fires = st.integers(0, MAX_FIRE_MS)
tokens = st.integers(1, MAX_INT)


@given(jobs, fires, tokens)
def test_every_notice_in_bounds_reads_back(job: str, fire: int, token: int) -> None:
    assert parse_notice(f"{job}\n{fire}\n{token}".encode()) == Notice(job, fire, token)
    assert parse_trigger(f"{job}\n{fire}") == Trigger(job, fire)


bad_numbers = st.one_of(
    st.integers(MAX_FIRE_MS + 1, 10**30).map(str),
    st.integers(-(10**30), -1).map(str),
    st.integers(0, 10**6).map(lambda n: f"{n:_}" if n >= 1000 else f" {n}"),  # 1_000, " 5"
    st.sampled_from(["", "+5", "5.0", "1e3", "٣", "0x10", "NaN"]),
)


@given(jobs, bad_numbers)
def test_a_fire_time_out_of_bounds_or_not_a_plain_decimal_is_dropped(job: str, fire: str) -> None:
    assert parse_notice(f"{job}\n{fire}\n5") is None
    assert parse_trigger(f"{job}\n{fire}") is None


@given(jobs, fires, st.one_of(st.integers(-(10**20), 0).map(str), st.integers(MAX_INT + 1, 10**30).map(str)))
def test_a_token_below_1_or_beyond_the_stores_bound_is_dropped(job: str, fire: int, token: str) -> None:
    assert parse_notice(f"{job}\n{fire}\n{token}") is None


def test_malformed_text_is_dropped() -> None:
    assert parse_notice("a\n1000") is None
    assert parse_notice("a\n1000\n3\nextra") is None
    assert parse_trigger("a\n1000\n3") is None
    assert parse_notice(b"\xff\n1000\n3") == Notice(
        "\ufffd", 1000, 3
    )  # (bad UTF-8 replaced: a name no job has)
