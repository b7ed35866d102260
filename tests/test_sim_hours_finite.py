"""``sim explore`` and ``sim scenario`` refuse an ``--hours`` that is not a finite time, in one line.

And one over 8784 (366 days, a scenario file's bound): ``sim explore`` ran it, and a failing
seed's file then had a duration ``sim replay`` refused.

``nan`` and ``inf`` pass click's ``FloatRange`` (nan compares false to both
bounds): ``sim scenario --config`` and ``sim explore --config`` then ended
in a traceback from the conversion, and ``sim explore`` without a config
blamed the first seed ("explored seed 0 ... raised ValueError").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main

CONFIG = """\
[cluster]
namespace = "small"
size = 3
redis_url = "redis://localhost:6379/0"

[[jobs]]
name = "tick"
schedule = "@every 10s"
command = ["/bin/true"]
"""


@pytest.mark.parametrize("hours", ["nan", "inf", "1e305", "8785"])
@pytest.mark.parametrize(
    "command",
    [["explore", "--seeds", "1"], ["explore", "--seeds", "1", "--config"], ["scenario", "--config"]],
)
def test_an_hours_that_is_no_finite_time_is_refused_in_one_line(
    tmp_path: Path, command: list[str], hours: str
) -> None:
    if command[-1] == "--config":
        path = tmp_path / "c.toml"
        path.write_text(CONFIG, encoding="utf-8")
        command = [*command, str(path)]
    res = CliRunner().invoke(main, ["sim", *command, "--hours", hours], prog_name="quorum-cron")
    assert res.exit_code == 2, (res.exit_code, res.stderr, res.exception)
    [line] = res.stderr.splitlines()
    assert line.startswith("error: ") and "'--hours'" in line, line
