"""Membership on Redis: heartbeats, the members hash, and the namespace's membership record.

All through the one ``members`` script (``members.lua``), whose keys share
the namespace's hash tag ``{<ns>}``: the members hash, the record hash and
its log, so a heartbeat records the node's epoch, replies with the record
and moves it (a seat filled, a joint change finished) in one atomic step.
Everything read back is parsed with bounds (:mod:`.parse`): a corrupt
record is reported and read as none, a corrupt member entry is skipped.
The log is read with a plain ``XREVRANGE``.

``init_membership``, a change and a finish end with ``WAIT`` when
``wait_replicas`` > 0, as votes do: a record a failover loses could be made
again at the same epoch with other members while nodes and jobs hold the
first one (docs/protocol.md, "One epoch, one record"). A heartbeat does not
wait: a shortfall would stop the node voting on every shard while one shard
lacks a replica; a finish it made and a failover lost is made again, the
same, by the next heartbeat (a seat fill in "size = N" mode may not be).
"""

from __future__ import annotations

import json
from typing import Any

from quorum_cron.errors import StoreError
from quorum_cron.store import keys as store_keys
from quorum_cron.store import parse
from quorum_cron.store.base import (
    Configuration,
    HeartbeatResult,
    Member,
    Membership,
    MembershipChange,
)
from quorum_cron.store.memory_control import change_refusal, same_refusal, waiting_refusal
from quorum_cron.store.redis_base import RedisBase, as_list, as_text
from quorum_cron.store.scripts import MEMBERS, Call

__all__ = ["RedisMembership"]

_WAITED = frozenset("icf")
"""members.lua ops followed by WAIT (init, change, finish; see the module docstring)."""


class RedisMembership(RedisBase):
    """Heartbeats and the membership record (see :class:`quorum_cron.store.base.Store`)."""

    def _members_call(self, op: str, *args: str | int) -> list[Any]:
        ns = self._ns
        names = (self._members_key, store_keys.membership_key(ns), store_keys.membership_log_key(ns))
        wait = self._wait if op in _WAITED else None
        return as_list(self._scripts.call(Call(MEMBERS, names, [self._now_arg(), op, *args]), wait))

    def _membership(self, fields: list[Any]) -> Membership | None:
        """The record fields ``r, at, by, why`` of a reply; None when absent or corrupt (reported)."""
        if len(fields) != 4:
            raise ValueError(f"membership fields: {len(fields)} elements, expected 4")
        raw, at, by, why = fields
        if raw in (b"", ""):
            return None
        what = f"membership record {store_keys.membership_key(self._ns)}"
        try:
            return Membership(
                record=parse.membership_record(raw, what),
                changed_ms=parse.bounded_int(at, f"{what}: at", 0),
                by=parse.text(by, f"{what}: by", parse.MAX_NAME_CHARS * 2),
                reason=parse.text(why, f"{what}: why", parse.MAX_FIELD_CHARS),
            )
        except parse.BadValue as exc:
            self._bad(exc.what, exc.problem)
            return None

    def heartbeat(
        self, node: str, incarnation: str, ttl_ms: int, info: dict[str, str], epoch: int = 0
    ) -> HeartbeatResult:
        info_json = json.dumps(info, sort_keys=True, separators=(",", ":"))
        with self._boundary("heartbeat"):
            reply = self._members_call("h", node, incarnation, ttl_ms, info_json, epoch, self._audit_maxlen)
            if len(reply) != 7:
                raise ValueError(f"heartbeat reply has {len(reply)} elements, expected 7")
            return HeartbeatResult(
                ok=int(reply[1]) == 1,
                now_ms=int(reply[0]),
                holder=as_text(reply[2]),
                membership=self._membership(reply[3:]),
            )

    def leave(self, node: str, incarnation: str) -> None:
        with self._boundary("leave"):
            self._members_call("l", node, incarnation)

    def members(self) -> list[Member]:
        with self._boundary("members"):
            reply = self._members_call("m")
            _, pairs = int(reply[0]), reply[1:]
            if len(pairs) % 2:
                raise ValueError("odd number of elements in the members reply")
            out = []
            for i in range(0, min(len(pairs), 2 * parse.MAX_MEMBERS), 2):
                try:
                    out.append(parse.member_entry(pairs[i], pairs[i + 1]))
                except parse.BadValue as exc:
                    self._bad(exc.what, exc.problem)
            return sorted(out, key=lambda m: m.node)

    def membership(self) -> Membership | None:
        with self._boundary("membership"):
            reply = self._members_call("g")
            return self._membership(reply[1:])

    def init_membership(self, current: Configuration, by: str) -> Membership:
        with self._boundary("init_membership"):
            reply = self._members_call("i", current.encode(), by, self._audit_maxlen)
            ms = self._membership(reply[1:])
        if ms is None:
            raise StoreError(f"redis at {self._where}: the membership record is corrupt (reported above)")
        return ms

    def _change_reply(
        self, reply: list[Any], expect_epoch: int, joint: bool, current: Configuration | None
    ) -> MembershipChange:
        if len(reply) != 7:
            raise ValueError(f"membership change reply has {len(reply)} elements, expected 7")
        code, detail = as_text(reply[1]), as_text(reply[2])
        ms = self._membership(reply[3:])
        if code == "":
            return MembershipChange(True, ms)
        if code in "NEJK":
            why = change_refusal(ms, expect_epoch, joint=joint)
        elif code == "S" and current is not None:
            why = same_refusal(current)
        elif code == "W":
            why = waiting_refusal(detail.split(","), expect_epoch)
        elif code == "X":
            why = f"the stored membership record is corrupt: {detail[:200]}"
        else:
            raise StoreError(f"unexpected membership refusal code {code!r} from redis at {self._where}")
        return MembershipChange(False, ms, why)

    def change_membership(
        self, expect_epoch: int, current: Configuration, by: str, reason: str
    ) -> MembershipChange:
        with self._boundary("change_membership"):
            reply = self._members_call("c", expect_epoch, current.encode(), by, reason, self._audit_maxlen)
            return self._change_reply(reply, expect_epoch, False, current)

    def finish_membership(
        self, expect_epoch: int, by: str, reason: str, force: bool = False
    ) -> MembershipChange:
        with self._boundary("finish_membership"):
            reply = self._members_call(
                "f", expect_epoch, by, reason, "1" if force else "", self._audit_maxlen
            )
            return self._change_reply(reply, expect_epoch, True, None)

    def membership_log(self, limit: int) -> list[Membership]:
        if limit <= 0:
            return []
        with self._boundary("membership_log"):
            entries = self._client.xrevrange(
                store_keys.membership_log_key(self._ns), count=min(limit, 10_000)
            )
            out = []
            what = f"membership log entry of {store_keys.membership_log_key(self._ns)}"
            for _, fields in entries or []:
                # (Field names decoded here, one entry at a time: a name that is not UTF-8 raised
                # out of the loop, and the whole log -- `members show`, every job's voters line on
                # the dashboard -- was unreadable for one entry anyone could append.)
                try:
                    f = {parse.text(k, what, 64): v for k, v in (fields or {}).items()}
                except parse.BadValue as exc:
                    self._bad(exc.what, exc.problem)
                    continue
                got = [f.get(name, b"") for name in ("r", "at", "by", "why")]
                ms = self._membership(got)
                if ms is not None:
                    out.append(ms)
            return out
