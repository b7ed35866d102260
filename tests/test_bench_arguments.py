"""A benchmark given a value it cannot run with says so at once, in one line naming flag, value and bound.

Why: ``store_vote.py --jobs 0`` and ``memory.py --slots 0`` ended in a
ZeroDivisionError, ``sim_speed.py --nodes 3`` in a KeyError,
``fire_latency.py --nodes 0`` ran forever, ``--voters 6`` failed deep in the
membership parser, and ``sim_speed.py --repeat 0`` or ``web_page.py
--requests 0`` wrote a result of nothing; and argparse printed the usage,
up to five lines, above the line that said what was wrong. Only the
argument parsing runs here: each case must stop before a server or process
is started.
"""

from __future__ import annotations

import sys

import pytest

from tests.benchmark_module import load_benchmark

SCRIPTS = (
    "store_vote",
    "fire_latency",
    "memory",
    "sim_speed",
    "leader_baseline",
    "web_page",
    "run_all",
    "scale",
)
modules = {name: load_benchmark(f"{name}.py", f"bench_args_{name}") for name in SCRIPTS}

CASES = [
    ("store_vote", ["--jobs", "1000", "0"], "argument --jobs: '0': expected an integer >= 1"),
    ("store_vote", ["--slots", "-5"], "argument --slots: '-5': expected an integer >= 1"),
    ("store_vote", ["--voters", "2"], "argument --voters: '2': expected an integer >= 3"),
    ("store_vote", ["--voters", "6"], "--voters 6: expected 3-5 (quorum 3 must be a majority)"),
    ("store_vote", ["--masters", "0"], "argument --masters: '0': expected an integer >= 1"),
    ("fire_latency", ["--nodes", "0"], "argument --nodes: '0': expected an integer >= 2"),
    ("fire_latency", ["--jobs", "0"], "argument --jobs: '0': expected an integer >= 1"),
    ("fire_latency", ["--before", "0"], "argument --before: '0': expected an integer >= 1"),
    ("memory", ["--jobs", "0"], "argument --jobs: '0': expected an integer >= 1"),
    ("memory", ["--slots", "0"], "argument --slots: '0': expected an integer >= 1"),
    ("memory", ["--long-seconds", "1"], "argument --long-seconds: '1': expected a number >= 2"),
    ("memory", ["--long-seconds", "nan"], "argument --long-seconds: 'nan': expected a number >= 2"),
    ("memory", ["--long-retention-ms", "0"], "argument --long-retention-ms: '0': expected an integer >= 1"),
    ("memory", ["--long-ledger", "0"], "argument --long-ledger: '0': expected an integer >= 1"),
    ("sim_speed", ["--nodes", "3"], "argument --nodes: '3': expected an integer >= 5"),
    ("sim_speed", ["--minutes", "0"], "argument --minutes: '0': expected a number >= 1"),
    ("sim_speed", ["--repeat", "0"], "argument --repeat: '0': expected an integer >= 1"),
    ("leader_baseline", ["--nodes", "1"], "argument --nodes: '1': expected an integer >= 2"),
    ("leader_baseline", ["--ttl-ms", "0"], "argument --ttl-ms: '0': expected an integer >= 3"),
    ("leader_baseline", ["--poll-ms", "0"], "argument --poll-ms: '0': expected an integer >= 1"),
    ("web_page", ["--jobs", "0"], "argument --jobs: '0': expected an integer >= 1"),
    ("web_page", ["--entries", "0"], "argument --entries: '0': expected an integer >= 1"),
    ("web_page", ["--requests", "0"], "argument --requests: '0': expected an integer >= 1"),
    ("web_page", ["--requests", "x"], "argument --requests: 'x': expected an integer >= 1"),
    # The usage, up to five lines, is left to --help: the error is one line.
    ("run_all", ["--quick", "--bogus"], "unrecognized arguments: --bogus"),
    ("scale", ["--agents", "0"], "--agents 0: expected an integer >= 1"),
]


@pytest.mark.parametrize(("script", "args", "message"), CASES)
def test_a_bad_size_is_the_parser_error_and_exit_2(
    script: str,
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    main = modules[script].main
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *args])  # the parser names the script from it
    with pytest.raises(SystemExit) as stopped:
        if script == "web_page":  # its main() reads sys.argv
            main()
        else:
            main(args)
    assert stopped.value.code == 2
    assert capsys.readouterr().err == f"{script}.py: error: {message} (--help: the usage)\n"
