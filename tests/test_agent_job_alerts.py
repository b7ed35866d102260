"""Job outcomes reach people, from real agent processes: alerts, metrics and output in the log.

A two-node cluster runs a job every second that fails (exit 3) while a flag
file exists. Checked against the ledger (the cluster's record), after a
graceful stop flushed every hook:

* every slot the ledger holds ``failed`` got exactly ONE ``job_failed``
  alert cluster-wide, at the command and at the URL (sent by the slot's
  executor, not by every node), with the exit code, the attempt and the end
  of the output — a URL password the job printed masked;
* the first success after the failures got one ``job_recovered`` naming how
  many runs failed, and no other slot did;
* ``alert_on = ["missed"]`` on a second, failing job silences its failures;
* each run's stdout/stderr lines are ``output`` events with job, slot,
  token and stream, password masked;
* the metrics serve last run/success/failure timestamps and the duration
  histogram, on 127.0.0.1 by default.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from quorum_cron.store.base import SlotState
from quorum_cron.store.embedded.single import EmbeddedRedis
from tests.agent_cluster import Cluster, free_port
from tests.test_agent_observability import ALERT_SCRIPT, AlertSink, command_alerts, scrape

pytestmark = pytest.mark.slow

JOB_SCRIPT = """#!/bin/sh
echo "report for token $QUORUM_CRON_TOKEN to redis://ops:hunter2@db.example:6379/0"
echo "disk full" >&2
if [ -e "$1" ]; then exit 3; fi
"""


@pytest.fixture
def sink():  # type: ignore[no-untyped-def]
    s = AlertSink()
    yield s
    s.close()


def _fields(doc: dict[str, object]) -> dict[str, str]:
    fields = doc["fields"]
    assert isinstance(fields, dict)
    return {str(k): str(v) for k, v in fields.items()}


def test_job_failures_alert_once_per_slot_through_both_hooks_and_recovery_too(
    tmp_path: Path, redis_server: EmbeddedRedis, sink: AlertSink
) -> None:
    alert_script = tmp_path / "alert.sh"
    alert_script.write_text(ALERT_SCRIPT)
    alert_script.chmod(0o755)
    job_script = tmp_path / "job.sh"
    job_script.write_text(JOB_SCRIPT)
    job_script.chmod(0o755)
    flag = tmp_path / "failing"
    flag.touch()
    alerts_file = tmp_path / "alerts.log"
    c = Cluster(tmp_path, redis_server.url, 2, namespace="jobalerts", cluster_opts='start_timeout = "1s"')
    try:
        jobs = (
            f'[[jobs]]\nname = "flaky"\nschedule = "@every 1s"\nstarting_deadline = "1s"\n'
            f'command = ["{job_script}", "{flag}"]\n\n'
            f'[[jobs]]\nname = "quiet"\nschedule = "@every 1s"\nstarting_deadline = "1s"\n'
            f'command = ["/bin/false"]\nalert_on = ["missed"]\n'
        )
        cfg = c.config(
            jobs,
            extra=f'alert_command = ["{alert_script}", "{alerts_file}"]\nalert_url = "{sink.url}"\n'
            "output_log_lines = 10\n",
        )
        ports = {"n1": free_port(), "n2": free_port()}
        for node, port in ports.items():
            c.start(node, cfg, "--metrics-port", str(port))  # the default address: 127.0.0.1
        c.wait_joined(["n1", "n2"])

        def failed_slots() -> list[int]:
            return sorted(s for s, e in c.ledger("flaky").items() if e.state == SlotState.FAILED)

        c.wait("two failed slots of flaky", lambda: failed_slots() if len(failed_slots()) >= 2 else None, 30)
        flag.unlink()
        c.wait(
            "job_recovered at the URL",
            lambda: [d for d in list(sink.docs) if d["kind"] == "job_recovered"] or None,
            30,
        )
        c.wait(
            "quiet failed at least twice",
            lambda: sum(e.state == SlotState.FAILED for e in c.ledger("quiet").values()) >= 2 or None,
            30,
        )

        def metrics_ready() -> dict[str, float] | None:
            got = [scrape(port) for port in ports.values()]
            names = (
                'quorum_cron_job_last_run_timestamp_seconds{job="flaky"}',
                'quorum_cron_job_last_success_timestamp_seconds{job="flaky"}',
                'quorum_cron_job_last_failure_timestamp_seconds{job="flaky"}',
            )
            merged = {n: max(m.get(n, 0.0) for m in got) for n in names}
            runs = sum(
                m.get('quorum_cron_job_duration_seconds_count{job="flaky",result="failed"}', 0) for m in got
            )
            return merged if all(merged.values()) and runs >= 2 else None

        m = c.wait("the job timestamps in the metrics", metrics_ready, 15, poll=0.3)
        # Bound to 127.0.0.1 only: another loopback address (which a 0.0.0.0 bind answers on) refuses.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.2", ports["n1"]), timeout=5).close()
        now = time.time()
        for value in m.values():
            assert now - 120 < value <= now + 5, m
        assert (
            m['quorum_cron_job_last_success_timestamp_seconds{job="flaky"}']
            > m['quorum_cron_job_last_failure_timestamp_seconds{job="flaky"}']
        )
        assert all(code == 0 for code in c.stop().values()), c.describe()

        ledger = c.ledger("flaky")
        failed = {s for s, e in ledger.items() if e.state == SlotState.FAILED}
        for where, docs in (
            ("url", list(sink.docs)),
            ("command", [doc for node in ("n1", "n2") for _, _, doc in command_alerts(alerts_file, node)]),
        ):
            fails = [d for d in docs if d["kind"] == "job_failed"]
            slots = [int(_fields(d)["slot"]) for d in fails]
            assert sorted(slots) == sorted(failed), (where, slots, sorted(failed))  # once per slot
            for doc in fails:
                f = _fields(doc)
                assert f["job"] == "flaky" and f["exit_code"] == "3" and f["attempt"] == "1", (where, doc)
                assert doc["node"] == ledger[int(f["slot"])].executor, (where, doc)  # the executor sent it
                assert "disk full" in f["output"] and "hunter2" not in json.dumps(doc), (where, doc)
            recovered = [d for d in docs if d["kind"] == "job_recovered"]
            assert len(recovered) == 1, (where, recovered)
            f = _fields(recovered[0])
            slot = int(f["slot"])
            assert ledger[slot].state == SlotState.SUCCEEDED and f["failures"] == str(len(failed)), (where, f)
            assert all(s < slot for s in failed), (where, slot, sorted(failed))
            assert not [d for d in docs if d["kind"] == "job_failed" and _fields(d)["job"] == "quiet"], where

        # The output lines of each run are events in the executor's log, the password masked.
        lines = [e for n in ("n1", "n2") for e in c.nodes[n].logged("output", job="flaky")]
        assert {e["stream"] for e in lines} == {"stdout", "stderr"}, lines[:4]
        for entry in lines:
            assert isinstance(entry["slot"], int) and isinstance(entry["token"], int), entry
            assert "hunter2" not in json.dumps(entry), entry
        for entry in (e for e in lines if e["stream"] == "stdout"):
            assert entry["msg"] == f"report for token {entry['token']} to redis://ops:***@db.example:6379/0"
    finally:
        c.close()
