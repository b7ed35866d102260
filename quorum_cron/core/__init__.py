"""The core: one node's protocol logic, pure and sans-I/O.

Owns the node core (``node``), its state, the vote and run sides, timers, actions and the
mapping from actions to store calls (``perform``), and the data model every part shares
(``model``, ``membership``). It takes a clock and a seeded random source from its caller
and never reads real time. It may import the store *contract* (``quorum_cron.store.base``),
``quorum_cron.config``'s pure modules and ``quorum_cron.errors``; never a store
implementation, the agent, a face or the simulator (``tests/test_architecture.py``).
"""
