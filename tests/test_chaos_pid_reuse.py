"""The harness acts on processes it can prove are its own, never on a pid alone.

A pid is reused: once a process is gone the kernel may hand its pid to any new one.
``chaos clean`` judged a crashed run's namespaces by the harness's pid, so a
reused pid kept them forever; the run's cleanup sent SIGKILL to the process
group of every process it had started, reaped ones too, whose pids may lead
someone else's group by then. Tested with real processes standing in for the
pid's new owner. The namespace tests need root and ``ip`` (they skip otherwise)
and touch only namespaces they create, under names no harness uses (role ``t1``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos import netns
from chaos.servers import Procs


def _was_left_alone(proc: subprocess.Popen[bytes]) -> bool:
    """Whether ``proc`` got no SIGKILL so far: SIGTERM it and see what it died of. A SIGKILL sent
    before (delivered or pending) wins over the SIGTERM; no waiting on a guess of a delay."""
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=10) == -signal.SIGTERM


@contextlib.contextmanager
def _sleeper(*prefix: str) -> Iterator[subprocess.Popen[bytes]]:
    """A real process (``sleep``), in a session of its own (it leads its group), killed at the end."""
    proc = subprocess.Popen([*prefix, "sleep", "60"], start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_the_run_cleanup_sends_nothing_to_the_pid_of_a_process_it_already_reaped(tmp_path: Path) -> None:
    """A node killed by a fault is reaped and restarted; the old Popen stays in the run's list and
    the cleanup used to ``killpg`` its pid at the end. Here that pid now leads another process's
    group (a record whose pid was given to a process that is not ours): it must survive."""
    procs = Procs(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    with _sleeper() as other:
        gone.pid = other.pid  # what a reused pid looks like to the record
        procs.live.append(gone)
        procs.close()
        assert _was_left_alone(other), "a process that is not the run's was killed"
    # A process the run started and has not reaped is killed, with its group.
    with _sleeper() as mine:
        procs.live.append(mine)
        procs.close()
        assert mine.wait(timeout=10) == -signal.SIGKILL


def test_start_time_names_one_process() -> None:
    with _sleeper() as a:
        start = netns.start_time(a.pid)
        assert start is not None and start == netns.start_time(a.pid)
        assert netns._alive(a.pid, start)
        assert not netns._alive(a.pid, start + 1)  # the same pid, another process: not that harness
        assert netns._alive(a.pid, None)  # an older name: the pid is all there is
    assert netns.start_time(a.pid) is None
    assert not netns._alive(a.pid, start)


def _require_root_and_ip() -> None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and ip")


@contextlib.contextmanager
def _namespace(name: str) -> Iterator[str]:
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def _wait_inside(ns: str, pid: int) -> None:
    deadline = time.monotonic() + 10
    while pid not in netns.ns_pids(ns):
        assert time.monotonic() < deadline, f"{pid} never showed up in {ns}"
        time.sleep(0.02)


def test_clean_removes_the_namespaces_of_a_harness_whose_pid_now_names_another_process() -> None:
    """The namespace records the harness's pid and start time. The pid is alive, but its start
    time is not the recorded one: the harness is gone and its pid reused. Its namespace is
    removed, the process inside killed; the pid's new owner (outside) is left alone, and a
    namespace whose recorded start time matches (its harness runs) is kept."""
    _require_root_and_ip()
    with _sleeper() as other:
        start = netns.start_time(other.pid)
        assert start is not None
        stale = f"{netns.PREFIX}{other.pid}-{start + 1}-t1"
        live = f"{netns.PREFIX}{other.pid}-{start}-t1"
        with _namespace(stale), _namespace(live), _sleeper("ip", "netns", "exec", stale) as inside:
            _wait_inside(stale, inside.pid)
            removed = netns.clean_stale()
            assert stale in removed and live not in removed, removed
            assert inside.wait(timeout=10) == -signal.SIGKILL
            assert _was_left_alone(other), "the reused pid's new owner was killed"
            listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            assert stale not in listed and live in listed


def test_only_a_process_inside_the_namespace_gets_the_signal() -> None:
    """``ip netns pids`` lists pids, and a pid can change hands before the kill: the kill checks,
    through a pidfd, that the process is inside the namespace being removed."""
    _require_root_and_ip()
    name = f"{netns.PREFIX}{os.getpid()}-{netns.start_time(os.getpid())}-t1"  # its harness runs: us
    with _namespace(name) as ns, _sleeper() as outside:
        assert not netns.kill_inside(ns, outside.pid)
        assert _was_left_alone(outside)
        with _sleeper("ip", "netns", "exec", ns) as inside:
            _wait_inside(ns, inside.pid)
            assert netns.kill_inside(ns, inside.pid)
            assert inside.wait(timeout=10) == -signal.SIGKILL
