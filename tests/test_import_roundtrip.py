"""Round trip: a crontab imported, run by a real agent, delivers what cron would deliver.

The jobs dump their environment (``env -0``), working directory and standard
input to files; the test compares them with what cron (cronie / Vixie)
gives the same lines — written out here by hand from crontab(5), not taken
from the importer.  The agent's own ``QUORUM_CRON_*`` slot facts are the
only additions, and the variables a shell sets for itself (``PWD``,
``SHLVL``, ``_``), which it sets under cron just the same.
"""

from __future__ import annotations

import getpass
import pwd
from pathlib import Path

import pytest
from click.testing import CliRunner

from quorum_cron.cli import main
from quorum_cron.config.file import load_config
from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster

pytestmark = pytest.mark.slow

SHELL_OWN = {"PWD", "SHLVL", "_", "OLDPWD"}
SLOT_FACTS = {
    "QUORUM_CRON_JOB",
    "QUORUM_CRON_SLOT",
    "QUORUM_CRON_SLOT_MS",
    "QUORUM_CRON_TOKEN",
    "QUORUM_CRON_NODE",
}


def _dump(tag: str) -> str:
    return f'env -0 > "$OUT/env.{tag}"; pwd > "$OUT/pwd.{tag}"; cat > "$OUT/in.{tag}"'


def test_imported_jobs_get_crons_stdin_environment_and_directory(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    out, home_b = tmp_path / "out", tmp_path / "home-b"
    out.mkdir()
    home_b.mkdir()
    user = getpass.getuser()
    home_a = pwd.getpwnam(user).pw_dir
    crontab = tmp_path / "crontab"
    crontab.write_text(
        "# two jobs that never come due during the test: they are triggered\n"
        f"OUT={out}\n"
        'FOO = "two  words"\n'
        "MAILTO=''\n"
        f"0 0 1 1 * {_dump('a')}; printf '\\%s|' x > \"$OUT/pct.a\""
        "%first line%100\\% sure%%ends with a backslash\\\n"
        "SHELL=/bin/bash\n"
        f"HOME={home_b}\n"
        "CRON_TZ=Asia/Tokyo\n"
        f"0 0 1 1 * {_dump('b')}\n"
    )
    result = CliRunner().invoke(main, ["import-crontab", str(crontab), "--timezone", "UTC", "--user", user])
    assert result.exit_code == 0, result.stderr
    c = Cluster(tmp_path, redis_server.url, 1, namespace="cronimport")
    try:
        cfg = c.config(result.stdout[result.stdout.index("\n# line ") :])
        jobs = load_config(cfg).jobs
        assert len(jobs) == 2
        c.start("n1", cfg)
        c.wait_joined(["n1"])
        for job in jobs:
            c.store.trigger(job.name, "round-trip test")
        c.wait(
            "both triggered runs to finish",
            lambda: (
                all(any(e.state == SlotState.SUCCEEDED for e in c.store.ledger(j.name, 10)) for j in jobs)
                or None
            ),
            30,
        )
    finally:
        c.close()

    def env_of(tag: str) -> dict[str, str]:
        pairs = (item.split("=", 1) for item in (out / f"env.{tag}").read_text().split("\0") if item)
        env = {k: v for k, v in pairs}
        assert set(env) >= SLOT_FACTS, env
        return {k: v for k, v in env.items() if k not in SLOT_FACTS | SHELL_OWN}

    common = {"OUT": str(out), "FOO": "two  words", "MAILTO": "", "PATH": "/usr/bin:/bin"}
    assert env_of("a") == {**common, "SHELL": "/bin/sh", "HOME": home_a, "LOGNAME": user, "USER": user}
    assert env_of("b") == {
        **common,
        "SHELL": "/bin/bash",
        "HOME": str(home_b),
        "CRON_TZ": "Asia/Tokyo",
        "LOGNAME": user,
        "USER": user,
    }
    # cron: a bare % is a newline, \% a %, other backslashes stay, and a newline ends the input.
    assert (out / "in.a").read_bytes() == b"first line\n100% sure\n\nends with a backslash\\\n"
    assert (out / "in.b").read_bytes() == b""
    # cron starts the job in HOME.
    assert (out / "pwd.a").read_text() == home_a + "\n"
    assert (out / "pwd.b").read_text() == f"{home_b}\n"
    # The % written \\% in the command line reached the shell as a plain %.
    assert (out / "pct.a").read_text() == "x|"
