"""The clock guard: whether this node's clock may be trusted to vote.

Owns the clock abstraction (``base``: real and manual clocks), the NTP client and its
evidence (``ntp``, ``ntp_evidence``), the store ``TIME`` probe's evidence (``evidence``),
the skew guard and its policy (``skew``, ``policy``) and the ``check-clock`` report
(``check``). Its verdicts feed the core as inputs; it imports no agent, face or simulator.

May import only the shared modules; ``check`` (the ``check-clock`` command) is a face and
may import the configuration and the store (docs/architecture.md).
"""
