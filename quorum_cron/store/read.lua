-- read.lua: read-only slot reads (Store.slot, Store.slots). Writes nothing:
-- a dead slot is reported absent and left for a writer to purge.
--
-- KEYS[1] the job's meta key (one job group), ARGV[1..6]: see _job.lua.
-- ARGV[7]  from_ms (inclusive)
-- ARGV[8]  to_ms (inclusive); Store.slot passes from = to = fire_ms
--
-- Reply: {now, slot...}: the live slots with from <= fire_ms <= to, by fire
-- time, each emit(fire_ms, record). Known slots are the members of the open
-- and the terminal index (a stale terminal member may name a slot that is
-- open again: each fire time is read once).

bind(1)
local out = {NOW}
local fires, seen = {}, {}
for _, index in ipairs({'open', 'slots'}) do
  local members = redis.pcall('ZRANGEBYSCORE', P .. index, ARGV[7], ARGV[8])
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
