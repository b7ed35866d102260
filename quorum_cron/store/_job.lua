-- _job.lua: the slot record helpers shared by every per-job script,
-- prepended after _clock.lua (see scripts.py). It issues no command itself.
--
-- KEYS (every per-job script; all share the hash tag {ns:job}):
--   KEYS[1]  qc:{ns:job}:meta    HASH  tk = token counter, q = quorum floor,
--                                      hw = high-water mark (latest decided fire_ms)
--   KEYS[2]  qc:{ns:job}:slots   ZSET  every known slot, member = score = fire_ms
--   KEYS[3]  qc:{ns:job}:open    ZSET  slots in proposed/committed/running
--   KEYS[4]  qc:{ns:job}:ledger  STREAM one entry per slot that became terminal
--   KEYS[5]  qc:{ns:job}:slot:   key PREFIX: slot key = KEYS[5] .. fire_ms. Slot
--                                keys found through the sorted sets are built
--                                from it; it carries the same hash tag, so in a
--                                Redis Cluster every key touched lives in the
--                                cluster slot the call was routed to.
-- ARGV (every per-job script):
--   ARGV[1]  now ms or "" (see _clock.lua)
--   ARGV[2]  retention ms: a slot is gone once retention has passed since its
--            last write (field x = expiry, checked against now)
--   ARGV[3]  physical key TTL ms (PEXPIRE on every slot write; garbage
--            collection only, the logical check above decides)
--   ARGV[4]  ledger MAXLEN (exact)
--   ARGV[5]  job name (rendezvous hashing)
--   ARGV[6..] per script
--
-- Slot hash fields (absent = "" or 0): st state, v:<node> vote (spec hash),
-- sh agreed spec hash, ex executor, as assigned executors (length-prefixed
-- list "3:abc5:node2", in order, repeats kept), na attempts, tk token, rs
-- reason, dl deadline ms of the committing vote, rn "1" once started, cm
-- committed ms, sm started ms, lu lease until ms, fm finished ms, dt detail,
-- x logical expiry ms.
--
-- Replies: a slot is emitted as a flat array {code, field, value, ...} of
-- its hash (code "" where the caller needs none); {code} alone = absent.

local K_META, K_SLOTS, K_OPEN, K_LEDGER, PREFIX = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local RETENTION = tonumber(ARGV[2])
local KEY_TTL = ARGV[3]
local MAXLEN = ARGV[4]
local JOB = ARGV[5]

local DECIDED = {committed = true, running = true, succeeded = true, failed = true,
                 lost = true, missed = true, skipped = true}

local function num(s)
  return tonumber(s) or 0
end

-- Job meta, read once per call on first use; changes are written before the
-- next slot write (so a token is never handed out twice even if a later
-- command of this script fails: Redis does not roll scripts back).
local M = nil
local M_dirty = {}
local function meta()
  if M == nil then
    local m = redis.call('HMGET', K_META, 'tk', 'q', 'hw')
    M = {tk = num(m[1]), q = num(m[2]), hw = num(m[3])}
  end
  return M
end
local function meta_set(field, value)
  M[field] = value
  M_dirty[field] = value
end
local function meta_flush()
  local args = {}
  for k, v in pairs(M_dirty) do
    args[#args + 1] = k
    args[#args + 1] = fmt(v)
  end
  if #args > 0 then
    redis.call('HSET', K_META, unpack(args))
    M_dirty = {}
  end
end

-- Read a slot. Returns the record, or nil plus "gone" (no key) or "dead"
-- (key present, retention passed). purge: delete a dead slot's traces, as
-- the model's lazy expiry does (read-only scripts pass false).
local function load(fire, purge)
  local key = PREFIX .. fire
  local raw = redis.call('HGETALL', key)
  if #raw == 0 then
    return nil, 'gone'
  end
  local f, votes = {}, {}
  for i = 1, #raw, 2 do
    local k = raw[i]
    if string.sub(k, 1, 2) == 'v:' then
      votes[string.sub(k, 3)] = raw[i + 1]
    else
      f[k] = raw[i + 1]
    end
  end
  if num(f.x) <= now then
    if purge then
      redis.call('DEL', key)
      redis.call('ZREM', K_OPEN, fire)
      redis.call('ZREM', K_SLOTS, fire)
    end
    return nil, 'dead'
  end
  return {key = key, fire = fire, firen = tonumber(fire), f = f, votes = votes, dirty = {}}
end

local function new_slot(fire)
  return {key = PREFIX .. fire, fire = fire, firen = tonumber(fire), f = {}, votes = {}, dirty = {}}
end

local function set(r, k, v)
  r.f[k] = v
  r.dirty[k] = v
end

local function set_vote(r, node, spec)
  r.votes[node] = spec
  r.dirty['v:' .. node] = spec
end

-- Write the changed fields and touch the slot (retention restarts).
local function save(r)
  set(r, 'x', fmt(now + RETENTION))
  meta_flush()
  local args = {}
  for k, v in pairs(r.dirty) do
    args[#args + 1] = k
    args[#args + 1] = v
  end
  redis.call('HSET', r.key, unpack(args))
  redis.call('PEXPIRE', r.key, KEY_TTL)
  r.dirty = {}
end

local function emit(code, r)
  local out = {code}
  if r then
    for k, v in pairs(r.f) do
      out[#out + 1] = k
      out[#out + 1] = v
    end
    for n, h in pairs(r.votes) do
      out[#out + 1] = 'v:' .. n
      out[#out + 1] = h
    end
  end
  return out
end

-- Call BEFORE adding a new slot to the index (its key does not exist yet and
-- would look gone). Drops dead slots from the low end of the slots index. Only slots whose hash
-- is gone or expired are removed, so the index never loses a live slot (an
-- old fire time can be alive: a late missed vote, record_missed, a long run).
local function trim()
  local cut = '(' .. fmt(now - RETENTION)
  local old = redis.call('ZRANGEBYSCORE', K_SLOTS, '-inf', cut, 'LIMIT', 0, 2)
  for _, f in ipairs(old) do
    local r, why = load(f, true)
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
    local len = tonumber(string.sub(s, i, c - 1))
    out[#out + 1] = string.sub(s, c + 1, c + len)
    i = c + len + 1
  end
  return out
end

-- Byte order, like Python's str order on UTF-8 text. Lua's < uses strcoll,
-- which follows the server's locale.
local function bytes_lt(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
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
    local x, y = tonumber(string.sub(a, i, i + 7), 16), tonumber(string.sub(b, i, i + 7), 16)
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
  for _, n in ipairs(cands) do
    local w = redis.sha1hex(JOB .. '\n' .. fire .. '\n' .. n)
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

-- Move a slot to a terminal state and append its ledger entry.
local function end_slot(r, state, reason)
  set(r, 'st', state)
  set(r, 'rs', reason)
  set(r, 'fm', NOW)
  set(r, 'lu', '0')
  local m = meta()
  if r.firen > m.hw then
    meta_set('hw', r.firen)
  end
  save(r)
  redis.call('ZREM', K_OPEN, r.fire)
  local voters = {}
  for n in pairs(r.votes) do
    voters[#voters + 1] = n
  end
  -- cjson encodes an empty table as {}; the reader accepts that as [].
  redis.call('XADD', K_LEDGER, 'MAXLEN', MAXLEN, '*',
    'fire', r.fire, 'state', state, 'reason', reason, 'voters', cjson.encode(voters),
    'executor', r.f.ex or '', 'token', r.f.tk or '0', 'committed', r.f.cm or '0',
    'started', r.f.sm or '0', 'finished', NOW, 'detail', r.f.dt or '')
end

-- Give the slot to the next executor among the voters that agree with the
-- committed spec hash: one not assigned yet, else any. New token. False if
-- nobody agrees (cannot happen for a committed slot; kept as in the model).
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
  meta_set('tk', m.tk + 1)
  set(r, 'st', 'committed')
  set(r, 'ex', chosen)
  set(r, 'as', (r.f.as or '') .. #chosen .. ':' .. chosen)
  set(r, 'na', fmt(num(r.f.na) + 1))
  set(r, 'tk', fmt(m.tk))
  set(r, 'cm', NOW)
  set(r, 'sm', '0')
  set(r, 'lu', '0')
  save(r)
  -- A committed slot is always in :open already (added when proposed).
  return true
end
