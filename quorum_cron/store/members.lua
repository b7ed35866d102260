-- members.lua: membership heartbeats and the namespace's membership record
-- (Store.heartbeat, leave, members, membership, init_membership,
-- change_membership, finish_membership; memory_control.py is the model).
--
-- KEYS[1]  qc:{ns}:members  HASH node -> cjson array
--          [incarnation, seen_ms, expires_ms, info JSON (sorted keys), epoch]
--          (epoch: the membership epoch the heartbeat carried; absent in
--          entries of older agents, read as 0)
-- KEYS[2]  qc:{ns}:membership  HASH r = record text (_membership.lua), at =
--          store ms of the change that made it, by, why
-- KEYS[3]  qc:{ns}:membership:log  STREAM one entry per record (r, at, by, why)
-- ARGV[1]  now ms or "" (see _clock.lua)
-- ARGV[2]  op: "h" heartbeat | "l" leave | "m" list | "g" get record |
--          "i" init | "c" change | "f" finish
-- heartbeat: ARGV[3] node, ARGV[4] incarnation, ARGV[5] ttl_ms, ARGV[6] info
--            JSON, ARGV[7] epoch, ARGV[8] log MAXLEN
-- leave:     ARGV[3] node, ARGV[4] incarnation
-- init:      ARGV[3] configuration text, ARGV[4] by, ARGV[5] log MAXLEN
-- change:    ARGV[3] expected epoch, ARGV[4] configuration text, ARGV[5] by,
--            ARGV[6] reason, ARGV[7] log MAXLEN
-- finish:    ARGV[3] expected epoch, ARGV[4] by, ARGV[5] reason, ARGV[6]
--            "1" force | "", ARGV[7] log MAXLEN
--
-- Replies: heartbeat {now, 1 | 0, holder incarnation on refusal, r, at, by,
-- why}; leave {now}; list {now, node, value, node, value, ...} of unexpired
-- members (expired ones are deleted on the way: nobody can observe them),
-- then the corrupt ones, bounded (see the list below);
-- get / init {now, r, at, by, why} ("" fields: no record); change / finish
-- {now, code, detail, r, at, by, why}: code "" done, or why it was refused:
-- "N" no record, "E" epoch differs, "J" a change is in progress, "K" not
-- joint (nothing to finish), "S" no change, "W" waiting for the members in
-- detail (comma-separated) to heartbeat under the joint epoch, "X" the
-- stored record is corrupt (detail: the problem; nothing changed).
--
-- The record moves only forward, one epoch per step, and only these ways:
-- created (epoch 1) if absent; current C -> joint (old C, new C') by a
-- change; joint -> its new configuration alone by a finish (forced, or once
-- every new member has a live heartbeat under the joint epoch — a heartbeat
-- does it too); in "size = N" mode a registering id fills an open seat.

local K, KR, KL = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[2]

-- Bounds on what anyone with write access may have put in these keys
-- (hostile store contents, issue 11): a member value as long as
-- parse.MAX_MEMBER_BYTES; an expiry at most MAX_TTL ahead (an agent's TTL is
-- three heartbeats, a heartbeat at most an hour: anything further is forged,
-- and would hold a node id for good); the record's fields (parse.py's
-- bounds, in bytes). Nothing over them is read back whole or trusted.
local MAX_MEMBER_BYTES = 4194304
local MAX_TTL = 86400000
local MAX_EPOCH = 999999999999999 -- 15 digits (mdecimal): no record can follow it
local MAX_FIELD = {r = MAX_RECORD, at = 20, by = 1600, why = 262144}

-- A member value, or nil when it is not one (anyone can write the hash):
-- a corrupt entry neither blocks a heartbeat nor fails the list, and one
-- that claims to live longer than any agent's TTL is not a live holder.
local function entry(raw)
  if #raw > MAX_MEMBER_BYTES then
    return nil
  end
  local ok, c = pcall(cjson.decode, raw)
  if ok and type(c) == 'table' and type(c[1]) == 'string' then
    local x = tonumber(c[3])
    if x and x <= now + MAX_TTL then
      return c
    end
  end
  return nil
end

-- The stored record: fields {r, at, by, why} ({'', '', '', ''} when absent)
-- and the parsed record (nil when absent), or nil plus the problem. A field
-- over its bound is not sent back (a reply of megabytes on every heartbeat
-- would time every node out): r then says so, which no reader parses as a
-- record. (Measured here, after HMGET, not with HSTRLEN: the documented ACL
-- has no HSTRLEN, and Redis checks a script's commands against it.)
local FIELD_NAMES = {'r', 'at', 'by', 'why'}
local function stored()
  local f = redis.call('HMGET', KR, 'r', 'at', 'by', 'why')
  for i, name in ipairs(FIELD_NAMES) do
    local v = f[i]
    if v and #v > MAX_FIELD[name] then
      local problem = 'field ' .. name .. ' of ' .. #v .. ' bytes (expected at most ' .. MAX_FIELD[name] .. ')'
      return {'corrupt: ' .. problem, '', '', ''}, nil, problem
    end
  end
  if not f[1] then
    return {'', '', '', ''}, nil
  end
  local rec, problem = parse_record(f[1])
  if not rec then
    return {f[1], f[2] or '', f[3] or '', f[4] or ''}, nil, problem
  end
  return {f[1], f[2] or '', f[3] or '', f[4] or ''}, rec
end

local function put(text, by, why, maxlen)
  redis.call('HSET', KR, 'r', text, 'at', NOW, 'by', by, 'why', why)
  redis.call('XADD', KL, 'MAXLEN', maxlen, '*', 'r', text, 'at', NOW, 'by', by, 'why', why)
  return {text, NOW, by, why}
end

-- Members of rec.cur without a live heartbeat sent under rec.epoch or later.
local function lagging(rec)
  local out = {}
  for _, m in ipairs(rec.cur.members) do
    local raw = redis.call('HGET', K, m)
    local c = raw and entry(raw)
    if not (c and tonumber(c[3]) > now and (tonumber(c[5]) or 0) >= rec.epoch) then
      out[#out + 1] = m
    end
  end
  return out
end

local function with_fields(head, f)
  for _, v in ipairs(f) do
    head[#head + 1] = v
  end
  return head
end

if op == 'h' then
  local node, inc = ARGV[3], ARGV[4]
  local cur = redis.call('HGET', K, node)
  local c = cur and entry(cur)
  if c then
    if c[1] ~= inc and tonumber(c[3]) > now then
      local f = stored()
      return with_fields({NOW, 0, string.sub(c[1], 1, 201)}, f) -- (a real incarnation is short)
    end
  end
  local epoch = tonumber(ARGV[7]) or 0
  redis.call('HSET', K, node, cjson.encode({inc, NOW, fmt(now + tonumber(ARGV[5])), ARGV[6], fmt(epoch)}))
  local f, rec = stored()
  if rec and rec.epoch < MAX_EPOCH then
    if rec.old == nil and rec.cur.size > #rec.cur.members and not rec.cur.set[node] then
      -- "size = N": the first N distinct ids to register fill the seats.
      local ms = {}
      for _, m in ipairs(rec.cur.members) do
        ms[#ms + 1] = m
      end
      ms[#ms + 1] = node
      table.sort(ms, mbytes_lt)
      local filled = {size = rec.cur.size, quorum = rec.cur.quorum, members = ms}
      f = put(record_text(rec.epoch + 1, filled), node, 'seat filled by ' .. node, ARGV[8])
    elseif rec.old ~= nil and epoch >= rec.epoch and #lagging(rec) == 0 then
      f = put(record_text(rec.epoch + 1, rec.cur), node, 'every member of epoch ' .. fmt(rec.epoch) .. ' holds it',
              ARGV[8])
    end
  end
  return with_fields({NOW, 1, ''}, f)
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

if op == 'g' then
  local f = stored()
  return with_fields({NOW}, f)
end

if op == 'i' then
  local f, rec, problem = stored()
  if f[1] == '' then
    local conf, p = parse_record('1;' .. ARGV[3])
    if not conf then
      return redis.error_reply('init_membership: ' .. p)
    end
    f = put(conf.text, ARGV[4], 'created from the config', ARGV[5])
  end
  return with_fields({NOW}, f)
end

if op == 'c' or op == 'f' then
  local f, rec, problem = stored()
  local function refuse(code, detail)
    return with_fields({NOW, code, detail}, f)
  end
  if f[1] == '' then
    return refuse('N', '')
  end
  if not rec then
    return refuse('X', problem)
  end
  if fmt(rec.epoch) ~= ARGV[3] then
    return refuse('E', '')
  end
  local function at_bound()
    if rec.epoch >= MAX_EPOCH then
      return refuse('X', 'epoch ' .. fmt(rec.epoch) .. ' is the largest a record can have: none can follow it')
    end
  end
  if op == 'c' then
    if rec.old ~= nil then
      return refuse('J', '')
    end
    local b = at_bound()
    if b then
      return b
    end
    local new, p = parse_record('1;' .. ARGV[4])
    if not new then
      return redis.error_reply('change_membership: ' .. p)
    end
    if conf_text(new.cur) == conf_text(rec.cur) then
      return refuse('S', '')
    end
    f = put(record_text(rec.epoch + 1, new.cur, rec.cur), ARGV[5], ARGV[6], ARGV[7])
    return with_fields({NOW, '', ''}, f)
  end
  if rec.old == nil then
    return refuse('K', '')
  end
  local b = at_bound()
  if b then
    return b
  end
  if ARGV[6] ~= '1' then
    local waiting = lagging(rec)
    if #waiting > 0 then
      return refuse('W', table.concat(waiting, ','))
    end
  end
  f = put(record_text(rec.epoch + 1, rec.cur), ARGV[4], ARGV[5], ARGV[7])
  return with_fields({NOW, '', ''}, f)
end

-- The list: live entries first -- those of the record's members (current
-- and, while joint, old) before any other -- then up to MAX_CORRUPT corrupt
-- ones for the reader to report, each as "corrupt: " and its first 200 bytes
-- (never a value a reader takes for an entry, nor a reply of megabytes), its
-- name cut to 201 bytes (still over the reader's bound when it was). So junk
-- fields, however many or large, neither hide a live member from a reader
-- that decodes a bounded number of entries nor make the reply large; nor do
-- well-formed entries of strangers, however many (a reader decodes at most
-- parse.MAX_MEMBERS: past it, in hash order, a member's own heartbeat was
-- cut, and status, the dashboard and the agents' quorum_lost alert said the
-- cluster down).
local MAX_CORRUPT = 100
local out, others, bad = {NOW}, {}, {}
-- (pcall: a membership hash of the wrong type orders nothing, and still lists.)
local read, _, rec = pcall(stored)
if not read then
  rec = nil
end
local function of_record(node)
  return rec ~= nil and (rec.cur.set[node] or (rec.old ~= nil and rec.old.set[node])) or false
end
local raw = redis.call('HGETALL', K)
for i = 1, #raw, 2 do
  local c = entry(raw[i + 1])
  if not c then
    if #bad < 2 * MAX_CORRUPT then
      bad[#bad + 1] = string.sub(raw[i], 1, 201)
      bad[#bad + 1] = 'corrupt: ' .. string.sub(raw[i + 1], 1, 200)
    end
  elseif tonumber(c[3]) > now then
    local into = of_record(raw[i]) and out or others
    into[#into + 1] = raw[i]
    into[#into + 1] = raw[i + 1]
  else
    -- (pcall: a server refusing writes, MISCONF or READONLY, still lists; the entry goes later)
    redis.pcall('HDEL', K, raw[i])
  end
end
for _, list in ipairs({others, bad}) do
  for _, v in ipairs(list) do
    out[#out + 1] = v
  end
end
return out
