"""Decoding what Redis holds, without trusting it: bounded, typed, one value at a time.

Anyone with write access to Redis can put anything into any key: a slot
value that is not JSON, JSON nested ten thousand deep, a number with a
thousand digits, a ledger field of a megabyte, a node name with escape
sequences. The scripts write well-formed values; everything here assumes
they may not be. Every decoder

- bounds the size it accepts before parsing (``MAX_*`` below), turns the
  ``RecursionError`` that :func:`json.loads` raises on deeply nested text
  (not a ``ValueError``: it escaped every loop that read a member entry)
  into a refusal, and checks the decoded shape level by level;
- accepts integers only as plain decimal text within ``±(2**53 - 1)`` (what
  Lua's doubles hold exactly; ``1e300``, ``abc``, ``9007199254740992`` are
  refused, never rounded or wrapped);
- raises :class:`BadValue` (a :class:`~quorum_cron.errors.StoreError`)
  naming the value (shortened) and what was expected, and nothing else.

Callers decode one value at a time, so one bad value costs its own entry
(a member, a ledger entry, a slot) and never the rest of a reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from quorum_cron.core.model import MAX_ENCODED
from quorum_cron.errors import StoreError
from quorum_cron.store.base import (
    AuditAction,
    AuditEntry,
    JobControl,
    LedgerEntry,
    Member,
    MembershipRecord,
    SlotState,
    SlotView,
)
from quorum_cron.store.ports import Notice, Trigger

__all__ = [
    "MAX_FIRE_MS",
    "MAX_INT",
    "BadValue",
    "audit_entry",
    "bounded_int",
    "bounded_json",
    "job_control",
    "ledger_entry",
    "member_entry",
    "membership_record",
    "parse_notice",
    "parse_trigger",
    "shorten",
    "slot_value",
    "slot_view",
    "text",
    "wire_text",
]

MAX_INT: Final = 2**53 - 1
"""Largest integer accepted (exact in Lua's doubles, which compute tokens and times)."""
MAX_SLOT_BYTES: Final = 256 * 1024
"""A slot value: a record with a bounded run detail (output tails), votes of a few nodes."""
MAX_MEMBER_BYTES: Final = 4 * 1024 * 1024
"""A member entry: incarnation, times, an info object whose ``jobs`` field lists every job with its
spec hash (10 000 jobs with long names: about 1.2 MB)."""
MAX_FIELD_CHARS: Final = 64 * 1024
"""A ledger or audit field (a run's detail is the longest)."""
MAX_NAME_CHARS: Final = 200
"""A node id or operator name as read back (node ids are validated to fewer at the agent)."""
MAX_MEMBERS: Final = 1000
"""Member entries decoded per read; a cluster has a handful."""


class BadValue(StoreError):
    """A value read from Redis is not what the scripts write (corrupt, or written by someone else)."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"{what}: {problem}")
        self.what = what
        self.problem = problem


def shorten(value: object, limit: int = 80) -> str:
    """A bounded ``repr`` for error messages: a bad value may be megabytes long."""
    if isinstance(value, bytes):
        value = value[: limit * 4].decode("utf-8", errors="replace")
    shown = repr(value[: limit + 1] if isinstance(value, str) else value)
    if len(shown) > limit:
        shown = shown[:limit] + f"...({len(value) if isinstance(value, (str, bytes)) else '?'} chars)"
    return shown


def text(value: object, what: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``value`` (bytes, str or int from a reply) as text of at most ``limit`` characters."""
    if isinstance(value, bytes):
        if len(value) > limit * 4:
            raise BadValue(what, f"{len(value)} bytes (expected at most {limit} characters)")
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise BadValue(what, f"{shorten(value)} is not UTF-8") from None
    elif isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadValue(what, f"{type(value).__name__} (expected a string)")
    elif isinstance(value, int):
        value = str(value)
    assert isinstance(value, str)
    if len(value) > limit:
        raise BadValue(what, f"{len(value)} characters (expected at most {limit})")
    return value


def bounded_int(value: object, what: str, lo: int = -MAX_INT, hi: int = MAX_INT) -> int:
    """A plain decimal integer in ``[lo, hi]`` (``int`` from a reply, or its text)."""
    if isinstance(value, bool):
        raise BadValue(what, f"{value!r} is not an integer")
    if isinstance(value, int):
        n = value
    else:
        if isinstance(value, bytes):
            value = value[:40].decode("ascii", errors="replace") if len(value) <= 40 else "x" * 41
        if not isinstance(value, str) or not (0 < len(value) <= 17):
            raise BadValue(what, f"{shorten(value)} is not a decimal integer")
        digits = value[1:] if value[:1] == "-" else value
        if not digits.isascii() or not digits.isdecimal():
            raise BadValue(what, f"{shorten(value)} is not a decimal integer")
        n = int(value)
    if not lo <= n <= hi:
        raise BadValue(what, f"{shorten(value)} is out of range (expected {lo} to {hi})")
    return n


def bounded_json(value: object, what: str, max_bytes: int) -> Any:
    """JSON text of at most ``max_bytes``, decoded.

    Nesting needs no scan of its own: :func:`json.loads` stops a very deep
    text with ``RecursionError`` at once (caught here like any decoding
    error, instead of escaping into a loop that expects ``ValueError``), and
    every caller checks the shape it expects level by level, so a nested
    value where a string or number belongs is refused without walking it.
    A text with a lone surrogate escape (``"\\udc00"``) is refused too: it
    decodes to a string no output can encode.
    """
    doc = text(value, what, max_bytes)
    try:
        decoded = _DECODER.decode(doc)
    except (ValueError, RecursionError) as exc:
        raise BadValue(what, f"{shorten(doc)} is not JSON ({exc})") from None
    if "\\u" in doc and _SURROGATE_ESCAPE.search(doc):
        # JSON may escape half of a surrogate pair alone ("\udc00"): decoded, that is a str no
        # UTF-8 can carry, and printing it raised out of `status` and failed dashboard pages.
        try:
            json.dumps(decoded, ensure_ascii=False).encode("utf-8")
        except (UnicodeEncodeError, RecursionError):
            raise BadValue(what, f"{shorten(doc)} holds a lone surrogate escape (not text)") from None
    return decoded


_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
"""The JSON escape of a surrogate code point (paired, as ``json.dumps`` writes an emoji, or not)."""


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not allowed")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""One decoder for every read: ``json.loads`` with an argument builds a new decoder per call,
about 3 % of an agent's CPU at a burst of 10,000 slots (a decoder keeps no state between
calls)."""


def _str_field(f: Mapping[str, Any], key: str, what: str, limit: int = MAX_FIELD_CHARS) -> str:
    value = f.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadValue(what, f"field {key!r} is {type(value).__name__} (expected a string)")
    if len(value) > limit:
        raise BadValue(what, f"field {key!r} has {len(value)} characters (expected at most {limit})")
    return value


def _int_field(f: Mapping[str, Any], key: str, what: str, lo: int = -MAX_INT) -> int:
    value = f.get(key, 0)
    if type(value) is int and lo <= value <= MAX_INT:
        return value  # the usual case, without building the error's wording (13 fields per slot read)
    return bounded_int(value if value != "" else 0, f"{what} field {key!r}", lo)


def _votes(votes: object, what: str) -> tuple[tuple[str, str], ...]:
    """Decoded votes: an object of node -> spec hash (cjson encodes an empty table as ``{}`` or ``[]``)."""
    if votes == [] or votes is None:
        return ()
    if not isinstance(votes, dict) or len(votes) > MAX_MEMBERS:
        raise BadValue(what, f"votes {shorten(votes)} are not an object of spec hashes")
    for node, spec in votes.items():
        if not isinstance(spec, str) or len(node) > MAX_NAME_CHARS or len(spec) > MAX_NAME_CHARS:
            raise BadValue(what, f"votes {shorten(votes)} are not an object of spec hashes")
    return tuple(sorted(votes.items()))


def slot_value(job: str, fire_ms: int, record: object) -> SlotView:
    """A slot value as stored: ``""`` absent, ``"proposed <x> <dl> <votes JSON>"``, or
    ``"<st> <x> <record JSON>"`` (any other state)."""
    if record is None or record in (b"", ""):
        return SlotView(job=job, fire_ms=fire_ms, state=SlotState.ABSENT)
    what = f"slot {job}@{fire_ms}"
    raw = text(record, what, MAX_SLOT_BYTES)
    parts = raw.split(" ", 3)
    if len(parts) < 3:
        raise BadValue(what, f"{shorten(raw)} lacks its '<state> <expiry> ' header")
    if parts[0] == "proposed":
        if len(parts) != 4:
            raise BadValue(what, f"proposed value {shorten(raw)} lacks its votes")
        votes = _votes(bounded_json(parts[3], what, MAX_SLOT_BYTES), what)
        return SlotView(job=job, fire_ms=fire_ms, state=SlotState.PROPOSED, votes=votes)
    f = bounded_json(raw.split(" ", 2)[2], what, MAX_SLOT_BYTES)
    if not isinstance(f, dict):
        raise BadValue(what, f"record {shorten(raw)} is not an object")
    try:
        state = SlotState(str(f.get("st", "")))
    except ValueError:
        raise BadValue(what, f"state {shorten(f.get('st'))} is not a slot state") from None
    return SlotView(
        job=job,
        fire_ms=fire_ms,
        state=state,
        votes=_votes(f.get("v"), what),
        spec_hash=_str_field(f, "sh", what, MAX_NAME_CHARS),
        executor=_str_field(f, "ex", what, MAX_NAME_CHARS),
        token=_int_field(f, "tk", what, 0),
        attempt=_int_field(f, "na", what, 0),
        reason=_str_field(f, "rs", what),
        committed_ms=_int_field(f, "cm", what),
        started_ms=_int_field(f, "sm", what),
        lease_until_ms=_int_field(f, "lu", what),
        finished_ms=_int_field(f, "fm", what),
        detail=_str_field(f, "dt", what),
        not_before_ms=_int_field(f, "nb", what),
        runs=_int_field(f, "rn", what, 0),
        starter=_str_field(f, "si", what, MAX_NAME_CHARS),
        epoch=_int_field(f, "ep", what, 0),
    )


def slot_view(job: str, emitted: Sequence[object], fire_ms: int | None = None) -> SlotView:
    """An ``emit(fire, slot)`` / ``{code, slot}`` reply element: two values, the second the slot's."""
    if not isinstance(emitted, (list, tuple)) or len(emitted) != 2:
        raise BadValue(f"slot of {job}", f"reply element {shorten(emitted)} is not a pair")
    if fire_ms is None:
        raw = emitted[0]
        fire_ms = bounded_int(raw, f"slot of {job}: fire time")
        # An index member is the slot's key suffix: "0<fire>" names another key than "<fire>"
        # with the same time (anyone may add one), and read as <fire> it made a second view of
        # that slot, which failed the read of every job batched with it.
        if isinstance(raw, (bytes, str)) and len(raw) > 1 and raw[:1] in ("0", b"0"):
            raise BadValue(f"slot of {job}", f"fire time {shorten(raw)} has a leading zero")
    return slot_value(job, fire_ms, emitted[1])


def ledger_entry(job: str, raw: Mapping[Any, Any]) -> LedgerEntry:
    """A ledger stream entry's fields; the scripts leave empty and zero fields out."""
    what = f"ledger entry of {job}"
    if len(raw) > 32:
        raise BadValue(what, f"{len(raw)} fields (expected at most 32)")
    f = {text(k, what, 64): text(v, what) for k, v in raw.items()}
    voters = bounded_json(f.get("voters", "[]"), what, MAX_FIELD_CHARS)
    if voters == {}:  # Lua's cjson encodes an empty table as an object
        voters = []
    if not isinstance(voters, list) or not all(isinstance(v, str) for v in voters):
        raise BadValue(what, f"voters {shorten(f.get('voters'))} is not a list of node ids")
    if "fire" not in f or "finished" not in f:
        raise BadValue(what, "lacks its 'fire' or 'finished' field")
    try:
        state = SlotState(f.get("state", ""))
    except ValueError:
        raise BadValue(what, f"state {shorten(f.get('state'))} is not a slot state") from None
    return LedgerEntry(
        job=job,
        fire_ms=bounded_int(f["fire"], f"{what}: fire"),
        state=state,
        reason=f.get("reason", ""),
        voters=tuple(sorted(voters)),
        executor=f.get("executor", "")[:MAX_NAME_CHARS],
        token=bounded_int(f.get("token", "0"), f"{what}: token", 0),
        committed_ms=bounded_int(f.get("committed", "0"), f"{what}: committed"),
        started_ms=bounded_int(f.get("started", "0"), f"{what}: started"),
        finished_ms=bounded_int(f["finished"], f"{what}: finished"),
        detail=f.get("detail", ""),
        epoch=bounded_int(f.get("epoch", "0"), f"{what}: epoch", 0),
    )


def audit_entry(job: str, raw: Mapping[Any, Any]) -> AuditEntry:
    """An audit stream entry: action, by, at, detail."""
    what = f"audit entry of {job}"
    if len(raw) > 16:
        raise BadValue(what, f"{len(raw)} fields (expected at most 16)")
    f = {text(k, what, 64): text(v, what) for k, v in raw.items()}
    try:
        action = AuditAction(f.get("action", ""))
    except ValueError:
        raise BadValue(what, f"action {shorten(f.get('action'))} is not an audit action") from None
    return AuditEntry(
        job=job,
        action=action,
        by=f.get("by", "")[: MAX_NAME_CHARS * 2],
        at_ms=bounded_int(f.get("at"), f"{what}: at", 0),
        detail=f.get("detail", ""),
    )


def member_entry(node: object, entry: object) -> Member:
    """A members-hash field and value: node id -> JSON ``[incarnation, seen, expires, info JSON, epoch]``
    (``epoch``, the membership epoch of the heartbeat, is absent in entries of older agents: 0)."""
    name = text(node, "member name", MAX_NAME_CHARS)
    what = f"member {shorten(name, 40)}"
    doc = bounded_json(entry, what, MAX_MEMBER_BYTES)
    if not isinstance(doc, list) or len(doc) not in (4, 5):
        raise BadValue(what, f"{shorten(entry)} is not [incarnation, seen, expires, info, epoch]")
    inc, seen, expires, info_json = doc[:4]
    epoch = bounded_int(doc[4], f"{what}: epoch", 0) if len(doc) == 5 else 0
    if not isinstance(inc, str) or len(inc) > MAX_NAME_CHARS:
        raise BadValue(what, f"incarnation {shorten(inc)} is not a short string")
    info = bounded_json(info_json, f"{what} info", MAX_MEMBER_BYTES)
    if not isinstance(info, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in info.items()
    ):
        raise BadValue(what, f"info {shorten(info_json)} is not an object of strings")
    return Member(
        node=name,
        incarnation=inc,
        seen_ms=bounded_int(seen, f"{what}: seen"),
        expires_ms=bounded_int(expires, f"{what}: expires"),
        info=info,
        epoch=epoch,
    )


def job_control(job: str, paused: object, by: object, at: object, reason: object) -> JobControl:
    """The pause fields of a job's meta hash (``p``, ``pb``, ``pa``, ``pr``); absent fields are empty."""
    what = f"pause state of {job}"
    return JobControl(
        paused=text(paused or "", what, 8) == "1",
        by=text(by or "", f"{what}: by", MAX_NAME_CHARS * 2),
        at_ms=bounded_int(at or "0", f"{what}: at", 0),
        reason=text(reason or "", f"{what}: reason", MAX_FIELD_CHARS),
    )


def membership_record(value: object, what: str) -> MembershipRecord:
    """A membership record's text as stored (:meth:`MembershipRecord.decode`, bounded)."""
    raw = text(value, what, MAX_ENCODED)
    try:
        return MembershipRecord.decode(raw)
    except ValueError as exc:
        raise BadValue(what, str(exc)) from None


MAX_FIRE_MS: Final = 253_402_300_799_999
"""The latest fire time a notice or trigger may name: 9999-12-31T23:59:59.999Z, the last instant a
date holds (a job's environment and context carry the fire time as one)."""


def wire_text(data: bytes | str) -> str:
    """A pub/sub message or channel name as text (bytes decoded, bad UTF-8 replaced)."""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def parse_notice(data: bytes | str) -> Notice | None:
    """An assignment notice from its wire form ``job\\nfire_ms\\ntoken``, or None when malformed (a hint).

    Anyone who may publish in the namespace can send one, so its numbers are read with the store's
    bounds: plain decimals, a fire time a date can hold, a positive token.
    """
    parts = wire_text(data).split("\n")
    if len(parts) != 3:
        return None
    job, fire, token = parts
    try:
        return Notice(job, bounded_int(fire, "fire", 0, MAX_FIRE_MS), bounded_int(token, "token", 1, MAX_INT))
    except BadValue:
        return None


def parse_trigger(data: bytes | str) -> Trigger | None:
    """A trigger from its wire form ``job\\nfire_ms``, or None when malformed (bounded as a notice is)."""
    parts = wire_text(data).split("\n")
    if len(parts) != 2:
        return None
    job, fire = parts
    try:
        return Trigger(job, bounded_int(fire, "fire", 0, MAX_FIRE_MS))
    except BadValue:
        return None
