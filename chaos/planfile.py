"""A fault plan written by hand (``--plan FILE``) instead of drawn from a seed.

The format follows the simulator's scenario files (``sim/scenarios/*.toml``):
one ``[[faults]]`` table per fault, ``at`` and ``for`` as durations
(``"20s"``, ``"1m30s"``, ``"500ms"``, or a bare number of seconds), the
kind's own values next to them, named as in ``faults.jsonl``::

    name = "two cuts"                   # optional, like a scenario's
    description = "n1 cut off, then n2 loses 30 % of its packets"

    [[faults]]
    kind = "cut-outbound"
    at = "10s"
    for = "4s"
    targets = ["n1"]

    [[faults]]
    kind = "loss"
    at = "25s"
    for = "5s"
    targets = ["n2"]
    percent = 30

The run carries the faults out one at a time, as it does a drawn schedule, so
the file must leave the same room the seed's schedule leaves: faults in order,
each starting no sooner than ``recovery_s`` + :data:`chaos.plan.GAP_S` after
the previous one ends, the last one's recovery inside the run. Everything is
checked before the run starts; a mistake is one line naming the file, the
fault, the field, the value and what was expected.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from chaos.options import Options
from chaos.plan import GAP_S, KINDS, REDIS_KINDS, Fault, plan

__all__ = ["MAX_FAULTS", "PlanFileError", "load_plan", "schedule_of"]

MAX_FAULTS = 10_000
"""More than a 24 h run holds (each fault takes at least GAP_S + recovery_s)."""
MAX_BYTES = 1_000_000
PARAMS: dict[str, tuple[str, ...]] = {
    "loss": ("percent",),
    "latency": ("delay_ms", "jitter_ms"),
    "clock-offset": ("offset_ms",),
    "clock-step": ("step_ms",),
}
"""The values each kind takes besides kind, at, for, targets and aim (``chaos.run.Harness.apply``)."""
_COMMON = ("kind", "at", "for", "targets", "aim")
_TOP = ("name", "description", "faults")
_MAX_CLOCK_MS = 3_600_000


class PlanFileError(ValueError):
    """A plan file the harness cannot carry out (one line: file, fault, field, value, expected)."""


def _show(value: object) -> str:
    """``value`` for an error message: short, and never a huge int's decimal expansion."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**12:
        return "a huge integer"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...{text[-10:]}"


def _seconds(raw: object, where: str) -> float:
    """A duration as the simulator's scenarios write one, in seconds (ms precision)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 0 <= raw <= 10**9:
            raise PlanFileError(f"{where}: {_show(raw)} is not a number of seconds from 0 to 1e9")
        return float(raw)
    if isinstance(raw, float) and math.isfinite(raw) and 0 <= raw <= 1e9:
        return round(raw, 3)
    if isinstance(raw, str):
        total = 0
        rest = raw.strip()
        # "1m30s", "250ms", "2s500ms": units largest first, each at most once.
        units = (("h", 3_600_000), ("ms", 1), ("m", 60_000), ("s", 1000))
        seen: list[int] = []
        while rest:
            digits = len(rest) - len(rest.lstrip("0123456789"))
            unit = next((u for u, _ in units if rest[digits:].startswith(u)), None)
            if digits == 0 or digits > 9 or unit is None:
                break
            size = dict(units)[unit]
            if seen and size >= seen[-1]:
                break
            seen.append(size)
            total += int(rest[:digits]) * size
            rest = rest[digits + len(unit) :]
        if raw.strip() and not rest:
            return total / 1000
    raise PlanFileError(
        f'{where}: {_show(raw)} is not a duration (expected e.g. "20s", "1m30s", "500ms" '
        "or a number of seconds)"
    )


def _int(raw: object, where: str, lo: int, hi: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not lo <= raw <= hi:
        raise PlanFileError(f"{where}: {_show(raw)} is not a whole number from {lo} to {hi}")
    return raw


def _targets(raw: object, kind: str, where: str, opts: Options) -> tuple[str, ...]:
    if kind in REDIS_KINDS:
        if raw not in (None, []):
            raise PlanFileError(f"{where}: targets {_show(raw)}: a {kind} fault hits Redis, expected none")
        return ()
    names = opts.node_names
    if (
        not isinstance(raw, list)
        or not raw
        or any(not isinstance(n, str) or n not in names for n in raw)
        or len(set(raw)) != len(raw)
    ):
        raise PlanFileError(
            f"{where}: targets {_show(raw)}: expected a list of distinct node names from {names[0]} "
            f"to {names[-1]}"
        )
    minority = opts.nodes - opts.quorum
    if kind == "partition-minority" and len(raw) > minority:
        raise PlanFileError(
            f"{where}: targets {_show(raw)}: a partition-minority cuts at most {minority} of "
            f"{opts.nodes} nodes (a quorum keeps Redis)"
        )
    if kind == "partition-majority" and len(raw) < opts.quorum:
        raise PlanFileError(
            f"{where}: targets {_show(raw)}: a partition-majority cuts at least {opts.quorum} of "
            f"{opts.nodes} nodes (no quorum keeps Redis)"
        )
    return tuple(sorted(raw))


def _params(doc: dict[str, Any], kind: str, where: str) -> dict[str, float]:
    wanted = PARAMS.get(kind, ())
    unknown = sorted(k for k in doc if k not in _COMMON and k not in wanted)
    if unknown:
        takes = ", ".join((*_COMMON, *wanted))
        raise PlanFileError(
            f"{where}: unknown field {_show(unknown[0])} for a {kind} fault (expected {takes})"
        )
    missing = [k for k in wanted if k not in doc]
    if missing:
        raise PlanFileError(f"{where}: a {kind} fault needs {missing[0]!r}")
    if kind == "loss":
        return {"percent": _int(doc["percent"], f"{where}: percent", 1, 99)}
    if kind == "latency":
        delay = _int(doc["delay_ms"], f"{where}: delay_ms", 0, 60_000)
        return {"delay_ms": delay, "jitter_ms": _int(doc["jitter_ms"], f"{where}: jitter_ms", 0, delay)}
    if kind in ("clock-offset", "clock-step"):
        (name,) = wanted
        value = _int(doc[name], f"{where}: {name}", -_MAX_CLOCK_MS, _MAX_CLOCK_MS)
        if value == 0:
            raise PlanFileError(f"{where}: {name} 0: expected a clock move other than 0 (milliseconds)")
        return {name: value}
    return {}


def _fault(doc: object, index: int, where: str, opts: Options) -> Fault:
    if not isinstance(doc, dict):
        raise PlanFileError(f"{where}: {_show(doc)} is not a table of kind, at, for, targets")
    kind = doc.get("kind")
    if kind not in KINDS:
        raise PlanFileError(f"{where}: kind {_show(kind)}: expected one of {', '.join(KINDS)}")
    if kind == "promotion" and not opts.replica:
        raise PlanFileError(f"{where}: kind 'promotion' needs the replica (drop --no-replica)")
    for name in ("at", "for"):
        if name not in doc:
            raise PlanFileError(f'{where}: a fault needs {name!r} (a duration such as "20s")')
    at = _seconds(doc["at"], f"{where}: at")
    duration = _seconds(doc["for"], f"{where}: for")
    if duration <= 0:
        raise PlanFileError(f"{where}: for {_show(doc['for'])}: expected a duration above 0")
    aim = doc.get("aim", False)
    if not isinstance(aim, bool) or (aim and kind in REDIS_KINDS):
        raise PlanFileError(f"{where}: aim {_show(aim)}: expected true or false (false for Redis faults)")
    params = _params(doc, kind, where)
    return Fault(index, kind, at, duration, _targets(doc.get("targets"), kind, where, opts), params, aim)


def load_plan(path: Path, opts: Options) -> list[Fault]:
    """The faults of the plan file at ``path`` for a run with ``opts``; :class:`PlanFileError` otherwise."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PlanFileError(f"plan {path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    if len(data) > MAX_BYTES:
        raise PlanFileError(f"plan {path}: larger than {MAX_BYTES} bytes (expected a list of faults)")
    try:
        doc = tomllib.loads(data.decode())
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, bad UTF-8, a 5000-digit integer
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise PlanFileError(f"plan {path}: not a TOML file ({reason})") from None
    unknown = sorted(k for k in doc if k not in _TOP)
    if unknown:
        raise PlanFileError(f"plan {path}: unknown key {_show(unknown[0])} (expected {', '.join(_TOP)})")
    raw = doc.get("faults")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_FAULTS:
        raise PlanFileError(f"plan {path}: expected 1 to {MAX_FAULTS} [[faults]] tables")
    faults: list[Fault] = []
    for i, item in enumerate(raw):
        where = f"plan {path}: fault #{i}"
        f = _fault(item, i, where, opts)
        if faults:
            ready = faults[-1].end_s + opts.recovery_s + GAP_S
            if f.at_s < ready:
                raise PlanFileError(
                    f"{where}: at {f.at_s:g}s: expected {ready:g}s or later (fault #{i - 1} ends at "
                    f"{faults[-1].end_s:g}s, then {opts.recovery_s:g}s of recovery and {GAP_S:g}s of quiet: "
                    "faults run one at a time, in order)"
                )
        if f.end_s + opts.recovery_s > opts.seconds:
            raise PlanFileError(
                f"{where}: ends at {f.end_s:g}s, and its {opts.recovery_s:g}s of recovery overrun the "
                f"run's {opts.seconds:g}s (expected a longer --seconds or an earlier fault)"
            )
        faults.append(f)
    return faults


def schedule_of(opts: Options) -> list[Fault]:
    """The faults of a run: its plan file's (``--plan``), else the seed's draw (what ``run``
    carries out and ``plan`` prints)."""
    if opts.plan_file is not None:
        return load_plan(opts.plan_file, opts)
    return plan(
        opts.seed,
        opts.seconds,
        opts.node_names,
        quorum=opts.quorum,
        kinds=opts.kinds,
        lease_s=opts.lease_ms / 1000,
        recovery_s=opts.recovery_s,
    )
