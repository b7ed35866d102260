"""The processes ``peers.py`` starts: the peers' schedulers and workers, and the job they all run.

Usage (by ``peers.py`` only)::

    python benchmarks/_peer_procs.py celery ARGS...   # the ``celery`` command on this module's app
    python benchmarks/_peer_procs.py rqscheduler ARGS...
    python benchmarks/_peer_procs.py rqworker ARGS...
    python benchmarks/_peer_procs.py apscheduler NAME PORT
    python benchmarks/_peer_procs.py lease ARGS...    # leader_baseline.py's scheduler

Every scheduler ends up running the same job: :func:`record`, which runs
the bash one-liner of ``fire_latency.py`` (it appends ``job slot who
$EPOCHREALTIME`` to ``$PEERS_OUT``) through ``env -u LD_PRELOAD -u
FAKETIME``, so that the job's stamp is the real time even when the
scheduler that started it runs under libfaketime.

Under libfaketime (``FAKETIME`` set) CPython's ``time.sleep`` fails with
EINVAL (libfaketime's ``clock_nanosleep`` on an absolute monotonic
deadline), so in such a process ``time.sleep`` is replaced by a
``select`` with a relative timeout — the same wait, on the real monotonic
clock. Nothing else of the peers is changed.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BASH = shutil.which("bash") or "/bin/bash"
RECORD = (
    'printf "%s %s %s %s\\n" "$QUORUM_CRON_JOB" "$QUORUM_CRON_SLOT_MS" "$QUORUM_CRON_NODE" "$EPOCHREALTIME"'
)


def job_command(out: Path | str) -> list[str]:
    """The job, as an argv: real-clock stamp even under libfaketime."""
    return ["env", "-u", "LD_PRELOAD", "-u", "FAKETIME", BASH, "-c", f'{RECORD} >> "{out}"']


def record(who: str, slot: str = "-") -> None:
    """Run the job once (what every peer's task does); ``slot`` is ``-`` when the peer has none."""
    env = dict(os.environ, QUORUM_CRON_JOB="tick", QUORUM_CRON_SLOT_MS=slot, QUORUM_CRON_NODE=who)
    subprocess.run(job_command(os.environ["PEERS_OUT"]), env=env, stdin=subprocess.DEVNULL, check=False)


def _patch_sleep_under_faketime() -> None:
    if "FAKETIME" not in os.environ:
        return
    import time

    def sleep(seconds: float) -> None:
        if seconds > 0:
            select.select([], [], [], seconds)

    time.sleep = sleep  # type: ignore[assignment]


# -- Celery + RedBeat ------------------------------------------------------------


def _make_celery() -> Any:
    from celery import Celery  # type: ignore[import-untyped]

    url = os.environ["PEERS_REDIS_URL"]
    app = Celery("peers", broker=url)
    app.conf.beat_scheduler = "redbeat.RedBeatScheduler"
    app.conf.redbeat_redis_url = url
    app.conf.beat_schedule = {"tick": {"task": "peers.tick", "schedule": 1.0}}
    app.conf.broker_connection_retry_on_startup = True
    lock = os.environ.get("PEERS_REDBEAT_LOCK_S")
    if lock:  # the tuned setup; without it RedBeat's defaults (lock 5 x 300 s)
        app.conf.redbeat_lock_timeout = int(lock)
        app.conf.beat_max_loop_interval = int(os.environ.get("PEERS_BEAT_MAX_LOOP_S", "1"))

    @app.task(name="peers.tick")  # type: ignore[untyped-decorator,unused-ignore]
    def tick() -> None:
        record(f"celery-worker-{os.getpid()}")

    return app


celery_app = _make_celery() if os.environ.get("PEERS_CELERY") else None


# -- rq + rq-scheduler -----------------------------------------------------------


def rq_tick() -> None:
    """The rq job (the worker imports it by name: ``_peer_procs.rq_tick``)."""
    record(f"rq-worker-{os.getppid()}")  # the worker (the job runs in a work horse it forked)


# -- APScheduler 3 with a shared RedisJobStore -----------------------------------


def aps_tick() -> None:
    record(os.environ.get("PEERS_WHO", "aps"))


def apscheduler_main(name: str, port: int) -> int:
    from apscheduler.jobstores.redis import RedisJobStore  # type: ignore[import-untyped]
    from apscheduler.schedulers.blocking import BlockingScheduler  # type: ignore[import-untyped]

    os.environ["PEERS_WHO"] = name
    sched = BlockingScheduler(
        jobstores={"default": RedisJobStore(host="127.0.0.1", port=port)}, timezone="UTC"
    )
    # As deployed: every process adds the job with a fixed id and replace_existing
    # (so restarts do not pile up copies); defaults for coalesce / misfire grace.
    sched.add_job("_peer_procs:aps_tick", "cron", second="*", id="tick", replace_existing=True)
    sched.start()
    return 0


def main(argv: list[str]) -> int:
    _patch_sleep_under_faketime()
    sys.path.insert(0, str(HERE))
    role, rest = argv[0], argv[1:]
    if role == "celery":
        from celery.__main__ import main as celery_main  # type: ignore[import-untyped]

        sys.argv = ["celery", "-A", "_peer_procs:celery_app", *rest]
        celery_main()
        return 0
    if role == "rqscheduler":
        from rq_scheduler.scripts.rqscheduler import main as rqs_main  # type: ignore[import-untyped]

        sys.argv = ["rqscheduler", *rest]
        rqs_main()
        return 0
    if role == "rqworker":
        from rq.cli.cli import main as rq_main

        sys.argv = ["rq", "worker", *rest]
        rq_main()
        return 0
    if role == "apscheduler":
        return apscheduler_main(rest[0], int(rest[1]))
    if role == "lease":
        import fire_latency
        import leader_baseline

        fire_latency.job_command = job_command  # the same job, real-clock stamp
        return leader_baseline.scheduler_main(rest)
    raise SystemExit(f"_peer_procs.py: unknown role {role!r}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
