-- control.lua: operator control of one job (Store.pause, resume, trigger,
-- triggers; MemoryStore is the model). Prepended: _clock.lua only.
-- Error reply "corrupt store: <key> is a <type> (expected a <type>)" when a
-- key a write op touches has the wrong type; nothing is written then.
--
-- KEYS[1]  qc:{ns:job}:meta      HASH  p "1" while paused, pb by, pa at ms, pr reason
-- KEYS[2]  qc:{ns:job}:triggers  ZSET  trigger fire times, member = score = fire_ms
-- KEYS[3]  qc:{ns:job}:audit     STREAM action, by, at, detail (empty fields left out)
-- ARGV[1]  now ms or "" (see _clock.lua)
-- ARGV[2]  op: "p" pause | "r" resume | "t" trigger | "l" list triggers
-- ARGV[3]  job name
-- ARGV[4]  by (list: since_ms)
-- ARGV[5]  pause reason
-- ARGV[6]  retention ms (triggers older than now - retention are dropped / not listed)
-- ARGV[7]  physical TTL ms of the trigger set (garbage collection only)
-- ARGV[8]  trigger MAXLEN (newest kept)
-- ARGV[9]  audit MAXLEN (exact)
-- ARGV[10] trigger channel "qc:{ns}:trigger" (PUBLISH, payload job \n fire_ms),
--          or "" on a cluster: SPUBLISH on the job's channel qc:{ns:job}:trigger
-- ARGV[11] pause/resume/trigger: this call's id (random, "" for none), kept in
--          meta pc by the call that changes the pause state, and in meta tc
--          (with tf, its fire time) by a trigger
--
-- Replies: pause/resume {now, paused "1"|"", by, at, reason, changed "1"|""}
-- (the control afterwards, and whether this call changed it: told from a
-- read before, two sessions resuming as the same "by" at once were both told
-- they had). A call redis-py sent again after a lost reply (the same id)
-- finds nothing to change, but its id in pc: it changed it, the first time;
-- trigger {now, fire_ms}: a trigger sent again finds its id in tc and
-- answers the first one's fire time (tf) without triggering again (it ran
-- the job twice); list {now, fire_ms...} ascending.

local K_META, K_TRIG, K_AUDIT = KEYS[1], KEYS[2], KEYS[3]
local op, job, by = ARGV[2], ARGV[3], ARGV[4]
local RETENTION = tonumber(ARGV[6])

local function audit(action, detail)
  local e = {'action', action, 'at', NOW}
  if by ~= '' then
    e[#e + 1] = 'by'
    e[#e + 1] = by
  end
  if detail ~= '' then
    e[#e + 1] = 'detail'
    e[#e + 1] = detail
  end
  redis.call('XADD', K_AUDIT, 'MAXLEN', ARGV[9], '*', unpack(e))
end

-- Hostile store contents (issue 11): a key of the wrong type where one of
-- the job's keys belongs makes its command fail. Every write op checks the
-- types of the keys it writes before its first write, so the call fails
-- whole (an error reply) instead of applying part-way: pausing a job with no
-- audit entry, or leaving an unaudited trigger in the set. Each op checks
-- only the keys it touches: a garbage trigger set does not block a pause.
-- The error is returned (redis.error_reply), not raised: Redis 6.2's error
-- handler cannot raise a table, and a raised string gets a script-location
-- prefix; a returned error reply reads the same on 6.2, 7 and Valkey.
local KEY_TYPES = {
  p = {{K_META, 'hash'}, {K_AUDIT, 'stream'}},
  r = {{K_META, 'hash'}, {K_AUDIT, 'stream'}},
  t = {{K_TRIG, 'zset'}, {K_AUDIT, 'stream'}, {K_META, 'hash'}},
}

local function check_types()
  for _, kt in ipairs(KEY_TYPES[op] or {}) do
    local t = redis.call('TYPE', kt[1]).ok
    if t ~= 'none' and t ~= kt[2] then
      return 'corrupt store: ' .. kt[1] .. ' is a ' .. t .. ' (expected a ' .. kt[2] .. ')'
    end
  end
  return nil
end

local CALL = ARGV[11] or ''

local function control(changed)
  local c = redis.call('HMGET', K_META, 'p', 'pb', 'pa', 'pr', 'pc')
  changed = changed or (CALL ~= '' and c[5] == CALL)
  return {NOW, c[1] or '', c[2] or '', c[3] or '0', c[4] or '', changed and '1' or ''}
end

local corrupt = check_types()
if corrupt then
  return redis.error_reply(corrupt)
end

if op == 'p' then
  local c = redis.call('HMGET', K_META, 'p', 'pb', 'pr')
  local reason = ARGV[5]
  local changed = not (c[1] == '1' and c[2] == by and (c[3] or '') == reason)
  if changed then
    redis.call('HSET', K_META, 'p', '1', 'pb', by, 'pa', NOW, 'pr', reason, 'pc', CALL)
    audit('pause', reason)
  end
  return control(changed)
end

if op == 'r' then
  local changed = redis.call('HGET', K_META, 'p') == '1'
  if changed then
    redis.call('HSET', K_META, 'p', '', 'pb', by, 'pa', NOW, 'pr', '', 'pc', CALL)
    audit('resume', '')
  end
  return control(changed)
end

if op == 't' then
  if CALL ~= '' then
    local c = redis.call('HMGET', K_META, 'tc', 'tf')
    if c[1] == CALL and c[2] then
      return {NOW, c[2]}
    end
    redis.call('HSET', K_META, 'tc', CALL, 'tf', NOW)
  end
  redis.call('ZADD', K_TRIG, now, NOW)
  redis.call('ZREMRANGEBYSCORE', K_TRIG, '-inf', '(' .. fmt(now - RETENTION))
  redis.call('ZREMRANGEBYRANK', K_TRIG, 0, -(tonumber(ARGV[8]) + 1))
  redis.call('PEXPIRE', K_TRIG, ARGV[7])
  audit('trigger', NOW)
  if ARGV[10] == '' then -- cluster: sharded, on the job's own channel (its hash slot)
    local P = string.sub(K_META, 1, -5) -- the job's key prefix
    redis.call('SPUBLISH', P .. 'trigger', job .. '\n' .. NOW)
  else
    redis.call('PUBLISH', ARGV[10], job .. '\n' .. NOW)
  end
  return {NOW, NOW}
end

-- list
local low = math.max(tonumber(by) + 1, now - RETENTION)
local out = {NOW}
for _, f in ipairs(redis.call('ZRANGEBYSCORE', K_TRIG, fmt(low), '+inf')) do
  out[#out + 1] = f
end
return out
