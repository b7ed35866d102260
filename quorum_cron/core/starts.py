"""Starts of the slots committed to this node: when one goes, and when none may.

A slot committed to this node is started when its fire time (or a retry's backoff) has come
(``_maybe_start``, ``_defer``, ``_deferred_due``), once: not while this node runs, ran or is
starting that token or a later one (``_holds``), and not while a start of another token is in
flight (``_starting_other``: its reply decides). An assignment notice (``_on_notice``) is a hint
that anyone who may publish in the namespace can send: the starts it defers to fire times ahead
of the clock are bounded per job (``MAX_DEFERRED_AHEAD``). The running side
(:mod:`quorum_cron.core.run`) handles what the starts' replies say.
"""

from __future__ import annotations

from quorum_cron.core.actions import Action, Now, Start
from quorum_cron.core.polls import Polls
from quorum_cron.core.slots import MAX_DEFERRED_AHEAD, deferred_ahead
from quorum_cron.core.state import _JobState

__all__ = ["Starts"]


class Starts(Polls):
    """Committed slots → starts, each sent once and one at a time."""

    def _on_notice(self, js: _JobState, fire_ms: int, token: int, now: Now) -> list[Action]:
        """An assignment notice: start, or defer the start, unless the job holds its bound of
        starts deferred ahead of the clock (a record that a notice makes waits until then)."""
        ahead = fire_ms > now.wall_ms and fire_ms not in js.slots
        if ahead and deferred_ahead(js.slots, now.wall_ms) >= MAX_DEFERRED_AHEAD:
            return []
        return self._maybe_start(js, fire_ms, token, self.settings.node_id, now)

    def _maybe_start(self, js: _JobState, fire_ms: int, token: int, executor: str, now: Now) -> list[Action]:
        # While stopping, leave new work to the start timeout's takeover.
        if executor != self.settings.node_id or self._stopping:
            return []
        if now.wall_ms < fire_ms:
            # Committed ahead of time (votes lead the fire time): start when due.
            self._defer(js, fire_ms, token, fire_ms)
            return []
        if self._holds(js, fire_ms, token) or self._starting_other(js, fire_ms, token):
            return []
        s = self._slot(js, fire_ms)
        s.start_token = token
        s.start_sent = now.mono_ms
        if s.start_first is None or s.start_first[0] != token:
            s.start_first = (token, now.mono_ms)
        s.poll_at = None
        s.parked = False  # (a read, should the start fail, must be sent: sim start-reply-lost)
        self._dirty.add(js.index)
        return [Start(js.job.name, fire_ms, token, self.settings.lease_ms)]

    def _starting_other(self, js: _JobState, fire_ms: int, token: int) -> bool:
        """Whether a start (or its confirmation) of another token is in flight: one at a time, its
        reply decides (a refusal that shows the slot ours under another token starts that one).

        A second start would take the first one's place in the record, its send time included,
        from which a run's lease is counted: a forged notice's start sent after the genuine one
        would stretch the genuine run's lease past the store's, or run it twice on a reordering.
        """
        s = js.slots.get(fire_ms)
        return s is not None and s.start_token is not None and s.start_token != token

    def _holds(self, js: _JobState, fire_ms: int, token: int) -> bool:
        """Whether this node already sent a start of ``token`` (or a later one), runs it, or ran it:
        a start of it, a late notice's or a folded one (a failover may hand a token out twice),
        must not run the job again."""
        s = js.slots.get(fire_ms)
        if s is None:
            return False
        return (
            (s.start_token if s.start_token is not None else -1) >= token
            or (s.run is not None and s.run.token >= token)
            or self._ran(js, fire_ms, token)
        )

    def _ran(self, js: _JobState, fire_ms: int, token: int) -> bool:
        """Whether this node's run of the slot under ``token`` (or a later one) already ended.

        Its result is still on its way to the store, which shows the slot running until it
        lands: a late assignment notice or read must not start it, nor a refused repeat of its
        start adopt it, a second time (explorer seed 7766, delays reordering the calls).
        """
        s = js.slots.get(fire_ms)
        done = s.finish if s is not None else None
        return done is not None and done.token >= token

    def _defer(self, js: _JobState, fire_ms: int, token: int, not_before_ms: int) -> None:
        s = js.slots.get(fire_ms)
        if s is None or s.deferred is None or s.deferred[0] <= token:
            self._slot(js, fire_ms).deferred = (token, not_before_ms)
            self._dirty.add(js.index)

    def _deferred_due(self, js: _JobState, order: list[int], now: Now, out: list[Action]) -> None:
        slots = js.slots
        for fire_ms in order:
            s = slots.get(fire_ms)
            if s is None or s.deferred is None:
                continue
            token, at = s.deferred
            if at <= now.wall_ms:
                s.deferred = None
                self._touched.append((js, s))
                out.extend(self._maybe_start(js, fire_ms, token, self.settings.node_id, now))
