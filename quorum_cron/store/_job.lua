-- _job.lua: the slot record helpers shared by every per-job script,
-- prepended after _clock.lua (see scripts.py). It issues no command itself.
--
-- A per-job script handles one or more JOB GROUPS. Group g (1-based) is
-- KEYS[g], the job's meta key qc:{ns:job}:meta; the job's key prefix P is
-- that minus "meta" — every key of the job is the prefix plus a suffix, so
-- all share the hash tag {ns:job} (in a Redis Cluster, the cluster slot the
-- call is routed to; a cluster call holds only jobs of one node). A script
-- builds only the names it touches (a decided vote touches one key): one
-- declared key per job costs less than five. The declared key is meta, a key
-- that exists whenever any state of the job does: while the job's cluster
-- slot is being migrated the source node serves the call until meta has
-- left, and only then redirects it (ASK) to the node that has the state.
--   meta    HASH  tk = token counter, mr = the membership record the job
--                 enforces (MembershipRecord.encode text; see vote.lua),
--                 q = legacy quorum floor (jobs only epoch-0 votes touched;
--                 dropped when the job adopts a record),
--                 hw = high-water mark (latest decided fire_ms),
--                 p/pb/pa/pr = paused "1", by, at ms, reason
--   open    ZSET  slots in proposed/committed/running (what sweep scans),
--                 member = score = fire_ms
--   slots   ZSET  slots that reached a terminal state (trimmed, see trim);
--                 open + slots index every known slot
--   ledger  STREAM one entry per slot that became terminal (and one per
--                 retried failure)
--   slot:<fire_ms>  STRING the slot value (below)
-- bind(g) makes group g current; the helpers below act on it. The job name
-- is the prefix between "qc:{ns:" and "}:" (job(), built when needed).
--
-- ARGV (every per-job script):
--   ARGV[1]  now ms or "" (see _clock.lua)
--   ARGV[2]  retention ms: a slot is gone once retention has passed since its
--            last write (x = expiry, checked against now)
--   ARGV[3]  physical key TTL ms of a decided slot (SET ... PX; garbage
--            collection only, the logical check above decides)
--   ARGV[4]  ledger MAXLEN (exact)
--   ARGV[5]  assignment channel prefix "qc:{ns}:assign:" (PUBLISH target =
--            prefix .. executor, payload job \n fire_ms \n token), or ""
--            on a cluster: SPUBLISH (sharded pub/sub) on the job's own
--            channel P .. "assign:" .. executor, in the job's hash slot
--   ARGV[6]  where the job name starts in the key prefix (#"qc:{ns:" + 1)
--   ARGV[7..] per script
--
-- Slot value, one STRING per slot:
--   proposed:  "proposed <x> <dl> <votes JSON>" — x logical expiry ms, dl
--              the largest deadline_ms any vote carried, votes a cjson
--              object {node: spec hash} (one per node, a repeat overwrites)
--   any other: "<st> <x> <record JSON>" — state and logical expiry as a
--              plain-text header (a vote for a decided slot reads them with
--              one pattern match, no JSON decoding), then the record.
-- Record: one JSON object (cjson, st and x included), every value a string
-- (numbers as decimal text: exact, whatever their size); absent = "" or 0.
-- Fields: st state, v {node: spec hash} votes, sh agreed spec hash, ex
-- executor, as assigned executors (length-prefixed list "3:abc5:node2", in
-- order, repeats kept), na attempts, tk token, rs reason, dl deadline ms
-- (the proposed slot's dl or the committing vote's, whichever is larger),
-- rn number of starts, cm committed ms, sm started ms, lu lease until ms, fm
-- finished ms, dt detail, nb not-before ms (retry backoff), ep the epoch of
-- the membership record whose quorum decided it (vote.lua), x logical expiry.
-- The stored value doubles as the reply, byte for byte.
--
-- Physical TTL: a decided slot is written with SET ... PX (ARGV[3]) on every
-- write. A proposed slot is written with PX once — ARGV[3] + dl + max_skew of
-- the vote that creates it (or raises dl) — and later votes keep it
-- (SET ... KEEPTTL): a vote is only recorded at fire - skew <= now <= fire +
-- dl, so that TTL outlives every logical expiry a later vote can set.
--
-- Replies: a slot is emitted as {code, slot value}; absent: {code, ""}.

local P, K, JOB
local RETENTION = tonumber(ARGV[2])
local KEY_TTL = ARGV[3]
local KEY_TTLN = tonumber(KEY_TTL)
local MAXLEN = ARGV[4]
local CHAN = ARGV[5]
local JOB_AT = tonumber(ARGV[6])
local byte, sub, match, find = string.byte, string.sub, string.match, string.find
local EXPIRY = fmt(now + RETENTION) -- x of every slot written by this call

-- expired(x): x (decimal ms text, no sign or leading zeros) <= now, compared
-- as text: tonumber's strtod costs more than the rest of a decided vote.
-- Digits sort in numeric order under any locale's strcoll.
local NOW_LEN = #NOW
local function expired(x)
  local n = #x
  return n < NOW_LEN or (n == NOW_LEN and x <= NOW)
end

local function num(s)
  return tonumber(s) or 0
end

-- Job meta, read once per group on first use; changes are written before the
-- next slot write (so a token is never handed out twice even if a later
-- command of this script fails: Redis does not roll scripts back).
local M, M_dirty

local function bind(g)
  K = KEYS[g]
  P = sub(K, 1, -5)
  JOB = nil
  M, M_dirty = nil, nil
end

-- Hostile store contents (issue 11): anyone with write access to Redis can
-- put a key of the wrong type where a job's key belongs, or a token counter
-- that is not a count. A multi-step write fails on such a key before its
-- first write, so it fails whole (an error reply) instead of applying
-- part-way. A commit's first write is the open index (ZADD fails before
-- anything is written), and meta is read (HMGET) before it is written, so
-- the vote's hot path pays nothing for it. end_slot (below) orders its
-- commands so that the ones that can fail come first: the trim's read of
-- the terminal index, a TYPE of the ledger (XADD is its last write), the
-- ZREM from the open index (its first write); the slot's SET cannot fail on
-- a type. Two TYPE calls per ended slot fewer than checking all three keys
-- (benchmarks/store_cycle.py, issue 27).
local LEDGER_OK -- the prefix whose ledger type was checked in this call

-- The error of a key of the wrong type: its name, its type (t, or read) and
-- the one expected.
local function wrong_type(suffix, want, t)
  t = t or redis.call('TYPE', P .. suffix).ok
  return 'corrupt store: ' .. P .. suffix .. ' is a ' .. t .. ' (expected a ' .. want .. ')'
end

-- A write or read of a key that may hold the wrong type: its reply, or the
-- corrupt-store error naming the key (any other error is raised as it is:
-- an outage fails the whole call, see transient).
local function typed(suffix, want, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    if find(reply.err, 'WRONGTYPE', 1, true) then
      error(wrong_type(suffix, want))
    end
    error(reply)
  end
  return reply
end

local function check_ledger()
  if LEDGER_OK == P then
    return
  end
  local t = redis.call('TYPE', P .. 'ledger').ok
  if t ~= 'none' and t ~= 'stream' then
    error(wrong_type('ledger', 'stream', t))
  end
  LEDGER_OK = P
end

-- A token counter: unset, or a positive integer below 2^53 (exact in a
-- double; beyond, +1 would repeat a token).
local function check_counter(tk)
  if tk and not (string.match(tk, '^[1-9]%d*$') and #tk <= 16 and tonumber(tk) < 9007199254740991) then
    error('corrupt store: token counter ' .. P .. 'meta tk = ' .. string.sub(tk, 1, 40)
      .. ' (expected a positive integer below 2^53)')
  end
end

local function job()
  if JOB == nil then
    JOB = sub(P, JOB_AT, -3)
  end
  return JOB
end

-- M.q quorum floor (number), M.p paused, M.tk / M.hw token counter and
-- high-water mark as stored (decimal text, false when unset; converted only
-- by the commit / end that needs them), M.pb / M.pr paused by, reason,
-- M.mr the membership record's text (false when unset; vote.lua parses it),
-- M.fs the failure streak as stored (see end_slot).
local function meta()
  if M == nil then
    local m = redis.call('HMGET', P .. 'meta', 'q', 'p', 'tk', 'hw', 'mr', 'fs')
    M = {q = tonumber(m[1]) or 0, p = m[2] == '1', tk = m[3], hw = m[4], mr = m[5], fs = m[6]}
    if M.p then
      local w = redis.call('HMGET', P .. 'meta', 'pb', 'pr')
      M.pb, M.pr = w[1] or '', w[2] or ''
    end
  end
  return M
end

-- Change a meta field: value is what the script compares with, text what
-- is stored (decimal text).
local function meta_set(field, value, text)
  M[field] = value
  if M_dirty == nil then
    M_dirty = {}
  end
  M_dirty[field] = text
end

local function meta_flush()
  if M_dirty ~= nil then
    if M_dirty.q == false then -- (a job adopting a record drops the legacy floor)
      M_dirty.q = nil
      redis.call('HDEL', P .. 'meta', 'q')
    end
    local args, n = {}, 0
    for k, v in pairs(M_dirty) do
      args[n + 1] = k
      args[n + 2] = v
      n = n + 2
    end
    if n > 0 then
      redis.call('HSET', P .. 'meta', unpack(args))
    end
    M_dirty = nil
  end
end

-- Raise the high-water mark to the slot's fire time (a slot was decided).
local function raise_hw(r)
  local m = meta()
  if r.firen > num(m.hw) then
    meta_set('hw', r.fire, r.fire)
  end
end

-- What a slot key holds: false (no key) or the slot value.
local function fetch(key)
  return redis.call('GET', key)
end

local function purge(key, fire)
  redis.call('DEL', key)
  redis.call('ZREM', P .. 'open', fire)
  redis.call('ZREM', P .. 'slots', fire)
end

local function proposed(key, fire, firen, x, dl, votes, raw)
  return {key = key, fire = fire, firen = firen or tonumber(fire), f = {st = 'proposed', v = votes, x = x},
          votes = votes, proposed = true, dl = dl, json = raw}
end

-- Read a slot. Returns the record, or nil plus "gone" (no key) or "dead"
-- (key present, retention passed). purge_dead: delete a dead slot's traces,
-- as the model's lazy expiry does (read-only scripts pass false). raw, key,
-- firen: what the key holds, its name and tonumber(fire) when the caller
-- already has them.
local function load(fire, purge_dead, raw, key, firen)
  key = key or P .. 'slot:' .. fire
  if raw == nil then
    raw = fetch(key)
  end
  if not raw then
    return nil, 'gone'
  end
  local x, dl, votes = match(raw, '^proposed (%d+) (%-?%d+) (.*)')
  local at
  if x == nil then
    x, at = match(raw, '^%a+ (%d+) ()')
    if x == nil then
      error('corrupt store: slot ' .. key .. ' holds ' .. string.sub(raw, 1, 40))
    end
  end
  if expired(x) then
    if purge_dead then
      purge(key, fire)
    end
    return nil, 'dead'
  end
  if dl then
    return proposed(key, fire, firen, x, dl, cjson.decode(votes), raw)
  end
  local f = cjson.decode(sub(raw, at))
  if f.v == nil then
    f.v = {}
  end
  return {key = key, fire = fire, firen = firen or tonumber(fire), f = f, votes = f.v, json = raw}
end

-- A new proposed slot (nothing written yet: write_proposed or save does;
-- not in the open index yet: index_open does).
local function new_slot(key, fire, firen)
  local votes = {}
  return {key = key, fire = fire, firen = firen, f = {st = 'proposed', v = votes}, votes = votes,
          proposed = true, new = true, dl = '0'}
end

local function index_open(r)
  if r.new then
    redis.call('ZADD', P .. 'open', r.fire, r.fire)
    r.new = nil
  end
end

local function set(r, k, v)
  r.f[k] = v
end

local function set_vote(r, node, spec)
  r.votes[node] = spec
end

-- Write a decided record and touch the slot (retention restarts): one SET
-- with its physical TTL.
local function save(r)
  local f = r.f
  f.x = EXPIRY
  meta_flush()
  r.json = f.st .. ' ' .. f.x .. ' ' .. cjson.encode(f)
  redis.call('SET', r.key, r.json, 'PX', KEY_TTL)
  r.proposed = nil
end

-- Write a proposed slot and touch it: SET ... PX ttl when r.ttl is set (new
-- slot, dl raised), else SET ... KEEPTTL (see Physical TTL).
local function write_proposed(r)
  meta_flush()
  r.f.x = EXPIRY
  r.json = 'proposed ' .. EXPIRY .. ' ' .. r.dl .. ' ' .. cjson.encode(r.votes)
  if r.ttl then
    redis.call('SET', r.key, r.json, 'PX', r.ttl)
    r.ttl = nil
  else
    redis.call('SET', r.key, r.json, 'KEEPTTL')
  end
end

-- A slot's reply value: the slot value ("" when absent), never re-encoded.
local function value(r)
  if not r then
    return ''
  end
  return r.json
end

-- The reply form of a slot: {code, slot value} ("" when absent).
local function emit(code, r)
  return {code, value(r)}
end

-- Drops dead slots from the low end of the terminal index. Only slots whose
-- key is gone or expired are removed, so the index never loses a live slot
-- (an old fire time can be alive: a late missed vote, record_missed, a long
-- run). trim_read runs before end_slot's first write (its read is the
-- index's type check), trim(old) after the slot joined the index. A gone
-- slot's entry in the open index is left to the sweep, which drops it when
-- it meets it (sweep.lua): a terminal slot has left that index already.
local TRIM_BELOW
local function trim_read()
  if TRIM_BELOW == nil then
    TRIM_BELOW = '(' .. fmt(now - RETENTION)
  end
  return typed('slots', 'zset', 'ZRANGEBYSCORE', P .. 'slots', '-inf', TRIM_BELOW, 'LIMIT', '0', '2')
end

local function trim(old)
  for _, f in ipairs(old) do
    local _, why = load(f, true)
    if why == 'gone' then
      redis.call('ZREM', P .. 'slots', f)
    end
  end
end

-- Length-prefixed list of node ids: binary-safe, keeps order and repeats.
local function list_decode(s)
  local out, i = {}, 1
  if not s then
    return out
  end
  while i <= #s do
    local c = find(s, ':', i, true)
    local len = tonumber(sub(s, i, c - 1))
    out[#out + 1] = sub(s, c + 1, c + len)
    i = c + len + 1
  end
  return out
end

-- Byte order, like Python's str order on UTF-8 text. Lua's < uses strcoll,
-- which follows the server's locale.
local function bytes_lt(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = byte(a, i), byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return la < lb
end

-- Compare two 40-digit hex weights numerically, 8 digits at a time
-- (locale-proof; the first chunk nearly always decides).
local function hex_cmp(a, b)
  for i = 1, 33, 8 do
    local x, y = tonumber(sub(a, i, i + 7), 16), tonumber(sub(b, i, i + 7), 16)
    if x ~= y then
      return x < y and -1 or 1
    end
  end
  return 0
end

-- Rendezvous winner: highest sha1(job \n fire \n node), tie -> smaller id.
-- Must match quorum_cron.store.rendezvous.pick_executor. The first 12 hex
-- digits (48 bits, exact in a double) nearly always decide.
local function pick(fire, cands)
  local best, best_w, best_k = nil, nil, nil
  local stem = job() .. '\n' .. fire .. '\n'
  for i = 1, #cands do
    local n = cands[i]
    local w = redis.sha1hex(stem .. n)
    local k = tonumber(sub(w, 1, 12), 16)
    if best == nil or k > best_k then
      best, best_w, best_k = n, w, k
    elseif k == best_k then
      local c = hex_cmp(w, best_w)
      if c > 0 or (c == 0 and bytes_lt(n, best)) then
        best, best_w, best_k = n, w, k
      end
    end
  end
  return best
end

-- Append the slot's ledger entry; empty / zero fields are left out (the
-- reader defaults them).
local function log_entry(r, state, reason)
  local e = {'fire', r.fire, 'state', state, 'finished', NOW}
  local function add(k, v)
    if v and v ~= '' and v ~= '0' then
      e[#e + 1] = k
      e[#e + 1] = v
    end
  end
  add('reason', reason)
  local voters = {}
  for n in pairs(r.votes) do
    voters[#voters + 1] = n
  end
  if #voters > 0 then
    add('voters', cjson.encode(voters))
  end
  add('executor', r.f.ex)
  add('token', r.f.tk)
  add('committed', r.f.cm)
  add('epoch', r.f.ep)
  add('started', r.f.sm)
  add('detail', r.f.dt)
  redis.call('XADD', P .. 'ledger', 'MAXLEN', MAXLEN, '*', unpack(e))
end

-- The job's failure streak (meta fs): how many of its slots ended failed or
-- lost in a row, counted when they end; a success reports it (r.fb, the
-- finish reply's third value: job_recovered needs no ledger read) and resets
-- it; missed and skipped slots pass over. A value that is not a plain count
-- reads as 0: it harms only this job's recovery alert.
local function streak(m)
  local n = tonumber(m.fs)
  if n == nil or n < 0 or n >= 1e9 or n ~= math.floor(n) then
    return 0
  end
  return n
end

-- Move a slot to a terminal state: write it, move it from the open index to
-- the terminal one (trimming that), append its ledger entry. Everything that
-- can fail on a corrupt key runs before the first write (see check_ledger).
local function end_slot(r, state, reason)
  local m = meta()
  local old = trim_read()
  check_ledger()
  if r.new then
    r.new = nil -- never joined the open index
  else
    typed('open', 'zset', 'ZREM', P .. 'open', r.fire)
  end
  local f = r.f
  f.st = state
  f.rs = reason
  f.fm = NOW
  f.lu = nil
  f.si = nil -- (only a running slot's tag means anything: a record a finish writes stays short)
  raise_hw(r)
  if state == 'failed' or state == 'lost' then
    local n = streak(m) + 1
    meta_set('fs', n, fmt(n))
  elseif state == 'succeeded' then
    r.fb = streak(m)
    if m.fs and m.fs ~= '0' then
      meta_set('fs', 0, '0')
    end
  end
  save(r)
  redis.call('ZADD', P .. 'slots', r.fire, r.fire)
  trim(old)
  log_entry(r, state, reason)
end

-- Parsed records by text, for this call: the jobs of a call nearly always
-- share one record, parsed once. (_membership.lua, prepended before this
-- file, parses them.)
local RECORDS = {}

-- The record the job enforces (parsed from meta mr, cached in M), or false.
-- A corrupt one fails this job only: its votes (code X) or its sweep, or a
-- fenced finish before anything is written; never the batch.
local function job_record(m)
  if m.rec == nil then
    if not m.mr then
      m.rec = false
    else
      local rec = RECORDS[m.mr]
      if not rec then
        local problem
        rec, problem = parse_record(m.mr)
        if not rec then
          error('corrupt store: ' .. P .. 'meta mr: ' .. problem)
        end
        RECORDS[m.mr] = rec
      end
      m.rec = rec
    end
  end
  return m.rec
end

-- The next executor among the voters that agree with the committed spec
-- hash and are members (current or, while joint, old) of the record the job
-- enforces (any agreeing voter on a job without a record: legacy): at a
-- commit the rendezvous winner; at a takeover or a retry the rendezvous
-- winner among those not assigned yet, and once every one has been, the one
-- whose last assignment is the oldest. So the slot goes round its voters and
-- never waits on one that stays down while another is up (it went back to
-- the winner every time before: sim/findings/README.md, seed 639). Returns
-- it, or nil plus the reason nobody can take the slot: after a membership
-- change every agreeing voter may have left (never at a commit: its quorum
-- is of members). The model is memory_records.choose_executor.
local function choose(r)
  local spec = r.f.sh
  local rec = job_record(meta())
  local agreeing, fresh, a = {}, {}, 0
  for n, h in pairs(r.votes) do
    if h == spec and (not rec or is_member(rec, n)) then
      a = a + 1
      agreeing[a] = n
    end
  end
  if r.f.as then -- assigned before (takeover, retry)
    local last = {} -- node -> the position of its last assignment
    for i, n in ipairs(list_decode(r.f.as)) do
      last[n] = i
    end
    local oldest, oldest_i = nil, nil
    for i = 1, a do
      local n = agreeing[i]
      local at = last[n]
      if not at then
        fresh[#fresh + 1] = n
      elseif oldest_i == nil or at < oldest_i then
        oldest, oldest_i = n, at
      end
    end
    if #fresh == 0 and oldest then
      return oldest
    end
  end
  local chosen = pick(r.fire, #fresh > 0 and fresh or agreeing)
  if chosen == nil then
    return nil, rec and ('no agreeing voter is a member of epoch ' .. fmt(rec.epoch)) or 'no agreeing voter'
  end
  return chosen
end

-- Give the slot to chosen (see choose): new token; the executor is notified
-- on its channel. With lease (a number: vote.lua, the committing voter is
-- chosen and asked for it) the slot starts in this same step instead, as a
-- fenced start would (fence.lua), tagged with the voting process's
-- incarnation inc (si; "": none): nobody to notify, the reply tells it, and
-- should the reply be lost the tag lets that process alone adopt the start.
local function assign_to(r, chosen, lease, inc)
  local m = meta()
  check_counter(m.tk)
  local tk = fmt(num(m.tk) + 1)
  meta_set('tk', tk, tk)
  local f = r.f
  f.st = 'committed'
  f.ex = chosen
  f.as = (f.as or '') .. fmt(#chosen) .. ':' .. chosen -- (fmt: a number's own text costs a %.14g)
  f.na = f.na and fmt(num(f.na) + 1) or '1'
  f.tk = tk
  f.cm = NOW
  f.sm = nil
  f.lu = nil
  f.si = nil
  if lease then
    f.st = 'running'
    f.rn = fmt(num(f.rn) + 1)
    f.sm = NOW
    f.lu = fmt(now + lease)
    if inc ~= '' then
      f.si = inc
    end
    save(r)
    return true
  end
  save(r)
  -- A committed slot is always in the open index already (vote: index_open).
  if CHAN == '' then
    redis.call('SPUBLISH', P .. 'assign:' .. chosen, job() .. '\n' .. r.fire .. '\n' .. tk)
  else
    redis.call('PUBLISH', CHAN .. chosen, job() .. '\n' .. r.fire .. '\n' .. tk)
  end
  return true
end

-- A slot nobody can take over (choose found no member among its voters)
-- ends: missed if it never started, failed if it was waiting for a retry,
-- lost if a run of it had started (at-least-once, lease expired).
local function unassignable(r, reason)
  local st = 'lost'
  if num(r.f.rn) == 0 then
    st = 'missed'
  elseif r.f.st == 'committed' and num(r.f.nb) > 0 then
    st = 'failed'
  end
  end_slot(r, st, reason)
end

-- An error raised by a call the server cannot serve now — out of memory, a
-- cluster slot in migration ("non local key", ASK, MOVED, TRYAGAIN), a
-- cluster down, a demoted master (READONLY), a server loading, writes held
-- back after a failed RDB save (MISCONF), an ACL that lost a command or key
-- (NOPERM; Redis 7.0 says "The user executing the script can't ...", Valkey
-- 8 "ACL failure in script: ...") — is an outage: it fails the whole call so
-- the caller retries, and is never taken for a corrupt value of one job
-- (which would drop that job's vote for good).
local TRANSIENT = {'OOM', 'non local key', 'TRYAGAIN', 'CLUSTERDOWN', 'MOVED ', 'ASK ', 'READONLY',
                   'LOADING', 'MASTERDOWN', 'BUSY', 'MISCONF', 'NOPERM', 'The user executing the script',
                   'ACL failure in script'}
--
-- Returns the error from its code on ("OOM command not allowed ..."), or nil
-- when it is not an outage. The caller returns it with redis.error_reply
-- rather than re-raising: Redis 7 raises a call's error as a table, which
-- Redis 6.2's error handler cannot concatenate, and 6.2 prefixes a raised
-- string with the script location, so redis-py would not see the code.
local function transient(err)
  local msg = tostring(type(err) == 'table' and err.err or err)
  for _, p in ipairs(TRANSIENT) do
    local at = string.find(msg, p, 1, true)
    if at then
      return string.sub(msg, at)
    end
  end
  return nil
end

-- The grouped scripts' argument walk (fence, read, sweep): group g is KEYS[g],
-- bound in turn, then ARGV[7..] holds per group n and n items of `width`
-- arguments each. item(i) gets the index in ARGV of an item's first argument;
-- a value it returns ends the walk and is returned (an outage's error reply,
-- which the script must return: see transient). group_done(), if given, runs
-- after each group's items.
local function each_item(width, item, group_done)
  local i = 7
  for g = 1, #KEYS do
    bind(g)
    local n = tonumber(ARGV[i])
    i = i + 1
    for _ = 1, n do
      local stop = item(i)
      if stop ~= nil then
        return stop
      end
      i = i + width
    end
    if group_done then
      group_done()
    end
  end
  return nil
end
