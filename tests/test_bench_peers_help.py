"""``peers.py --help`` lists ``--scale``, which the docs use (``peers.py --scale --jobs 100000``).

Why: ``--scale`` is taken before parsing and handed to peers_scale.py, so
it was missing from the help a reader checks the docs' commands against.
"""

from __future__ import annotations

import pytest

from tests.benchmark_module import load_benchmark

peers = load_benchmark("peers.py", "bench_peers_help")


def test_help_lists_scale(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        peers.main(["--help"])
    assert stopped.value.code == 0
    assert "--scale" in capsys.readouterr().out
