"""Every command's ``--config`` reads ``--config FILE`` in its help, as the shared option makes it.

``next`` declared its own option, without ``dir_okay=False``: its help said ``--config PATH``
while every other command said ``FILE``, and it alone read a missing file past click's check.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from quorum_cron.cli import main


def commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def test_every_config_option_is_file() -> None:
    seen = []
    for path, command in commands(main):
        if not any("--config" in p.opts for p in command.params):
            continue
        result = CliRunner().invoke(main, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        assert "--config FILE" in result.output and "--config PATH" not in result.output, (
            path,
            result.output,
        )
        seen.append(" ".join(path))
    assert "next" in seen and "status" in seen and "members show" in seen, seen


def test_next_refuses_a_directory_like_every_command(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["next", "backup", "--config", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: Invalid value for '--config': File '{tmp_path}' is a directory.")
