"""A job's starting_deadline checked against the cluster's max_skew names a default as the default.

A job without ``starting_deadline`` under ``max_skew = "1m"`` was told "field 'starting_deadline':
'30s' must be longer than cluster max_skew '1m'": a value its author never wrote, and nothing said
what to change. The file, ``@app.cron`` and a :class:`Config` built in code share the rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.app import App
from quorum_cron.cli import main
from quorum_cron.config.file import parse_config
from quorum_cron.config.settings import ClusterConfig, Config, InvalidConfig, JobSpec
from quorum_cron.errors import ConfigError

_WHY = "a node whose clock lags by max_skew could never vote"


def _file_errors(cluster: dict[str, object], job: dict[str, object]) -> tuple[str, ...]:
    data = {
        "cluster": {"name": "prod", "size": 3, **cluster},
        "jobs": [{"name": "j", "schedule": "* * * * *", "command": ["/bin/true"], **job}],
    }
    with pytest.raises(InvalidConfig) as info:
        parse_config(data, "c.toml")
    return info.value.errors


def test_a_defaulted_deadline_is_named_the_default_with_what_to_change() -> None:
    assert _file_errors({"max_skew": "1m"}, {}) == (
        "c.toml: job 'j': field 'starting_deadline': '30s' (the default for this schedule) must be "
        f"longer than cluster max_skew '1m' ({_WHY}; set starting_deadline above 1m, or max_skew below 30s)",
    )


def test_a_defaulted_max_skew_is_named_the_default() -> None:
    assert _file_errors({}, {"starting_deadline": "100ms"}) == (
        "c.toml: job 'j': field 'starting_deadline': '100ms' must be longer than cluster max_skew "
        f"'250ms' (the default; {_WHY}; set starting_deadline above 250ms, or max_skew below 100ms)",
    )


def test_values_both_written_read_as_before() -> None:
    assert _file_errors({"max_skew": "2s"}, {"starting_deadline": "1s"}) == (
        "c.toml: job 'j': field 'starting_deadline': '1s' must be longer than cluster max_skew "
        f"'2s' ({_WHY})",
    )
    # Written equal to the defaults: the file says which values were written, so none is "the default".
    errors = _file_errors({"max_skew": "250ms"}, {"starting_deadline": "100ms"})
    assert "(the default" not in errors[0]


def test_validate_prints_the_default_line(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[cluster]\nname = "prod"\nsize = 3\nmax_skew = "1m"\n\n'
        '[[jobs]]\nname = "j"\nschedule = "* * * * *"\ncommand = ["/bin/true"]\n'
    )
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1
    assert "'30s' (the default for this schedule) must be longer than cluster max_skew '1m'" in result.output
    assert "Traceback" not in result.output


def test_app_cron_names_its_defaulted_deadline() -> None:
    app = App(namespace="x", size=1, redis_url="redis://localhost:1/0", node_id="n", max_skew="1m")
    with pytest.raises(ConfigError) as refused:
        app.cron("* * * * *", name="j")(lambda ctx: None)
    assert str(refused.value) == (
        "App: job 'j': field 'starting_deadline': '30s' (the default for this schedule) must be longer "
        f"than cluster max_skew '1m' ({_WHY}; set starting_deadline above 1m, or max_skew below 30s)"
    )
    with pytest.raises(ConfigError) as written:
        app.cron("* * * * *", name="k", starting_deadline="30s")(lambda ctx: None)
    assert "(the default" not in str(written.value)


def test_a_config_built_in_code_names_values_equal_to_the_defaults() -> None:
    job = JobSpec.create("j", "* * * * *", command=["/bin/true"])
    with pytest.raises(ConfigError) as refused:
        Config(ClusterConfig(namespace="x", size=1, max_skew_ms=60_000), (job,), source="code")
    assert str(refused.value) == (
        "code: job 'j': field 'starting_deadline': '30s' (the default for this schedule) must be longer "
        f"than cluster max_skew '1m' ({_WHY}; set starting_deadline above 1m, or max_skew below 30s)"
    )
