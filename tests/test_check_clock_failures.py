"""``check-clock`` prints each distinct failure of a server once, with how many queries it ended.

A server name that does not resolve was printed once per query (4 by default), then again as the
reason the server was unusable. The exit status and the verdict line are unchanged. Only loopback
and a name that cannot resolve (``.invalid``, RFC 6761) are queried.
"""

from __future__ import annotations

import re

from click.testing import CliRunner, Result

from quorum_cron.clock.check import check_clock
from tests.ntp_responder import NtpResponder

FAST = ["--sample-interval", "0", "--timeout", "0.5"]


def run(*args: str) -> Result:
    return CliRunner().invoke(check_clock, [*args, *FAST])


def server_lines(output: str, server: str) -> list[str]:
    """The lines of ``server``'s block of the report."""
    lines = output.splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"NTP {server}: ")))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        block.append(line)
    return block


def test_a_name_that_does_not_resolve_is_said_once() -> None:
    result = run("--server", "nonexistent.invalid")
    assert result.exit_code == 2, result.output
    block = server_lines(result.stdout, "nonexistent.invalid")
    assert block[0] == "NTP nonexistent.invalid: 0 replies, 4 failed queries"
    assert block[-1] == "  unusable: every query failed"
    # One line per distinct failure with its count: one line, "(4 of 4 queries)", on a resolver
    # that fails alike each time. (A resolver that answers "no such name" once and "try again"
    # once makes two lines; the test accepts that and still checks each is said once.)
    failed = block[1:-1]
    said = [
        re.fullmatch(r"  failed: host name does not resolve \(resolver: (.+)\) \((\d) of 4 queries\)", f)
        for f in failed
    ]
    assert failed and all(said), block
    assert len({m[1] for m in said if m}) == len(failed) and sum(int(m[2]) for m in said if m) == 4, block
    verdict = result.stdout.splitlines()[-1]
    assert verdict.startswith(
        "verdict: clock trust unknown: NTP unavailable (nonexistent.invalid: host name does not resolve"
    )
    assert verdict.endswith("and policy is abstain")
    assert result.stdout.count("does not resolve") == len(failed) + 1  # its failed lines and the verdict
    # The product's words, not the resolver's raw "[Errno -2] Name or service not known"; the
    # name is said by the line's context (the server's block, "<server>: " in the verdict), once.
    assert "Errno" not in result.stdout and result.stdout.count("nonexistent.invalid") == 2


def test_each_server_says_its_own_failure_once() -> None:
    with NtpResponder() as gone:
        refused = gone.address
    result = run("--server", refused, "--server", "nonexistent.invalid", "--samples", "3")
    assert result.exit_code == 2, result.output
    assert server_lines(result.stdout, refused) == [
        f"NTP {refused}: 0 replies, 3 failed queries",
        "  failed: connection refused (nothing listening on that port) (3 of 3 queries)",
        "  unusable: every query failed",
    ]
    assert 3 <= len(server_lines(result.stdout, "nonexistent.invalid")) <= 5  # (a line per distinct failure)
    assert result.stdout.splitlines()[-1].startswith("verdict: clock trust unknown: NTP unavailable")


def test_a_single_query_has_no_count() -> None:
    with NtpResponder() as gone:
        refused = gone.address
    result = run("--server", refused, "--samples", "1")
    assert result.exit_code == 2, result.output
    assert server_lines(result.stdout, refused)[1:] == [
        "  failed: connection refused (nothing listening on that port)",
        "  unusable: every query failed",
    ]
