"""The agent: the asyncio node that runs the sans-I/O core against real time, Redis and processes.

Modules, each owning one thing:

* :mod:`.runtime` — the node loop around :class:`~quorum_cron.core.NodeCore`:
  dispatching its actions, triggers, start and graceful stop;
* :mod:`.settings` — what an agent is built from (its jobs and settings);
* :mod:`.storeio` — store calls on a worker thread, in order;
* :mod:`.notify` — assignment notices and operator triggers over Redis pub/sub;
* :mod:`.runs` — the job processes of a node (and ``run-local`` runs);
* :mod:`.runner` — running one slot's job (subprocess or Python callable);
* :mod:`.health` — store up/down, clock trust and membership, wired together;
* :mod:`.membership` — heartbeats, incarnations, quorum health;
* :mod:`.clocktrust` — the clock skew guard, fed by store TIME and NTP;
* :mod:`.observe`, :mod:`.alerts`, :mod:`.metrics`, :mod:`.logs` — telling people;
* :mod:`.connect`, :mod:`.setup` — building an agent from a config.

``python -m quorum_cron.agent`` is ``quorum-cron agent``.
"""
