"""The lines docs/clock.md quotes of ``check-clock`` are what it prints.

The page quoted a resolver failure as "failed: cannot resolve 'ntp.example': ... (4 of 4
queries)" after the command had come to say "failed: host name does not resolve (resolver:
...)". Each quote is compared with a real run: a name that cannot resolve (``.invalid``, RFC
6761), and a store URL at a port where nothing listens (a bound socket that never listens).
The resolver's own words and the address differ by machine and run; they are set aside.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

from click.testing import CliRunner

from quorum_cron.clock.check import check_clock

PAGE = Path(__file__).resolve().parent.parent / "docs" / "clock.md"
FAST = ["--sample-interval", "0", "--timeout", "0.5"]


def _section() -> str:
    text = PAGE.read_text()
    return text[text.index("## `quorum-cron check-clock`") : text.index("## Tests")]


def _same(line: str) -> str:
    """A line with what differs by machine and run set aside."""
    line = re.sub(r"\(resolver: [^)]*\)", "(resolver: ...)", line)
    return re.sub(r"redis://:\*\*\*@[\w.]+:\d+/0", "redis://:***@HOST/0", line)


def test_the_resolver_failure_it_quotes() -> None:
    quoted = [" ".join(q.split()) for q in re.findall(r"`(failed: [^`]*)`", _section()) if "resolve" in q]
    assert len(quoted) == 1, quoted
    result = CliRunner().invoke(check_clock, ["--server", "ntp.x.invalid", "--samples", "4", *FAST])
    printed = [line.strip() for line in result.stdout.splitlines() if line.startswith("  failed: ")]
    assert _same(quoted[0]) in {_same(line) for line in printed}, (quoted, printed)


def test_the_store_time_failure_it_quotes() -> None:
    quoted = [
        line
        for block in re.findall(r"```\n(.*?)```", _section(), re.S)
        for line in block.splitlines()
        if line.startswith(("store TIME", "verdict:"))
    ]
    assert len(quoted) == 2, quoted
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"redis://:pw@127.0.0.1:{sock.getsockname()[1]}/0"
        result = CliRunner().invoke(check_clock, ["--redis", url])
    assert [_same(line) for line in result.stdout.splitlines()[-2:]] == [_same(line) for line in quoted]
