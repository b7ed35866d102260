-- _job.lua: the slot record helpers shared by every per-job script,
-- prepended after _clock.lua (see scripts.py). It issues no command itself.
--
-- A per-job script handles one or more JOB GROUPS. Group g (1-based) is
-- KEYS[5g-4 .. 5g], the job's keys in this order: meta, slots, open, ledger,
-- and the slot key prefix — all the job's prefix qc:{ns:job}: plus a
-- suffix, so all share the hash tag {ns:job} (in a Redis Cluster, the
-- cluster slot the call is routed to; cluster mode sends one group per
-- call). Declaring the names costs less than building them in Lua (string
-- concatenation in the script is several times dearer than an argument).
--   meta    HASH  tk = token counter, q = quorum floor,
--                 hw = high-water mark (latest decided fire_ms),
--                 p/pb/pa/pr = paused "1", by, at ms, reason
--   slots   ZSET  every known slot, member = score = fire_ms
--   open    ZSET  slots in proposed/committed/running
--   ledger  STREAM one entry per slot that became terminal (and one per
--                 retried failure)
--   slot:<fire_ms>  a proposed slot: HASH node -> spec hash, plus field ""
--                 = logical expiry ms (an empty node id is never stored
--                 there: such a vote keeps the slot a string, below);
--                 any other slot: STRING the slot value (below). Slot keys
--                 found through the sorted sets are built from the prefix.
-- bind(g, job) makes group g current; the helpers below act on it.
--
-- ARGV (every per-job script):
--   ARGV[1]  now ms or "" (see _clock.lua)
--   ARGV[2]  retention ms: a slot is gone once retention has passed since its
--            last write (field x = expiry, checked against now)
--   ARGV[3]  physical key TTL ms (SET ... PX on every slot write; garbage
--            collection only, the logical check above decides)
--   ARGV[4]  ledger MAXLEN (exact)
--   ARGV[5]  assignment channel prefix "qc:{ns}:assign:" (PUBLISH target =
--            prefix .. executor, payload job \n fire_ms \n token)
--   ARGV[6..] per script
--
-- Slot value: "<st> <x> <record JSON>" — state and logical expiry as a
-- plain-text header (a vote for a decided slot reads them with one pattern
-- match, no JSON decoding), then the record. Record: one JSON object
-- (cjson, st and x included), every value a string (numbers as
-- decimal text: exact, whatever their size); absent = "" or 0. Fields: st
-- state, v {node: spec hash} votes (one per node, a repeat overwrites), sh
-- agreed spec hash, ex executor, as assigned executors (length-prefixed
-- list "3:abc5:node2", in order, repeats kept), na attempts, tk token, rs
-- reason, dl deadline ms of the committing vote, rn number of starts, cm
-- committed ms, sm started ms, lu lease until ms, fm finished ms, dt detail,
-- nb not-before ms (retry backoff), x logical expiry ms.
-- A decided slot is one string: GET + cjson.decode and cjson.encode + SET
-- cost a fraction of HGETALL / HSET + PEXPIRE and of parsing field by field
-- in Lua, and the stored JSON doubles as the reply. A proposed slot only
-- gains votes, so its hash takes one HSET (+ PEXPIRE) per vote with no JSON
-- at all; the committing vote (or missed / skipped end) writes the string
-- over it. A proposed slot stored as a string (older format, or an empty
-- node id) stays a string until it is decided.
--
-- Replies: a slot is emitted as {code, slot value}; absent: {code, ""}; a
-- proposed slot held in its hash: {code, votes JSON} ("{...}", see value).

local K_META, K_SLOTS, K_OPEN, K_LEDGER, PREFIX, JOB
local RETENTION = tonumber(ARGV[2])
local KEY_TTL = ARGV[3]
local MAXLEN = ARGV[4]
local CHAN = ARGV[5]
local byte, sub, match = string.byte, string.sub, string.match
local EXPIRY = fmt(now + RETENTION) -- x of every slot written by this call

-- expired(x): x (decimal ms text, no sign or leading zeros) <= now, compared
-- as text: tonumber's strtod costs more than the rest of a decided vote.
-- Digits sort in numeric order under any locale's strcoll.
local NOW_LEN = #NOW
local function expired(x)
  local n = #x
  return n < NOW_LEN or (n == NOW_LEN and x <= NOW)
end

local DECIDED = {committed = true, running = true, succeeded = true, failed = true,
                 lost = true, missed = true, skipped = true, retrying = true}

local function num(s)
  return tonumber(s) or 0
end

-- Job meta, read once per group on first use; changes are written before the
-- next slot write (so a token is never handed out twice even if a later
-- command of this script fails: Redis does not roll scripts back).
local M, M_dirty

local function bind(g, job)
  local k = 5 * g - 4
  K_META, K_SLOTS, K_OPEN, K_LEDGER, PREFIX = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  JOB = job
  M, M_dirty = nil, nil
end

local function meta()
  if M == nil then
    local m = redis.call('HMGET', K_META, 'tk', 'q', 'hw', 'p')
    M = {tk = num(m[1]), q = num(m[2]), hw = num(m[3]), p = m[4] == '1'}
    if M.p then
      local w = redis.call('HMGET', K_META, 'pb', 'pr')
      M.pb, M.pr = w[1] or '', w[2] or ''
    end
  end
  return M
end

local function meta_set(field, value)
  M[field] = value
  if M_dirty == nil then
    M_dirty = {}
  end
  M_dirty[field] = value
end

local function meta_flush()
  if M_dirty ~= nil then
    local args, n = {}, 0
    for k, v in pairs(M_dirty) do
      args[n + 1] = k
      args[n + 2] = fmt(v)
      n = n + 2
    end
    redis.call('HSET', K_META, unpack(args))
    M_dirty = nil
  end
end

-- Stands for a slot key that holds a vote hash (see fetch).
local HASH = {}
local STRING_ENC = {embstr = true, raw = true, int = true}

-- What a slot key holds: false (no key), HASH (a proposed slot's vote
-- hash) or the slot value (a string). OBJECT ENCODING answers for any type,
-- so neither read can fail with WRONGTYPE.
local function fetch(key)
  local enc = redis.call('OBJECT', 'ENCODING', key)
  if not enc then
    return false
  end
  if STRING_ENC[enc] then
    return redis.call('GET', key)
  end
  return HASH
end

-- A proposed slot kept in its vote hash: the record, or nil plus "dead".
local function load_votes(fire, key, purge)
  local h = redis.call('HGETALL', key)
  local votes, x = {}, nil
  for i = 1, #h, 2 do
    local k = h[i]
    if k == '' then
      x = h[i + 1]
    else
      votes[k] = h[i + 1]
    end
  end
  if x == nil or expired(x) then
    if purge then
      redis.call('DEL', key)
      redis.call('ZREM', K_OPEN, fire)
      redis.call('ZREM', K_SLOTS, fire)
    end
    return nil, 'dead'
  end
  return {key = key, fire = fire, firen = tonumber(fire), f = {st = 'proposed', v = votes, x = x},
          votes = votes, proposed = true}
end

-- Read a slot. Returns the record, or nil plus "gone" (no key) or "dead"
-- (key present, retention passed). purge: delete a dead slot's traces, as
-- the model's lazy expiry does (read-only scripts pass false). raw: what
-- the key holds when the caller already fetched it (see peek).
local function load(fire, purge, raw, key)
  key = key or PREFIX .. fire
  if raw == nil then
    raw = fetch(key)
  end
  if not raw then
    return nil, 'gone'
  end
  if raw == HASH then
    return load_votes(fire, key, purge)
  end
  local st, x = match(raw, '^(%a+) (%d+) ')
  if expired(x) then
    if purge then
      redis.call('DEL', key)
      redis.call('ZREM', K_OPEN, fire)
      redis.call('ZREM', K_SLOTS, fire)
    end
    return nil, 'dead'
  end
  local f = cjson.decode(sub(raw, #st + #x + 3))
  if f.v == nil then
    f.v = {}
  end
  return {key = key, fire = fire, firen = tonumber(fire), f = f, votes = f.v, json = raw}
end

-- What the slot key holds (see fetch), when it is a live string its
-- state, and the key — without decoding the JSON (most votes for a decided slot need
-- nothing more). A vote hash is always a proposed slot.
local function peek(fire)
  local key = PREFIX .. fire
  local raw = fetch(key)
  if not raw or raw == HASH then
    return raw, nil, key
  end
  local st, x = match(raw, '^(%a+) (%d+) ')
  if expired(x) then
    return raw, nil, key
  end
  return raw, st, key
end

-- A new proposed slot (nothing written yet: write_vote or save does).
local function new_slot(fire)
  local votes = {}
  return {key = PREFIX .. fire, fire = fire, firen = tonumber(fire),
          f = {st = 'proposed', v = votes}, votes = votes, proposed = true}
end

local function set(r, k, v)
  r.f[k] = v
end

local function set_vote(r, node, spec)
  r.votes[node] = spec
end

-- Write the record and touch the slot (retention restarts): one SET with
-- its physical TTL.
local function save(r)
  local f = r.f
  f.x = EXPIRY
  meta_flush()
  r.json = f.st .. ' ' .. f.x .. ' ' .. cjson.encode(f)
  redis.call('SET', r.key, r.json, 'PX', KEY_TTL) -- replaces a vote hash
  r.proposed = nil
end

-- Store one vote of a proposed slot held in its vote hash and touch it.
local function write_vote(r, node, spec)
  meta_flush()
  r.f.x = EXPIRY
  redis.call('HSET', r.key, node, spec, '', EXPIRY)
  redis.call('PEXPIRE', r.key, KEY_TTL)
end

-- A slot's reply value: the slot value ("" when absent) or, for a proposed
-- slot held in its hash, its votes as a JSON object {node: spec_hash}
-- (one cjson call; a nested reply table costs several times more to convert).
local function value(r)
  if not r then
    return ''
  end
  if r.proposed then
    return cjson.encode(r.votes)
  end
  return r.json
end

-- The reply form of a slot: {code, slot value} ("" when absent): the
-- stored value itself (read or just written), no re-encoding; a proposed
-- slot in its vote hash: {code, {node, spec_hash, ...}}.
local function emit(code, r)
  return {code, value(r)}
end

-- Call BEFORE adding a new slot to the index (its key does not exist yet and
-- would look gone). Drops dead slots from the low end of the slots index. Only slots whose hash
-- is gone or expired are removed, so the index never loses a live slot (an
-- old fire time can be alive: a late missed vote, record_missed, a long run).
local function trim()
  local old = redis.call('ZRANGEBYSCORE', K_SLOTS, '-inf', '(' .. fmt(now - RETENTION), 'LIMIT', 0, 2)
  for _, f in ipairs(old) do
    local _, why = load(f, true)
    if why == 'gone' then
      redis.call('ZREM', K_SLOTS, f)
      redis.call('ZREM', K_OPEN, f)
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
    local c = string.find(s, ':', i, true)
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
-- Must match quorum_cron.store.rendezvous.pick_executor.
local function pick(fire, cands)
  local best, best_w = nil, nil
  local stem = JOB .. '\n' .. fire .. '\n'
  for _, n in ipairs(cands) do
    local w = redis.sha1hex(stem .. n)
    if best == nil then
      best, best_w = n, w
    else
      local c = hex_cmp(w, best_w)
      if c > 0 or (c == 0 and bytes_lt(n, best)) then
        best, best_w = n, w
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
  add('started', r.f.sm)
  add('detail', r.f.dt)
  redis.call('XADD', K_LEDGER, 'MAXLEN', MAXLEN, '*', unpack(e))
end

-- Move a slot to a terminal state and append its ledger entry.
local function end_slot(r, state, reason)
  local f = r.f
  f.st = state
  f.rs = reason
  f.fm = NOW
  f.lu = nil
  local m = meta()
  if r.firen > m.hw then
    meta_set('hw', r.firen)
  end
  save(r)
  redis.call('ZREM', K_OPEN, r.fire)
  log_entry(r, state, reason)
end

-- Give the slot to the next executor among the voters that agree with the
-- committed spec hash: one not assigned yet, else any. New token; the
-- executor is notified on its channel. False if nobody agrees (cannot happen
-- for a committed slot; kept as in the model).
local function assign(r)
  local spec = r.f.sh
  local assigned = {}
  for _, n in ipairs(list_decode(r.f.as)) do
    assigned[n] = true
  end
  local agreeing, fresh = {}, {}
  for n, h in pairs(r.votes) do
    if h == spec then
      agreeing[#agreeing + 1] = n
      if not assigned[n] then
        fresh[#fresh + 1] = n
      end
    end
  end
  local chosen = pick(r.fire, #fresh > 0 and fresh or agreeing)
  if chosen == nil then
    return false
  end
  local m = meta()
  local tk = fmt(m.tk + 1)
  meta_set('tk', m.tk + 1)
  local f = r.f
  f.st = 'committed'
  f.ex = chosen
  f.as = (f.as or '') .. #chosen .. ':' .. chosen
  f.na = fmt(num(f.na) + 1)
  f.tk = tk
  f.cm = NOW
  f.sm = nil
  f.lu = nil
  save(r)
  -- A committed slot is always in :open already (added when proposed).
  redis.call('PUBLISH', CHAN .. chosen, JOB .. '\n' .. r.fire .. '\n' .. tk)
  return true
end
