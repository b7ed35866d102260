-- members.lua: membership heartbeats (Store.heartbeat, leave, members).
--
-- KEYS[1]  qc:{ns}:members  HASH node -> cjson array
--          [incarnation, seen_ms, expires_ms, info JSON (sorted keys)]
-- ARGV[1]  now ms or "" (see _clock.lua)
-- ARGV[2]  op: "h" heartbeat | "l" leave | "m" list
-- heartbeat: ARGV[3] node, ARGV[4] incarnation, ARGV[5] ttl_ms, ARGV[6] info JSON
-- leave:     ARGV[3] node, ARGV[4] incarnation
--
-- Replies: heartbeat {now, 1 | 0, holder incarnation on refusal};
-- leave {now}; list {now, node, value, node, value, ...} of unexpired
-- members (expired ones are deleted on the way: nobody can observe them).

local K = KEYS[1]
local op = ARGV[2]

-- A member value, or nil when it is not one (anyone can write the hash):
-- a corrupt entry neither blocks a heartbeat nor fails the list.
local function entry(raw)
  local ok, c = pcall(cjson.decode, raw)
  if ok and type(c) == 'table' and type(c[1]) == 'string' and tonumber(c[3]) then
    return c
  end
  return nil
end

if op == 'h' then
  local node, inc = ARGV[3], ARGV[4]
  local cur = redis.call('HGET', K, node)
  local c = cur and entry(cur)
  if c then
    if c[1] ~= inc and tonumber(c[3]) > now then
      return {NOW, 0, c[1]}
    end
  end
  redis.call('HSET', K, node, cjson.encode({inc, NOW, fmt(now + tonumber(ARGV[5])), ARGV[6]}))
  return {NOW, 1, ''}
end

if op == 'l' then
  local node, inc = ARGV[3], ARGV[4]
  local cur = redis.call('HGET', K, node)
  local c = cur and entry(cur)
  if c and c[1] == inc then
    redis.call('HDEL', K, node)
  end
  return {NOW}
end

local out = {NOW}
local raw = redis.call('HGETALL', K)
for i = 1, #raw, 2 do
  local c = entry(raw[i + 1])
  if not c or tonumber(c[3]) > now then -- a corrupt entry is listed for the reader to report
    out[#out + 1] = raw[i]
    out[#out + 1] = raw[i + 1]
  else
    redis.call('HDEL', K, raw[i])
  end
end
return out
