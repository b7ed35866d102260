"""Configuration: what each node is told, validated where it enters.

Owns the frozen settings the other parts consume (``settings``), the TOML file reader
(``file``), value parsers shared with the CLI (``values``), the members' rules
(``members``), and the pure time grammar: cron expressions (``cron``), schedules with their
DST policy (``schedule``) and durations (``durations``). Job definitions live only here,
never in the store. It imports no agent, face or simulator.
"""
