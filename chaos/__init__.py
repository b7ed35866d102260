"""A Jepsen-style fault harness: real agents in network namespaces, real faults, a checker.

``python -m chaos run`` starts Redis (AOF, optionally a replica) and N real
``quorum-cron agent`` processes, each in a network namespace of its own
joined through a bridge in a private hub namespace; injects faults from a
seeded schedule (partitions, one-way cuts, loss, latency, pauses, kills,
clock offsets and steps, Redis restarts and promotion); then checks what
the jobs themselves recorded against the ledger. See docs/testing.md.

Modules: ``netns`` (namespaces, bridge, nftables faults), ``proxy`` (the
latency proxy), ``servers`` (processes, Redis), ``plan`` (the schedule),
``run`` (one run), ``check`` (the checker and its report).
"""
