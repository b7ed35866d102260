-- read.lua: read-only slot reads (Store.slot, Store.slots, Store.read_slots) of
-- one or more jobs. Writes nothing: a dead slot is reported absent and left
-- for a writer to purge.
--
-- KEYS: one meta key per job group (see _job.lua), ARGV[1..6]: see _job.lua.
-- ARGV[7..] per group g = 1, 2, ... (as many as KEYS), in order: n (its
--           number of ranges, in call order), then n ranges of from_ms,
--           to_ms (both inclusive; a slot's read passes from = to = fire_ms)
--
-- Why many jobs per call: a node's polls at a burst read hundreds of slots
-- at once, and a call of its own per slot paid the script's set-up and a
-- TIME each time (see fence.lua; issue 27).
--
-- Reply: {now, range_1, ..., range_N} over all ranges in argument order;
-- range_i = the live slots with from <= fire_ms <= to, by fire time, each
-- emit(fire_ms, record). Known slots are the members of the open and the
-- terminal index (a stale terminal member may name a slot that is open
-- again: each fire time is read once).

local function read_range(from, to)
  local out = {}
  local fires, seen = {}, {}
  for _, index in ipairs({'open', 'slots'}) do
    local members = redis.pcall('ZRANGEBYSCORE', P .. index, from, to)
    if members.err then -- a corrupt index: read what the other one knows
      members = {}
    end
    for _, f in ipairs(members) do
      if not seen[f] and match(f, '^%d+$') then -- (an index member is a fire time, or corrupt)
        seen[f] = true
        fires[#fires + 1] = f
      end
    end
  end
  table.sort(fires, function(a, b)
    return tonumber(a) < tonumber(b)
  end)
  for _, f in ipairs(fires) do
    local ok, r = pcall(load, f, false)
    if not ok then -- corrupt: passed on as stored, for the caller to report
      local raw = redis.pcall('GET', P .. 'slot:' .. f)
      out[#out + 1] = {f, type(raw) == 'string' and raw or 'corrupt'}
    elseif r then
      out[#out + 1] = emit(f, r)
    end
  end
  return out
end

local out = {NOW}
each_item(2, function(i)
  out[#out + 1] = read_range(ARGV[i], ARGV[i + 1])
end)
return out
