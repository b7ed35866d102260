"""``python -m chaos`` as a user drives it: bad input, the schedule ``plan`` prints, ``check`` on
a directory that holds no finished run, and ``clean`` on a machine missing a tool it does not use.

Bad input must end in one line naming the value and what was expected (exit 2), never a
traceback, a hang or a silently different run. Each command runs as a subprocess with a
timeout: before these fixes ``--seconds inf`` drew an endless schedule and ``--seconds 0``
started the 130 s default run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from chaos.__main__ import main
from chaos.options import Options
from chaos.plan import KINDS, plan
from chaos.run import Harness
from quorum_cron.config.file import load_config
from quorum_cron.store.embedded.single import RedisServerNotFound

ROOT = Path(__file__).resolve().parent.parent
NODES = [f"n{i}" for i in range(1, 6)]


def _chaos(*args: str, env: dict[str, str] | None = None, timeout: float = 20) -> tuple[int, str, str]:
    """``python -m chaos ARGS``; one that outlives ``timeout`` gets SIGTERM (a run removes what it
    made) and fails the test."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "chaos", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f"python -m chaos {' '.join(args)} still running after {timeout:.0f} s:\n{out}{err}")
    return proc.returncode, out, err


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["plan", "--seconds", "inf"], "--seconds 'inf'"),
        (["plan", "--seconds", "nan"], "--seconds 'nan'"),
        (["plan", "--seconds", "-5"], "--seconds '-5'"),
        (["run", "--seconds", "0"], "--seconds '0'"),
        (["soak", "--minutes", "1e9"], "--minutes '1e9'"),
        (["plan", "--nodes", "0"], "--nodes '0'"),
        (["plan", "--nodes", "2"], "--nodes '2'"),
        (["run", "--nodes", "21"], "--nodes '21'"),
        (["run", "--start-timeout-ms", "-5"], "--start-timeout-ms '-5'"),
        (["run", "--starting-deadline-ms", "0"], "--starting-deadline-ms '0'"),
        (["plan", "--kinds", "promotion", "--no-replica"], "promotion"),
        (["run", "--kinds", "promotion", "--no-replica"], "promotion"),
    ],
)
def test_bad_input_is_one_line_naming_the_value_and_what_was_expected(args: list[str], names: str) -> None:
    code, out, err = _chaos(*args)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and names in last and ("expected" in last or "needs" in last), err
    assert out == ""  # nothing was planned or run


@pytest.mark.parametrize(
    ("flags", "kinds"), [(["--no-replica"], KINDS[:-1]), (["--kinds", "kill,pause"], ("kill", "pause"))]
)
def test_plan_prints_the_schedule_a_run_with_the_same_options_carries_out(
    flags: list[str], kinds: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --no-replica`` drops promotion and ``--kinds`` picks the kinds, which changes the
    seed's shuffle: ``plan`` must take the same options to show that schedule."""
    assert main(["plan", "--seed", "3", "--seconds", "130", *flags]) == 0
    shown = capsys.readouterr().out.splitlines()
    expected = plan(3, 130, NODES, quorum=3, kinds=kinds)
    assert len(shown) == len(expected) and expected
    for line, f in zip(shown, expected, strict=True):
        assert f"#{f.index:<3} {f.describe()}" in line
    assert {line.split()[2] for line in shown} <= set(kinds)


def _harness(workdir: Path) -> Harness:
    """A harness for ``workdir``, built but not brought up (no root, no network): it needs only
    a Redis server binary to point at, found as the suite finds it."""
    try:
        h = Harness(Options(seed=1, seconds=30, workdir=workdir))
    except RedisServerNotFound as exc:
        pytest.skip(f"no Redis server for the harness to name: {exc}")
    h.fault_log.close()
    return h


def _run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "quorum-seed1"
    d.mkdir()
    opts = {"period_ms": 2000, "max_skew_ms": 250, "nodes": 5, "jobs": 1, "seed": 1, "scheduler": "quorum"}
    (d / "run.json").write_text(
        json.dumps({"options": opts, "t0_ms": 100_000, "end_ms": 110_000, "faults": []})
    )
    (d / "ground-truth.log").write_text(
        "".join(
            f"job0 {t} n1 {(t + 5) / 1000:.3f} {i + 1}\n" for i, t in enumerate(range(102_000, 110_001, 2000))
        )
    )
    ledger = [
        {"fire_ms": t, "state": "succeeded", "reason": "exit 0", "executor": "n1", "token": i + 1}
        for i, t in reversed(list(enumerate(range(102_000, 110_001, 2000))))
    ]
    (d / "ledger.json").write_text(json.dumps({"job0": ledger}))
    return d


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda d: (d / "run.json").write_text('{"options": {'), "not a run the checker can read"),
        (lambda d: (d / "run.json").write_text("{}"), "not a run the checker can read"),
        (lambda d: (d / "ledger.json").unlink(), "no ledger.json"),
        (
            lambda d: (d / "ground-truth.log").write_text("job0 notanumber n1 1.0 1\n"),
            "not a run the checker",
        ),
        (lambda d: (d / "run.json").unlink(), "no run.json"),
    ],
)
def test_check_names_what_is_wrong_with_a_run_directory_on_one_line(
    tmp_path: Path, damage: object, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _run_dir(tmp_path)
    assert main(["check", str(d)]) == 0
    capsys.readouterr()
    damage(d)  # type: ignore[operator]
    assert main(["check", str(d)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and says in err and str(d) in err, err


def test_a_reused_run_directory_loses_its_old_run_json(tmp_path: Path) -> None:
    """A run into a directory that holds an earlier run's record writes a new one only when it
    finishes; interrupted or failed, the old record used to stay and ``check`` judged the old
    run against the new ground truth (every old slot "unaccounted")."""
    d = _run_dir(tmp_path)
    _harness(d)
    assert not (d / "run.json").exists()
    assert main(["check", str(d)]) == 2


def test_a_day_long_run_keeps_every_slot_in_its_jobs_ledgers(tmp_path: Path) -> None:
    """The agents keep 10 000 ledger entries per job by default, 5.5 h of a 2 s job: the oldest
    slots of a 24 h run lost their entries, which the checker reads as unaccounted (or, when the
    slot ran, unrecorded). The harness's cluster.toml gives the ledger room for the whole run."""
    h = _harness(tmp_path / "d")
    h.o = replace(h.o, seconds=86_400)
    config = load_config(h._write_config())
    assert config.cluster.ledger_maxlen >= (86_400 + 600) * 1000 // h.o.period_ms


def test_clean_needs_only_root_and_ip(tmp_path: Path) -> None:
    """Removing a crashed run's namespaces uses ``ip`` alone; it used to demand nft, libfaketime
    and a Redis server too, so a machine that had lost one could not clean up."""
    ip = shutil.which("ip")
    if os.geteuid() != 0 or ip is None:
        pytest.skip("chaos clean needs root and ip")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ip").symlink_to(ip)  # PATH holds ip and nothing else: no nft, no redis-server
    code, _, err = _chaos("clean", env=dict(os.environ, PATH=str(bin_dir)))
    assert code == 0, err
    code, _, err = _chaos("run", "--seconds", "10", env=dict(os.environ, PATH=str(bin_dir)))
    assert code == 2 and "nft" in err, err


@pytest.mark.parametrize("cmd", ["run", "soak"])
@pytest.mark.parametrize("where", ["no/s.json", "adir"])
def test_a_json_path_that_cannot_be_written_is_refused_before_the_run(
    cmd: str, where: str, tmp_path: Path
) -> None:
    """The summaries are written after the runs; a --json in a missing directory (or naming a
    directory) used to end minutes of running in a traceback, the summaries lost."""
    (tmp_path / "adir").mkdir()
    code, out, err = _chaos(
        cmd, "--seconds", "10", "--dir", str(tmp_path / "runs"), "--json", str(tmp_path / where)
    )
    assert code == 2 and out == "", (out, err)
    assert err.strip().splitlines()[-1].startswith(f"error: --json {tmp_path / where}"), err
    assert not (tmp_path / "runs").exists()  # nothing was run


def test_a_relative_run_directory_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--dir runs`` failed at bring-up ("redis-server r1 exited with 1 at start": Redis chdirs
    to its data dir, then binds its Unix socket by the relative path); every path the harness
    hands to a process is now absolute."""
    monkeypatch.chdir(tmp_path)
    h = _harness(Path("runs") / "quorum-seed1")
    assert h.dir == tmp_path / "runs" / "quorum-seed1"
    assert h.truth.is_absolute() and Path(h._job_command()[-1]).is_absolute()


@pytest.mark.parametrize("cmd", ["run", "soak"])
def test_a_run_directory_too_long_for_its_unix_sockets_is_refused_naming_the_limit(
    cmd: str, tmp_path: Path
) -> None:
    """Redis and the proxy bind Unix sockets in the run directory; with a --dir over ~96 bytes
    redis-server exited at start ("unix socket path too long") and the harness said only
    "redis-server r1 exited with 1 at start"."""
    long_dir = tmp_path / ("d" * max(1, 100 - len(str(tmp_path))))
    code, out, err = _chaos(cmd, "--seconds", "10", "--dir", str(long_dir))
    assert code == 2 and out == "", (out, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: --dir {long_dir}:") and "107 bytes" in last and "proxy.sock" in last, err
    assert not long_dir.exists()


def test_a_node_stopped_by_someone_elses_signal_is_not_called_a_crash_of_its_own(tmp_path: Path) -> None:
    """On a shared machine another session's ``pkill -f "node-id n1"`` SIGTERMed two of this
    harness's agents mid-run; the report said "exited by itself with 0" and showed only the
    agent's last line ("left"), hiding the signal the agent had logged."""
    h = _harness(tmp_path / "quorum-seed1")
    for node, lines in (
        ("n1", ['{"event":"stopping","msg":"SIGTERM received"}', '{"event":"left","msg":"node n1 left"}']),
        ("n2", ['{"event":"error","msg":"store refused"}']),
    ):
        (h.dir / "logs" / f"node-{node}.log").write_text("\n".join(lines) + "\n")
        proc = subprocess.Popen(["true"])
        proc.wait()
        h.nodes[node] = proc
    h.check_alive()
    assert h.crashes[0].startswith("node n1 was stopped by a signal the harness did not send (exit 0):")
    assert h.crashes[1] == 'node n2 exited by itself with 0: {"event":"error","msg":"store refused"}'


def test_a_signal_during_the_cleanup_waits_until_everything_is_removed(tmp_path: Path) -> None:
    """Ctrl-C while the harness kills its processes (at the end of a run, or a first Ctrl-C's
    cleanup) raised in the middle of it: the processes after that one lived on. The signal now
    waits until the cleanup is done, then raises."""
    if shutil.which("ip") is None:
        pytest.skip("the harness's cleanup lists namespaces with ip")
    from chaos import interrupts
    from chaos.servers import Procs

    h = _harness(tmp_path / "quorum-seed1")
    old = signal.signal(signal.SIGINT, interrupts.on_interrupt)
    interrupts.pending.clear()
    procs = []
    try:
        with pytest.raises(KeyboardInterrupt), h:
            procs = [h.procs.start(name, ["sleep", "60"]) for name in ("a", "b", "c")]

            def kill_after_ctrl_c(proc: subprocess.Popen[bytes]) -> None:
                if proc is procs[0]:
                    os.kill(os.getpid(), signal.SIGINT)  # pressed as the cleanup begins
                Procs.kill(proc)

            h.procs.kill = kill_after_ctrl_c  # type: ignore[method-assign]
    finally:
        signal.signal(signal.SIGINT, old)
        interrupts.pending.clear()
        for proc in procs:
            if proc.poll() is None:
                Procs.kill(proc)
                pytest.fail(f"{proc.args} outlived the interrupted cleanup")
    assert [p.returncode for p in procs] == [-signal.SIGKILL] * 3
