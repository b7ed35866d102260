"""The config-side CLI: ``validate`` and ``next``, their output, and each bad input's error and exit code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main

EXAMPLES = Path(__file__).parents[1] / "examples"
CLUSTER = str(EXAMPLES / "cluster.toml")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_validate_ok_prints_summary() -> None:
    code, out, err = run("validate", CLUSTER)
    assert code == 0, err
    assert err == ""
    assert f"{CLUSTER}: ok" in out
    assert "cluster billing-prod: N=3 Q=2" in out
    assert "redis: redis://:***@redis.internal:6379/0" in out and "change-me" not in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert set(lines) == {"nightly-backup", "invoice-run", "cache-warm", "queue-depth-probe"}
    assert "30 2 * * *" in lines["nightly-backup"] and "Europe/Berlin" in lines["nightly-backup"]
    assert re.search(r"H \* \* \* \* \(\d+ \* \* \* \*\)", lines["cache-warm"])
    assert re.search(r"next \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$", lines["invoice-run"])


def test_validate_names_the_redis_url_the_environment_overrides_it_with() -> None:
    """validate printed the file's URL (or "(not set)") while QUORUM_CRON_REDIS_URL, which the agent
    takes over it, pointed elsewhere: the summary now says so, password hidden."""
    result = CliRunner(env={"QUORUM_CRON_REDIS_URL": "redis://:hunter2@other:6380/1"}).invoke(
        main, ["validate", CLUSTER]
    )
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("redis: ")]
    assert line == (
        "redis: redis://:***@redis.internal:6379/0; "
        "the agent here uses QUORUM_CRON_REDIS_URL: redis://:***@other:6380/1"
    ), line
    assert "hunter2" not in result.output


def test_validate_prints_every_error_and_exits_1() -> None:
    code, out, err = run("validate", str(EXAMPLES / "invalid.toml"))
    assert code == 1
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 7
    assert all(line.startswith("error: ") and "invalid.toml: " in line for line in lines)
    assert any("field 'timeout': '5 parsecs' is not a duration" in line for line in lines)


def test_validate_missing_file_and_bad_toml(tmp_path: Path) -> None:
    code, _, err = run("validate", str(tmp_path / "nope.toml"))
    assert (code, err) == (1, f"error: {tmp_path / 'nope.toml'}: no such file\n")
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster\n")
    code, _, err = run("validate", str(bad))
    assert code == 1 and err.startswith(f"error: {bad}: invalid TOML: ") and "line 1" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # tomllib raised ValueError for an integer past Python's 4,300-digit limit...
        ("[cluster]\nname = 'x'\nsize = 3\nlease = " + "1" * 5000 + "\n", "a number too long to read"),
        # ...and RecursionError for deeply nested arrays: both a traceback from `validate`.
        ("[cluster]\nname = 'x'\nsize = 3\nx = " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply"),
        # A duration amount past that limit was a ValueError in parse_duration.
        ("[cluster]\nname = 'x'\nsize = 3\nlease = '" + "1" * 5000 + "s'\n", "more than 30 digits"),
        # A BOM was "Invalid statement (at line 1, column 1)", not naming the invisible cause.
        ("\ufeff[cluster]\nname = 'x'\nsize = 3\n", "byte order mark"),
    ],
    ids=["huge-integer", "deep-nesting", "huge-duration", "bom"],
)
def test_validate_an_unreadable_value_is_one_line_not_a_traceback(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and not isinstance(result.exception, (ValueError, RecursionError))
    assert result.stderr.startswith(f"error: {path}: ") and result.stderr.count("\n") == 1, result.stderr
    assert expected in result.stderr and len(result.stderr) < 300


def test_next_prints_zone_and_utc_across_spring_forward() -> None:
    code, out, err = run(
        "next", "nightly-backup", "--config", CLUSTER, "-n", "3", "--after", "2026-03-28T12:00:00Z"
    )
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "2026-03-29T03:00:00+02:00  2026-03-29T01:00:00+00:00",
        "2026-03-30T02:30:00+02:00  2026-03-30T00:30:00+00:00",
        "2026-03-31T02:30:00+02:00  2026-03-31T00:30:00+00:00",
    ]


def test_next_naive_after_is_in_the_jobs_zone() -> None:
    # 08:59 New York time, not UTC: the 09:00 run of the same day comes next.
    code, out, _ = run("next", "invoice-run", "--config", CLUSTER, "-n", "1", "--after", "2026-07-01T08:59")
    assert code == 0
    assert out == "2026-07-01T09:00:00-04:00  2026-07-01T13:00:00+00:00\n"


def test_next_defaults_to_now_and_five() -> None:
    code, out, _ = run("next", "queue-depth-probe", "--config", CLUSTER)
    assert code == 0 and len(out.splitlines()) == 5


def test_next_reads_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUORUM_CRON_CONFIG", CLUSTER)
    code, out, _ = run("next", "cache-warm", "-n", "2", "--after", "2026-01-01T00:00:00+00:00")
    assert code == 0 and len(out.splitlines()) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["next", "nope", "--config", CLUSTER],
            "error: " + CLUSTER + ": no job named 'nope' (known jobs: cache-warm,",
        ),
        (
            ["next", "cache-warm", "--config", CLUSTER, "-n", "0"],
            "error: -n 0 is out of range (expected 1 to 1000)",
        ),
        (["next", "cache-warm", "--config", CLUSTER, "-n", "1001"], "error: -n 1001 is out of range"),
        (
            ["next", "cache-warm", "--config", CLUSTER, "--after", "tomorrow"],
            "error: --after 'tomorrow' is not an ISO-8601 time",
        ),
        (
            ["next", "cache-warm", "--config", "/nonexistent/c.toml"],
            "error: Invalid value for '--config': File '/nonexistent/c.toml' does not exist.",
        ),
        (["next", "backup", "--config", str(EXAMPLES / "invalid.toml")], "error: "),
    ],
)
def test_next_bad_input_is_one_line_and_exit_1(args: list[str], message: str) -> None:
    code, out, err = run(*args)
    assert code == 1
    assert out == ""
    assert err.startswith(message)
    if "invalid.toml" not in args[-1]:
        assert err.count("\n") == 1


def test_usage_errors_are_one_error_line_with_exit_1() -> None:
    """Click's own usage errors take the tool's one error style (issue 26), not click's 3 lines and exit 2."""
    for args, expected in (
        (("next", "cache-warm"), "error: Missing option '--config'."),
        (("next", "cache-warm", "--config", CLUSTER, "-n", "abc"), "error: Invalid value for '-n': 'abc'"),
        (("frobnicate",), "error: No such command 'frobnicate'."),
    ):
        code, out, err = run(*args)
        assert (code, out) == (1, ""), (args, code, out, err)
        assert len(err.splitlines()) == 1 and err.startswith(expected), (args, err)


def test_version_and_help() -> None:
    code, out, _ = run("--version")
    assert code == 0 and out.startswith("quorum-cron, version ")
    code, out, _ = run("--help")
    assert code == 0 and "validate" in out and "next" in out


def test_python_dash_m() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    result = subprocess.run(
        [sys.executable, "-m", "quorum_cron", "validate", CLUSTER], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "cluster billing-prod" in result.stdout


def test_validate_warns_of_a_starting_deadline_no_takeover_can_meet(tmp_path: Path) -> None:
    """`@every 5s` defaults to a 2.5 s starting deadline, under the default 5 s start_timeout: a
    takeover, due start_timeout after the commit, comes past the deadline, so a slot whose executor
    does not start is missed. Valid (a user may mean it), but validate says so (a newcomer's audit)."""
    path = tmp_path / "c.toml"
    path.write_text(
        '[cluster]\nname = "prod"\nsize = 3\n\n'
        '[[jobs]]\nname = "fast"\nschedule = "@every 5s"\ncommand = ["/bin/true"]\n\n'
        '[[jobs]]\nname = "slow"\nschedule = "* * * * *"\ncommand = ["/bin/true"]\n'
    )
    code, out, err = run("validate", str(path))
    assert code == 0 and f"{path}: ok" in out, err
    assert err.splitlines() == [
        "warning: job 'fast': starting_deadline 2s500ms is not above start_timeout 5s: a slot whose executor "
        "does not start is missed, never taken over (set starting_deadline above 5s, or start_timeout "
        "below 2s500ms)"
    ]


def test_validate_warns_of_ten_jobs_at_most_and_not_on_one_node(tmp_path: Path) -> None:
    """A crontab import may hold thousands of such jobs: ten lines, then how many more. A
    one-node cluster has no takeover to miss: nothing is said."""
    jobs = "".join(
        f'\n[[jobs]]\nname = "j{i:02d}"\nschedule = "@every 5s"\ncommand = ["/bin/true"]\n' for i in range(12)
    )
    path = tmp_path / "c.toml"
    path.write_text(f'[cluster]\nname = "prod"\nsize = 3\n{jobs}')
    code, _, err = run("validate", str(path))
    assert code == 0 and len(err.splitlines()) == 11, err
    assert err.splitlines()[-1] == "warning: and 2 more jobs like these"
    path.write_text(f'[cluster]\nname = "prod"\nsize = 1\n{jobs}')
    code, _, err = run("validate", str(path))
    assert code == 0 and err == "", err
