"""The shipped deployment files (examples/deploy/) are checked, not just shipped (issue 26, item 10).

- the systemd unit passes ``systemd-analyze verify`` (no warning either: an
  unknown key is only a warning there), reloads with SIGHUP, reads the Redis
  URL from an environment file whose variables are the ones the CLI reads;
- the Kubernetes example: its config is valid, names the StatefulSet's pod
  names as members, its PodDisruptionBudget keeps a quorum, and a real
  agent takes its node id the documented ways (``QUORUM_CRON_NODE_ID`` set
  from the pod name; else the host name, which in a pod is the pod name),
  against a real redis-server;
- the Containerfile copies paths that exist and runs the CLI.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from quorum_cron.agent.startup import open_node_store
from quorum_cron.commands.agent import agent
from quorum_cron.config.file import load_config
from quorum_cron.config.settings import Config
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.tools import require_tool

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "examples" / "deploy"
UNIT = DEPLOY / "quorum-cron.service"
MANIFEST = DEPLOY / "kubernetes.yaml"


def directives(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = require_tool("systemd-analyze")
    cli = shutil.which("quorum-cron") or str(Path(sys.executable).parent / "quorum-cron")
    assert os.access(cli, os.X_OK), cli
    # verify checks that ExecStart's binary exists: point it at the installed console script.
    unit = tmp_path / "quorum-cron.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/quorum-cron", cli))
    res = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stderr, res.stdout) == (0, "", ""), res


def test_systemd_unit_reloads_hardens_and_reads_the_url_from_an_environment_file() -> None:
    d = directives(UNIT.read_text())
    assert d["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert d["EnvironmentFile"] == ["/etc/quorum-cron/quorum-cron.env"]
    for key in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "RestrictSUIDSGID"):
        assert d[key] in (["yes"], ["strict"]), key
    assert d["CapabilityBoundingSet"] == [""]
    # Longer than the agent's default grace (30 s), so running jobs are recorded before SIGKILL.
    assert int(d["TimeoutStopSec"][0]) > 30
    # The environment file sets what the CLI reads.
    env_keys = {
        line.split("=", 1)[0].lstrip("#") for line in (DEPLOY / "quorum-cron.env").read_text().splitlines()
    }
    env_keys.discard("")
    node_param = next(p for p in agent.params if p.name == "node_id")
    assert {k for k in env_keys if not k.startswith(" ")} == {"QUORUM_CRON_REDIS_URL", "QUORUM_CRON_NODE_ID"}
    assert node_param.envvar == "QUORUM_CRON_NODE_ID"
    redis_param = next(p for p in agent.params if p.name == "redis_url")
    assert redis_param.envvar == "QUORUM_CRON_REDIS_URL"


def manifest_config(tmp_path: Path, redis_url: str | None = None) -> tuple[Path, Config]:
    text = MANIFEST.read_text()
    block = text.split("cluster.toml: |\n", 1)[1].split("\n---", 1)[0]
    toml = "\n".join(line.removeprefix("    ") for line in block.splitlines())
    if redis_url is not None:
        toml = toml.replace("size = 3\n", f'size = 3\nredis_url = "{redis_url}"\n', 1)
    path = tmp_path / "cluster.toml"
    path.write_text(toml)
    return path, load_config(path)


def test_kubernetes_members_are_the_pod_names_and_the_budget_keeps_a_quorum(tmp_path: Path) -> None:
    text = MANIFEST.read_text()
    _, config = manifest_config(tmp_path)
    name = re.search(r"kind: StatefulSet\nmetadata:\n  name: (\S+)", text)
    replicas = re.search(r"\n  replicas: (\d+)", text)
    budget = re.search(r"kind: PodDisruptionBudget[\s\S]*?minAvailable: (\d+)", text)
    assert name and replicas and budget, text
    pods = [f"{name.group(1)}-{i}" for i in range(int(replicas.group(1)))]
    assert list(config.cluster.members) == pods
    assert config.cluster.size == len(pods)
    assert int(budget.group(1)) == config.cluster.quorum  # a drain leaves a quorum, never less
    assert re.search(
        r"- name: QUORUM_CRON_NODE_ID\n\s+valueFrom:\n\s+fieldRef:\n\s+fieldPath: metadata.name", text
    ), "the node id must come from the pod name"
    assert re.search(r"- name: QUORUM_CRON_REDIS_URL\n\s+valueFrom:\n\s+secretKeyRef:", text)
    assert not config.cluster.redis_url  # the URL is a Secret, not in the ConfigMap


@pytest.fixture
def agents() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def wait_for_member(
    config: Config, url: str, node: str, proc: subprocess.Popen[str], timeout: float = 60
) -> None:
    store, _ = open_node_store(url, config.cluster)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if node in {m.node for m in store.members()}:
                return
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
    finally:
        store.close()
    pytest.fail(f"{node} did not heartbeat within {timeout} s")


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


def test_agent_takes_its_id_from_the_pod_name_as_documented(
    tmp_path: Path, redis_server: EmbeddedRedis, agents: list[subprocess.Popen[str]]
) -> None:
    cfg, config = manifest_config(tmp_path, redis_server.url)
    cmd = [sys.executable, "-m", "quorum_cron", "agent", "--config", str(cfg), "--log-json"]
    # 1. As in the manifest: QUORUM_CRON_NODE_ID from metadata.name (no --node-id).
    env = {**os.environ, "QUORUM_CRON_NODE_ID": "quorum-cron-1"}
    env.pop("QUORUM_CRON_REDIS_URL", None)
    agents.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    wait_for_member(config, redis_server.url, "quorum-cron-1", agents[-1])
    # 2. Without it: the host name, which a StatefulSet sets to the pod name (a UTS namespace here).
    unshare = shutil.which("unshare")
    env.pop("QUORUM_CRON_NODE_ID")
    probe = subprocess.run([unshare or "unshare", "--uts", "true"], capture_output=True) if unshare else None
    if probe is not None and probe.returncode == 0:
        wrapped = ["unshare", "--uts", "sh", "-c", 'hostname quorum-cron-2 && exec "$@"', "sh", *cmd]
        agents.append(
            subprocess.Popen(wrapped, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        )
        wait_for_member(config, redis_server.url, "quorum-cron-2", agents[-1])
    for proc in agents:
        err = stop(proc)
        assert all(line.startswith("{") for line in err.splitlines() if line.strip()), (
            err
        )  # --log-json: only JSON
    if probe is None or probe.returncode != 0:
        pytest.skip("the host-name default needs unshare --uts (a UTS namespace): not permitted here")


def test_containerfile_copies_what_exists_and_runs_the_cli() -> None:
    text = (DEPLOY / "Containerfile").read_text()
    for line in text.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), src
    assert 'ENTRYPOINT ["quorum-cron"]' in text
    assert "STOPSIGNAL SIGTERM" in text and "USER 10001" in text
    assert re.search(r"runAsUser: 10001", MANIFEST.read_text())  # the manifest runs the image's user
