"""When a start, renew or vote actually left for the store: a lease is counted from there.

The core counts a lease from the moment the call that set it was sent
(docs/protocol.md, "Leases"): the store set the lease when the call arrived,
which is later. Until told otherwise, "sent" is when the core emitted the
action. But an agent carries calls out on one store worker thread, in order,
and during a burst a ``Start`` waits there behind the burst's votes and
sweeps: at 100,000 jobs for more than a third of the 15 s lease, so every
run renewed at once on its start's reply (or, past half the lease, sent a
confirming renew before it could run): about one renew per slot for nothing
(docs/benchmarks.md, "Counting a lease from the wire").

:meth:`WireTimes.sent` moves the moment to when the worker put the call on
the wire, which is still before the store received it, so the lease end
the core keeps stays on the safe side. A time is only ever moved later, and
only for the send the core is waiting on (the same token, a start or renew
still in flight); a runtime that never calls it (the simulator) keeps the
emission times. A vote's time matters for the start its commit may fold in
(docs/protocol.md, "A start folded into the commit"): at a burst the votes
wait on that thread as the starts did.
"""

from __future__ import annotations

from quorum_cron.core.actions import Renew, Start, StoreAction, Vote
from quorum_cron.core.run import RunningSide

__all__ = ["WireTimes"]


class WireTimes(RunningSide):
    """The runtime's word on when a fenced call left: :meth:`sent`."""

    def sent(self, action: StoreAction, mono_ms: int) -> None:
        """``action`` was put on the wire at ``mono_ms`` (this node's monotonic clock, the one
        its ``Now.mono_ms`` reads), after the core emitted it: count its lease from there."""
        if isinstance(action, Vote):
            self._vote_sent(action, mono_ms)
            return
        if not isinstance(action, Start | Renew):
            return
        js = self._jobs.get(action.job)
        s = js.slots.get(action.fire_ms) if js is not None else None
        if s is None:
            return
        if isinstance(action, Start):
            if s.start_token == action.token and s.start_sent is not None and s.confirming is None:
                s.start_sent = max(s.start_sent, mono_ms)
            return
        if s.confirming is not None and s.start_token == action.token:
            s.confirming = max(s.confirming, mono_ms)  # (a confirming renew: its own half-lease check)
            return
        r = s.run
        if r is not None and r.token == action.token and r.renewing:
            r.renew_sent_mono = max(r.renew_sent_mono, mono_ms)

    def _vote_sent(self, action: Vote, mono_ms: int) -> None:
        """A vote (or a part of one) left: a start folded into one of its commits holds a lease
        counted from there (only votes that asked for one: :attr:`NodeSettings.incarnation`)."""
        jobs = self._jobs
        for r in action.requests:
            if not r.start_lease_ms:
                return  # (a node's votes all ask, or none do)
            js = jobs.get(r.job)
            s = js.slots.get(r.fire_ms) if js is not None else None
            p = s.vote if s is not None else None
            if p is not None and p.in_flight and p.request is r:
                p.sent_mono = max(p.sent_mono, mono_ms)
