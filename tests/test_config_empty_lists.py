"""An empty list in an argv or name-list field: a line naming the field, ``[]`` and what is expected.

``alert_command = []`` was refused as "field 'alert_command': expected 1-1000 strings (an argv
list)", which named neither the value nor the way to have no alert command (leave the key out).
``env_passthrough = []`` (the default docs/configuration.md gives) was refused as "expected 1-200
strings": writing out the documented default failed the config.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.config.file import load_config
from quorum_cron.config.settings import ClusterConfig
from quorum_cron.errors import ConfigError

_CLUSTER = '[cluster]\nname = "prod"\nsize = 3\n'
_JOB = '\n[[jobs]]\nname = "backup"\nschedule = "30 2 * * *"\ncommand = ["/bin/backup"]\n'


def _validate(tmp_path: Path, text: str) -> tuple[int, str, Path]:
    path = tmp_path / "c.toml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["validate", str(path)])
    return result.exit_code, result.output, path


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            _CLUSTER + "alert_command = []\n" + _JOB,
            "cluster: field 'alert_command': [] is an empty list (expected 1-1000 argv strings, "
            "e.g. ['/usr/local/bin/page-oncall', '--team', 'ops']; leave the key out for no alert command)",
        ),
        (
            _CLUSTER + _JOB.replace('command = ["/bin/backup"]', "command = []"),
            "job 'backup': field 'command': [] is an empty list "
            "(expected 1-1000 argv, e.g. ['/usr/local/bin/backup', '--full'])",
        ),
    ],
)
def test_an_empty_argv_names_the_field_the_value_and_the_expectation(
    tmp_path: Path, text: str, line: str
) -> None:
    code, out, path = _validate(tmp_path, text)
    assert code == 1
    assert out.splitlines() == [f"error: {path}: {line}"]


def test_env_passthrough_empty_is_the_default_written_out(tmp_path: Path) -> None:
    code, out, path = _validate(tmp_path, _CLUSTER + _JOB + "env_passthrough = []\n")
    assert code == 0, out
    (job,) = load_config(path).jobs
    (plain,) = load_config(_write(tmp_path / "plain.toml", _CLUSTER + _JOB)).jobs
    assert job.env_passthrough == () and job.spec_hash == plain.spec_hash
    docs = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    assert "| `env_passthrough` | `[]` |" in docs


def test_too_many_names_says_how_many(tmp_path: Path) -> None:
    names = ", ".join(f'"V{i}"' for i in range(201))
    code, out, path = _validate(tmp_path, _CLUSTER + _JOB + f"env_passthrough = [{names}]\n")
    assert code == 1
    assert out.splitlines() == [
        f"error: {path}: job 'backup': field 'env_passthrough': has 201 elements "
        "(expected 1-200 names of the agent's variables the job gets)"
    ]


@pytest.mark.parametrize("argv", [(), ("",)])
def test_the_python_api_names_the_value_too(argv: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as info:
        ClusterConfig(namespace="prod", size=3, alert_command=argv)
    expected = f"cluster: field 'alert_command': {argv!r} (expected an argv: non-empty strings)"
    assert str(info.value) == expected


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
