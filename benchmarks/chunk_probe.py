"""Benchmark: what a slot would cost the server if slot records were kept per chunk of jobs.

Usage::

    .venv/bin/python benchmarks/chunk_probe.py [--jobs 1000] [--rounds 2] [--chunk 250]
        [--voters 3] [--sweeps 2] [--redis-server PATH] [--label NAME] [--callgrind]
        [--hash-tables]

Why: a slot costs the server about 535,000 instructions today
(``store_cycle.py --callgrind --fold``), and docs/store.md ("Where the 50 µs
target stands") finds that no lever that keeps one record, one meta read and
one index entry per job can take that near the 50 µs issue 27 asks for.
Those pages name the way that could: jobs that share a fire time share one
record per chunk of jobs, so the three votes, the commit and the finish of a
chunk are a handful of commands for all its jobs. That is a revision of the
Redis store (its scripts, keys, readers, cluster routing, and a cut-over;
the store's contract, and so the core, memory model and simulator, can
stay), so before anyone builds it this measures what it would buy, with a
prototype that does each job's share of the protocol's work.

The prototype, per chunk of ``--chunk`` jobs, keys under the chunk's own
hash tag:

* ``meta``, a HASH: ``mr`` the membership record (parsed once per call with
  the store's own bounded parser, ``_membership.lua``), and per job a field
  ``<job>`` = ``"<token counter> <high-water mark> <failure streak>"``;
* ``slot:<fire>``, a HASH of the chunk's slots at that fire time, and in it
  ``#open``, how many of them are not terminal. Three layouts of a job's
  state in it (``LAYOUTS``): ``cjson``, one field per job holding the slot
  value exactly as the store keeps it today (``proposed <x> <dl> <votes
  JSON>`` or ``<st> <x> <record JSON>``, every field the store writes);
  ``packed``, the same with positional text instead of JSON; ``fields``, a
  field per job and attribute (``FIELDS_LUA``: a vote is one field, the
  state one, so nothing is decoded);
* ``open`` and ``slots``, ZSETs of fire times (one entry per chunk and fire
  time, not per job); ``ledger``, a STREAM with one entry per slot carrying
  the fields a ledger entry has today plus ``job``.

A vote (one call per node, chunk and pass, in the agents' burst order as
``store_cycle.py --fold`` sends them): one ``HMGET`` of the jobs' meta and one
of their slot state, then per job under ``pcall`` what ``vote.lua`` does for
an undecided member's vote (the votes counted against the record's quorum;
on a commit the token, the rendezvous pick with ``redis.sha1hex``, the start
folded in for the executor's own vote), then one ``HSET`` of the changed
state, one of the changed meta fields, one ``ZADD`` of the open index and one
``PEXPIRE``. A finish (one call per executor and chunk): the same two reads,
per job the token, executor and state checked and the state ended, one
``XADD`` per slot, the two ``HSET`` calls, one ``ZADD`` of the terminal index
and, once nothing of the fire time is open, one ``ZREM``. A sweep: one
``ZRANGEBYSCORE`` per chunk.

Like the store, it reads the server's clock (``TIME``) once per call and
takes a spec hash per vote and a detail per finish. What it leaves out, so
its figures are lower bounds of the revision's cost: pauses, overlap, the
missed and early checks, the legacy quorum, joint configurations' second
count, a job adopting a membership record (each chunk's is written before
the run), the retention and TTL rules, the trim of the terminal index, the
corruption checks of the keys' types, and a finish's failure and retry
paths (every run succeeds). It also keeps a job's meta in one field
(``"tk hw fs"``), a lever of its own that the store could take today
(docs/store.md). The other way, it pays a little the store does not: each
vote call reads every job's meta, decided votes included, and adds to the
open index. Replies: ``cjson`` and ``packed`` return every job's code and
value, as ``vote.lua`` does; ``fields`` returns a job's state fields (none
for a recorded vote).

A hash of at most 512 short fields is a listpack (the server's default
``hash-max-listpack-entries``), where each field read or written is a scan;
``--hash-tables`` sets that to 0 for the prototype's runs, to show what the
layouts cost without those scans (a real design would have to reach that by
the size of its chunks, not by the server's settings).

Each run measures, on one server, the floor and the store of
``store_cycle.py`` (``--fold``) and then the prototype in each layout, as
Redis CPU µs per slot per phase and, with ``--callgrind``, instructions per
slot. JSON under ``benchmarks/results/``, the latest kept per server, chunk
size and mode. docs/store.md has the figures and what they mean.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import ArgumentParser, write_result  # noqa: E402
from store_cycle import (  # noqa: E402
    PHASES,
    Meter,
    _vote_passes,
    add_cycle_arguments,
    callgrind_wrapper,
    run_floor,
    run_store,
)

from quorum_cron.core.membership import MembershipRecord  # noqa: E402
from quorum_cron.store.embedded.single import EmbeddedRedis  # noqa: E402

NAMESPACE = "benchc"
LEASE_MS = 600_000
RETENTION_MS = 86_400_000
FMT = "local function fmt(n)\n  return string.format('%d', n)\nend"  # (as _clock.lua)

HEAD_LUA = r"""
-- KEYS[1] the chunk's prefix; ARGV[1] phase (v vote | f finish | w sweep),
-- ARGV[2] fire ms, ARGV[3] now ms or "" (the server's TIME, as the store
-- reads it), ARGV[4] node;
-- vote: ARGV[5] lease ms, ARGV[6] incarnation, ARGV[7..] job, spec hash pairs;
-- finish: ARGV[5..] job, token, detail triples.
-- Shared by the layouts: the arguments, the meta read, the helpers. A layout's
-- part then reads the slot hash (setting open) and defines vote_one(k, job)
-- and finish_one(k, job, token, detail); TAIL_LUA runs them and writes.
local P, phase, fire, NOW = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if phase == 'w' then
  return redis.call('ZRANGEBYSCORE', P .. 'open', '-inf', '+inf', 'LIMIT', '0', '16')
end
if NOW == '' then
  local t = redis.call('TIME')
  NOW = fmt(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
local now, firen, node = tonumber(NOW), tonumber(fire), ARGV[4]
local byte, sub, match = string.byte, string.sub, string.match
local EXPIRY = fmt(now + RETENTION)
local SKEY = P .. 'slot:' .. fire
local voting = phase == 'v'
local first, step = voting and 7 or 5, voting and 2 or 3
local jobs, mf = {}, {'mr'}
for i = first, #ARGV, step do
  jobs[#jobs + 1] = ARGV[i]
  mf[#mf + 1] = ARGV[i]
end
local metas = redis.call('HMGET', P .. 'meta', unpack(mf))
local rec = metas[1] and parse_record(metas[1])
if not rec then
  return redis.error_reply('no membership record in ' .. P .. 'meta')
end
local sw, mw, codes, out = {}, {}, {}, {NOW, ''}
local open -- how many of the chunk's slots at fire are not terminal (the layout's read sets
-- it; TAIL_LUA counts a slot a vote created and one a finish ended)

local function put(t, k, v)
  local n = #t
  t[n + 1], t[n + 2] = k, v
end

-- A job's meta: token counter, high-water mark, failure streak (decimal text).
local function meta_of(k)
  return match(metas[k + 1] or '0 0 0', '^(%d+) (%d+) (%d+)$')
end

-- A commit's meta change (the token counter moved on, the high-water mark
-- raised); returns the token.
local function commit_meta(k, job)
  local tk, hw, fs = meta_of(k)
  tk = fmt(tonumber(tk) + 1)
  if firen > tonumber(hw) then
    hw = fire
  end
  put(mw, job, tk .. ' ' .. hw .. ' ' .. fs)
  return tk
end

-- A success's meta change (the failure streak reset).
local function finish_meta(k, job)
  local tk, hw, fs = meta_of(k)
  if fs ~= '0' then
    put(mw, job, tk .. ' ' .. hw .. ' 0')
  end
end

-- Rendezvous among cands (the first 12 hex digits of sha1(job \n fire \n node)).
local function pick(job, cands)
  local best, best_k
  local stem = job .. '\n' .. fire .. '\n'
  for i = 1, #cands do
    local k = tonumber(sub(redis.sha1hex(stem .. cands[i]), 1, 12), 16)
    if best == nil or k > best_k then
      best, best_k = cands[i], k
    end
  end
  return best
end

-- The slot's ledger entry: today's fields, and the job.
local function log_entry(job, voters, executor, token, cm, sm, detail)
  redis.call('XADD', P .. 'ledger', 'MAXLEN', '10000', '*', 'job', job, 'fire', fire, 'state', 'succeeded',
             'finished', NOW, 'reason', detail, 'voters', voters, 'executor', executor,
             'token', token, 'committed', cm, 'started', sm, 'detail', detail)
end
"""

CHUNK_LUA = r"""
-- The "cjson" and "packed" layouts: a field per job holding its slot value.
mf[1] = '#open'
local slots = redis.call('HMGET', SKEY, unpack(mf))
open = tonumber(slots[1]) or 0

-- The per-job values: cjson as the store keeps them today, or (PACKED)
-- positional text: a record's fields in the order of FIELDS, joined by \31,
-- its votes last as node=hash,... (a real format would length-prefix the
-- free-text fields, rs and dt; the prototype's never hold \31).
local FIELDS = {'st', 'sh', 'ex', 'as', 'na', 'tk', 'cm', 'sm', 'lu', 'rn', 'si', 'fm', 'rs', 'dt', 'dl', 'x'}
local NF = #FIELDS
local votes_enc, votes_dec, rec_enc, rec_dec, list_enc
if PACKED then
  votes_enc = function(v)
    local t, n = {}, 0
    for voter, h in pairs(v) do
      n = n + 1
      t[n] = voter .. '=' .. h
    end
    return table.concat(t, ',')
  end
  votes_dec = function(s)
    local v = {}
    for voter, h in string.gmatch(s, '([^=,]+)=([^,]*)') do
      v[voter] = h
    end
    return v
  end
  rec_enc = function(f)
    local t = {}
    for i = 1, NF do
      t[i] = f[FIELDS[i]] or ''
    end
    t[NF + 1] = votes_enc(f.v)
    return table.concat(t, '\31')
  end
  rec_dec = function(s)
    local f, i = {}, 0
    for part in string.gmatch(s .. '\31', '([^\31]*)\31') do
      i = i + 1
      if i > NF then
        f.v = votes_dec(part)
        break
      elseif part ~= '' then
        f[FIELDS[i]] = part
      end
    end
    return f
  end
  list_enc = function(t)
    return table.concat(t, ',')
  end
else
  votes_enc, votes_dec, rec_enc, rec_dec, list_enc = cjson.encode, cjson.decode, cjson.encode, cjson.decode,
    cjson.encode
end

function vote_one(k, job, spec)
  local raw = slots[k + 1]
  if raw and byte(raw, 1) ~= 112 then
    return 'D', raw
  end
  local votes, dl
  if raw then
    local _, d, v = match(raw, '^proposed (%d+) (%-?%d+) (.*)')
    votes, dl = votes_dec(v), d
  else
    votes, dl = {}, '3600000'
  end
  if not rec.cur.set[node] then
    return 'F', raw or ''
  end
  votes[node] = spec
  local agreeing, a = {}, 0
  for n, h in pairs(votes) do
    if h == spec and rec.cur.set[n] then
      a = a + 1
      agreeing[a] = n
    end
  end
  if a < rec.cur.quorum then
    local val = 'proposed ' .. EXPIRY .. ' ' .. dl .. ' ' .. votes_enc(votes)
    put(sw, job, val)
    return 'R', val, not raw
  end
  local tk = commit_meta(k, job)
  local chosen = pick(job, agreeing)
  local f = {st = 'committed', v = votes, sh = spec, ex = chosen, as = fmt(#chosen) .. ':' .. chosen,
             na = '1', tk = tk, cm = NOW, dl = dl, x = EXPIRY}
  local lease = tonumber(ARGV[5])
  if lease > 0 and chosen == node and now >= firen then
    f.st, f.rn, f.sm, f.lu, f.si = 'running', '1', NOW, fmt(now + lease), ARGV[6]
  end
  local val = f.st .. ' ' .. EXPIRY .. ' ' .. rec_enc(f)
  put(sw, job, val)
  return 'C', val, not raw
end

function finish_one(k, job, token, detail)
  local raw = slots[k + 1]
  local st, at = match(raw or '', '^(%a+) %d+ ()')
  if st ~= 'running' then
    return 'N', raw or ''
  end
  local f = rec_dec(sub(raw, at))
  if f.tk ~= token or f.ex ~= node then
    return 'N', raw
  end
  local voters = {}
  for n in pairs(f.v) do
    voters[#voters + 1] = n
  end
  log_entry(job, list_enc(voters), f.ex, f.tk, f.cm, f.sm, detail)
  f.st, f.rs, f.fm, f.lu, f.si, f.dt, f.x = 'succeeded', detail, NOW, nil, nil, detail, EXPIRY
  local val = 'succeeded ' .. EXPIRY .. ' ' .. rec_enc(f)
  put(sw, job, val)
  finish_meta(k, job)
  return 'S', val
end
"""

FIELDS_LUA = r"""
-- The "fields" layout: no value to decode. Per job <job>:v:<node> = the
-- node's spec hash (a vote), <job>:s = "<st> <token> <executor>", <job>:r =
-- "<x> <cm> <sm> <lu> <si> <na> <rn> <dl> <as>" ("-" for none) and, once
-- ended, <job>:f = "<fm> <reason>": the server splits a job's state into the
-- fields a call reads. A reply's value is s and r on two lines ("" for a
-- recorded vote, whose caller needs nothing back).
local members, nm = rec.cur.members, #rec.cur.members
local per = nm + 2 -- fields read per job: s, r, a vote per member
local sf = {'#open'}
for _, job in ipairs(jobs) do
  sf[#sf + 1] = job .. ':s'
  sf[#sf + 1] = job .. ':r'
  for m = 1, nm do
    sf[#sf + 1] = job .. ':v:' .. members[m]
  end
end
local vals = redis.call('HMGET', SKEY, unpack(sf))
open = tonumber(vals[1]) or 0

function vote_one(k, job, spec)
  local b = 1 + (k - 1) * per
  local s = vals[b + 1]
  if s then
    return 'D', s .. '\n' .. vals[b + 2]
  end
  if not rec.cur.set[node] then
    return 'F', ''
  end
  local n, cands, new = 0, {}, true
  for m = 1, nm do
    local h = vals[b + 2 + m]
    if h then
      new = false
    end
    if members[m] == node then
      h = spec
    end
    if h == spec then
      n = n + 1
      cands[n] = members[m]
    end
  end
  if n < rec.cur.quorum then
    put(sw, job .. ':v:' .. node, spec)
    return 'R', '', new
  end
  local tk = commit_meta(k, job)
  local chosen = pick(job, cands)
  local st, sm, lu, si, rn = 'committed', '-', '-', '-', '0'
  local lease = tonumber(ARGV[5])
  if lease > 0 and chosen == node and now >= firen then
    st, sm, lu, si, rn = 'running', NOW, fmt(now + lease), ARGV[6], '1'
  end
  local sv = st .. ' ' .. tk .. ' ' .. chosen
  local r = table.concat({EXPIRY, NOW, sm, lu, si, '1', rn, '3600000', #chosen .. ':' .. chosen}, ' ')
  put(sw, job .. ':v:' .. node, spec)
  put(sw, job .. ':s', sv)
  put(sw, job .. ':r', r)
  return 'C', sv .. '\n' .. r, new
end

function finish_one(k, job, token, detail)
  local b = 1 + (k - 1) * per
  local s, r = vals[b + 1], vals[b + 2]
  if s ~= 'running ' .. token .. ' ' .. node or not r then
    return 'N', s or ''
  end
  local cm, sm, na, rn, dl, as = match(r, '^%S+ (%S+) (%S+) %S+ %S+ (%S+) (%S+) (%S+) (%S+)$')
  local voters = {}
  for m = 1, nm do
    if vals[b + 2 + m] then
      voters[#voters + 1] = members[m]
    end
  end
  log_entry(job, cjson.encode(voters), node, token, cm, sm, detail)
  local sv = 'succeeded ' .. token .. ' ' .. node
  r = table.concat({EXPIRY, cm, sm, '-', '-', na, rn, dl, as}, ' ') -- (lease and tag cleared)
  put(sw, job .. ':s', sv)
  put(sw, job .. ':r', r)
  put(sw, job .. ':f', NOW .. ' ' .. detail)
  finish_meta(k, job)
  return 'S', sv .. '\n' .. r
end
"""

TAIL_LUA = r"""
-- Each job under pcall (a bad value fails its own job only, as in vote.lua),
-- then the writes of all of them.
for k, job in ipairs(jobs) do
  local i = first + step * (k - 1)
  local ok, code, val, new
  if voting then
    ok, code, val, new = pcall(vote_one, k, job, ARGV[i + 1])
  else
    ok, code, val = pcall(finish_one, k, job, ARGV[i + 1], ARGV[i + 2])
  end
  if not ok then
    code, val = 'X', tostring(code)
  elseif new then
    open = open + 1 -- (a slot this vote created)
  elseif code == 'S' then
    open = open - 1
  end
  codes[k], out[k + 2] = code, val
end
if #sw > 0 then
  put(sw, '#open', fmt(open))
  redis.call('HSET', SKEY, unpack(sw))
  redis.call('PEXPIRE', SKEY, RETENTION)
end
if #mw > 0 then
  redis.call('HSET', P .. 'meta', unpack(mw))
end
if voting then
  redis.call('ZADD', P .. 'open', fire, fire)
else
  redis.call('ZADD', P .. 'slots', fire, fire)
  if open == 0 then
    redis.call('ZREM', P .. 'open', fire)
  end
end
out[2] = table.concat(codes)
return out
"""

LAYOUTS = ("cjson", "packed", "fields")


def chunk_script(layout: str = "cjson") -> str:
    """The prototype as loaded for ``layout``: the store's own record parser, ``HEAD_LUA``,
    the layout's part (``CHUNK_LUA`` with cjson or packed values, ``FIELDS_LUA``), ``TAIL_LUA``."""
    parser = (ROOT / "quorum_cron" / "store" / "_membership.lua").read_text()
    packed = "true" if layout == "packed" else "false"
    part = FIELDS_LUA if layout == "fields" else CHUNK_LUA
    head = (f"local RETENTION = {RETENTION_MS}", f"local PACKED = {packed}", FMT, parser, HEAD_LUA)
    return "\n".join((*head, "local vote_one, finish_one", part, TAIL_LUA))


def _token(value: str, layout: str) -> str:
    """The token of a committed slot value the prototype replied."""
    if layout == "fields":
        return value.split(" ")[1]
    if layout == "packed":
        return value.split(" ", 2)[2].split("\x1f")[5]
    return value.split('"tk":"', 1)[1].split('"', 1)[0]


def run_chunked(
    port: int,
    jobs: list[str],
    rounds: int,
    voters: int,
    sweeps: int,
    base: int,
    chunk: int,
    callgrind: bool = False,
    layout: str = "cjson",
) -> dict[str, Any]:
    """The prototype's cycle; raises SystemExit unless every slot ends ``succeeded`` exactly once.
    ``layout``: one of :data:`LAYOUTS` (see ``CHUNK_LUA`` and ``FIELDS_LUA``)."""
    admin = redis.Redis(host="127.0.0.1", port=port)
    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    sha = client.script_load(chunk_script(layout))
    nodes = [f"node-{v}" for v in range(voters)]
    quorum = voters // 2 + 1
    record = MembershipRecord.decode(f"1;{voters},{quorum}," + ",".join(sorted(nodes))).encode()
    ns = f"{NAMESPACE}-{layout}"
    prefixes = [f"qc:{{{ns}:c{c}}}:" for c in range(-(-len(jobs) // chunk))]  # (a chunk's keys)
    prefix = {j: prefixes[i // chunk] for i, j in enumerate(jobs)}
    for p in prefixes:
        client.hset(p + "meta", "mr", record)

    def send(calls: list[tuple[str, list[str]]]) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for key, args in calls:
            pipe.evalsha(sha, 1, key, *args)
        return pipe.execute()

    meter = Meter(admin, callgrind)
    for r in range(rounds):
        fire = str(base + r)
        passes = _vote_passes(jobs, int(fire), nodes, quorum)
        # (executor, prefix) -> job, token, detail of each slot it runs; the votes' codes
        running: dict[tuple[str, str], list[str]] = defaultdict(list)
        codes: Counter[str] = Counter()

        def votes(
            fire: str = fire,
            passes: list[tuple[str, list[str]]] = passes,
            running: Any = running,
            codes: Counter[str] = codes,
        ) -> None:
            for node, batch in passes:
                by_chunk: dict[str, list[str]] = defaultdict(list)
                for j in batch:
                    by_chunk[prefix[j]].append(j)
                calls = [
                    (
                        p,
                        [
                            "v",
                            fire,
                            "",
                            node,
                            str(LEASE_MS),
                            f"i-{node}",
                            *(a for j in js for a in (j, "h1")),
                        ],
                    )
                    for p, js in by_chunk.items()
                ]
                for (p, args), reply in zip(calls, send(calls), strict=True):
                    codes.update(reply[1])
                    for j, code, value in zip(args[6::2], reply[1], reply[2:], strict=True):
                        if code not in "RCD":
                            raise SystemExit(f"prototype vote {j}: {code} {value[:80]}")
                        if code == "C":
                            if not value.startswith("running "):
                                raise SystemExit(f"prototype commit of {j} did not fold its start")
                            token = _token(value, layout)
                            running[(node, p)] += [j, token, "exit 0"]

        def finishes(fire: str = fire, running: Any = running) -> None:
            calls = [(p, ["f", fire, "", node, *items]) for (node, p), items in running.items()]
            for reply in send(calls):
                if set(reply[1]) != {"S"}:
                    raise SystemExit(f"prototype finish: codes {reply[1]!r}")

        def sweep() -> None:
            for _ in range(sweeps):
                if any(send([(p, ["w", "0", "", ""]) for p in prefixes])):
                    raise SystemExit("prototype sweep: a slot left open")

        meter.phase("vote", votes)
        # Each slot: quorum - 1 votes recorded, the quorum-th committing, the rest decided.
        want = {"R": (quorum - 1) * len(jobs), "C": len(jobs), "D": (voters - quorum) * len(jobs)}
        if {c: n for c, n in codes.items() if n} != {c: n for c, n in want.items() if n}:
            raise SystemExit(f"round {r}: prototype vote codes {dict(codes)}, expected {want}")
        meter.phase("finish", finishes)
        meter.phase("sweep", sweep)
    entries = sum(int(client.xlen(p + "ledger")) for p in prefixes)
    if entries != len(jobs) * rounds:
        raise SystemExit(f"prototype ledger: {entries} entries for {len(jobs) * rounds} slots")
    client.close()
    admin.close()
    return meter.report(len(jobs) * rounds)


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    add_cycle_arguments(ap, jobs=1_000, rounds=2)
    ap.add_argument("--chunk", type=int, default=250, help="jobs per chunk record")
    ap.add_argument(
        "--hash-tables",
        action="store_true",
        help="keep the prototype's hashes as hash tables (hash-max-listpack-entries 0), not listpacks",
    )
    args = ap.parse_args(argv)
    if min(args.jobs, args.rounds, args.chunk, args.voters) < 1 or args.sweeps < 0:
        raise SystemExit("--jobs, --rounds, --chunk and --voters must be >= 1, --sweeps >= 0")
    jobs = [f"job-{i:06d}" for i in range(args.jobs)]
    tmp = tempfile.TemporaryDirectory(prefix="qc-chunk-probe-")
    binary = callgrind_wrapper(args.redis_server, Path(tmp.name)) if args.callgrind else args.redis_server
    with tmp, EmbeddedRedis(binary, startup_timeout=60.0 if args.callgrind else 10.0) as server:
        probe = server.client()
        info = probe.info("server")
        valkey = info.get("valkey_version")
        version = f"valkey {valkey}" if valkey else f"redis {info['redis_version']}"
        sec, usec = probe.time()
        base = int(sec) * 1000 + int(usec) // 1000 - 60_000
        probe.close()
        print(f"{version}; {args.jobs:,} jobs x {args.rounds} rounds; chunks of {args.chunk}", flush=True)
        t0 = time.perf_counter()
        cycle = (server.port, jobs, args.rounds, args.voters, args.sweeps, base)
        floor = run_floor(*cycle, callgrind=args.callgrind)
        store = run_store(*cycle, callgrind=args.callgrind, fold=True)
        if args.hash_tables:  # (after the store's run: its meta hashes keep the server's default)
            admin = server.client()
            admin.config_set("hash-max-listpack-entries", 0)
            admin.close()
        chunked = {
            lay: run_chunked(*cycle, args.chunk, callgrind=args.callgrind, layout=lay) for lay in LAYOUTS
        }
        wall = time.perf_counter() - t0
    rows = (
        ("floor (same run)", floor),
        ("store (--fold)", store),
        *((f"chunks of {args.chunk}, {lay}", chunked[lay]) for lay in LAYOUTS),
    )
    for title, key, form in (
        ("Redis CPU µs per slot", "redis_cpu_us_per_slot", "{:>9.1f}"),
        ("instructions per slot", "redis_instructions_per_slot", "{:>9,}"),
    ):
        if key not in store:
            continue
        print(f"\n{title:28}" + "".join(f"{p:>9}" for p in (*PHASES, "total")))
        for name, res in rows:
            print(f"{name:28}" + "".join(form.format(res[key].get(p, 0)) for p in (*PHASES, "total")))
    doc = {
        "server": version,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "jobs": args.jobs,
        "rounds": args.rounds,
        "chunk": args.chunk,
        "voters": args.voters,
        "sweeps": args.sweeps,
        "callgrind": args.callgrind,
        "hash_tables": args.hash_tables,
        "wall_s": round(wall, 1),
        "floor": floor,
        "store": store,
        "chunked": chunked,
    }
    flags = ("-callgrind" if args.callgrind else "") + ("-hashtables" if args.hash_tables else "")
    variant = f"{version.replace(' ', '')}-chunk{args.chunk}{flags}"
    write_result("chunk_probe", doc, args.label, variant=variant)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
