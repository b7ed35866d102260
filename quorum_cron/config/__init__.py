"""Configuration: what each node is told, validated where it enters.

Owns the frozen settings the other parts consume (``settings``), the TOML file reader
(``file``, over ``table``), a job's options with their defaults and checks, read alike for a
``[[jobs]]`` table and the Python API (``job_options``), value parsers and name rules shared
with the CLI (``values``), the members' rules (``members``), the membership as the config
describes it (``membership``), and the pure time grammar: cron expressions (``cron``),
schedules with their DST policy (``schedule``) and durations (``durations``).
Job definitions live only here, never in the store.

It may import the model (``quorum_cron.core.model``), the shared ``errors``, ``redact`` and
``printable``, the clock's ``policy`` (the default for an unreachable NTP) and the
store's URL parser (``quorum_cron.store.urls``): reading a config builds no client and loads
no agent, face or simulator (docs/architecture.md, ``tests/test_architecture.py``).
"""
