"""The agent: the asyncio node that runs the sans-I/O core against real time, Redis and processes.

Modules, each owning one thing:

* :mod:`.runtime` — the node loop around :class:`~quorum_cron.core.node.NodeCore`:
  dispatching its actions, start and graceful stop;
* :mod:`.intake` — what the node hears (assignment notices, operator triggers: ``Store.listen_notices``)
  into the core;
* :mod:`.spec` — what an agent is built from (its jobs and settings);
* :mod:`.storeio` — store calls on a worker thread, in order;
* :mod:`.executions` — the job processes of a node (and ``run-local`` runs);
* :mod:`.jobprocess` — running one slot's job (subprocess or Python callable);
* :mod:`.jobenv` — the clean environment jobs and alert commands start from;
* :mod:`.triggers` — acting only on triggers stored with their audit entry;
* :mod:`.badvalues` — reporting values read from Redis that fail to parse;
* :mod:`.health` — store up/down, clock trust and membership, wired together;
* :mod:`.membership` — heartbeats, incarnations, quorum health;
* :mod:`.clocktrust` — the clock skew guard, fed by store TIME and NTP;
* :mod:`.observe`, :mod:`.alerts`, :mod:`.metrics`, :mod:`.logs` — telling people;
* :mod:`.redisclient`, :mod:`.build`, :mod:`.preflight` — building an agent from a config and
  checking the server before it starts.
* :mod:`.startup` — the one start-up path of ``quorum-cron agent`` and the Python API
  (store, server checks, signals, the bad-value reporter).

``python -m quorum_cron.agent`` is ``quorum-cron agent``.

May import: the model, the core, the clock guard, the configuration, the store and the
shared modules; never a face (the CLI, the App API, the web) or the simulator, and not
redis-py: every server call goes through the store (docs/architecture.md).
"""
