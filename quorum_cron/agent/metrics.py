"""Prometheus metrics of one agent, on a private registry.

Each node counts what *it* observed or did: the executor counts the
outcomes of the runs it finished, the node whose sweep ended a slot counts
that missed/lost slot. Summed over the cluster, every slot is counted once.
A private registry (not the process-global default) lets several agents —
the tests, an application embedding :class:`~quorum_cron.app.App` — live in
one process without clashing.

The per-job metrics (votes, slots, delays, durations, last run...) are the
lean families of :mod:`.lean_metrics`: one packed cell per job, shared by
the families (issue 27: memory per job); the metrics with a few fixed label
sets and the unlabelled gauges are prometheus_client's own objects.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from quorum_cron.agent.lean_metrics import JobCells, LeanCounter, LeanGauge, LeanHistogram

__all__ = ["JobCells", "LeanCounter", "LeanGauge", "LeanHistogram", "Metrics"]

_DURATION_BUCKETS = (
    0.1,
    0.5,
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
    4 * 3600.0,
    24 * 3600.0,
)
_DELAY_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The agent's metrics; :meth:`serve` exposes them over HTTP.

    The per-job families take their label values as a tuple, in label-name
    order: ``metrics.votes.inc((job, status))``, ``metrics.last_run.set((job,), t)``.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.vote_cells = voting = JobCells()
        """The numbers of the families every node adds to for every job it votes on."""
        self.run_cells = running = JobCells()
        """The numbers of the families a node adds to for the jobs it runs (and the slots it ends)."""
        self.slots = LeanCounter(
            "quorum_cron_slots",
            "Slots this node saw end, by outcome.",
            ["job", "outcome"],
            registry=r,
            table=running,
        )
        self.fire_delay = LeanHistogram(
            "quorum_cron_fire_delay_seconds",
            "From a slot's nominal fire time to its job process start, on the executor.",
            ["job"],
            buckets=_DELAY_BUCKETS,
            registry=r,
            table=running,
        )
        self.votes = LeanCounter(
            "quorum_cron_votes",
            "Votes cast, by the store's answer.",
            ["job", "status"],
            registry=r,
            table=voting,
        )
        self.abstentions = LeanCounter(
            "quorum_cron_abstentions",
            "Due slots this node did not vote for.",
            ["job", "cause"],
            registry=r,
            table=voting,
        )
        self.clock_offset = Gauge(
            "quorum_cron_clock_offset_seconds", "Estimated reference minus local clock.", registry=r
        )
        self.clock_trusted = Gauge("quorum_cron_clock_trusted", "1 while this node may vote.", registry=r)
        self.store_errors = Counter(
            "quorum_cron_store_errors", "Store calls that failed, by operation.", ["op"], registry=r
        )
        self.store_up = Gauge("quorum_cron_store_up", "1 while the store answers.", registry=r)
        self.members_alive = Gauge("quorum_cron_members_alive", "Live members seen by this node.", registry=r)
        self.bad_values = Counter(
            "quorum_cron_bad_values",
            "Values read from Redis that were corrupt and ignored, by kind (slot, member, ledger...).",
            ["kind"],
            registry=r,
        )
        self.masters_unreplicated = Gauge(
            "quorum_cron_store_masters_unreplicated",
            "Redis Cluster masters whose writes fall short of wait_replicas (their jobs are not voted).",
            registry=r,
        )
        self.store_oom = Gauge(
            "quorum_cron_store_oom", "1 while Redis refuses writes for lack of memory (OOM).", registry=r
        )
        self.membership_epoch = Gauge(
            "quorum_cron_membership_epoch", "Epoch of the membership record this node holds.", registry=r
        )
        self.member = Gauge(
            "quorum_cron_member",
            "1 while this node is a member of the record it holds (and its config agrees).",
            registry=r,
        )
        self.membership_refusals = Counter(
            "quorum_cron_membership_refusals",
            "Times this node found itself refused: not a member of an epoch, or a vote refused as stale.",
            ["kind"],
            registry=r,
        )
        self.last_run = LeanGauge(
            "quorum_cron_job_last_run_timestamp_seconds",
            "Unix time this node last started a run of the job (max over the nodes: the cluster's).",
            ["job"],
            registry=r,
            table=running,
        )
        self.last_success = LeanGauge(
            "quorum_cron_job_last_success_timestamp_seconds",
            "Unix time (store clock) a run of the job executed here last recorded succeeded.",
            ["job"],
            registry=r,
            table=running,
        )
        self.last_failure = LeanGauge(
            "quorum_cron_job_last_failure_timestamp_seconds",
            "Unix time (store clock) a slot of the job executed here last recorded failed.",
            ["job"],
            registry=r,
            table=running,
        )
        self.duration = LeanHistogram(
            "quorum_cron_job_duration_seconds",
            "How long the job's runs on this node took, start to end, by result (succeeded or failed).",
            ["job", "result"],
            buckets=_DURATION_BUCKETS,
            registry=r,
            table=running,
        )
        self.output_dropped = LeanCounter(
            "quorum_cron_job_output_lines_dropped",
            "Job output lines not copied to the agent's log (per-run or per-second bound).",
            ["job"],
            registry=r,
            table=running,
        )
        self.running = Gauge("quorum_cron_running_jobs", "Job processes running on this node.", registry=r)
        # The columns nearly every job uses, first and side by side: a job's cell reaches only as
        # far as the last column it uses (lean_metrics.JobCells), so the rarer values (a failure,
        # a refused vote, a missed slot...) are claimed after these, as they first come.
        for status in ("recorded", "committed", "decided"):
            self.votes.reserve(status)
        self.slots.reserve("succeeded")
        for family in (self.last_run, self.last_success, self.fire_delay):
            family.reserve()
        self.duration.reserve("succeeded")

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve ``/metrics`` on ``addr:port`` from a daemon thread."""
        start_http_server(port, addr=addr, registry=self.registry)
