"""``check-clock`` says its counts in the number they take: "1 failed query", "1 reply".

A server queried once that did not answer read "0 replies, 1 failed queries", one that did
"1 replies", and the agreement of one server "1 of 1 usable servers". Real servers on loopback:
the NTP responder, and its port once it is closed (refused).
"""

from __future__ import annotations

from click.testing import CliRunner

from quorum_cron.clock.check import check_clock
from tests.ntp_responder import NtpResponder

FAST = ["--sample-interval", "0", "--timeout", "0.5"]


def report(*args: str) -> list[str]:
    return CliRunner().invoke(check_clock, [*args, *FAST]).stdout.splitlines()


def test_one_failed_query() -> None:
    with NtpResponder() as gone:
        refused = gone.address
    assert f"NTP {refused}: 0 replies, 1 failed query" in report("--server", refused, "--samples", "1")


def test_one_reply_of_one_usable_server() -> None:
    with NtpResponder() as ntp:
        lines = report("--server", ntp.address, "--samples", "1")
    assert f"NTP {ntp.address}: 1 reply, 0 failed queries" in lines, lines
    assert any(line.startswith("NTP agreement: 1 of 1 usable server; offset ") for line in lines), lines


def test_plural_counts_stay_plural() -> None:
    with NtpResponder() as ntp:
        lines = report("--server", ntp.address, "--samples", "2")
    assert f"NTP {ntp.address}: 2 replies, 0 failed queries" in lines, lines


def test_the_progress_line_counts_servers_and_samples_in_the_number_they_take() -> None:
    """The stderr progress line said "querying 1 NTP server(s), 2 sample(s) each"."""
    with NtpResponder() as gone, NtpResponder() as other:
        refused = (gone.address, other.address)
    one = CliRunner().invoke(check_clock, ["--server", refused[0], "--samples", "2", *FAST])
    assert one.stderr.splitlines()[0].startswith("querying 1 NTP server, 2 samples each (at most "), (
        one.stderr
    )
    two = CliRunner().invoke(
        check_clock, ["--server", refused[0], "--server", refused[1], "--samples", "1", *FAST]
    )
    assert two.stderr.splitlines()[0].startswith("querying 2 NTP servers, 1 sample each (at most "), (
        two.stderr
    )
