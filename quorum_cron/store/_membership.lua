-- _membership.lua: membership records, parsed with bounds (MembershipRecord
-- in quorum_cron/core/model.py is the model). Prepended to every per-job script
-- (before _job.lua, whose executor pick needs it) and to members.lua (see
-- scripts.py); it issues no command itself.
--
-- Record text (MembershipRecord.encode): "epoch;current[;old]", each
-- configuration "size,quorum,member,..." with members sorted by byte order
-- and distinct, ids of 1-100 characters from [A-Za-z0-9_.-], at most 100
-- members, size from max(1, #members) to 100, quorum from size//2+1 to size,
-- epoch from 1 to 15 digits, no leading zeros. Anything else is refused:
-- nothing read from Redis (or sent by a node) is trusted, and a bounded
-- parse cannot be made to loop or allocate without limit.
--
-- parse_record(text) -> record or nil, problem. A record: {epoch = number,
-- text = text, cur = conf, old = conf or nil}; a conf: {size, quorum,
-- members = {id, ...} (sorted), set = {id = true}}.

local MAX_RECORD = 20256 -- model.MAX_ENCODED
local MAX_CONF_MEMBERS = 100 -- model.MAX_MEMBERS

local function mbytes_lt(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return la < lb
end

local function mdecimal(s, what)
  if not string.find(s, '^[0-9]+$') or #s > 15 or (#s > 1 and string.byte(s, 1) == 48) then
    return nil, what .. ' ' .. string.sub(s, 1, 20) .. ': expected a decimal number without leading zeros'
  end
  return tonumber(s)
end

local function parse_conf(s)
  local parts, n, at = {}, 0, 1
  while true do
    local c = string.find(s, ',', at, true)
    n = n + 1
    if n > MAX_CONF_MEMBERS + 2 then
      return nil, 'configuration with more than ' .. MAX_CONF_MEMBERS .. ' members'
    end
    parts[n] = string.sub(s, at, c and c - 1 or -1)
    if not c then
      break
    end
    at = c + 1
  end
  if n < 2 then
    return nil, 'configuration ' .. string.sub(s, 1, 40) .. ': expected size,quorum,member,...'
  end
  local size, p1 = mdecimal(parts[1], 'size')
  if not size then
    return nil, p1
  end
  local quorum, p2 = mdecimal(parts[2], 'quorum')
  if not quorum then
    return nil, p2
  end
  local members, set = {}, {}
  for i = 3, n do
    local m = parts[i]
    if #m > 100 or not string.find(m, '^[A-Za-z0-9_%.%-]+$') then
      return nil, 'member ' .. string.sub(m, 1, 40) .. ': expected a node id of 1-100 characters from A-Z a-z 0-9 _ . -'
    end
    if i > 3 and not mbytes_lt(parts[i - 1], m) then
      return nil, 'members not distinct in sorted order'
    end
    members[#members + 1] = m
    set[m] = true
  end
  if size < math.max(1, #members) or size > MAX_CONF_MEMBERS then
    return nil, 'size ' .. size .. ': expected ' .. math.max(1, #members) .. '-' .. MAX_CONF_MEMBERS
  end
  if quorum < math.floor(size / 2) + 1 or quorum > size then
    return nil, 'quorum ' .. quorum .. ': expected a majority of size ' .. size
  end
  return {size = size, quorum = quorum, members = members, set = set}
end

local function parse_record(text)
  if #text > MAX_RECORD then
    return nil, 'membership record of ' .. #text .. ' bytes (expected at most ' .. MAX_RECORD .. ')'
  end
  local e, c, o = string.match(text, '^([^;]*);([^;]*)$')
  if not e then
    e, c, o = string.match(text, '^([^;]*);([^;]*);([^;]*)$')
    if not e then
      return nil, 'membership record ' .. string.sub(text, 1, 60) .. ': expected epoch;size,quorum,members[;old]'
    end
  end
  local epoch, problem = mdecimal(e, 'epoch')
  if not epoch or epoch < 1 then
    return nil, problem or 'epoch 0: expected a positive integer'
  end
  local cur, p1 = parse_conf(c)
  if not cur then
    return nil, p1
  end
  local old
  if o then
    local p2
    old, p2 = parse_conf(o)
    if not old then
      return nil, p2
    end
  end
  return {epoch = epoch, text = text, cur = cur, old = old}
end

-- Whether node may vote under the record: in current or (joint) old.
local function is_member(rec, node)
  return rec.cur.set[node] == true or (rec.old ~= nil and rec.old.set[node] == true)
end

local function conf_text(conf)
  local t = {fmt(conf.size), fmt(conf.quorum)}
  for _, m in ipairs(conf.members) do
    t[#t + 1] = m
  end
  return table.concat(t, ',')
end

local function record_text(epoch, cur, old)
  local t = fmt(epoch) .. ';' .. conf_text(cur)
  if old then
    t = t .. ';' .. conf_text(old)
  end
  return t
end
