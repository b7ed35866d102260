"""Operator control on Redis: pause, resume, manual triggers (each audited), and reading them back.

All writes go through the one ``control`` script, which updates the job's
meta hash, its trigger set and its audit stream in one step and publishes a
trigger's notice; it also lists a job's kept triggers. The job's control
fields are read with a plain ``HMGET``. Separate
from the node's own writes (:mod:`.redis_writes`): these calls come from
operators (CLI, web face), never from the protocol.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

from quorum_cron.store import keys as store_keys
from quorum_cron.store import parse
from quorum_cron.store.base import JobControl
from quorum_cron.store.redis_base import RedisBase, as_list, as_text
from quorum_cron.store.scripts import CONTROL, Call

__all__ = ["RedisControl"]


def _call_id() -> str:
    """A pause, resume or trigger call's own id (control.lua ARGV[11]). Why: redis-py sends a call
    again when its reply is lost on the connection, and the second run finds nothing to change: the
    id it finds in ``pc`` says this call changed it, so the answer's ``changed`` stays right; a
    trigger's second run finds its id in ``tc`` and answers the first one's slot instead of
    triggering the job a second time."""
    return secrets.token_hex(8)


class RedisControl(RedisBase):
    """Operator control (see :class:`quorum_cron.store.base.Store`)."""

    def _control_call(self, op: str, job: str, by: str | int, reason: str = "", call: str = "") -> list[Any]:
        base = self._job_prefix(job)
        names = (base + store_keys.META, base + store_keys.TRIGGERS, base + store_keys.AUDIT)
        args: list[str | int] = [
            self._now_arg(),
            op,
            job,
            by,
            reason,
            self._retention_ms,
            self._key_ttl_ms,
            self._trigger_maxlen,
            self._audit_maxlen,
            "" if self._cluster else self._trigger_channel,
            call,
        ]
        return as_list(self._scripts.call(Call(CONTROL, names, args)))

    def pause(self, job: str, by: str, reason: str) -> JobControl:
        with self._boundary("pause"):
            return self._changed_control("pause", job, self._control_call("p", job, by, reason, _call_id()))

    def resume(self, job: str, by: str) -> JobControl:
        with self._boundary("resume"):
            return self._changed_control("resume", job, self._control_call("r", job, by, "", _call_id()))

    def _changed_control(self, op: str, job: str, reply: list[Any]) -> JobControl:
        """A pause's or resume's reply: the control after, and whether this call changed it."""
        if len(reply) != 6:
            raise ValueError(f"{op} reply has {len(reply)} elements, expected 6")
        return replace(self._job_control(job, *reply[1:5]), changed=as_text(reply[5]) == "1")

    def control(self, job: str) -> JobControl:
        with self._boundary("control"):
            fields = ["p", "pb", "pa", "pr"]
            paused, by, at, reason = self._client.hmget(self._job_prefix(job) + store_keys.META, fields)
            return self._job_control(job, paused, by, at, reason)

    def trigger(self, job: str, by: str) -> int:
        with self._boundary("trigger"):
            reply = self._control_call("t", job, by, "", _call_id())
            if len(reply) != 2:
                raise ValueError(f"trigger reply has {len(reply)} elements, expected 2")
            return int(as_text(reply[1]))

    def triggers(self, job: str, since_ms: int) -> list[int]:
        with self._boundary("triggers"):
            reply = self._control_call("l", job, since_ms)
            out = []
            for f in reply[1:]:
                try:
                    out.append(parse.bounded_int(f, f"trigger of {job}", 0))
                except parse.BadValue as exc:
                    self._bad(exc.what, exc.problem)
            return out
